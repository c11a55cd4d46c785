"""Spark benchmark: the ``aiokafka_lite`` data source against Spark's own ``kafka`` connector.

Run: python benchmarks/bench_spark.py [--broker apache|tansu|noida] [--bootstrap host:port]
     [--records N] [--partitions P] [--master local[2]] [--rounds R] [--no-plain] [--cluster]

Both connectors run in the same SparkSession, on the same broker, in the same run: Spark's
``spark-sql-kafka-0-10`` comes from Maven Central (``aiokafka_lite.launchers.spark_reference``, jars
handed over with ``spark.jars``). Workload: N (default 500,000) records with a short string key
and a 100-byte value, P partitions.

* write: ``spark.range(N, numPartitions=P)`` -> (key, value) -> ``write.format(F)`` into a fresh
  P-partition topic per connector; the count written is checked afterwards;
* read: ``read.format(F)`` of one topic (the same for both connectors), materialised with Spark's
  ``noop`` sink (every row reaches the JVM, nothing is written);
* cluster (``--cluster``, instead of the above): the ``aiokafka_lite`` write and read on a
  standalone Spark cluster (``aiokafka_lite.launchers.spark_cluster``) of one, then two one-core workers;
  P should be at least 2, one task per core;
* plain (unless ``--no-plain``): one AIOKafkaProducer / AIOKafkaConsumer in this process, the
  single-process baseline for the same records.

Spark's startup and a small warm-up write and read per connector (the first queries of a session
run on a cold JVM, several times slower) are not counted; per-query planning is, as a user pays
it. Within a round the two connectors alternate which goes first. Rows/s are medians over the
rounds; the ratio is aiokafka_lite / kafka (> 1: aiokafka_lite is faster).

The default broker is Apache Kafka itself (Maven jars, ``aiokafka_lite.launchers.apache``). noida-db
ignores a Fetch's ``max_bytes`` and answers with everything from the fetch offset on, so with
``--broker noida`` keep the topic under ~100 MiB (the clients' ``max_response_size``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: this checkout's aiokafka_lite, not an installed one
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

VALUE = b"v" * 100
FORMATS = ("kafka", "aiokafka_lite")


async def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from aiokafka_lite.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        resp = await admin.create_topics([NewTopic(topic, partitions, 1)])
        if any(e.error_code for e in resp.topic_errors):
            raise RuntimeError(f"create topic {topic}: {resp.topic_errors}")
    finally:
        await admin.close()


async def plain_produce(bootstrap: str, topic: str, n: int) -> float:
    from aiokafka_lite.producer import AIOKafkaProducer

    async with AIOKafkaProducer(
        bootstrap_servers=bootstrap, linger_ms=5, max_batch_size=256 * 1024
    ) as p:
        t0 = time.perf_counter()
        last = None
        send = p.send
        for i in range(n):
            last = await send(topic, VALUE, key=b"%d" % i)
        await p.flush()
        if last is not None:
            await asyncio.wait_for(last, 120)
        return time.perf_counter() - t0


async def plain_consume(bootstrap: str, topic: str, partitions: int, n: int) -> float:
    from aiokafka_lite.consumer import AIOKafkaConsumer
    from aiokafka_lite.structs import TopicPartition

    c = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)
        got = 0
        t0 = time.perf_counter()
        deadline = t0 + 600
        while got < n:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"plain consume read {got} of {n} records in 600 s")
            for recs in (await c.getmany(timeout_ms=1000)).values():
                for r in recs:
                    r.value  # noqa: B018 - touch every record
                got += len(recs)
        return time.perf_counter() - t0
    finally:
        await c.stop()


def spark_write(spark: Any, fmt: str, bootstrap: str, topic: str, n: int, partitions: int) -> float:
    df = spark.range(n, numPartitions=partitions).selectExpr(
        "cast(id as string) as key", f"repeat('v', {len(VALUE)}) as value"
    )
    t0 = time.perf_counter()
    df.write.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("topic", topic).mode(
        "append"
    ).save()
    return time.perf_counter() - t0


def spark_read(spark: Any, fmt: str, bootstrap: str, topic: str) -> float:
    t0 = time.perf_counter()
    (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
        .write.format("noop")
        .mode("overwrite")
        .save()
    )
    return time.perf_counter() - t0


def spark_count(spark: Any, bootstrap: str, topic: str, fmt: str = "kafka") -> int:
    return int(
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
        .count()
    )


def _start_broker(kind: str) -> tuple[Any, str]:
    if kind == "apache":
        from aiokafka_lite.launchers.apache import ApacheKafka

        kafka = ApacheKafka().start()
        return kafka, kafka.bootstrap
    from aiokafka_lite.launchers.embedded import EmbeddedBroker

    broker = EmbeddedBroker(kind)
    broker.start()
    return broker, broker.bootstrap


def _wait_executors(spark: Any, n: int, timeout: float = 120.0) -> None:
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus  # the driver + executors
    deadline = time.monotonic() + timeout
    while status().size() < n + 1:
        if time.monotonic() > deadline:
            raise SystemExit(f"{status().size() - 1} of {n} executors registered after {timeout} s")
        time.sleep(0.1)


def cluster_scaling(bootstrap: str, n: int, parts: int, rounds: int) -> None:
    """``aiokafka_lite`` write and read on a standalone cluster of 1, then 2 one-core workers."""
    from aiokafka_lite.launchers.spark_cluster import StandaloneCluster, python_env
    from aiokafka_lite.launchers.spark_reference import spark_session

    fmt = "aiokafka_lite"
    med: dict[int, dict[str, float]] = {}
    for workers in (1, 2):
        t0 = time.perf_counter()
        with StandaloneCluster(workers=workers, cores=1, memory="1g") as cluster:
            spark = spark_session(
                f"aiokafka_lite-bench-{workers}w",
                cluster.master_url,
                reference=False,
                conf={
                    "spark.driver.memory": "1g",
                    "spark.executor.cores": "1",
                    "spark.executor.memory": "1g",
                    "spark.executorEnv.PYTHONPATH": python_env()["PYTHONPATH"],
                },
            )
            try:
                _wait_executors(spark, workers)
                print(
                    f"{workers} worker(s) x 1 core: cluster and session up in "
                    f"{time.perf_counter() - t0:.1f} s"
                )
                warm = f"bench-warmup-{uuid.uuid4().hex[:8]}"
                asyncio.run(_create_topic(bootstrap, warm, parts))
                spark_write(spark, fmt, bootstrap, warm, 20_000, parts)
                spark_read(spark, fmt, bootstrap, warm)
                writes, reads = [], []
                for r in range(rounds):
                    topic = f"bench-cluster-{uuid.uuid4().hex[:8]}"
                    asyncio.run(_create_topic(bootstrap, topic, parts))
                    writes.append(n / spark_write(spark, fmt, bootstrap, topic, n, parts))
                    written = spark_count(spark, bootstrap, topic, fmt)
                    if written != n:
                        raise SystemExit(f"wrote {written} records, expected {n}")
                    reads.append(n / spark_read(spark, fmt, bootstrap, topic))
                    print(f"  round {r + 1}: write {writes[-1]:,.0f}/s, read {reads[-1]:,.0f}/s")
                med[workers] = {
                    "write": statistics.median(writes),
                    "read": statistics.median(reads),
                }
            finally:
                spark.stop()
    print()
    print(f"{'rows/s':>16}{'write':>12}{'read':>12}")
    for workers, m in med.items():
        print(f"{f'{workers} worker(s)':>16}{m['write']:>12,.0f}{m['read']:>12,.0f}")
    print(
        f"{'2 vs 1':>16}{med[2]['write'] / med[1]['write']:>11.2f}x"
        f"{med[2]['read'] / med[1]['read']:>11.2f}x"
    )


def main(argv: list[str] | None = None) -> None:
    """Spark's read and write through aiokafka_lite's data source against Spark's own
    ``kafka`` format (``argv``: this module's options; the command line when None)."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--broker", default="apache", choices=("apache", "tansu", "noida"))
    ap.add_argument("--bootstrap", help="use this broker instead of starting one")
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--no-plain", action="store_true", help="skip the single-process baseline")
    ap.add_argument(
        "--cluster",
        action="store_true",
        help="aiokafka_lite only, on a standalone cluster of 1 then 2 one-core workers",
    )
    args = ap.parse_args(argv)
    n, parts = args.records, args.partitions

    from aiokafka_lite.launchers.spark_reference import (
        SPARK_KAFKA_VERSION,
        has_reference,
        spark_session,
    )

    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker, bootstrap = _start_broker(args.broker)
    try:
        if args.cluster:
            cluster_scaling(bootstrap, n, parts, args.rounds)
            return
        t0 = time.perf_counter()
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark = spark_session("aiokafka_lite-bench", args.master)
        if not has_reference(spark):
            raise SystemExit("Spark's Kafka connector could not be resolved with Maven")
        print(
            f"spark {spark.version} ({args.master}) started in {time.perf_counter() - t0:.1f} s, "
            f"spark-sql-kafka-0-10 {SPARK_KAFKA_VERSION}; {n:,} records x {len(VALUE)} B, "
            f"{parts} partitions, broker {args.bootstrap or args.broker}"
        )
        t0 = time.perf_counter()  # the first queries of a session run on a cold JVM: warm up
        for fmt in FORMATS:
            warm = f"bench-warmup-{fmt}-{uuid.uuid4().hex[:8]}"
            asyncio.run(_create_topic(bootstrap, warm, parts))
            spark_write(spark, fmt, bootstrap, warm, 20_000, parts)
            spark_read(spark, fmt, bootstrap, warm)
        print(f"warm-up queries took {time.perf_counter() - t0:.1f} s (not counted)")

        names = [f"{fmt} write" for fmt in FORMATS] + [f"{fmt} read" for fmt in FORMATS]
        if not args.no_plain:
            names += ["plain produce", "plain consume"]
        results: dict[str, list[float]] = {k: [] for k in names}
        for r in range(args.rounds):
            order = FORMATS if r % 2 == 0 else FORMATS[::-1]
            source = f"bench-source-{uuid.uuid4().hex[:8]}"
            for fmt in order:
                topic = f"bench-{fmt}-{uuid.uuid4().hex[:8]}"
                asyncio.run(_create_topic(bootstrap, topic, parts))
                results[f"{fmt} write"].append(
                    n / spark_write(spark, fmt, bootstrap, topic, n, parts)
                )
                written = spark_count(spark, bootstrap, topic)
                if written != n:
                    raise SystemExit(f"{fmt} wrote {written} records, expected {n}")
                if fmt == order[0]:
                    source = topic  # both connectors read the topic the first one wrote
            for fmt in order:
                results[f"{fmt} read"].append(n / spark_read(spark, fmt, bootstrap, source))
            if not args.no_plain:
                plain = f"bench-plain-{uuid.uuid4().hex[:8]}"
                asyncio.run(_create_topic(bootstrap, plain, parts))
                results["plain produce"].append(n / asyncio.run(plain_produce(bootstrap, plain, n)))
                results["plain consume"].append(
                    n / asyncio.run(plain_consume(bootstrap, plain, parts, n))
                )
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in results.items()))
        med = {k: statistics.median(v) for k, v in results.items()}
        print()
        print(f"{'rows/s':>16}{'write':>12}{'read':>12}")
        for fmt in FORMATS:
            print(f"{fmt:>16}{med[f'{fmt} write']:>12,.0f}{med[f'{fmt} read']:>12,.0f}")
        if not args.no_plain:
            print(
                f"{'plain client':>16}{med['plain produce']:>12,.0f}{med['plain consume']:>12,.0f}"
            )
        print()
        for op in ("write", "read"):
            ratio = med[f"aiokafka_lite {op}"] / med[f"kafka {op}"]
            per_round = [
                a / b for a, b in zip(results[f"aiokafka_lite {op}"], results[f"kafka {op}"])
            ]
            rounds = ", ".join(f"{x:.2f}" for x in per_round)
            print(f"{op:>5} ratio aiokafka_lite/kafka: {ratio:.2f} (per round: {rounds})")
        spark.stop()
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
