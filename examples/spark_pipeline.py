"""Spark pipeline: Kafka topic -> transform -> Kafka topic, with the ``aiokafka_lite`` data source.

Needs ``pip install 'aiokafka_lite[spark]'`` and Java 17+. Run against your broker::

    python examples/spark_pipeline.py --bootstrap 127.0.0.1:9092 --source orders --sink orders_enriched

or with no ``--bootstrap`` to start a throw-away embedded broker (``aiokafka_lite[broker]``) and
seed it with a few JSON orders first. The job reads every order (batch, then as a stream with
``availableNow``), parses the JSON value, keeps the big ones, adds a field and writes the result
to the sink topic keyed by customer; it prints what landed there.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from aiokafka_lite.spark import register

ORDER_SCHEMA = "id long, customer string, amount double"


async def seed(bootstrap: str, topic: str, n: int = 200) -> None:
    """Write ``n`` JSON orders to ``topic`` with the plain async producer."""
    from aiokafka_lite.producer import AIOKafkaProducer

    async with AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        for i in range(n):
            order = {"id": i, "customer": f"c{i % 7}", "amount": float(i % 50) * 3.5}
            await producer.send(topic, json.dumps(order).encode(), key=order["customer"].encode())
        await producer.flush()


def transform(orders):  # type: ignore[no-untyped-def]
    """Kafka rows -> parsed, filtered, enriched (key, value) rows ready for the Kafka sink."""
    parsed = orders.select(
        F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("o"),
        F.col("timestamp").alias("ingested_at"),
    ).select("o.*", "ingested_at")
    big = parsed.where(F.col("amount") >= 100).withColumn("tier", F.lit("gold"))
    return big.select(
        F.col("customer").alias("key"),
        F.to_json(F.struct("id", "customer", "amount", "tier", "ingested_at")).alias("value"),
    )


def run(spark: SparkSession, bootstrap: str, source: str, sink: str, checkpoint: str) -> None:
    # 1. batch: how many big orders are there right now?
    batch = (
        spark.read.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
    )
    print(f"{source}: {batch.count()} orders, {transform(batch).count()} of them >= 100")

    # 2. streaming: copy the big ones to the sink topic; availableNow processes what is there
    #    and stops (drop the trigger to keep the query running). The checkpoint makes a rerun
    #    continue where this one stopped.
    stream = (
        spark.readStream.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "1000")
        .load()
    )
    query = (
        transform(stream)
        .writeStream.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("kafka.compression.type", "zstd")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)

    # 3. read back what landed in the sink
    out = (
        spark.read.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", sink)
        .load()
        .selectExpr("cast(key as string) as customer", "cast(value as string) as order")
    )
    print(f"{sink}: {out.count()} records")
    out.show(5, truncate=False)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--bootstrap", help="host:port of your broker (default: start an embedded one)")
    ap.add_argument("--source", default="orders")
    ap.add_argument("--sink", default="orders_enriched")
    ap.add_argument("--checkpoint", default=None, help="streaming checkpoint directory")
    args = ap.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers run this interpreter
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("aiokafka_lite-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="aiokafka_lite-ckpt-")
    try:
        if args.bootstrap:
            run(spark, args.bootstrap, args.source, args.sink, checkpoint)
        else:
            from aiokafka_lite.launchers.embedded import EmbeddedBroker

            with EmbeddedBroker("tansu") as broker:
                asyncio.run(seed(broker.bootstrap, args.source))
                run(spark, broker.bootstrap, args.source, args.sink, checkpoint)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
