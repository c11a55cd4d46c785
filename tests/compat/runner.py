"""Run one differential scenario in THIS process and print what a user observes, as JSON.

    python tests/compat/runner.py {aiokafka|lite} SCENARIO      (bootstrap in COMPAT_BOOTSTRAP)

``lite`` calls ``aiokafka_lite.install_as_aiokafka()`` first, so the scenario's ``import aiokafka``
gets aiokafka_lite; ``aiokafka`` runs it on the real aiokafka.  Each run is its own process so
the real aiokafka stays importable everywhere else.  Names the scenario creates (topics, groups,
transactional ids) are replaced by stable placeholders so both runs' output can be compared.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

RESULT_PREFIX = "COMPAT-RESULT:"


class Context:
    """What a scenario gets: the broker, unique names and a few observation helpers."""

    def __init__(self, bootstrap: str, mode: str) -> None:
        self.bootstrap = bootstrap
        self.mode = mode
        self.names: dict[str, str] = {}  # real name -> placeholder

    def name(self, kind: str = "n") -> str:
        """A unique name (placeholder ``<kind#i>`` in the output)."""
        real = f"compat-{kind}-{uuid.uuid4().hex[:10]}"
        self.names[real] = f"<{kind}{len(self.names)}>"
        return real

    async def topic(self, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
        """Create a fresh topic (with aiokafka_lite's admin in both modes) and return its name."""
        from aiokafka_lite.admin import AIOKafkaAdminClient, NewTopic

        name = self.name("topic")
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                described = await admin.describe_topics([name])
                parts = described[0]["partitions"] if described else []
                if len(parts) == partitions and all(p["leader"] >= 0 for p in parts):
                    break
                await asyncio.sleep(0.05)
        finally:
            await admin.close()
        return name

    @staticmethod
    def rec(r: Any) -> dict[str, Any]:
        """The fields of a ConsumerRecord a user compares (not the wall-clock timestamp)."""
        return {
            "topic": r.topic,
            "partition": r.partition,
            "offset": r.offset,
            "key": r.key,
            "value": r.value,
            "headers": [list(h) for h in r.headers],
            "timestamp_type": r.timestamp_type,
            "has_timestamp": isinstance(r.timestamp, int) and r.timestamp > 0,
        }

    @staticmethod
    def md(md: Any) -> Any:
        """The fields of a RecordMetadata a user compares."""
        if md is None:
            return None
        return {
            "topic": md.topic,
            "partition": md.partition,
            "offset": md.offset,
            "timestamp_type": md.timestamp_type,
        }

    @staticmethod
    async def outcome(aw: Any) -> Any:
        """``{"ok": result}`` or ``{"raised": ExceptionClassName}`` for an awaitable."""
        try:
            return {"ok": await aw}
        except Exception as exc:  # the class is the observation
            return {"raised": type(exc).__name__}

    @staticmethod
    def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``{"ok": result}`` or ``{"raised": ExceptionClassName}`` for a plain call."""
        try:
            return {"ok": fn(*args, **kwargs)}
        except Exception as exc:
            return {"raised": type(exc).__name__}

    @staticmethod
    async def wait_for(pred: Any, timeout: float = 20.0) -> bool:
        """Poll ``pred()`` until true (False after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():
                return True
            await asyncio.sleep(0.05)
        return False


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, bytes):
        return {"bytes": obj.decode("latin-1")}
    if isinstance(obj, dict):
        items = [(str(_jsonable(k)), _jsonable(v)) for k, v in obj.items()]
        return dict(sorted(items))
    if isinstance(obj, (set, frozenset)):
        return sorted((_jsonable(x) for x in obj), key=repr)
    if isinstance(obj, (list, tuple)):
        if hasattr(obj, "_fields"):  # namedtuples (TopicPartition, ...): as a plain list
            return [_jsonable(x) for x in obj]
        return [_jsonable(x) for x in obj]
    if obj is None or isinstance(obj, (int, float, str, bool)):
        return obj
    return f"<{type(obj).__name__}>"


def main() -> int:
    mode, scenario = sys.argv[1], sys.argv[2]
    if mode == "lite":
        import aiokafka_lite

        aiokafka_lite.install_as_aiokafka()
    sys.path.insert(0, str(Path(__file__).parent))
    import aiokafka
    import scenarios

    want = "aiokafka_lite" if mode == "lite" else "aiokafka"
    assert aiokafka.__name__ == want, (aiokafka.__name__, want)
    ctx = Context(os.environ["COMPAT_BOOTSTRAP"], mode)
    fn = getattr(scenarios, scenario)
    try:
        result = asyncio.run(asyncio.wait_for(fn(ctx), 90))
    except Exception as exc:
        traceback.print_exc()
        result = {"scenario raised": type(exc).__name__}
    text = json.dumps(_jsonable(result), sort_keys=True)
    for real, placeholder in sorted(ctx.names.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(real, placeholder)
    print(RESULT_PREFIX + text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
