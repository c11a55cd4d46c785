"""Spark benchmark: the ``aiokafka_lite`` data source vs a plain single-process client, same broker.

Run: /work/venv/bin/python benchmarks/bench_spark.py [--broker tansu|noida] [--bootstrap host:port]
     [--records N] [--partitions P] [--master local[2]] [--rounds R]

Workload: N (default 1,000,000) records with a short string key and a 100-byte value.

* plain produce: one AIOKafkaProducer in this process sends N records (linger 5 ms, 256 KiB
  batches, the data source's write defaults) and waits for every acknowledgement;
* Spark write: ``spark.range(N)`` -> (key, value) -> ``write.format("aiokafka_lite")`` into a
  fresh P-partition topic;
* plain consume: one AIOKafkaConsumer reads all N records of the P partitions from offset 0,
  touching every value;
* Spark read: ``read.format("aiokafka_lite")`` of the same topic, materialised with Spark's
  ``noop`` sink (every row goes through Arrow into the JVM, nothing is written).

Spark's startup and a small warm-up write and read (the first queries of a session run on a cold
JVM, several times slower) are excluded; per-query planning (a Python planner process, offset lookup) is
included, as a user pays it. Rows/s are medians over the rounds, and the ratio is Spark / plain.
With ``local[2]`` on a 2-core machine the Spark side has two Python workers, the plain client one.

noida-db ignores a Fetch's ``max_bytes``/``partition_max_bytes`` and answers with everything
from the fetch offset on, so with ``--broker noida`` keep the topic under ~100 MiB (the
clients' ``max_response_size``): ``--records 500000`` works, 1,000,000 does not.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from typing import Any

VALUE = b"v" * 100


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
            await asyncio.wait_for(asyncio.ensure_future(_done(last)), 120)
        return time.perf_counter() - t0


async def _done(handle: Any) -> None:
    while not handle.done():
        await asyncio.sleep(0.001)
    exc = handle.exception()
    if exc is not None:
        raise exc


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
        while got < n:
            for recs in (await c.getmany(timeout_ms=1000)).values():
                for r in recs:
                    r.value  # noqa: B018 - touch every record
                got += len(recs)
        return time.perf_counter() - t0
    finally:
        await c.stop()


def spark_session(master: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from aiokafka_lite.spark import register

    spark = (
        SparkSession.builder.master(master)
        .appName("aiokafka_lite-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def spark_write(spark: Any, bootstrap: str, topic: str, n: int, partitions: int) -> float:
    df = spark.range(n, numPartitions=partitions).selectExpr(
        "cast(id as string) as key", f"repeat('v', {len(VALUE)}) as value"
    )
    t0 = time.perf_counter()
    df.write.format("aiokafka_lite").option("kafka.bootstrap.servers", bootstrap).option(
        "topic", topic
    ).mode("append").save()
    return time.perf_counter() - t0


def spark_read(spark: Any, bootstrap: str, topic: str) -> float:
    t0 = time.perf_counter()
    (
        spark.read.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
        .write.format("noop")
        .mode("overwrite")
        .save()
    )
    return time.perf_counter() - t0


def spark_count(spark: Any, bootstrap: str, topic: str) -> int:
    return int(
        spark.read.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
        .count()
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--broker", default="tansu", choices=("tansu", "noida"))
    ap.add_argument("--bootstrap", help="use this broker instead of starting an embedded one")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    n, parts = args.records, args.partitions

    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from aiokafka_lite._embedded import EmbeddedBroker

        broker = EmbeddedBroker(args.broker)
        broker.start()
        bootstrap = broker.bootstrap
    try:
        t0 = time.perf_counter()
        spark = spark_session(args.master)
        print(
            f"spark {spark.version} started in {time.perf_counter() - t0:.1f} s ({args.master}); "
            f"{n:,} records x {len(VALUE)} B, {parts} partitions, broker {args.bootstrap or args.broker}"
        )
        t0 = time.perf_counter()  # the first queries of a session run a cold JVM: warm up
        warm = f"bench-warmup-{uuid.uuid4().hex[:8]}"
        asyncio.run(_create_topic(bootstrap, warm, parts))
        spark_write(spark, bootstrap, warm, 20_000, parts)
        spark_read(spark, bootstrap, warm)
        print(f"warm-up queries took {time.perf_counter() - t0:.1f} s (not counted)")
        results: dict[str, list[float]] = {
            k: [] for k in ("plain produce", "spark write", "plain consume", "spark read")
        }
        for r in range(args.rounds):
            t_plain = f"bench-plain-{uuid.uuid4().hex[:8]}"
            t_spark = f"bench-spark-{uuid.uuid4().hex[:8]}"
            asyncio.run(_create_topic(bootstrap, t_plain, parts))
            asyncio.run(_create_topic(bootstrap, t_spark, parts))
            results["plain produce"].append(n / asyncio.run(plain_produce(bootstrap, t_plain, n)))
            results["spark write"].append(n / spark_write(spark, bootstrap, t_spark, n, parts))
            written = spark_count(spark, bootstrap, t_spark)
            if written != n:
                raise SystemExit(f"spark write produced {written} records, expected {n}")
            results["plain consume"].append(
                n / asyncio.run(plain_consume(bootstrap, t_plain, parts, n))
            )
            results["spark read"].append(n / spark_read(spark, bootstrap, t_plain))
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in results.items()))
        med = {k: statistics.median(v) for k, v in results.items()}
        print()
        print(f"{'':16}{'rows/s':>12}")
        for k, v in med.items():
            print(f"{k:16}{v:>12,.0f}")
        print()
        print(f"write ratio spark/plain: {med['spark write'] / med['plain produce']:.2f}")
        print(f"read  ratio spark/plain: {med['spark read'] / med['plain consume']:.2f}")
        spark.stop()
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
