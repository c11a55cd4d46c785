"""The [spark] extra from the installed wheel (.ci/wheel-check): records produced through the
wheel on the embedded broker are read back by a local Spark session through the data source."""

from __future__ import annotations

import asyncio
import os
import sys

from user import round_trip  # .ci/wheel_user.py, copied beside this file

from aiokafka_lite.launchers.embedded import EmbeddedBroker


def main() -> int:
    # Spark's Python workers run this interpreter (else the first python3 on PATH, which does
    # not have the wheel)
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from aiokafka_lite.spark import register

    with EmbeddedBroker("tansu") as broker:
        asyncio.run(round_trip(broker.bootstrap))
        topic = asyncio.run(_topic(broker.bootstrap))
        spark = SparkSession.builder.master("local[1]").appName("wheel-check").getOrCreate()
        try:
            register(spark)
            rows = (
                spark.read.format("aiokafka_lite")
                .option("kafka.bootstrap.servers", broker.bootstrap)
                .option("subscribe", topic)
                .option("startingOffsets", "earliest")
                .option("endingOffsets", "latest")
                .load()
                .select("value")
                .collect()
            )
        finally:
            spark.stop()
    values = sorted(bytes(r.value) for r in rows)
    assert values == sorted(b"record %d" % i for i in range(10)), values
    print("spark: the data source read the 10 records back")
    return 0


async def _topic(bootstrap: str) -> str:
    from aiokafka_lite.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return next(t for t in await admin.list_topics() if t.startswith("wheel-"))
    finally:
        await admin.close()


if __name__ == "__main__":
    sys.exit(main())
