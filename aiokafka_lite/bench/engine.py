"""Benchmark orchestration: topics, interleaved rounds of worker processes, medians and ratios.

Method (the same for every client): each run is a fresh child process (``bench.worker``) on the
same broker; with several clients the rounds interleave them (round r starts with client
``r mod k``), so slow drifts of the machine hit every client alike; the summary keeps each
client's median over the rounds; ratios divide by aiokafka's and confluent-kafka's medians.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ._shared import PREFIX_ERROR, PREFIX_PROGRESS, PREFIX_RESULT
from .admin import create_topic, delete_topic
from .config import CLIENTS, CONSUME_APIS, HOOK_VARIANTS, PRODUCE_APIS, RunConfig
from .progress import ProgressUI
from .stats import RESULT_METRICS, median_or_none

__all__ = ["BenchOptions", "BenchError", "run_benchmark", "machine_info"]

#: Clients the ratio columns divide by.
REFERENCES = ("aiokafka", "confluent-aio", "confluent")


class BenchError(Exception):
    """A benchmark could not run (bad settings, broker unreachable, every run failed)."""


@dataclass
class BenchOptions:
    """What ``aiokafka-lite bench`` asked for."""

    kind: str = "produce"
    clients: list[str] = field(default_factory=lambda: ["aiokafka_lite"])
    records: int = 100_000
    size: int = 100
    partitions: int = 1
    codec: str = "none"
    acks: int = 1
    linger_ms: int | None = None  # None: 0 for api=wait, else 5
    batch_size: int = 16384
    concurrency: int | None = None  # None: 1 (produce), 100 (roundtrip window)
    api: str = "send"  # consume: "getmany" or "iter" (anything else means getmany)
    keys: bool = False
    headers: bool = False
    latency_samples: int = 20_000  # produce --api send: at most this many sampled records
    rounds: int = 1
    bootstrap: str | None = None
    broker_label: str = "external"  # how the report names a --bootstrap broker
    broker_kind: str = (
        "noida"  # Tansu never wakes a waiting fetch: roundtrip latency = its max wait
    )
    timeout_s: float = 300.0
    populate_client: str = "aiokafka_lite"
    profile_dir: str | None = None  # cProfile every aiokafka_lite run into this directory
    loop: str = "asyncio"  # or "uvloop" (asyncio clients only)

    def run_config(self, client: str, bootstrap: str, topic: str) -> RunConfig:
        """The worker settings of one run."""
        linger = self.linger_ms
        if linger is None:
            linger = 0 if (self.kind == "produce" and self.api == "wait") else 5
        api = self.api
        if self.kind == "consume" and api not in CONSUME_APIS:
            api = "getmany"
        concurrency = self.concurrency
        if concurrency is None:
            concurrency = 100 if self.kind == "roundtrip" else 1
        return RunConfig(
            kind=self.kind,
            client=client,
            bootstrap=bootstrap,
            topic=topic,
            records=self.records,
            size=self.size,
            partitions=self.partitions,
            codec=self.codec,
            acks=self.acks,
            linger_ms=linger,
            batch_size=self.batch_size,
            concurrency=concurrency,
            api=api,
            keys=self.keys,
            headers=self.headers,
            latency_samples=self.latency_samples,
            timeout_s=self.timeout_s,
            loop=self.loop,
        )


def machine_info() -> dict[str, Any]:
    """CPU model and count, OS and Python: printed with every result."""
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "os": platform.platform(terse=True),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "loadavg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }


def library_versions(clients: list[str]) -> dict[str, str]:
    """Installed versions of the compared libraries (``"missing"`` when not importable)."""
    out: dict[str, str] = {}
    for client in clients:
        try:
            if client.startswith("aiokafka_lite"):
                import aiokafka_lite

                out[client] = aiokafka_lite.__version__
            elif client == "aiokafka":
                import aiokafka

                out[client] = aiokafka.__version__
            elif client in ("confluent", "confluent-aio"):
                import confluent_kafka

                if client == "confluent-aio":
                    import confluent_kafka.aio  # noqa: F401  (2.13+)

                out[client] = (
                    f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"
                )
            elif client == "kafka-python":
                import kafka

                out[client] = kafka.__version__
        except ImportError:
            out[client] = "missing"
    return out


def _child_env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env.setdefault("PYTHONHASHSEED", "0")
    return env


async def run_worker(cfg: RunConfig, ui: ProgressUI, label: str) -> dict[str, Any]:
    """Run one configuration in a child process; raises BenchError with its one-line failure."""
    handle = ui.start(label, cfg.records)
    with tempfile.TemporaryFile() as errfile:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "aiokafka_lite.bench.worker", cfg.to_json(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=errfile,
            env=_child_env(),
            limit=1 << 20,  # a library may print long lines to stdout too
        )  # fmt: skip
        assert proc.stdout is not None
        result: dict[str, Any] | None = None
        error: str | None = None
        deadline = time.monotonic() + cfg.timeout_s + 30.0
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise asyncio.TimeoutError
                raw = await asyncio.wait_for(proc.stdout.readline(), remaining)
                if not raw:
                    break
                line = raw.decode("utf-8", "replace").rstrip("\n")
                if line.startswith(PREFIX_PROGRESS):
                    with contextlib.suppress(ValueError):
                        ui.update(handle, int(line[len(PREFIX_PROGRESS) :]))
                elif line.startswith(PREFIX_RESULT):
                    result = json.loads(line[len(PREFIX_RESULT) :])
                elif line.startswith(PREFIX_ERROR):
                    error = line[len(PREFIX_ERROR) :]
            await asyncio.wait_for(proc.wait(), 30.0)
        except asyncio.TimeoutError:
            error = f"no result within {cfg.timeout_s + 30:g} s (run killed)"
        finally:
            if proc.returncode is None:
                _kill(proc)
                with contextlib.suppress(asyncio.TimeoutError, ProcessLookupError):
                    await asyncio.wait_for(proc.wait(), 5.0)  # reap it: no zombie left behind
        if result is None:
            if error is None:
                errfile.seek(0)
                tail = errfile.read()[-2000:].decode("utf-8", "replace").strip().splitlines()
                error = f"exit status {proc.returncode}" + (f": {tail[-1]}" if tail else "")
            ui.finish(handle, f"FAILED: {error}")
            raise BenchError(f"{label}: {error}")
    ui.finish(handle, _short(result))
    return result


def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


def _short(result: dict[str, Any]) -> str:
    text = f"{result['records_per_s']:,.0f} rec/s {result['mb_per_s']:.1f} MB/s"
    if result.get("p50_ms") is not None:
        text += f" p50 {result['p50_ms']:.2f} ms p99 {result['p99_ms']:.2f} ms"
    if result.get("errors"):
        text += f" ({result['errors']} errors)"
    return text


def _order(clients: list[str], round_no: int) -> list[str]:
    k = round_no % len(clients)
    return clients[k:] + clients[:k]


def _topic(kind: str, tag: str) -> str:
    return f"aiokafka-lite-bench-{kind}-{tag}-{uuid.uuid4().hex[:8]}"


async def _run_all(opts: BenchOptions, bootstrap: str, ui: ProgressUI) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    shared_topic: str | None = None
    if opts.kind == "consume":
        shared_topic = _topic("consume", "data")
        await create_topic(bootstrap, shared_topic, opts.partitions)
        fill = opts.run_config(opts.populate_client, bootstrap, shared_topic)
        fill = replace(fill, kind="produce", api="send", concurrency=1, keys=False, headers=False)
        await run_worker(fill, ui, f"fill {shared_topic} ({opts.populate_client})")
        # one unmeasured read first: the broker's caches are then equally warm for every client
        warm = opts.run_config(opts.populate_client, bootstrap, shared_topic)
        await run_worker(warm, ui, f"warm-up read ({opts.populate_client}, not counted)")
    try:
        for round_no in range(opts.rounds):
            for client in _order(opts.clients, round_no):
                label = f"{round_no + 1}/{opts.rounds} {client:<13} {opts.kind}"
                if opts.kind in ("produce", "consume"):
                    label += f"/{opts.run_config(client, bootstrap, '-').api}"
                topic = shared_topic or _topic(opts.kind, client.replace("_", "-"))
                if shared_topic is None:
                    await create_topic(bootstrap, topic, opts.partitions)
                try:
                    cfg = opts.run_config(client, bootstrap, topic)
                    if opts.profile_dir and client == "aiokafka_lite":
                        tag = opts.kind + (f"-{cfg.api}" if opts.kind != "roundtrip" else "")
                        path = Path(opts.profile_dir) / f"{tag}-{client}-r{round_no + 1}.prof"
                        path.parent.mkdir(parents=True, exist_ok=True)
                        cfg = replace(cfg, profile_path=str(path.resolve()))
                        result_profile = str(path)
                    else:
                        result_profile = None
                    try:
                        result = await run_worker(cfg, ui, label)
                    except BenchError as exc:
                        result = {"client": client, "failed": str(exc)}
                    result["round"] = round_no + 1
                    if result_profile and "failed" not in result:
                        result["profile"] = result_profile
                    runs.append(result)
                finally:
                    if shared_topic is None:
                        await delete_topic(bootstrap, topic)
    finally:
        if shared_topic is not None:
            await delete_topic(bootstrap, shared_topic)
    return runs


def summarize(clients: list[str], runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per client: the median of every metric over its successful rounds, and the ratios."""
    summary: dict[str, dict[str, Any]] = {}
    for client in clients:
        ok = [r for r in runs if r.get("client") == client and "failed" not in r]
        failed = [r["failed"] for r in runs if r.get("client") == client and "failed" in r]
        row: dict[str, Any] = {"rounds": len(ok), "failures": failed}
        for metric in RESULT_METRICS:
            row[metric] = median_or_none(r.get(metric) for r in ok)
        row["errors"] = sum(int(r.get("errors") or 0) for r in ok)
        notes = {str(r["note"]) for r in ok if r.get("note")}
        row["note"] = "; ".join(sorted(notes)) if notes else None
        summary[client] = row
    for row in summary.values():
        for ref in REFERENCES:
            base = summary.get(ref, {}).get("records_per_s")
            mine = row.get("records_per_s")
            row["x_" + ref.replace("-", "_")] = mine / base if mine is not None and base else None
    return summary


