"""One benchmark run in a child process: ``python -m aiokafka_lite.bench.worker '<RunConfig JSON>'``.

The engine starts a fresh interpreter per run so clients never share an event loop, garbage,
threads or memory, and a run that hangs can be killed. The child talks to the parent through
stdout lines with a marker prefix (anything else a library prints there is ignored):

* ``@@P <n>``: ``n`` records done so far (every ``progress_interval_s``, from a daemon thread);
* ``@@R <json>``: the result dictionary (last line of a successful run);
* ``@@E <message>``: a one-line failure; the exit status is then 1.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
from collections.abc import Callable
from typing import Any

from ._shared import (
    HEADERS,
    PREFIX_ERROR,
    PREFIX_PROGRESS,
    PREFIX_RESULT,
    Progress,
    key_pool,
    value_pool,
)
from .config import RunConfig
from .stats import latency_summary

__all__ = ["HEADERS", "Progress", "key_pool", "value_pool", "run_config", "main"]


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MiB.

    ``VmHWM`` from /proc when available: ``ru_maxrss`` survives ``execve`` on Linux, so a child
    would report its parent's peak if that was larger.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _reporter(progress: Progress, interval: float, stop: threading.Event) -> None:
    out = sys.stdout
    last = -1
    while not stop.wait(interval):
        done = progress.done
        if done != last:
            last = done
            out.write(f"{PREFIX_PROGRESS}{done}\n")
            out.flush()


def _runner(client: str) -> Callable[[RunConfig, Progress], dict[str, Any]]:
    if client.startswith("aiokafka_lite") or client == "aiokafka":
        from .run_async import run
    elif client == "confluent":
        from .run_confluent import run
    elif client == "confluent-aio":
        from .run_confluent_aio import run
    elif client == "kafka-python":
        from .run_kafka_python import run
    else:
        raise ValueError(f"unknown client {client!r}")
    return run


def _per_record(cpu_s: float | None, records: int) -> float | None:
    return cpu_s / records * 1e6 if cpu_s is not None and records else None


def run_config(cfg: RunConfig, progress: Progress | None = None) -> dict[str, Any]:
    """Run one benchmark in this process and return the result dictionary."""
    progress = progress or Progress()
    runner = _runner(cfg.client)
    if cfg.profile_path:
        import cProfile

        profiler = cProfile.Profile()
        try:
            measured = profiler.runcall(runner, cfg, progress)
        finally:
            profiler.dump_stats(cfg.profile_path)
    else:
        measured = runner(cfg, progress)
    elapsed = float(measured["elapsed_s"])
    records = int(measured["records"])
    nbytes = int(measured.get("bytes", records * cfg.size))
    result: dict[str, Any] = {
        "client": cfg.client,
        "kind": cfg.kind,
        "api": cfg.api if cfg.kind == "produce" else None,
        "records": records,
        "bytes": nbytes,
        "elapsed_s": elapsed,
        "records_per_s": records / elapsed if elapsed > 0 else 0.0,
        "mb_per_s": nbytes / elapsed / 1e6 if elapsed > 0 else 0.0,
        "errors": progress.errors,
        "first_error": progress.first_error,
        "rss_mb": peak_rss_mb(),
        "cpu_us_per_record": _per_record(measured.get("cpu_s"), records),
        "cpu_pct": 100.0 * measured["cpu_s"] / elapsed
        if measured.get("cpu_s") and elapsed > 0
        else None,
        "note": measured.get("note"),
    }
    result.update(latency_summary(progress.latencies))
    return result


def main(argv: list[str] | None = None) -> int:
    """Child entry point (see the module docstring)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(f"{PREFIX_ERROR}usage: python -m aiokafka_lite.bench.worker '<RunConfig JSON>'")
        return 2
    stop = threading.Event()
    try:
        cfg = RunConfig.from_json(args[0])
        progress = Progress()
        thread = threading.Thread(
            target=_reporter, args=(progress, cfg.progress_interval_s, stop), daemon=True
        )
        thread.start()
        result = run_config(cfg, progress)
    except BaseException as exc:  # report any failure as one line; the parent shows it
        stop.set()
        if isinstance(exc, KeyboardInterrupt):
            print(f"{PREFIX_ERROR}interrupted", flush=True)
            return 130
        message = str(exc).splitlines()[0] if str(exc) else ""
        print(f"{PREFIX_ERROR}{type(exc).__name__}: {message}", flush=True)
        if os.environ.get("AIOKAFKA_LITE_BENCH_DEBUG"):
            raise
        return 1
    stop.set()
    sys.stdout.write(f"{PREFIX_PROGRESS}{result['records']}\n{PREFIX_RESULT}{json.dumps(result)}\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # do not wait for client library threads that ignore shutdown
