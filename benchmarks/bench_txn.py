"""Small transactions committed back to back (issue 31): ``python -m benchmarks.bench_txn``.

On Apache Kafka 4.4 (started here unless ``--bootstrap``), with the cluster's
``transaction.version`` at 1 (TV1: AddPartitionsToTxn before a partition's first batch, EndTxn
v4) and then at 2 (TV2, KIP-890: Produce v12 adds the partition itself, EndTxn v5 bumps the
epoch), for 1 and then 3 partitions: ``--count`` transactions of ``--records`` 100-byte records
spread over the partitions (record i to partition i mod P), each committed before the next
begins, after ``--warmup`` unmeasured ones, by

* aiokafka_lite (TV2 where the broker offers it),
* aiokafka 0.14 (always TV1: it has no TV2),
* the Java producer 4.4 (``tests/java`` TxnOracle ``bench``; TV2 where offered).

Reported: transactions/s over the measured ones (their mean: on a shared machine the commit
tail moves it a lot), the p50 of one transaction (begin to committed: its inverse is the rate
of a typical transaction) and the p50/p99 of ``commit_transaction()`` (which waits for the
records too). Rounds are interleaved (round r starts with client r mod 3)
and the tables show medians. ``--json FILE`` writes every run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from aiokafka_lite.admin import AIOKafkaAdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

VALUE = b"x" * 100


async def _topic(bootstrap: str, partitions: int) -> str:
    topic = f"bench-txn-{uuid.uuid4().hex[:8]}"
    async with AIOKafkaAdminClient(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    await asyncio.sleep(0.5)  # leaders elected (a single node: at once)
    return topic


Run = tuple[float, list[float], list[float]]  # seconds, commit times, begin-to-commit times


async def _asyncio_client(
    producer_cls: Any, bootstrap: str, topic: str, partitions: int, args: argparse.Namespace
) -> Run:
    """aiokafka_lite and aiokafka: the same calls (a drop-in)."""
    producer = producer_cls(
        bootstrap_servers=bootstrap, transactional_id=f"bench-{uuid.uuid4().hex[:8]}"
    )
    await producer.start()
    commits: list[float] = []
    txns: list[float] = []
    try:
        start = 0.0
        for t in range(-args.warmup, args.count):
            if t == 0:
                start = time.perf_counter()
            b = time.perf_counter()
            await producer.begin_transaction()
            for i in range(args.records):
                await producer.send(topic, VALUE, partition=i % partitions)
            c = time.perf_counter()
            await producer.commit_transaction()
            if t >= 0:
                e = time.perf_counter()
                commits.append(e - c)
                txns.append(e - b)
        return time.perf_counter() - start, commits, txns
    finally:
        await producer.stop()


async def lite(bootstrap: str, topic: str, partitions: int, args: argparse.Namespace) -> Run:
    from aiokafka_lite import AIOKafkaProducer

    return await _asyncio_client(AIOKafkaProducer, bootstrap, topic, partitions, args)


async def aiokafka(bootstrap: str, topic: str, partitions: int, args: argparse.Namespace) -> Run:
    from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]

    return await _asyncio_client(AIOKafkaProducer, bootstrap, topic, partitions, args)


async def java(bootstrap: str, topic: str, partitions: int, args: argparse.Namespace) -> Run:
    import java_oracle

    lines = await asyncio.to_thread(
        java_oracle.txn_scenario,
        bootstrap,
        topic,
        f"bench-java-{uuid.uuid4().hex[:8]}",
        "bench",
        timeout=600,
        partitions=partitions,
        records=args.records,
        count=args.count,
        warmup=args.warmup,
    )
    line = lines[-1]
    return (
        float(line["seconds"]),
        [ns / 1e9 for ns in line["commit_ns"]],
        [ns / 1e9 for ns in line["txn_ns"]],
    )


CLIENTS = {"aiokafka_lite": lite, "aiokafka": aiokafka, "java": java}


def _q(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] * 1000


async def main(args: argparse.Namespace) -> dict[str, Any]:
    import java_oracle

    bootstrap = args.bootstrap
    broker = None
    if bootstrap is None:
        from aiokafka_lite.launchers.apache import ApacheKafka

        broker = ApacheKafka()
        await asyncio.to_thread(broker.start)
        bootstrap = broker.bootstrap
    clients = [c for c in args.clients.split(",") if c]
    if "java" in clients and java_oracle.unavailable_reason():
        print(f"java skipped: {java_oracle.unavailable_reason()}")
        clients.remove("java")
    out: dict[str, Any] = {
        "records": args.records,
        "count": args.count,
        "warmup": args.warmup,
        "runs": [],
    }
    try:
        for level in (1, 2):
            await asyncio.to_thread(java_oracle.set_transaction_version, bootstrap, level)
            for partitions in (1, 3):
                topic = await _topic(bootstrap, partitions)
                runs: dict[str, list[Run]] = {c: [] for c in clients}
                for r in range(args.rounds):
                    order = clients[r % len(clients) :] + clients[: r % len(clients)]
                    for c in order:
                        runs[c].append(await CLIENTS[c](bootstrap, topic, partitions, args))
                for c in clients:
                    secs = statistics.median(r[0] for r in runs[c])
                    commits = [x for r in runs[c] for x in r[1]]
                    txns = [x for r in runs[c] for x in r[2]]
                    row = {
                        "tv": level,
                        "partitions": partitions,
                        "client": c,
                        "tx_per_s": args.count / secs,
                        "txn_p50_ms": _q(txns, 50),
                        "commit_p50_ms": _q(commits, 50),
                        "commit_p99_ms": _q(commits, 99),
                        "seconds": [r[0] for r in runs[c]],
                    }
                    out["runs"].append(row)
                    print(
                        f"TV{level} {partitions}p {c:14s} {row['tx_per_s']:8.0f} tx/s  "
                        f"txn p50 {row['txn_p50_ms']:6.2f} ms  "
                        f"commit p50 {row['commit_p50_ms']:6.2f} ms  "
                        f"p99 {row['commit_p99_ms']:6.2f} ms  (runs {row['seconds']})",
                        flush=True,
                    )
        await asyncio.to_thread(java_oracle.set_transaction_version, bootstrap, 2)
        return out
    finally:
        if broker is not None:
            await asyncio.to_thread(broker.stop)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--bootstrap", default=None, help="an Apache Kafka 4.x (default: start one)"
    )
    parser.add_argument("--records", type=int, default=10, help="records per transaction")
    parser.add_argument("--count", type=int, default=300, help="measured transactions per run")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", default="aiokafka_lite,aiokafka,java")
    parser.add_argument("--json", default=None, metavar="FILE")
    ns = parser.parse_args()
    result = asyncio.run(main(ns))
    if ns.json:
        Path(ns.json).write_text(json.dumps(result, indent=2) + "\n")
