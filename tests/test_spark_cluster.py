"""The ``aiokafka_lite`` data source where Spark runs for real, against Apache Kafka.

* a standalone Spark cluster (a master and two one-core workers, ``aiokafka_lite.launchers.spark_cluster``,
  started from the pyspark package): batch read, batch write and an availableNow stream run as
  tasks in the executors' Python workers, driven by a classic SparkSession on ``spark://``;
* Spark Connect: a Connect server (pyspark ships ``spark-connect_2.13``) and a client that
  registers the data source itself: batch read and write, and an availableNow stream, through
  ``sc://``;
* checkpoint replay: a streaming driver killed with SIGKILL while a planned batch is not yet
  committed replays exactly that batch's offset ranges on restart, then goes on.

Each driver runs outside the pytest process (``tests/spark_drivers.py``: one SparkContext per
process, and ``test_spark.py`` holds a local one). One cluster and one Connect server serve the
module. Apache Kafka only: these tests are about Spark's deployment modes, not broker dialects,
and they are the most expensive of the suite (Tansu and noida run the same data source in
``test_spark.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.timeout(480),  # the body starts Spark drivers (JVMs): two in the replay test
    pytest.mark.skip_broker(
        "tansu",
        "noida",
        reason="Spark deployment modes are tested once, on the reference broker (Apache Kafka)",
    ),
]

pytest.importorskip(
    "pyspark", reason="pyspark is not installed: pip install 'aiokafka_lite[spark]'"
)
pytest.importorskip(
    "pyarrow", reason="pyarrow is not installed: pip install 'aiokafka_lite[spark]'"
)

from aiokafka_lite.consumer import AIOKafkaConsumer  # noqa: E402
from aiokafka_lite.launchers.spark_cds import driver_java_options  # noqa: E402
from aiokafka_lite.launchers.spark_cluster import (  # noqa: E402
    ConnectServer,
    SparkProcessError,
    StandaloneCluster,
    python_env,
)
from aiokafka_lite.producer import AIOKafkaProducer  # noqa: E402
from aiokafka_lite.structs import TopicPartition  # noqa: E402
from tests import spark_drivers  # noqa: E402
from tests.spark_drivers import Driver  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXECUTOR_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _need_java() -> None:
    home = os.environ.get("JAVA_HOME")
    if not (home and os.path.exists(os.path.join(home, "bin", "java"))) and not shutil.which(
        "java"
    ):
        pytest.skip("no Java runtime (java not on PATH, JAVA_HOME unset): Spark needs Java 17+")


class SparkSetup:
    """What the module's tests drive: the cluster and two driver processes."""

    def __init__(self, cluster: StandaloneCluster, classic: Driver, connect: Driver) -> None:
        self.cluster = cluster
        self.classic = classic  # a classic SparkSession on the cluster, both executors registered
        self.connect = connect  # a Spark Connect session to the Connect server (local[2])


