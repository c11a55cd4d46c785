"""Spark drivers that run outside the pytest process, for ``tests/test_spark_cluster.py``.

A process has one SparkContext, and ``test_spark.py`` keeps a local[2] one for the whole run;
a Spark Connect client also switches the process into Connect mode for good. So the standalone
cluster's driver and the Connect client run in a spawned child process (:class:`Driver`), and
the checkpoint-replay driver is a script (``python -m tests.spark_drivers replay ...``) the test
kills with SIGKILL.

Functions called through :class:`Driver` run in the child, on its one session (``_SPARK``).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing
import os
import sys
import threading
from pathlib import Path
from typing import Any

_SPARK: Any = None


class Driver:
    """A spawned child process holding one SparkSession; ``call(fn, *args)`` runs ``fn`` there."""

    def __init__(self) -> None:
        self._pool = cf.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))

    def submit(self, fn: Any, *args: Any) -> cf.Future[Any]:
        return self._pool.submit(fn, *args)

    def call(self, fn: Any, *args: Any, timeout: float = 120.0) -> Any:
        return self.submit(fn, *args).result(timeout=timeout)

    def close(self) -> None:
        try:
            self.call(stop_session, timeout=30)
        except Exception:
            pass
        for proc in list(getattr(self._pool, "_processes", {}).values()):
            if proc.is_alive():
                proc.kill()  # its JVM exits when the Python side's pipe closes
        self._pool.shutdown(wait=True, cancel_futures=True)


# ---- run in the child -------------------------------------------------------------------------


def start_classic_session(master: str, conf: dict[str, str], executors: int) -> str:
    """A classic SparkSession on ``master``; returns once ``executors`` executors registered."""
    import time

    global _SPARK
    from aiokafka_lite.launchers.spark_reference import QUICK_JVM_CONF, spark_session

    _SPARK = spark_session(
        "aiokafka_lite-cluster-tests", master, reference=False, conf={**QUICK_JVM_CONF, **conf}
    )
    status = _SPARK.sparkContext._jsc.sc().getExecutorMemoryStatus  # driver + executors
    deadline = time.monotonic() + 60
    while status().size() < executors + 1:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{status().size() - 1} of {executors} executors after 60 s")
        time.sleep(0.1)
    return str(_SPARK.sparkContext.master)


def start_connect_session(url: str) -> str:
    """A Spark Connect session to ``url`` with the data source registered from this client."""
    global _SPARK
    from pyspark.sql import SparkSession

    from aiokafka_lite.spark import register

    _SPARK = SparkSession.builder.remote(url).getOrCreate()
    register(_SPARK)
    return type(_SPARK).__module__


def stop_session() -> None:
    global _SPARK
    if _SPARK is not None:
        _SPARK.stop()
        _SPARK = None


def read_topic(bootstrap: str, topic: str) -> list[tuple[str, int, int, bytes, bytes]]:
    """Rows of ``topic`` as (executor id, partition, offset, key, value)."""
    from pyspark.sql.functions import udf

    def executor_id() -> str:  # nested: pickled by value, the workers need not import tests/
        """In a Python worker: the id of the executor it serves (its working directory's name)."""
        import os

        return os.path.basename(os.getcwd())

    executor = udf(executor_id, "string").asNondeterministic()
    df = (
        _SPARK.read.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )
    rows = df.select(executor().alias("executor"), "partition", "offset", "key", "value").collect()
    return [(r.executor, r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in rows]


def write_topic(bootstrap: str, topic: str, n: int, tasks: int) -> None:
    """``n`` rows (key ``str(i)``, value ``v<i>``) from ``tasks`` Spark tasks into ``topic``."""
    (
        _SPARK.range(0, n, 1, tasks)
        .selectExpr("cast(id as string) as key", "concat('v', id) as value")
        .write.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .mode("append")
        .save()
    )


def stream_to_parquet(
    bootstrap: str, topic: str, checkpoint: str, out: str, per_trigger: int
) -> tuple[list[tuple[int, int, bytes]], list[int]]:
    """An availableNow query of ``topic`` into a parquet file sink at ``out``.

    Returns the sink's rows (partition, offset, value) and each batch's input row count.
    """
    stream = (
        _SPARK.readStream.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(per_trigger))
        .load()
    )
    query = (
        stream.select("partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    if not query.awaitTermination(120):
        query.stop()
        raise TimeoutError("the availableNow query did not finish in 120 s")
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    # attributes: under Spark Connect (pyspark 4.3) p["numInputRows"] is None, p.numInputRows set
    sizes = [p.numInputRows for p in query.recentProgress if p.numInputRows]
    rows = _SPARK.read.parquet(out).collect()  # the sink's committed files only
    return [(r.partition, r.offset, bytes(r.value)) for r in rows], sizes


# ---- the checkpoint-replay driver (a script, killed by the test) -------------------------------


def replay_main(argv: list[str]) -> None:
    """One run of a rate-limited availableNow query whose foreachBatch records every batch.

    Each batch's (partition, offset) pairs go to ``<out>/run<run>-batch<id>.json``. With
    ``--block-batch N`` the run writes ``<out>/blocked`` when batch N arrives and waits there
    (to be killed: batch N is in the offsets log, not in the commits log).
    """
    ap = argparse.ArgumentParser()
    for name in ("--bootstrap", "--topic", "--checkpoint", "--out", "--run"):
        ap.add_argument(name, required=True)
    ap.add_argument("--per-trigger", type=int, default=10)
    ap.add_argument("--block-batch", type=int, default=-1)
    args = ap.parse_args(argv)
    out = Path(args.out)

    from aiokafka_lite.launchers.spark_reference import QUICK_JVM_CONF, spark_session

    # scratch space under --out: a SIGKILLed driver cannot clean up after itself
    conf = {**QUICK_JVM_CONF, "spark.local.dir": str(out / "spark-local")}
    spark = spark_session("aiokafka_lite-replay", "local[2]", reference=False, conf=conf)

    def record(batch_df: Any, batch_id: int) -> None:
        rows = sorted(
            (r.partition, r.offset) for r in batch_df.select("partition", "offset").collect()
        )
        path = out / f"run{args.run}-batch{batch_id}.json"
        path.with_suffix(".tmp").write_text(json.dumps(rows))
        os.replace(path.with_suffix(".tmp"), path)
        if batch_id == args.block_batch:
            (out / "blocked").write_text(str(os.getpid()))
            threading.Event().wait(600)  # until the test kills this driver

    query = (
        spark.readStream.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.per_trigger))
        .load()
        .writeStream.foreachBatch(record)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    if not query.awaitTermination(180):
        sys.exit("the availableNow query did not finish in 180 s")
    if query.exception() is not None:
        sys.exit(f"the query failed: {query.exception()}")
    spark.stop()


if __name__ == "__main__":
    if sys.argv[1:2] != ["replay"]:
        sys.exit("usage: python -m tests.spark_drivers replay --bootstrap ... (see replay_main)")
    replay_main(sys.argv[2:])
