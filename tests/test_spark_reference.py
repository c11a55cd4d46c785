"""Parity with Spark's own Kafka connector: ``format("kafka")`` and ``format("aiokafka_lite")``.

The same topic is read with both connectors and the DataFrames must be identical (schema,
columns, values, sorted by partition and offset); rows written by either connector must read
back identically with the other. So a pipeline can switch between the two by changing only the
format name. Spark's connector comes from Maven Central (``aiokafka_lite.launchers.spark_reference``);
without Java, Maven or pyspark these tests are skipped with the reason. They run on apache and
noida; on Tansu the reference itself reads short (see ``pytestmark``).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skip_broker(
        "tansu",
        reason="Tansu's ListOffsets(latest) is the newest batch's base offset + 1, so Spark's "
        "connector stops short of the end (ours confirms the end with a Fetch high watermark)",
    ),
]

pytest.importorskip(
    "pyspark", reason="pyspark is not installed: pip install 'aiokafka_lite[spark]'"
)
pytest.importorskip(
    "pyarrow", reason="pyarrow is not installed: pip install 'aiokafka_lite[spark]'"
)

from aiokafka_lite.launchers import spark_reference as _reference  # noqa: E402
from aiokafka_lite.launchers.spark_cds import stop_session  # noqa: E402
from aiokafka_lite.producer import AIOKafkaProducer  # noqa: E402

FORMATS = ("kafka", "aiokafka_lite")


@pytest.fixture(scope="session")
def spark() -> Any:
    """The process's local[2] SparkSession, with Spark's Kafka connector jars on it."""
    reason = _reference.reference_available()
    if reason:
        pytest.skip(reason)
    try:
        _reference.reference_jars()
    except _reference.ReferenceUnavailable as exc:
        pytest.skip(str(exc))
    session = _reference.spark_session(
        "aiokafka_lite-tests", conf=_reference.QUICK_JVM_CONF, cds_dump=True
    )
    if not _reference.has_reference(session):
        pytest.skip("the SparkSession was created without Spark's Kafka connector jars")
    yield session
    stop_session(session)  # and its JVM, keeping the class-data-sharing archive it wrote


def _load(spark: Any, fmt: str, bootstrap: str, **options: str) -> Any:
    r = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in df.orderBy("topic", "partition", "offset").collect()]


def _both(spark: Any, bootstrap: str, **options: str) -> tuple[Any, Any]:
    """Load with both formats; assert the schemas match; return (kafka rows, ours)."""
    ref, ours = (_load(spark, fmt, bootstrap, **options) for fmt in FORMATS)
    assert ours.schema == ref.schema
    assert ours.columns == ref.columns
    return _rows(ref), _rows(ours)


async def _produce(bootstrap: str, topic: str, records: list[dict[str, Any]]) -> None:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        handles = [await producer.send(topic, **r) for r in records]
        await producer.flush()
        for h in handles:
            await h


async def test_batch_read_is_identical(spark, kafka_bootstrap, new_topic):
    topic = await new_topic(partitions=3)
    base_ts = int(time.time() * 1000) - 3_600_000  # recent: older ones fall to time retention
    await _produce(
        kafka_bootstrap,
        topic,
        [
            dict(
                value=b"value-%d" % i if i % 7 else None,
                key=b"key-%d" % i if i % 5 else None,
                partition=i % 3,
                timestamp_ms=base_ts + i,
                headers=[("h", b"%d" % i), ("n", None), ("h", b"again")] if i % 2 else [],
            )
            for i in range(45)
        ],
    )
    for headers in ("false", "true"):
        ref, ours = _both(spark, kafka_bootstrap, subscribe=topic, includeHeaders=headers)
        assert len(ref) == 45
        assert ours == ref
    # assign, subscribePattern and minPartitions select the same rows
    assign = json.dumps({topic: [0, 2]})
    ref, ours = _both(spark, kafka_bootstrap, assign=assign, minPartitions="5")
    assert len(ref) == 30 and ours == ref
    ref, ours = _both(spark, kafka_bootstrap, subscribePattern=topic.replace("-", "[-]"))
    assert len(ref) == 45 and ours == ref


async def test_offsets_json_bounds_are_identical(spark, kafka_bootstrap, new_topic):
    topic = await new_topic(partitions=3)
    await _produce(
        kafka_bootstrap, topic, [dict(value=b"%d" % i, partition=i % 3) for i in range(30)]
    )
    cases = [
        ({topic: {"0": 2, "1": -2, "2": 9}}, {topic: {"0": 5, "1": -1, "2": 10}}),
        ({topic: {"0": 0, "1": 3, "2": 4}}, "latest"),
        ("earliest", {topic: {"0": 1, "1": 0, "2": 7}}),
    ]
    for start, end in cases:
        options = {
            "subscribe": topic,
            "startingOffsets": start if isinstance(start, str) else json.dumps(start),
            "endingOffsets": end if isinstance(end, str) else json.dumps(end),
        }
        ref, ours = _both(spark, kafka_bootstrap, **options)
        assert ref and ours == ref, options


async def test_timestamp_bounds_are_identical(spark, kafka_bootstrap, new_topic):
    topic = await new_topic(partitions=2)
    base = int(time.time() * 1000) - 3_600_000
    await _produce(
        kafka_bootstrap,
        topic,
        [dict(value=b"%d" % i, partition=i % 2, timestamp_ms=base + i * 1000) for i in range(20)],
    )
    by_ts = json.dumps({topic: {"0": base + 4_000, "1": base + 11_000}})
    until = json.dumps({topic: {"0": base + 16_000, "1": base + 999_000}})
    cases = [
        {"startingTimestamp": str(base + 5_000)},
        {"startingTimestamp": str(base + 5_000), "endingTimestamp": str(base + 15_500)},
        {"startingOffsetsByTimestamp": by_ts},
        {"startingOffsetsByTimestamp": by_ts, "endingOffsetsByTimestamp": until},
        # the global timestamp wins over the per-partition ones, which win over offsets
        {"startingTimestamp": str(base + 9_000), "startingOffsetsByTimestamp": by_ts},
        {"startingOffsetsByTimestamp": by_ts, "startingOffsets": "earliest"},
        {"endingTimestamp": str(base + 3_000), "endingOffsets": "latest"},
        # past the newest record: the end with strategy latest (nothing to read)
        {"startingTimestamp": str(base + 99_000), "startingOffsetsByTimestampStrategy": "latest"},
    ]
    for options in cases:
        ref, ours = _both(spark, kafka_bootstrap, subscribe=topic, **options)
        assert ours == ref, options
    # ... and a failed query by default, with either connector
    for fmt in FORMATS:
        df = _load(
            spark, fmt, kafka_bootstrap, subscribe=topic, startingTimestamp=str(base + 99_000)
        )
        with pytest.raises(Exception, match=r"(?i)timestamp"):
            df.collect()


def _write(df: Any, fmt: str, bootstrap: str, **options: str) -> None:
    w = df.write.format(fmt).option("kafka.bootstrap.servers", bootstrap).mode("append")
    for k, v in options.items():
        w = w.option(k, v)
    w.save()


def _written(spark: Any, fmt: str, bootstrap: str, topic: str) -> list[tuple[Any, ...]]:
    """Rows of ``topic`` read with ``fmt``, without the write-time timestamps."""
    df = _load(spark, fmt, bootstrap, subscribe=topic, includeHeaders="true")
    return _rows(df.drop("timestamp"))


def _anonymous(rows: list[tuple[Any, ...]], topic: str) -> list[tuple[Any, ...]]:
    """``rows`` with the topic column (the third) replaced by "T"."""
    assert all(r[2] == topic for r in rows)
    return [(*r[:2], "T", *r[3:]) for r in rows]


async def test_writes_are_identical(spark, kafka_bootstrap, new_topic):
    topics = {
        fmt: await new_topic(partitions=3, name=f"{fmt}-w{time.time_ns()}") for fmt in FORMATS
    }
    rows = [
        (
            f"k{i}" if i % 4 else None,
            f"value {i}" if i % 9 else None,
            i % 3,
            [("h", b"%d" % i), ("empty", None)] if i % 2 else None,
        )
        for i in range(60)
    ]
    schema = (
        "key string, value string, partition int, headers array<struct<key string, value binary>>"
    )
    df = spark.createDataFrame(rows, schema).coalesce(1)  # one task: the same order per partition
    for fmt, topic in topics.items():
        _write(df, fmt, kafka_bootstrap, topic=topic)
    results = {
        (writer, reader): _written(spark, reader, kafka_bootstrap, topics[writer])
        for writer in FORMATS
        for reader in FORMATS
    }
    ref = _anonymous(results[("kafka", "kafka")], topics["kafka"])
    assert len(ref) == 60
    for (writer, reader), got in results.items():
        assert _anonymous(got, topics[writer]) == ref, (writer, reader)


async def test_topic_column_and_binary_writes_are_identical(spark, kafka_bootstrap, new_topic):
    base = f"tcol{time.time_ns()}"
    names: dict[str, list[str]] = {}
    for fmt in FORMATS:  # a loop: Python 3.10 rejects an await in a nested comprehension
        names[fmt] = [await new_topic(partitions=1, name=f"{base}-{fmt}-{j}") for j in range(2)]
    for fmt, (a, b) in names.items():
        data = [(a if i % 3 else b, b"\x00\xff%d" % i, b"key%d" % i) for i in range(12)]
        df = spark.createDataFrame(data, "topic string, value binary, key binary").coalesce(1)
        _write(df, fmt, kafka_bootstrap)  # no topic option: the column names each row's topic
    for reader in FORMATS:
        got = {
            fmt: [
                [r[:2] + r[3:] for r in _written(spark, reader, kafka_bootstrap, t)]
                for t in names[fmt]
            ]
            for fmt in FORMATS
        }
        assert got["aiokafka_lite"] == got["kafka"]
        assert [len(x) for x in got["kafka"]] == [8, 4]


async def test_default_partitioner_matches_java(spark, kafka_bootstrap, new_topic):
    """Keyed rows without a partition column land where Java's producer puts them (murmur2)."""
    topics = {
        fmt: await new_topic(partitions=5, name=f"{fmt}-p{time.time_ns()}") for fmt in FORMATS
    }
    df = spark.createDataFrame(
        [(f"key-{i}", f"v{i}") for i in range(100)], "key string, value string"
    )
    placed = {}
    for fmt, topic in topics.items():
        _write(df, fmt, kafka_bootstrap, topic=topic)
        back = _load(spark, "kafka", kafka_bootstrap, subscribe=topic).collect()
        placed[fmt] = {r.key: r.partition for r in back}
    assert len(placed["kafka"]) == 100 and len(set(placed["kafka"].values())) == 5
    assert placed["aiokafka_lite"] == placed["kafka"]