@contextlib.contextmanager
def _broker(opts: BenchOptions) -> Iterator[tuple[str, str]]:
    if opts.bootstrap:
        yield opts.bootstrap, opts.broker_label
        return
    from aiokafka_lite.launchers.embedded import EmbeddedBroker, EmbeddedBrokerError

    try:
        broker = EmbeddedBroker(opts.broker_kind).start()
    except EmbeddedBrokerError as exc:
        raise BenchError(str(exc).splitlines()[0]) from None
    try:
        yield broker.bootstrap, f"embedded {opts.broker_kind}"
    finally:
        broker.stop()


def validate(opts: BenchOptions) -> None:
    """Raise BenchError for settings no run could satisfy."""
    if opts.records <= 0:
        raise BenchError("--records must be positive")
    if opts.size < 0:
        raise BenchError("--size must not be negative")
    if opts.kind == "roundtrip" and opts.size < 12:
        raise BenchError("roundtrip records carry a 12-byte stamp: --size must be at least 12")
    if opts.kind == "produce" and opts.api not in PRODUCE_APIS:
        raise BenchError(f"unknown produce api {opts.api!r}; expected one of {PRODUCE_APIS}")
    if opts.kind == "consume" and opts.api not in (*CONSUME_APIS, "send"):
        raise BenchError(f"unknown consume api {opts.api!r}; expected one of {CONSUME_APIS}")
    if opts.loop not in ("asyncio", "uvloop"):
        raise BenchError(f"unknown event loop {opts.loop!r}")
    if opts.loop == "uvloop":
        try:
            import uvloop  # noqa: F401
        except ImportError:
            raise BenchError("--loop uvloop needs uvloop: pip install uvloop") from None
    if opts.partitions <= 0:
        raise BenchError("--partitions must be positive")
    if opts.rounds <= 0:
        raise BenchError("--rounds must be positive")
    if not opts.clients:
        raise BenchError("no client to run")
    unknown = [c for c in opts.clients if c not in CLIENTS and c not in HOOK_VARIANTS]
    if unknown:
        raise BenchError(f"unknown client(s): {', '.join(unknown)}")


