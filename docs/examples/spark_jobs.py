"""Spark jobs on Kafka through the `aiokafka_lite` data source (docs/guides/spark.md).

pip install 'aiokafka_lite[spark]' (pyspark >= 4.2, pyarrow, pandas; Java 17+). Rows and options
are those of Spark's own Kafka connector (`format("kafka")`): switching is the format name.

    KAFKA_BOOTSTRAP=127.0.0.1:9092 python docs/examples/spark_jobs.py
"""

import os
import tempfile

from pyspark.sql import DataFrame, SparkSession

from aiokafka_lite.spark import register


# --8<-- [start:write]
def write_orders(spark: SparkSession, bootstrap: str, topic: str) -> None:
    """Batch write: a DataFrame with `key` and `value` columns (binary or string) becomes
    records; an optional `headers` column and a `topic` column per row are written too."""
    orders = spark.createDataFrame(
        [("alice", "apple"), ("bob", "pear"), ("alice", "plum")], "key string, value string"
    )
    (
        orders.write.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)  # or a `topic` column per row
        .option("kafka.compression.type", "zstd")  # kafka.* goes to the producer
        .mode("append")  # needed: PySpark writes Python data sources in append mode
        .save()
    )


# --8<-- [end:write]


# --8<-- [start:read]
def read_topic(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    """Batch read of everything in the topic now: key binary, value binary, topic string,
    partition int, offset long, timestamp timestamp, timestampType int (+ headers with
    includeHeaders=true)."""
    return (
        spark.read.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)  # or subscribePattern / assign
        .option("startingOffsets", "earliest")  # or JSON {"orders": {"0": 42, "1": -2}}
        .option("endingOffsets", "latest")
        .load()
    )


# --8<-- [end:read]


# --8<-- [start:stream]
def stream_upper(
    spark: SparkSession, bootstrap: str, source: str, sink: str, checkpoint: str
) -> None:
    """Streaming: per-partition offsets in the checkpoint, at most 10,000 records per
    micro-batch; availableNow reads what is there and stops (a scheduled job). Without the
    trigger it runs until stopped."""
    query = (
        spark.readStream.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "10000")
        .load()
        .selectExpr("key", "upper(cast(value as string)) as value")
        .writeStream.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


# --8<-- [end:stream]


def main(
    spark: SparkSession, bootstrap: str, source: str = "orders", sink: str = "orders_upper"
) -> list[tuple[str, str]]:
    register(spark)  # or spark.dataSource.register(aiokafka_lite.spark.KafkaDataSource)
    write_orders(spark, bootstrap, source)
    with tempfile.TemporaryDirectory() as checkpoint:
        stream_upper(spark, bootstrap, source, sink, checkpoint)
    rows = read_topic(spark, bootstrap, sink).selectExpr(
        "cast(key as string)", "cast(value as string)"
    )
    return sorted((r[0], r[1]) for r in rows.collect())


if __name__ == "__main__":
    session = SparkSession.builder.master("local[2]").getOrCreate()
    print(main(session, os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")))