async def test_spark_style_client_options(spark, broker, kafka_bootstrap, new_topic):
    """Options written for Spark's connector work unchanged: kafka.group.id, groupIdPrefix,
    unknown names (ignored), SASL via JAAS."""
    topic = await new_topic(partitions=2)
    await _produce(
        kafka_bootstrap, topic, [dict(value=b"%d" % i, partition=i % 2) for i in range(10)]
    )
    ref, ours = _both(spark, kafka_bootstrap, subscribe=topic, **{"kafka.group.id": "spark-app"})
    assert len(ref) == 10 and ours == ref
    # groupIdPrefix (unused by both here) and unknown names: ignored by both (ours warns)
    unknown = {"groupIdPrefix": "app", "startingOffsetByTimestamp": "{}", "kafka.lingerr.ms": "5"}
    ref, ours = _both(spark, kafka_bootstrap, subscribe=topic, **unknown)
    assert len(ref) == 10 and ours == ref
    if broker.sasl_bootstrap is None:
        pytest.skip(f"[{broker.kind}] no SASL listener")
    user, password = next(iter(broker.sasl_users.items()))
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{password}";'
    )
    options = {
        "subscribe": topic,
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": jaas,
    }
    ref, ours = _both(spark, broker.sasl_bootstrap, **options)
    assert len(ref) == 10 and ours == ref