def run_benchmark(opts: BenchOptions, ui: ProgressUI) -> dict[str, Any]:
    """Run the whole benchmark (starting an embedded broker if no bootstrap was given)."""
    validate(opts)
    started = time.time()
    load_at_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    with _broker(opts) as (bootstrap, broker_name):
        ui.log(
            f"bench {opts.kind}: {opts.records:,} x {opts.size} B, {opts.partitions} partition(s), "
            f"codec {opts.codec}, acks {opts.acks}, clients {', '.join(opts.clients)}, "
            f"{opts.rounds} round(s), broker {broker_name} at {bootstrap}"
        )
        _check_reachable(bootstrap)
        runs = asyncio.run(_run_all(opts, bootstrap, ui))
    summary = summarize(opts.clients, runs)
    if all(row["rounds"] == 0 for row in summary.values()):
        first = next((r["failed"] for r in runs if "failed" in r), "no run finished")
        raise BenchError(f"every run failed; first failure: {first}")
    machine = machine_info()
    machine["loadavg_1m_at_start"] = load_at_start
    sample = opts.run_config(opts.clients[0], bootstrap, "-")
    config = {k: v for k, v in asdict(sample).items() if k not in ("client", "topic", "bootstrap")}
    config.update(rounds=opts.rounds, clients=opts.clients)
    return {
        "kind": opts.kind,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "config": config,
        "machine": machine,
        "broker": {"name": broker_name, "bootstrap": bootstrap},
        "versions": library_versions(opts.clients),
        "runs": runs,
        "summary": summary,
    }


def _check_reachable(bootstrap: str) -> None:
    from aiokafka_lite.launchers.embedded import probe_api_versions

    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    try:
        probe_api_versions(host or "127.0.0.1", int(port), timeout=5.0)
    except (OSError, ValueError) as exc:
        raise BenchError(f"broker {first} unreachable: {exc}") from None
