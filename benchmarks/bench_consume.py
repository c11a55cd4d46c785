"""Consume benchmark: aiokafka_lite vs aiokafka vs kafka-python vs confluent-kafka, one broker, one run.

Run: /work/venv/bin/python benchmarks/bench_consume.py [--broker noida|tansu] [--records N]
     [--rounds R] [--bootstrap host:port] [--clients a,b,...]

Workload (issue 4/5): N (default 200,000) records of 100-byte values, no key, written once to a
one-partition topic (uncompressed, the producer's default batching); every client then reads
all of them from offset 0 with a manual assignment and library-default fetch sizes, touching
each record's value. Time runs from the first poll until the N-th record is in hand
(connection setup excluded). Rounds are interleaved (every client once per round, so a noisy
neighbour hurts everyone alike); the table shows medians and ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

VALUE = b"v" * 100


async def _lite(bootstrap: str, topic: str, n: int) -> float:
    from aiokafka_lite.consumer import AIOKafkaConsumer
    from aiokafka_lite.structs import TopicPartition

    c = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        got = 0
        t0 = time.perf_counter()
        while got < n:
            for recs in (await c.getmany(timeout_ms=1000)).values():
                for r in recs:
                    r.value  # noqa: B018 - touch every record, as every runner does
                got += len(recs)
        return time.perf_counter() - t0
    finally:
        await c.stop()


async def _aiokafka(bootstrap: str, topic: str, n: int) -> float:
    import aiokafka

    c = aiokafka.AIOKafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await c.start()
    try:
        tp = aiokafka.TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        got = 0
        t0 = time.perf_counter()
        while got < n:
            for recs in (await c.getmany(timeout_ms=1000)).values():
                for r in recs:
                    r.value  # noqa: B018
                got += len(recs)
        return time.perf_counter() - t0
    finally:
        await c.stop()


def _kafka_python(bootstrap: str, topic: str, n: int) -> float:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    try:
        tp = KTP(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        got = 0
        t0 = time.perf_counter()
        while got < n:
            for recs in c.poll(timeout_ms=1000).values():
                for r in recs:
                    r.value  # noqa: B018
                got += len(recs)
        return time.perf_counter() - t0
    finally:
        c.close()


def _confluent(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        c.assign([CTP(topic, 0, 0)])
        got = 0
        t0 = time.perf_counter()
        while got < n:
            msgs = c.consume(num_messages=500, timeout=1.0)
            for msg in msgs:
                if msg.error():
                    continue
                msg.value()
                got += 1
        return time.perf_counter() - t0
    finally:
        c.close()


def _fill(bootstrap: str, topic: str, n: int) -> None:
    """Create the topic and write n records (confluent-kafka: fastest way to set up)."""

    async def create() -> None:
        from aiokafka_lite.admin import AIOKafkaAdminClient, NewTopic

        async with AIOKafkaAdminClient(bootstrap_servers=bootstrap) as admin:
            await admin.create_topics([NewTopic(topic, 1, 1)])
            for _ in range(100):
                described = await admin.describe_topics([topic])
                parts = described[0]["partitions"] if described else []
                if parts and all(p["leader"] >= 0 for p in parts):
                    return
                await asyncio.sleep(0.05)

    asyncio.run(create())
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5})
    for _ in range(n):
        while True:
            try:
                p.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0


def _run(fn: Callable[..., Any], *args: Any) -> Any:
    if asyncio.iscoroutinefunction(fn):
        return asyncio.run(fn(*args))
    return fn(*args)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--broker", default="noida", choices=["noida", "tansu"])
    ap.add_argument("--bootstrap", help="use this broker instead of starting one")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", default="aiokafka_lite,aiokafka,kafka-python,confluent-kafka")
    args = ap.parse_args()

    runners: dict[str, Callable[..., Any]] = {
        "aiokafka_lite": _lite,
        "aiokafka": _aiokafka,
        "kafka-python": _kafka_python,
        "confluent-kafka": _confluent,
    }
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    embedded = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from aiokafka_lite._embedded import EmbeddedBroker

        embedded = EmbeddedBroker(args.broker).start()
        bootstrap = embedded.bootstrap
    try:
        print(
            f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}; "
            f"broker: {args.broker if embedded else bootstrap}; {args.records} records x 100 B, "
            f"1 partition, {args.rounds} interleaved rounds",
            flush=True,
        )
        topic = f"bench-consume-{uuid.uuid4().hex[:6]}"
        _fill(bootstrap, topic, args.records)
        rates: dict[str, list[float]] = {c: [] for c in clients}
        for r in range(args.rounds):
            for c in clients:
                elapsed = _run(runners[c], bootstrap, topic, args.records)
                rates[c].append(args.records / elapsed)
                print(f"  round {r + 1} {c:16s} {args.records / elapsed:12,.0f} rec/s", flush=True)
        med = {c: statistics.median(v) for c, v in rates.items()}
        print("\nconsume throughput (median records/s)")
        for c in clients:
            extra = [
                f"{med[c] / med[ref]:5.2f}x {ref}"
                for ref in ("aiokafka", "confluent-kafka")
                if ref in med and ref != c
            ]
            print(f"  {c:16s} {med[c]:12,.0f}  {med[c] * 100 / 1e6:6.2f} MB/s   {'  '.join(extra)}")
    finally:
        if embedded is not None:
            embedded.stop()


if __name__ == "__main__":
    sys.exit(main())