@pytest.mark.parametrize(
    "options",
    [
        {"startingOffsets": "latest"},
        {"endingOffsets": "earliest"},
        {"startingOffsets": '{"T": {"0": -1}}'},
        {"endingOffsets": '{"T": {"0": -2}}'},
        {"kafka.auto.offset.reset": "earliest"},
        {"kafka.enable.auto.commit": "true"},
        {"kafka.key.deserializer": "x"},
        {"startingTimestamp": "soon"},
    ],
    ids=lambda o: ",".join(o),
)
def test_both_refuse_the_same_options(spark, options):
    """Options Spark's connector refuses before reading anything are refused by ours too."""
    options = {k: v.replace('"T"', '"t"') for k, v in options.items()}
    for fmt in FORMATS:
        with pytest.raises(Exception) as info:
            _load(spark, fmt, "127.0.0.1:9", subscribe="t", **options).collect()
        # Spark's IllegalArgumentException; ours arrives wrapped, naming IllegalArgumentError
        assert "IllegalArgument" in type(info.value).__name__ + str(info.value), (fmt, info.value)


async def test_save_modes_match(spark, kafka_bootstrap, new_topic):
    """Append writes with both; overwrite is refused by both. The default mode (errorifexists)
    works with Spark's connector only: PySpark lets Python data sources be written in append or
    overwrite mode alone, so portable pipelines say ``mode("append")``."""
    topics = {
        fmt: await new_topic(partitions=1, name=f"{fmt}-m{time.time_ns()}") for fmt in FORMATS
    }
    df = spark.createDataFrame([("a",), ("b",)], "value string").coalesce(1)
    for fmt, topic in topics.items():
        _write(df, fmt, kafka_bootstrap, topic=topic)
        with pytest.raises(Exception, match=r"(?i)overwrite"):
            df.write.format(fmt).option("kafka.bootstrap.servers", kafka_bootstrap).option(
                "topic", topic
            ).mode("overwrite").save()
    for fmt, topic in topics.items():
        got = [r.value for r in _load(spark, "kafka", kafka_bootstrap, subscribe=topic).collect()]
        assert sorted(got) == [b"a", b"b"], fmt
    default = df.write.option("kafka.bootstrap.servers", kafka_bootstrap)
    default.format("kafka").option("topic", topics["kafka"]).save()
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        default.format("aiokafka_lite").option("topic", topics["aiokafka_lite"]).save()