@pytest.fixture(scope="module")
def spark_setup(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A standalone master with two one-core workers, a Spark Connect server and their drivers.

    Every JVM starts at once (their start-up is mostly single-threaded; one after the other they
    cost twice the time on two cores).
    """
    _need_java()
    cluster = StandaloneCluster(workers=2, cores=1, memory="1g")
    server = ConnectServer(log_dir=str(tmp_path_factory.mktemp("connect")))
    classic, connect = Driver(), Driver()
    conf = {
        "spark.executor.cores": "1",
        "spark.executor.memory": "512m",
        "spark.cores.max": "2",
        # the executors map the drivers' class-data-sharing archive too (same jars, options)
        "spark.executor.extraJavaOptions": driver_java_options(EXECUTOR_JAVA_OPTS, dump=False),
        # the executors' Python workers import this checkout's aiokafka_lite
        "spark.executorEnv.PYTHONPATH": python_env()["PYTHONPATH"],
    }
    try:
        try:
            server.launch()
            cluster.launch()  # returns when the master listens, with the workers starting
            # the driver waits for both executors itself
            classic_master = classic.submit(
                spark_drivers.start_classic_session, cluster.master_url, conf, 2
            )
            server.wait_ready()
            cluster.wait_ready()
        except SparkProcessError as exc:
            pytest.fail(str(exc), pytrace=False)
        module = connect.call(spark_drivers.start_connect_session, server.url, timeout=90)
        assert module.startswith("pyspark.sql.connect"), module
        assert classic_master.result(timeout=120) == cluster.master_url
        yield SparkSetup(cluster, classic, connect)
    finally:
        classic.close()
        connect.close()
        server.stop()
        cluster.stop()


async def _produce(bootstrap: str, topic: str, n: int, partitions: int) -> set[tuple[Any, ...]]:
    """``n`` records spread over ``partitions``; returns {(partition, offset, key, value)}."""
    async with AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        sent = [
            (
                await producer.send(
                    topic, b"value-%d" % i, key=b"key-%d" % i, partition=i % partitions
                ),
                b"key-%d" % i,
                b"value-%d" % i,
            )
            for i in range(n)
        ]
        await producer.flush()
        return {(m.partition, m.offset, k, v) for h, k, v in sent for m in [await h]}


async def _consume_all(bootstrap: str, topic: str, partitions: int) -> list[tuple[bytes, bytes]]:
    """Every record of ``topic`` (up to the end offsets of now) as (key, value)."""
    async with AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        ends = await c.end_offsets(tps)
        out: list[tuple[bytes, bytes]] = []

        async def behind() -> bool:
            return any([await c.position(tp) < ends[tp] for tp in tps])

        async def drain() -> None:
            while await behind():
                for records in (await c.getmany(timeout_ms=500)).values():
                    out.extend((r.key, r.value) for r in records)

        await asyncio.wait_for(drain(), 60)
        return out


# ---- checkpoint replay after a driver kill ----------------------------------------------------
# First in the module: it runs before the module fixture starts the cluster and the Connect server.


def _offsets_log(checkpoint: Path, batch: int) -> dict[int, int]:
    """The source offsets Spark planned for ``batch``: {partition: end offset}."""
    lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    assert lines[0] == "v1", lines
    (source,) = lines[2:]  # after the version and the batch metadata: one line per source
    ((_, ends),) = json.loads(source).items()
    return {int(p): int(o) for p, o in ends.items()}


def _run_replay_driver(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = python_env()
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env["PYTHONPATH"]])
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.spark_drivers", "replay", *args],
            cwd=str(ROOT),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the driver, its JVM and Python workers: one group to kill
        )


def _tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-40:])


async def test_checkpoint_replay_after_driver_kill(kafka_bootstrap, new_topic, tmp_path):
    _need_java()
    topic = await new_topic(partitions=2)
    await _produce(kafka_bootstrap, topic, 30, 2)
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    out.mkdir()
    common = ["--bootstrap", kafka_bootstrap, "--topic", topic, "--checkpoint", str(ckpt)]
    common += ["--out", str(out), "--per-trigger", "10"]

    # run 1 blocks inside batch 1: planned (offsets/1 written), not committed (no commits/1)
    log1, log2 = tmp_path / "run1.log", tmp_path / "run2.log"
    first = _run_replay_driver([*common, "--run", "1", "--block-batch", "1"], log1)
    try:
        # the driver's start-up (a JVM, a Spark session) is readiness, not what is asserted:
        # bounded generously for a busy machine
        deadline = time.monotonic() + 200
        while not (out / "blocked").exists():
            assert first.poll() is None, f"the first driver exited:\n{_tail(log1)}"
            assert time.monotonic() < deadline, "batch 1 did not start within 200 s"
            await asyncio.sleep(0.2)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
    assert (ckpt / "offsets" / "1").exists() and not (ckpt / "commits" / "1").exists()
    assert (ckpt / "commits" / "0").exists()
    planned = {b: _offsets_log(ckpt, b) for b in (0, 1)}
    read_before_kill = json.loads((out / "run1-batch1.json").read_text())

    # more data while the driver is down, then restart from the checkpoint
    await _produce(kafka_bootstrap, topic, 6, 2)
    second = _run_replay_driver([*common, "--run", "2"], log2)
    try:
        second.wait(200)
    finally:
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
            second.wait(30)
    assert second.returncode == 0, _tail(log2)
    assert _offsets_log(ckpt, 1) == planned[1]  # the offsets log was not rewritten

    run2 = {
        int(p.stem.split("batch")[1]): [tuple(x) for x in json.loads(p.read_text())]
        for p in out.glob("run2-batch*.json")
    }
    assert min(run2) == 1  # batch 0 was committed: not run again
    # the replayed batch 1 read exactly the ranges planned before the kill: offsets/0 -> offsets/1
    want1 = [(p, o) for p in (0, 1) for o in range(planned[0][p], planned[1][p])]
    assert len(want1) == 10  # maxOffsetsPerTrigger
    assert run2[1] == want1 == [tuple(x) for x in read_before_kill]
    # then it went on: every offset once, beyond the replay, none skipped
    run1 = [tuple(x) for x in json.loads((out / "run1-batch0.json").read_text())]
    seen = run1 + [x for b in sorted(run2) for x in run2[b]]
    assert sorted(seen) == [(p, o) for p in (0, 1) for o in range(18)]
    assert sorted(run2) == list(range(1, max(run2) + 1))
    assert max(run2) >= 3  # 36 records at 10 per trigger


# ---- standalone cluster -----------------------------------------------------------------------


async def test_cluster_batch_read(spark_setup, kafka_bootstrap, new_topic):
    topic = await new_topic(partitions=4)
    produced = await _produce(kafka_bootstrap, topic, 80, 4)
    rows = spark_setup.classic.call(spark_drivers.read_topic, kafka_bootstrap, topic)
    assert {tuple(r[1:]) for r in rows} == produced and len(rows) == len(produced)
    # four tasks on two one-core executors: the first wave is one task on each
    assert len({r[0] for r in rows}) == 2
    apps = spark_setup.cluster.state()["activeapps"]
    assert [a["name"] for a in apps] == ["aiokafka_lite-cluster-tests"]


async def test_cluster_batch_write(spark_setup, kafka_bootstrap, new_topic):
    topic = await new_topic(partitions=3)
    spark_setup.classic.call(spark_drivers.write_topic, kafka_bootstrap, topic, 500, 4)
    got = await _consume_all(kafka_bootstrap, topic, 3)
    want = [(b"%d" % i, b"v%d" % i) for i in range(500)]
    assert Counter(got) == Counter(want)  # every row once: no loss, no duplicate


async def test_cluster_streaming_available_now(spark_setup, kafka_bootstrap, new_topic, tmp_path):
    topic = await new_topic(partitions=3)
    produced = await _produce(kafka_bootstrap, topic, 45, 3)
    rows, sizes = spark_setup.classic.call(
        spark_drivers.stream_to_parquet,
        kafka_bootstrap,
        topic,
        str(tmp_path / "ckpt"),
        str(tmp_path / "out"),
        20,
    )
    assert sizes == [20, 20, 5]
    assert sorted(rows) == sorted((p, o, v) for p, o, _, v in produced)


# ---- Spark Connect ----------------------------------------------------------------------------


async def test_connect_batch_read_and_write(spark_setup, kafka_bootstrap, new_topic):
    src = await new_topic(partitions=2)
    dst = await new_topic(partitions=2, name=src + "-out")
    produced = await _produce(kafka_bootstrap, src, 40, 2)
    rows = spark_setup.connect.call(spark_drivers.read_topic, kafka_bootstrap, src)
    assert sorted(tuple(r[1:]) for r in rows) == sorted(produced)
    spark_setup.connect.call(spark_drivers.write_topic, kafka_bootstrap, dst, 200, 3)
    got = await _consume_all(kafka_bootstrap, dst, 2)
    assert Counter(got) == Counter((b"%d" % i, b"v%d" % i) for i in range(200))


async def test_connect_streaming_available_now(spark_setup, kafka_bootstrap, new_topic, tmp_path):
    topic = await new_topic(partitions=2)
    produced = await _produce(kafka_bootstrap, topic, 30, 2)
    rows, sizes = spark_setup.connect.call(
        spark_drivers.stream_to_parquet,
        kafka_bootstrap,
        topic,
        str(tmp_path / "ckpt"),
        str(tmp_path / "out"),
        20,
    )
    assert sizes == [20, 10]
    assert sorted(rows) == sorted((p, o, v) for p, o, _, v in produced)
