"""Share-group consumption (KIP-932) on Apache Kafka 4.4: ``python -m benchmarks.bench_share``.

On one topic (one partition, ``--records`` records of ``--size`` bytes, produced once):

* aiokafka_lite's ``AIOKafkaShareConsumer`` (implicit acknowledgement) reading every record;
* Java's ``KafkaShareConsumer`` (``tests/java_oracle.ShareMember``: it prints every record as a
  JSON line, which it pays for) reading every record, timed from its first record to its last;
* the classic ``AIOKafkaConsumer.getmany`` on the same topic, for scale;
* the acknowledgement round trip: explicit mode, one record per poll, ``acknowledge`` +
  ``commit()`` timed (p50/p99).

Each share run uses a new share group (``share.auto.offset.reset=earliest``). Prints a table and,
with ``--json FILE``, writes the numbers.
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

from aiokafka_lite import AcknowledgeType, AIOKafkaConsumer, AIOKafkaProducer, AIOKafkaShareConsumer
from aiokafka_lite.admin import AIOKafkaAdminClient, NewTopic
from aiokafka_lite.admin.config_resource import ConfigResource

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


async def _setup(bootstrap: str, records: int, size: int) -> str:
    topic = f"bench-share-{uuid.uuid4().hex[:8]}"
    async with AIOKafkaAdminClient(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, 1, 1)])
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, max_batch_size=65536)
    await producer.start()
    try:
        value = b"x" * size
        futures = [await producer.send(topic, value) for _ in range(records)]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return topic


async def _group(bootstrap: str) -> str:
    group = f"bench-share-{uuid.uuid4().hex[:8]}"
    async with AIOKafkaAdminClient(bootstrap_servers=bootstrap) as admin:
        await admin.incremental_alter_configs(
            [ConfigResource("group", group, {"share.auto.offset.reset": "earliest"})]
        )
    return group


async def lite_share(bootstrap: str, topic: str, records: int) -> float:
    """Seconds from the first record to the last (implicit acknowledgement)."""
    group = await _group(bootstrap)
    async with AIOKafkaShareConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, max_poll_records=500
    ) as consumer:
        n = 0
        first = 0.0
        while n < records:
            batch = await consumer.getmany(timeout_ms=1000)
            got = sum(len(v) for v in batch.values())
            if got and not first:
                first = time.perf_counter()
            n += got
        await consumer.commit()
        return time.perf_counter() - first


async def lite_classic(bootstrap: str, topic: str, records: int) -> float:
    async with AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None
    ) as consumer:
        n = 0
        first = 0.0
        while n < records:
            batch = await consumer.getmany(timeout_ms=1000)
            got = sum(len(v) for v in batch.values())
            if got and not first:
                first = time.perf_counter()
            n += got
        return time.perf_counter() - first


async def java_share(bootstrap: str, topic: str, records: int) -> float:
    from java_oracle import ShareMember

    group = await _group(bootstrap)
    member = ShareMember(bootstrap, topic, group, run_ms=300_000)
    await asyncio.to_thread(member.start)
    try:
        await asyncio.to_thread(member.wait_for, lambda m: len(m.records) >= 1, 120.0, "a record")
        first = time.perf_counter()
        await asyncio.to_thread(
            member.wait_for, lambda m: len(m.records) >= records, 300.0, "every record"
        )
        return time.perf_counter() - first
    finally:
        await asyncio.to_thread(member.stop)


async def ack_round_trip(bootstrap: str, topic: str, samples: int) -> list[float]:
    """Milliseconds of ``acknowledge`` + ``commit()`` for one record, ``samples`` times."""
    group = await _group(bootstrap)
    times: list[float] = []
    async with AIOKafkaShareConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        acknowledgement_mode="explicit",
        max_poll_records=1,
        strict_max_poll_records=True,
    ) as consumer:
        while len(times) < samples:
            for recs in (await consumer.getmany(timeout_ms=1000)).values():
                for r in recs:
                    start = time.perf_counter()
                    consumer.acknowledge(r, AcknowledgeType.ACCEPT)
                    await consumer.commit()
                    times.append((time.perf_counter() - start) * 1000)
    return times


async def main(args: argparse.Namespace) -> dict[str, Any]:
    bootstrap = args.bootstrap
    broker = None
    if bootstrap is None:
        from aiokafka_lite.launchers.apache import ApacheKafka

        broker = ApacheKafka()
        await asyncio.to_thread(broker.start)
        bootstrap = broker.bootstrap
    try:
        topic = await _setup(bootstrap, args.records, args.size)
        out: dict[str, Any] = {"records": args.records, "size": args.size}
        for name, fn in (
            ("aiokafka_lite share", lite_share),
            ("aiokafka_lite classic getmany", lite_classic),
            ("java KafkaShareConsumer", java_share),
        ):
            runs = [await fn(bootstrap, topic, args.records) for _ in range(args.rounds)]
            secs = statistics.median(runs)
            out[name] = {"seconds": runs, "records_per_s": args.records / secs}
            print(f"{name:32s} {args.records / secs:>12,.0f} records/s  (median of {runs})")
        rtt = await ack_round_trip(bootstrap, topic, args.samples)
        q = statistics.quantiles(rtt, n=100)
        out["ack round trip ms"] = {"p50": q[49], "p99": q[98], "samples": len(rtt)}
        print(f"acknowledge + commit             p50 {q[49]:.2f} ms  p99 {q[98]:.2f} ms")
        return out
    finally:
        if broker is not None:
            await asyncio.to_thread(broker.stop)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bootstrap", default=None, help="an Apache Kafka 4.x (default: start one)"
    )
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=300, help="ack round trips to time")
    parser.add_argument("--json", default=None, metavar="FILE")
    ns = parser.parse_args()
    result = asyncio.run(main(ns))
    if ns.json:
        Path(ns.json).write_text(json.dumps(result, indent=2) + "\n")