async def test_transactional_topic_reads_are_identical(spark, kafka_bootstrap, new_topic):
    """Aborted batches and commit markers: the same rows under both isolation levels."""
    topic = await new_topic(partitions=2)
    async with AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, transactional_id=f"spark-ref-{uuid.uuid4().hex[:8]}"
    ) as producer:
        for txn in range(4):
            await producer.begin_transaction()
            for i in range(6):
                await producer.send(topic, b"t%d-%d" % (txn, i), partition=i % 2)
            await producer.flush()
            if txn == 1:
                await producer.abort_transaction()
            else:
                await producer.commit_transaction()
    for isolation in ("read_uncommitted", "read_committed"):
        ref, ours = _both(
            spark, kafka_bootstrap, subscribe=topic, **{"kafka.isolation.level": isolation}
        )
        assert len(ref) == (24 if isolation == "read_uncommitted" else 18)
        assert ours == ref, isolation


async def test_streaming_is_identical(spark, kafka_bootstrap, new_topic, tmp_path):
    """readStream (availableNow, maxOffsetsPerTrigger) and writeStream with either format."""
    src = await new_topic(partitions=2)
    await _produce(
        kafka_bootstrap,
        src,
        [dict(key=b"k%d" % i, value=b"v%d" % i, partition=i % 2) for i in range(40)],
    )
    batches: dict[str, list[list[tuple[Any, ...]]]] = {fmt: [] for fmt in FORMATS}
    sinks = {fmt: await new_topic(partitions=2, name=f"{src}-{fmt}") for fmt in FORMATS}
    for fmt in FORMATS:

        def collect(df: Any, batch_id: int, fmt: str = fmt) -> None:
            batches[fmt].append(_rows(df))

        stream = (
            spark.readStream.format(fmt)
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("subscribe", src)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "10")
            .load()
        )
        queries = [
            stream.writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(tmp_path / f"{fmt}-batches"))
            .trigger(availableNow=True)
            .start(),
            stream.selectExpr("key", "upper(cast(value as string)) as value", "partition")
            .writeStream.format(fmt)
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("topic", sinks[fmt])
            .option("checkpointLocation", str(tmp_path / f"{fmt}-copy"))
            .trigger(availableNow=True)
            .start(),
        ]
        for q in queries:
            assert q.awaitTermination(180), f"{fmt}: the availableNow query did not finish"
            assert q.exception() is None
    ref = [r for b in batches["kafka"] for r in b]
    assert len(ref) == 40
    assert [r for b in batches["aiokafka_lite"] for r in b] == ref
    assert [len(b) for b in batches["aiokafka_lite"] if b] == [
        len(b) for b in batches["kafka"] if b
    ]
    copies = {
        fmt: [r[:2] + r[3:5] for r in _rows(_load(spark, "kafka", kafka_bootstrap, subscribe=t))]
        for fmt, t in sinks.items()
    }
    assert len(copies["kafka"]) == 40
    assert copies["aiokafka_lite"] == copies["kafka"]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_compressed_writes_read_identically(spark, kafka_bootstrap, new_topic, codec):
    """kafka.compression.type: batches compressed by either writer (Java's codecs or ours) read
    back the same with either reader."""
    topics = {
        fmt: await new_topic(partitions=1, name=f"{fmt}-{codec}-{time.time_ns()}")
        for fmt in FORMATS
    }
    rows = [(f"k{i}", "compressible " * (i % 13) + str(i)) for i in range(300)]
    df = spark.createDataFrame(rows, "key string, value string").coalesce(1)
    for fmt, topic in topics.items():
        _write(df, fmt, kafka_bootstrap, topic=topic, **{"kafka.compression.type": codec})
    ref = _anonymous(_written(spark, "kafka", kafka_bootstrap, topics["kafka"]), topics["kafka"])
    assert len(ref) == 300
    for writer in FORMATS:
        for reader in FORMATS:
            got = _written(spark, reader, kafka_bootstrap, topics[writer])
            assert _anonymous(got, topics[writer]) == ref, (writer, reader)


