"""Produce benchmark: aiokafka_lite vs aiokafka vs kafka-python vs confluent-kafka, one broker, one run.

Run: /work/venv/bin/python benchmarks/bench_produce.py [--broker noida|tansu] [--records N]
     [--rounds R] [--latency-count N] [--bootstrap host:port]

Workload (issue 3/5): 100-byte values, no key, one partition, acks=1, linger 5 ms, library
default batch sizes. Each round runs every client once in turn (interleaved, so a noisy
neighbour hurts everyone alike); the table shows medians over rounds, records/s counted from
the first send until the last acknowledgement. ``aiokafka_lite batch`` is the bulk path
(``create_batch`` + ``send_batch``), ``aiokafka_lite send_many`` the
``send_many(topic, values)`` call.

Also printed: client CPU time per record (process time of the benchmark process, which includes
librdkafka's and kafka-python's own threads): less sensitive to a busy machine than wall time.

Latency: sequential ``send_and_wait`` (linger 0, acks=1) p50/p99 per client (confluent-kafka:
produce + flush; kafka-python: send().get()).
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


# ---- throughput runners (each returns elapsed seconds for n records) ------------------------


async def _lite(bootstrap: str, topic: str, n: int) -> float:
    from aiokafka_lite import producer as lite

    p = lite.AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5)
    await p.start()
    try:
        await p.send_and_wait(topic, b"warm-up")
        send = p.send
        t0 = time.perf_counter()
        c0 = time.process_time()
        fut = None
        for _ in range(n):
            fut = await send(topic, VALUE)
        await fut  # type: ignore[misc]
        await p.flush()
        return time.perf_counter() - t0, time.process_time() - c0
    finally:
        await p.stop()


async def _lite_batch(bootstrap: str, topic: str, n: int) -> float:
    from aiokafka_lite import producer as lite

    p = lite.AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5)
    await p.start()
    try:
        await p.send_and_wait(topic, b"warm-up")
        t0 = time.perf_counter()
        c0 = time.process_time()
        futs = []
        left = n
        while left:
            batch = p.create_batch()
            while left and batch.append(key=None, value=VALUE, timestamp=None) is not None:
                left -= 1
            futs.append(await p.send_batch(batch, topic, partition=0))
        await asyncio.gather(*futs)
        return time.perf_counter() - t0, time.process_time() - c0
    finally:
        await p.stop()


async def _lite_many(bootstrap: str, topic: str, n: int) -> tuple[float, float]:
    from aiokafka_lite import producer as lite

    p = lite.AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5)
    await p.start()
    try:
        await p.send_and_wait(topic, b"warm-up")
        t0 = time.perf_counter()
        c0 = time.process_time()
        handles = await p.send_many(topic, [VALUE] * n)
        await handles[-1]
        await p.flush()
        return time.perf_counter() - t0, time.process_time() - c0
    finally:
        await p.stop()


async def _aiokafka(bootstrap: str, topic: str, n: int) -> float:
    import aiokafka

    p = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5)
    await p.start()
    try:
        await p.send_and_wait(topic, b"warm-up")
        send = p.send
        t0 = time.perf_counter()
        c0 = time.process_time()
        fut = None
        for _ in range(n):
            fut = await send(topic, VALUE)
        await fut  # type: ignore[misc]
        await p.flush()
        return time.perf_counter() - t0, time.process_time() - c0
    finally:
        await p.stop()


def _kafka_python(bootstrap: str, topic: str, n: int) -> float:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5)
    try:
        p.send(topic, b"warm-up").get(timeout=30)
        send = p.send
        t0 = time.perf_counter()
        c0 = time.process_time()
        for _ in range(n):
            send(topic, VALUE)
        p.flush(timeout=120)
        return time.perf_counter() - t0, time.process_time() - c0
    finally:
        p.close(timeout=10)


def _confluent(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5})
    p.produce(topic, b"warm-up")
    p.flush(30)
    produce, poll = p.produce, p.poll
    t0 = time.perf_counter()
    c0 = time.process_time()
    for _ in range(n):
        try:
            produce(topic, VALUE)
        except BufferError:
            poll(0.001)
            produce(topic, VALUE)
    left = p.flush(120)
    assert left == 0, f"confluent-kafka left {left} records undelivered"
    return time.perf_counter() - t0, time.process_time() - c0


# ---- latency runners (each returns a list of seconds) ---------------------------------------


async def _lite_latency(bootstrap: str, topic: str, n: int) -> list[float]:
    from aiokafka_lite import producer as lite

    p = lite.AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
    await p.start()
    try:
        out = []
        for i in range(n + 50):
            t0 = time.perf_counter()
            await p.send_and_wait(topic, VALUE)
            if i >= 50:
                out.append(time.perf_counter() - t0)
        return out
    finally:
        await p.stop()


async def _aiokafka_latency(bootstrap: str, topic: str, n: int) -> list[float]:
    import aiokafka

    p = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
    await p.start()
    try:
        out = []
        for i in range(n + 50):
            t0 = time.perf_counter()
            await p.send_and_wait(topic, VALUE)
            if i >= 50:
                out.append(time.perf_counter() - t0)
        return out
    finally:
        await p.stop()


def _kafka_python_latency(bootstrap: str, topic: str, n: int) -> list[float]:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
    try:
        out = []
        for i in range(n + 50):
            t0 = time.perf_counter()
            p.send(topic, VALUE).get(timeout=30)
            if i >= 50:
                out.append(time.perf_counter() - t0)
        return out
    finally:
        p.close(timeout=10)


def _confluent_latency(bootstrap: str, topic: str, n: int) -> list[float]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
    out = []
    for i in range(n + 50):
        t0 = time.perf_counter()
        p.produce(topic, VALUE)
        p.flush(30)
        if i >= 50:
            out.append(time.perf_counter() - t0)
    return out


# ---- harness --------------------------------------------------------------------------------


def _create_topic(bootstrap: str, name: str) -> None:
    async def go() -> None:
        from aiokafka_lite.admin import AIOKafkaAdminClient, NewTopic

        async with AIOKafkaAdminClient(bootstrap_servers=bootstrap) as admin:
            await admin.create_topics([NewTopic(name, 1, 1)])
            for _ in range(100):
                described = await admin.describe_topics([name])
                parts = described[0]["partitions"] if described else []
                if parts and all(p["leader"] >= 0 for p in parts):
                    return
                await asyncio.sleep(0.05)

    asyncio.run(go())


def _run(fn: Callable[..., Any], *args: Any) -> Any:
    if asyncio.iscoroutinefunction(fn):
        return asyncio.run(fn(*args))
    return fn(*args)


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--broker", default="noida", choices=["noida", "tansu"])
    ap.add_argument("--bootstrap", help="use this broker instead of starting one")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--latency-count", type=int, default=1000)
    ap.add_argument(
        "--clients",
        default=(
            "aiokafka_lite,aiokafka_lite batch,aiokafka_lite send_many,aiokafka,kafka-python,"
            "confluent-kafka"
        ),
    )
    args = ap.parse_args()

    throughput: dict[str, Callable[..., Any]] = {
        "aiokafka_lite": _lite,
        "aiokafka_lite batch": _lite_batch,
        "aiokafka_lite send_many": _lite_many,
        "aiokafka": _aiokafka,
        "kafka-python": _kafka_python,
        "confluent-kafka": _confluent,
    }
    latency: dict[str, Callable[..., Any]] = {
        "aiokafka_lite": _lite_latency,
        "aiokafka": _aiokafka_latency,
        "kafka-python": _kafka_python_latency,
        "confluent-kafka": _confluent_latency,
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
            f"1 partition, acks=1, linger 5 ms, {args.rounds} interleaved rounds"
        )
        rates: dict[str, list[float]] = {c: [] for c in clients}
        cpus: dict[str, list[float]] = {c: [] for c in clients}
        for r in range(args.rounds):
            for c in clients:
                topic = f"bench-{c.replace(' ', '-')}-{r}-{uuid.uuid4().hex[:6]}"
                _create_topic(bootstrap, topic)
                elapsed, cpu = _run(throughput[c], bootstrap, topic, args.records)
                rates[c].append(args.records / elapsed)
                cpus[c].append(cpu / args.records * 1e6)
                print(
                    f"  round {r + 1} {c:22s} {args.records / elapsed:12,.0f} rec/s"
                    f"  {cpu / args.records * 1e6:6.2f} client CPU us/rec",
                    flush=True,
                )
        med = {c: statistics.median(v) for c, v in rates.items()}
        mcpu = {c: statistics.median(v) for c, v in cpus.items()}
        print("\nthroughput (median records/s; client CPU per record: process time, all threads)")
        for c in clients:
            extra = []
            for ref in ("aiokafka", "confluent-kafka"):
                if ref in med and ref != c:
                    extra.append(f"{med[c] / med[ref]:5.2f}x {ref}")
            print(
                f"  {c:22s} {med[c]:12,.0f}  {med[c] * 100 / 1e6:6.2f} MB/s  "
                f"{mcpu[c]:6.2f} us/rec   {'  '.join(extra)}"
            )
        if "aiokafka_lite" in mcpu and "aiokafka" in mcpu:
            print(
                f"  CPU per record, aiokafka / aiokafka_lite: {mcpu['aiokafka'] / mcpu['aiokafka_lite']:.2f}x"
            )

        if args.latency_count:
            print(f"\nsend_and_wait latency, linger 0 ({args.latency_count} sequential sends)")
            lat: dict[str, tuple[float, float]] = {}
            for c in [c for c in clients if c in latency]:
                topic = f"lat-{c}-{uuid.uuid4().hex[:6]}"
                _create_topic(bootstrap, topic)
                vals = _run(latency[c], bootstrap, topic, args.latency_count)
                lat[c] = (_pct(vals, 0.5), _pct(vals, 0.99))
                print(
                    f"  {c:22s} p50 {lat[c][0] * 1e3:7.3f} ms   p99 {lat[c][1] * 1e3:7.3f} ms",
                    flush=True,
                )
            if "aiokafka_lite" in lat and "aiokafka" in lat:
                print(
                    f"  p50 ratio aiokafka/aiokafka_lite: {lat['aiokafka'][0] / lat['aiokafka_lite'][0]:.2f}"
                )
    finally:
        if embedded is not None:
            embedded.stop()


if __name__ == "__main__":
    sys.exit(main())
