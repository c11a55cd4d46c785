"""Topic set-up for benchmark runs: create a topic with N partitions (leaders known), delete it."""

from __future__ import annotations

import asyncio
import time

from .. import errors as Errors
from ..admin import AIOKafkaAdminClient, NewTopic

__all__ = ["create_topic", "delete_topic"]


async def create_topic(bootstrap: str, name: str, partitions: int, timeout: float = 30.0) -> None:
    """Create ``name`` with ``partitions`` partitions and wait until every partition has a leader."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000))
    await asyncio.wait_for(admin.start(), timeout)
    try:
        resp = await asyncio.wait_for(admin.create_topics([NewTopic(name, partitions, 1)]), timeout)
        for err in resp.topic_errors:
            if err.error_code:
                raise Errors.for_code(err.error_code)(f"create topic {name!r}: {err.error_message}")
        deadline = time.monotonic() + timeout
        while True:
            described = await asyncio.wait_for(admin.describe_topics([name]), timeout)
            parts = described[0]["partitions"] if described else []
            if len(parts) == partitions and all(p["leader"] >= 0 for p in parts):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name} has no leaders after {timeout:g} s")
            await asyncio.sleep(0.05)
    finally:
        await asyncio.wait_for(admin.close(), timeout)


async def delete_topic(bootstrap: str, name: str, timeout: float = 30.0) -> None:
    """Delete ``name``; errors are ignored (this only frees broker memory between runs)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000))
    try:
        await asyncio.wait_for(admin.start(), timeout)
        await asyncio.wait_for(admin.delete_topics([name]), timeout)
    except Exception:
        pass
    finally:
        try:
            await asyncio.wait_for(admin.close(), timeout)
        except Exception:
            pass