async def test_log_append_time_reads_identically(spark, broker, kafka_bootstrap, new_topic):
    """timestamp / timestampType of a LogAppendTime topic (the broker's clock, type 1)."""
    topic = await new_topic(partitions=1, configs={"message.timestamp.type": "LogAppendTime"})
    await _produce(
        kafka_bootstrap, topic, [dict(value=b"%d" % i, timestamp_ms=1000) for i in range(5)]
    )
    ref, ours = _both(spark, kafka_bootstrap, subscribe=topic)
    if broker.kind != "apache" and all(r[6] == 0 for r in ref):
        pytest.skip(f"[{broker.kind}] the topic config message.timestamp.type is not honoured")
    assert [r[6] for r in ref] == [1] * 5
    assert ours == ref


def _spans(df: Any) -> list[tuple[int, int, int]]:
    """(partition, first offset, end offset) of each Spark task's rows."""
    tasks = df.select("partition", "offset").rdd.glom().collect()
    return sorted((t[0][0], t[0][1], t[-1][1] + 1) for t in tasks if t)


async def test_task_split_is_identical(spark, kafka_bootstrap, new_topic, tmp_path):
    """minPartitions and maxRecordsPerPartition cut the offset ranges into the same Spark tasks
    (batch; and streaming, where Spark's connector applies maxRecordsPerPartition alone too)."""
    topic = await new_topic(partitions=3)
    await _produce(
        kafka_bootstrap,
        topic,
        [dict(value=b"%d" % i, partition=0 if i < 25 else 1 if i < 32 else 2) for i in range(34)],
    )
    for options in (
        {"minPartitions": "5"},
        {"minPartitions": "8"},
        {"minPartitions": "8", "maxRecordsPerPartition": "10"},
    ):
        ref, ours = (
            _spans(_load(spark, fmt, kafka_bootstrap, subscribe=topic, **options))
            for fmt in FORMATS
        )
        assert ours == ref, options
    got: dict[str, list[list[tuple[int, int, int]]]] = {fmt: [] for fmt in FORMATS}
    for fmt in FORMATS:
        query = (
            spark.readStream.format(fmt)
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxRecordsPerPartition", "10")
            .load()
            .writeStream.foreachBatch(lambda df, _, fmt=fmt: got[fmt].append(_spans(df)))
            .option("checkpointLocation", str(tmp_path / fmt))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180), f"{fmt}: the availableNow query did not finish"
        assert query.exception() is None
    ref = [s for s in got["kafka"] if s]
    assert ref == [[(0, 0, 8), (0, 8, 16), (0, 16, 25), (1, 0, 7), (2, 0, 2)]]
    assert [s for s in got["aiokafka_lite"] if s] == ref
