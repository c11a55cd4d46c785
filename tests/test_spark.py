"""The PySpark data source ``aiokafka_lite`` against a real broker and a local[2] Spark session.

Needs the ``spark`` extra (pyspark, pyarrow, pandas) and a Java runtime; skipped with the reason
otherwise. One Spark session serves every test of the run (startup is the slow part).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from typing import Any

import pytest

pytestmark = pytest.mark.spark

pyspark = pytest.importorskip(
    "pyspark", reason="pyspark is not installed: pip install 'aiokafka_lite[spark]'"
)
pytest.importorskip(
    "pyarrow", reason="pyarrow is not installed: pip install 'aiokafka_lite[spark]'"
)

from aiokafka_lite import errors  # noqa: E402
from aiokafka_lite.producer import AIOKafkaProducer  # noqa: E402
from aiokafka_lite.spark._options import option_warnings, parse_options  # noqa: E402
from aiokafka_lite.structs import TopicPartition  # noqa: E402


def _java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return True
    return shutil.which("java") is not None


@pytest.fixture(scope="session")
def spark() -> Any:
    """A local[2] SparkSession whose Python workers run this interpreter."""
    if not _java_available():
        pytest.skip("no Java runtime (java not on PATH, JAVA_HOME unset): PySpark needs Java 17+")
    from aiokafka_lite.launchers.spark_cds import stop_session
    from aiokafka_lite.launchers.spark_reference import QUICK_JVM_CONF, spark_session

    # the same builder as test_spark_reference.py: one session per process serves both
    session = spark_session("aiokafka_lite-tests", conf=QUICK_JVM_CONF, cds_dump=True)
    yield session
    stop_session(session)  # and its JVM, keeping the class-data-sharing archive it wrote


def _reader(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.read.format("aiokafka_lite").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


async def _produce(bootstrap: str, topic: str, records: list[dict[str, Any]]) -> list[Any]:
    """Send records (dicts of send() kwargs) and return their RecordMetadata."""
    async with AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        handles = [await producer.send(topic, **r) for r in records]
        await producer.flush()
        return [await h for h in handles]


async def test_batch_read_equals_produced(spark, kafka_bootstrap, new_topic):
    topic = await new_topic(partitions=3)
    base_ts = int(time.time() * 1000) - 3_600_000  # recent: old timestamps fall to time retention
    records = [
        dict(
            value=b"value-%d" % i if i % 7 else None,
            key=b"key-%d" % i if i % 5 else None,  # i = 0, 35: neither key nor value
            partition=i % 3,
            timestamp_ms=base_ts + i,
            headers=[("h", b"%d" % i), ("n", None)] if i % 2 else [],
        )
        for i in range(60)
    ]
    metas = await _produce(kafka_bootstrap, topic, records)
    df = _reader(spark, kafka_bootstrap, subscribe=topic, includeHeaders="true")
    assert df.columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    got = {
        (r.partition, r.offset): (
            r.key,
            r.value,
            r.topic,
            r.ts_ms,
            r.timestampType,
            None if r.headers is None else [(h.key, h.value) for h in r.headers],
        )
        for r in df.selectExpr("*", "unix_millis(timestamp) as ts_ms").collect()
    }
    assert len(got) == len(records)
    for rec, meta in zip(records, metas):
        key = (meta.partition, meta.offset)
        assert key in got, key
        k, v, t, ts_ms, ttype, headers = got[key]
        assert (k, v, t, ts_ms, ttype) == (rec["key"], rec["value"], topic, rec["timestamp_ms"], 0)
        assert headers == (rec["headers"] or None)  # no headers: null, as in Spark's source
    # without includeHeaders there is no headers column (as in Spark's own source)
    assert "headers" not in _reader(spark, kafka_bootstrap, subscribe=topic).columns


async def test_starting_and_ending_offsets_json(spark, kafka_bootstrap, new_topic):
    topic = await new_topic(partitions=3)
    await _produce(
        kafka_bootstrap, topic, [dict(value=b"%d" % i, partition=i % 3) for i in range(30)]
    )
    df = _reader(
        spark,
        kafka_bootstrap,
        subscribe=topic,
        startingOffsets=json.dumps({topic: {"0": 2, "1": -2}}),  # partition 2: earliest by default
        endingOffsets=json.dumps({topic: {"0": 5, "1": -1, "2": 3}}),
    )
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    want = [(0, o) for o in range(2, 5)] + [(1, o) for o in range(10)] + [(2, o) for o in range(3)]
    assert got == want
    # assign + minPartitions splits one partition's range over several tasks without changing it
    split = _reader(spark, kafka_bootstrap, assign=json.dumps({topic: [1]}), minPartitions="4")
    assert split.rdd.getNumPartitions() == 4
    assert sorted(r.offset for r in split.select("offset").collect()) == list(range(10))


async def test_batch_write_then_read_back(spark, kafka_bootstrap, new_topic):
    topic = await new_topic(partitions=2)
    other = await new_topic(partitions=1, name=topic + "-b")
    rows = [(f"k{i}", f"v{i}", i % 2) for i in range(200)]
    df = spark.createDataFrame(rows, "key string, value string, partition int")
    (
        df.write.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("topic", topic)
        .option("kafka.compression.type", "gzip")
        .option("kafka.acks", "all")
        .mode("append")
        .save()
    )
    back = _reader(spark, kafka_bootstrap, subscribe=topic)
    got = sorted((r.key.decode(), r.value.decode(), r.partition) for r in back.collect())
    assert got == sorted(rows)
    # per-row topic column, binary values, headers column
    df2 = spark.createDataFrame(
        [(other, b"x%d" % i, [("h", b"1")]) for i in range(5)],
        "topic string, value binary, headers array<struct<key string, value binary>>",
    )
    df2.write.format("aiokafka_lite").option("kafka.bootstrap.servers", kafka_bootstrap).mode(
        "append"
    ).save()
    back2 = _reader(spark, kafka_bootstrap, subscribe=other, includeHeaders="true").collect()
    assert sorted(r.value for r in back2) == sorted(b"x%d" % i for i in range(5))
    assert all([(h.key, h.value) for h in r.headers] == [("h", b"1")] for r in back2)


async def test_streaming_available_now_rate_limit_and_restart(
    spark, kafka_bootstrap, new_topic, tmp_path
):
    topic = await new_topic(partitions=2)
    await _produce(
        kafka_bootstrap, topic, [dict(value=b"%d" % i, partition=i % 2) for i in range(50)]
    )
    batches: list[list[tuple[int, int]]] = []

    def collect(batch_df: Any, batch_id: int) -> None:
        batches.append(
            sorted(
                (r.partition, r.offset) for r in batch_df.select("partition", "offset").collect()
            )
        )

    def run_query() -> None:
        stream = (
            spark.readStream.format("aiokafka_lite")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "20")
            # never reached, and not waited for: an availableNow run reads everything and ends
            .option("minOffsetsPerTrigger", "1000")
            .load()
        )
        query = (
            stream.writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120), "the availableNow query did not finish"
        assert query.exception() is None

    run_query()
    sizes = [len(b) for b in batches if b]
    assert sizes == [20, 20, 10]
    seen = [x for b in batches for x in b]
    assert sorted(seen) == sorted((p, o) for p in range(2) for o in range(25))
    # restart from the checkpoint: only what was produced since is read
    batches.clear()
    await _produce(
        kafka_bootstrap, topic, [dict(value=b"n%d" % i, partition=i % 2) for i in range(6)]
    )
    run_query()
    seen = [x for b in batches for x in b]
    assert sorted(seen) == sorted((p, o) for p in range(2) for o in range(25, 28))


async def test_streaming_kafka_to_kafka_copy(spark, broker, kafka_bootstrap, new_topic, tmp_path):
    broker.skip_on(
        "tansu",
        reason="on Tansu the availableNow copy once planned one of two partitions as empty "
        "(1 run in 4; its ListOffsets latest is inexact and the Fetch high watermark of a "
        "just-written partition can lag): Apache Kafka and noida are the references here",
    )
    src = await new_topic(partitions=2)
    dst = await new_topic(partitions=1, name=src + "-out")
    await _produce(
        kafka_bootstrap,
        src,
        [dict(key=b"k%d" % i, value=b"hello-%d" % i, partition=i % 2) for i in range(40)],
    )
    stream = (
        spark.readStream.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        stream.selectExpr("key", "upper(cast(value as string)) as value")
        .writeStream.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("topic", dst)
        .option("checkpointLocation", str(tmp_path / "copy-ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "the copy query did not finish"
    assert query.exception() is None
    out = _reader(spark, kafka_bootstrap, subscribe=dst).collect()
    assert sorted((r.key, r.value) for r in out) == sorted(
        (b"k%d" % i, b"HELLO-%d" % i) for i in range(40)
    )


async def test_subscribe_pattern_and_starting_timestamp(spark, broker, kafka_bootstrap, new_topic):
    topic = await new_topic(partitions=2)
    base_ts = int(time.time() * 1000) - 3_600_000  # recent: old timestamps fall to time retention
    await _produce(
        kafka_bootstrap,
        topic,
        [
            dict(value=b"%d" % i, partition=i % 2, timestamp_ms=base_ts + i * 1000)
            for i in range(20)
        ],
    )
    pattern = topic.replace("-", "[-]")  # every character matched literally, anchored (fullmatch)
    got = (
        _reader(spark, kafka_bootstrap, subscribePattern=pattern)
        .select("topic", "offset")
        .collect()
    )
    assert len(got) == 20 and {r.topic for r in got} == {topic}
    assert (
        _reader(spark, kafka_bootstrap, subscribePattern=pattern[:-3]).count() == 0
    )  # no partial match
    broker.skip_on(
        "tansu",
        reason="Tansu's ListOffsets by timestamp uses the write time, not the record timestamp",
    )
    late = _reader(spark, kafka_bootstrap, subscribe=topic, startingTimestamp=str(base_ts + 14_000))
    assert sorted(int(r.value) for r in late.collect()) == list(range(14, 20))


@pytest.mark.skip_broker("tansu", reason="DeleteRecords makes Tansu panic and drop the connection")
async def test_fail_on_data_loss(spark, kafka_bootstrap, new_topic):
    from aiokafka_lite.client import KafkaClient
    from aiokafka_lite.protocol import messages as m

    topic = await new_topic(partitions=1)
    await _produce(kafka_bootstrap, topic, [dict(value=b"%d" % i, partition=0) for i in range(10)])
    async with KafkaClient(bootstrap_servers=kafka_bootstrap) as client:
        await client.add_topics([topic])
        leader = client.cluster.leader_for_partition(TopicPartition(topic, 0))
        req = m.DeleteRecordsRequest(
            timeout_ms=10_000,
            topics=[
                m.DeleteRecordsRequest.DeleteRecordsTopic(
                    name=topic,
                    partitions=[
                        m.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=4)
                    ],
                )
            ],
        )
        resp = await client.send(leader, req)
        assert resp.topics[0].partitions[0].error_code == 0
    starting = json.dumps({topic: {"0": 1}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        _reader(spark, kafka_bootstrap, subscribe=topic, startingOffsets=starting).collect()
    lenient = _reader(
        spark, kafka_bootstrap, subscribe=topic, startingOffsets=starting, failOnDataLoss="false"
    )
    assert sorted(r.offset for r in lenient.collect()) == list(range(4, 10))


async def test_empty_and_unknown_topics_read_as_empty(spark, kafka_bootstrap, new_topic):
    topic = await new_topic(partitions=2)
    assert _reader(spark, kafka_bootstrap, subscribe=topic).count() == 0
    assert _reader(spark, kafka_bootstrap, subscribe=topic + "-does-not-exist").count() == 0


def test_options_are_validated():
    with pytest.raises(errors.IllegalArgumentError, match="bootstrap"):
        parse_options({"subscribe": "t"})
    with pytest.raises(errors.IllegalArgumentError, match=r"auto\.offset\.reset"):
        parse_options({"kafka.bootstrap.servers": "h:1", "kafka.auto.offset.reset": "earliest"})
    # accepted and unused, as Spark's source accepts it (the data source never joins a group)
    assert parse_options({"kafka.bootstrap.servers": "h:1", "kafka.group.id": "g"}).client == {}
    with pytest.raises(errors.IllegalArgumentError, match="batch"):
        parse_options({"kafka.bootstrap.servers": "h:1", "startingOffsets": "latest"})
    with pytest.raises(errors.IllegalArgumentError, match="JSON"):
        parse_options({"kafka.bootstrap.servers": "h:1", "startingOffsets": "{bad"})
    opts = parse_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "kafka.acks": "all",
            "kafka.batch.size": "1000",
            "kafka.compression.type": "none",
            "startingOffsets": '{"t": {"0": 5}}',
        }
    )
    assert opts.client == {"acks": -1, "max_batch_size": 1000, "compression_type": None}
    from aiokafka_lite.spark._offsets import check_client_options

    assert check_client_options(opts) == []
    assert opts.starting == {"t": {0: 5}}


def test_rate_limit_is_proportional_and_exact():
    from aiokafka_lite.spark.datasource import rate_limit

    a, b, c = (TopicPartition("t", i) for i in range(3))
    start = {a: 0, b: 10, c: 5}
    latest = {a: 100, b: 20, c: 5}
    limited = rate_limit(start, latest, 33)
    assert sum(limited[tp] - start[tp] for tp in start) == 33
    assert all(start[tp] <= limited[tp] <= latest[tp] for tp in start)
    assert limited[a] - start[a] > limited[b] - start[b]
    assert rate_limit(start, latest, 1000) == latest


def test_spark_option_forms_are_parsed():
    """Option forms written for Spark's connector: timestamp precedence, JAAS, strategy."""
    base = {"kafka.bootstrap.servers": "h:1"}
    by_ts = '{"t": {"0": 1000, "1": 2000}}'
    opts = parse_options(
        {**base, "startingOffsetsByTimestamp": by_ts, "startingOffsets": "earliest"}
    )
    assert opts.starting == ("timestamps", {"t": {0: 1000, 1: 2000}})
    opts = parse_options({**base, "startingTimestamp": "5", "startingOffsetsByTimestamp": by_ts})
    assert opts.starting == ("timestamp", 5) and opts.timestamp_strategy == "error"
    opts = parse_options(
        {**base, "endingOffsetsByTimestamp": by_ts, "startingOffsetsByTimestampStrategy": "LATEST"}
    )
    assert opts.ending == ("timestamps", {"t": {0: 1000, 1: 2000}})
    assert opts.timestamp_strategy == "latest"
    with pytest.raises(errors.IllegalArgumentError, match="Strategy"):
        parse_options({**base, "startingOffsetsByTimestampStrategy": "earliest"})
    with pytest.raises(errors.IllegalArgumentError, match="batch"):
        parse_options({**base, "endingOffsetsByTimestamp": by_ts}, streaming=True)
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username=\'bob\' password="p@ss \\"word\\"";'
    )
    assert parse_options({**base, "kafka.sasl.jaas.config": jaas}).client == {
        "sasl_plain_username": "bob",
        "sasl_plain_password": 'p@ss "word"',
    }
    with pytest.raises(errors.IllegalArgumentError, match="jaas"):
        parse_options({**base, "kafka.sasl.jaas.config": "nonsense"})


def test_unknown_options_warn_with_the_closest_name(caplog):
    """An unknown option is not an error (Spark ignores it too) but a warning in the driver's
    log naming the closest known option; Spark's options are case-insensitive."""
    from aiokafka_lite.spark._offsets import check_client_options
    from aiokafka_lite.spark._options import option_warnings
    from aiokafka_lite.spark.datasource import KafkaDataSource

    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    assert (
        option_warnings(
            {**base, "STARTINGOFFSETS": "earliest", "groupIdPrefix": "p", "kafka.group.id": "g"},
            streaming=False,
            read=True,
        )
        == []
    )
    assert (
        option_warnings(
            {**base, "checkpointLocation": "/c", "queryName": "q"}, streaming=True, read=False
        )
        == []
    )  # what Spark adds to a streaming sink's options
    got = option_warnings(
        {**base, "startingOffsetByTimestamp": "{}", "whatever": "1"}, streaming=False, read=True
    )
    assert got == [
        "unknown option 'startingoffsetbytimestamp' is ignored: "
        "did you mean startingOffsetsByTimestamp?",
        "unknown option 'whatever' is ignored",
    ]
    # streaming-only options on a batch read: Spark's connector's own warnings
    assert option_warnings(
        {**base, "maxOffsetsPerTrigger": "5", "minOffsetsPerTrigger": "1", "maxTriggerDelay": "1s"},
        streaming=False,
        read=True,
    ) == [
        "maxOffsetsPerTrigger option ignored in batch queries",
        "minOffsetsPerTrigger option ignored in batch queries",
        "maxTriggerDelay option ignored in batch queries",
    ]
    # kafka.* names are checked against the clients' settings (in Java spelling)
    opts = parse_options({**base, "kafka.lingerr.ms": "5", "kafka.zzz.yyy": "1"})
    assert check_client_options(opts) == [
        "unknown Kafka client option 'kafka.lingerr.ms' is ignored: did you mean kafka.linger.ms?",
        "unknown Kafka client option 'kafka.zzz.yyy' is ignored",
    ]
    # ... and both reach the log when Spark asks the data source for a reader
    source = KafkaDataSource({**base, "subscribepatern": "x", "kafka.bach.size": "10"})
    with caplog.at_level("WARNING", logger="aiokafka_lite.spark"):
        source.reader(None)  # type: ignore[arg-type]
    logged = [r.getMessage() for r in caplog.records if r.name == "aiokafka_lite.spark"]
    assert any("did you mean subscribePattern?" in m for m in logged), logged
    assert any("did you mean kafka.batch.size?" in m for m in logged), logged
    # Java key/trust stores and Kerberos stay refused: TLS/SASL would fail later, less clearly
    for name in ("kafka.ssl.truststore.location", "kafka.sasl.kerberos.service.name"):
        with pytest.raises(errors.IllegalArgumentError, match="not supported"):
            parse_options({**base, name: "x"})


def test_streaming_and_split_options_are_parsed():
    base = {"kafka.bootstrap.servers": "h:1"}
    opts = parse_options(base, streaming=True)
    assert (opts.min_offsets_per_trigger, opts.max_trigger_delay_ms) == (None, 15 * 60_000)
    assert (opts.fetch_offset_retries, opts.fetch_offset_retry_interval_ms) == (3, 10)
    opts = parse_options(
        {
            **base,
            "minOffsetsPerTrigger": "100",
            "maxTriggerDelay": "30s",
            "maxRecordsPerPartition": "1000",
            "fetchOffset.numRetries": "5",
            "fetchOffset.retryIntervalMs": "0",
        },
        streaming=True,
    )
    assert opts.min_offsets_per_trigger == 100 and opts.max_trigger_delay_ms == 30_000
    assert opts.max_records_per_partition == 1000
    assert (opts.fetch_offset_retries, opts.fetch_offset_retry_interval_ms) == (5, 0)
    for text, ms in (("250", 250), ("100ms", 100), ("2 min", 120_000), ("1h", 3_600_000)):
        assert parse_options({**base, "maxTriggerDelay": text}).max_trigger_delay_ms == ms
    with pytest.raises(errors.IllegalArgumentError, match=r"maxTriggerDelay.*\(ms\)"):
        parse_options({**base, "maxTriggerDelay": "soon"})
    for name in (
        "minPartitions",
        "maxOffsetsPerTrigger",
        "minOffsetsPerTrigger",
        "maxRecordsPerPartition",
        "fetchOffset.numRetries",
        "kafkaConsumer.pollTimeoutMs",
    ):
        with pytest.raises(errors.IllegalArgumentError, match=f": {name} must be positive"):
            parse_options({**base, name: "0"})
    with pytest.raises(errors.IllegalArgumentError, match="must not be negative"):
        parse_options({**base, "fetchOffset.retryIntervalMs": "-1"})
    assert opts.commit_group is None
    assert parse_options({**base, "commitoffsetstogroup": " g1 "}).commit_group == "g1"
    with pytest.raises(errors.IllegalArgumentError, match="commitOffsetsToGroup"):
        parse_options({**base, "commitOffsetsToGroup": " "})
    # as Spark's streaming-only options: a batch read warns that it has no effect
    assert option_warnings({**base, "commitOffsetsToGroup": "g"}, streaming=False, read=True) == [
        "commitOffsetsToGroup option ignored in batch queries"
    ]


def test_split_ranges_like_spark():
    """minPartitions / maxRecordsPerPartition cut ranges where Spark's connector cuts them
    (the (5, None) and (8, 10) cases are what Spark 4.2's connector planned for a batch read of
    the same offsets)."""
    from aiokafka_lite.spark._offsets import OffsetRange, split_ranges

    ranges = [OffsetRange("t", 0, 0, 25), OffsetRange("t", 1, 0, 7), OffsetRange("t", 2, 0, 2)]

    def cut(min_partitions: int | None, max_records: int | None) -> list[tuple[int, int, int]]:
        return [
            (r.partition, r.start, r.end) for r in split_ranges(ranges, min_partitions, max_records)
        ]

    assert cut(None, None) == [(0, 0, 25), (1, 0, 7), (2, 0, 2)]
    assert cut(5, None) == [(0, 0, 8), (0, 8, 16), (0, 16, 25), (1, 0, 7), (2, 0, 2)]
    # a range whose share rounds to one piece stays whole; the others share the rest
    assert cut(8, None) == [
        *[(0, s, s + 5) for s in range(0, 25, 5)],
        (1, 0, 3),
        (1, 3, 7),
        (2, 0, 2),
    ]
    assert cut(8, 10) == [
        *[(0, s, s + 4) for s in range(0, 20, 4)],
        (0, 20, 25),
        (1, 0, 3),
        (1, 3, 7),
        (2, 0, 2),
    ]
    assert cut(None, 10) == [(0, 0, 8), (0, 8, 16), (0, 16, 25), (1, 0, 7), (2, 0, 2)]
    assert cut(None, 25) == cut(None, None)
    # both: maxRecordsPerPartition first, then minPartitions if there are still too few
    assert all(r[2] - r[1] <= 7 for r in cut(2, 7)) and len(cut(2, 7)) == 6
    assert len(cut(12, 10)) >= 12 and all(r[2] - r[1] <= 10 for r in cut(12, 10))


def test_offsets_are_fetched_again_while_they_look_wrong(monkeypatch):
    """fetchOffset.numRetries / retryIntervalMs: a partition whose end is below the offset the
    query already reached is asked again (Spark's "incorrect offsets" retry) before it counts
    as data loss."""
    from aiokafka_lite.spark.datasource import KafkaStreamReader

    tp = TopicPartition("t", 0)
    opts = parse_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "subscribe": "t",
            "fetchOffset.numRetries": "4",
            "fetchOffset.retryIntervalMs": "1",
        },
        streaming=True,
    )
    reader = KafkaStreamReader(opts)
    answers = [{tp: (0, 3)}, {tp: (0, 3)}, {tp: (0, 12)}]
    calls = []
    monkeypatch.setattr(reader, "_bounds", lambda: calls.append(1) or answers[len(calls) - 1])
    assert reader._checked_bounds({tp: 10}) == {tp: (0, 12)} and len(calls) == 3
    calls.clear()
    answers[:] = [{tp: (0, 3)}] * 4
    assert reader._checked_bounds({tp: 10}) == {tp: (0, 3)} and len(calls) == 4


def _wait_until(predicate: Any, timeout: float, query: Any, what: str) -> None:
    """Poll ``predicate`` until true; fail after ``timeout`` s or when ``query`` died."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert query.isActive, f"the query stopped while waiting for {what}: {query.exception()}"
        assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
        time.sleep(0.1)


async def test_max_records_per_partition_splits_tasks(spark, kafka_bootstrap, new_topic, tmp_path):
    """maxRecordsPerPartition: no Spark task reads more offsets than that, batch and streaming."""
    topic = await new_topic(partitions=2)
    await _produce(
        kafka_bootstrap, topic, [dict(value=b"%d" % i, partition=int(i >= 25)) for i in range(32)]
    )

    def spans(df: Any) -> list[tuple[int, int, int]]:
        tasks = df.select("partition", "offset").rdd.glom().collect()
        return sorted((t[0][0], t[0][1], t[-1][1] + 1) for t in tasks if t)

    want = [(0, 0, 8), (0, 8, 16), (0, 16, 25), (1, 0, 7)]  # 25 offsets: three tasks of <= 10
    assert (
        spans(_reader(spark, kafka_bootstrap, subscribe=topic, maxRecordsPerPartition="10")) == want
    )
    got: list[list[tuple[int, int, int]]] = []
    query = (
        spark.readStream.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerPartition", "10")
        .load()
        .writeStream.foreachBatch(lambda df, _: got.append(spans(df)))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "the availableNow query did not finish"
    assert query.exception() is None
    assert [s for s in got if s] == [want]


async def test_streaming_min_offsets_per_trigger_and_max_trigger_delay(
    spark, kafka_bootstrap, new_topic, tmp_path
):
    """minOffsetsPerTrigger holds a micro-batch back until enough new offsets are available
    (across partitions), unless maxTriggerDelay passed since the previous batch. As in Spark's
    source, the query's first batch is never held back."""
    topic = await new_topic(partitions=2)
    await _produce(kafka_bootstrap, topic, [dict(value=b"a", partition=i % 2) for i in range(5)])
    batches: list[tuple[float, list[tuple[int, int]]]] = []

    def collect(df: Any, batch_id: int) -> None:
        rows = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
        if rows:
            batches.append((time.monotonic(), rows))

    query = (
        spark.readStream.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("minOffsetsPerTrigger", "10")
        .option("maxTriggerDelay", "10s")
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        _wait_until(lambda: len(batches) >= 1, 120, query, "first micro-batch")
        assert len(batches[0][1]) == 5
        # 4 new offsets are too few; 4 + 6 are enough: one micro-batch holds all ten
        await _produce(kafka_bootstrap, topic, [dict(value=b"b", partition=0) for _ in range(4)])
        enough_from = time.monotonic()
        await _produce(kafka_bootstrap, topic, [dict(value=b"c", partition=1) for _ in range(6)])
        _wait_until(lambda: len(batches) >= 2, 60, query, "second micro-batch")
        assert batches[1][1] == [(0, o) for o in range(3, 7)] + [(1, o) for o in range(2, 8)]
        # 3 never reach the minimum: they are read once maxTriggerDelay passed since batch 2
        # (which started after ``enough_from``)
        await _produce(kafka_bootstrap, topic, [dict(value=b"d", partition=0) for _ in range(3)])
        _wait_until(lambda: len(batches) >= 3, 60, query, "third micro-batch")
        assert batches[2][1] == [(0, o) for o in range(7, 10)]
        assert batches[2][0] - enough_from >= 10
    finally:
        query.stop()


def _available_now(spark: Any, bootstrap: str, topic: str, ckpt: Any, **options: str) -> Any:
    """Run an availableNow query from ``ckpt``: ``(rows as (partition, offset), exception)``."""
    rows: list[tuple[int, int]] = []

    def collect(df: Any, batch_id: int) -> None:
        rows.extend(
            sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
        )

    # Spark starts a fresh Python worker for the streaming source of each query and gives it
    # 10 s to connect back: on a loaded machine that can run out before our code ran at all
    # (the query then fails while INITIALIZING, committing nothing). That is Spark's readiness,
    # not the behaviour under test: such an attempt is made again, at most 3 times in all.
    for attempt in range(3):
        r = (
            spark.readStream.format("aiokafka_lite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
        )
        for k, v in options.items():
            r = r.option(k, v)
        query = (
            r.load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert query.awaitTermination(120), "the availableNow query did not finish"
            exc = query.exception()
        except pyspark.errors.StreamingQueryException as raised:
            exc = raised
        if exc is None or attempt == 2 or not _python_worker_never_started(exc) or rows:
            return rows, exc
    raise AssertionError("unreachable")


def _python_worker_never_started(exc: Any) -> bool:
    """True for Spark's 'Python worker failed to connect back' (its 10 s worker start-up)."""
    text = " ".join(
        str(part)
        for part in (exc, getattr(exc, "desc", ""), getattr(exc, "_desc", ""),
                     getattr(exc, "stackTrace", ""), getattr(exc, "_stackTrace", ""),
                     getattr(exc, "cause", ""), getattr(exc, "_cause", ""))
    )  # fmt: skip
    return "failed to connect back" in text or "waiting for the Python worker" in text


@pytest.mark.skip_broker("tansu", reason="DeleteRecords makes Tansu panic and drop the connection")
async def test_streaming_fail_on_data_loss_deleted_records(
    spark, kafka_bootstrap, new_topic, tmp_path, caplog
):
    """Records deleted after a micro-batch and before the next one read them: the query fails
    naming the partition and the offsets lost, or with failOnDataLoss=false skips them (a
    warning) and goes on with the rest."""
    from aiokafka_lite.admin import AIOKafkaAdminClient, RecordsToDelete
    from aiokafka_lite.spark.datasource import KafkaStreamReader

    topic = await new_topic(partitions=1)
    await _produce(kafka_bootstrap, topic, [dict(value=b"%d" % i) for i in range(10)])
    rows, exc = _available_now(spark, kafka_bootstrap, topic, tmp_path / "a")
    assert exc is None and rows == [(0, o) for o in range(10)]
    await _produce(kafka_bootstrap, topic, [dict(value=b"%d" % i) for i in range(10, 20)])
    async with AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap) as admin:
        await admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(15)})
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # the same checkpoint for both settings
    rows, exc = _available_now(spark, kafka_bootstrap, topic, tmp_path / "a")
    assert exc is not None and rows == []
    assert f"{topic}-0: offsets [10, 15) were deleted" in str(exc), exc
    assert "failOnDataLoss" in str(exc)
    rows, exc = _available_now(
        spark, kafka_bootstrap, topic, tmp_path / "b", failOnDataLoss="false"
    )
    assert exc is None and rows == [(0, o) for o in range(15, 20)]
    # the warning, planning in this process
    options = {"kafka.bootstrap.servers": kafka_bootstrap, "subscribe": topic}
    reader = KafkaStreamReader(
        parse_options({**options, "failOnDataLoss": "false"}, streaming=True)
    )
    with caplog.at_level("WARNING", logger="aiokafka_lite.spark"):
        planned = reader.partitions({topic: {"0": 10}}, {topic: {"0": 20}})
    assert [(p.range.start, p.range.end) for p in planned] == [(15, 20)]  # type: ignore[attr-defined]
    assert any(f"{topic}-0: offsets [10, 15) were deleted" in m for m in caplog.messages)


async def test_streaming_fail_on_data_loss_topic_recreated(
    spark, kafka_bootstrap, new_topic, tmp_path
):
    """The topic deleted and re-created between micro-batches (its offsets went back): the query
    fails naming the partition and the offsets, or with failOnDataLoss=false reads the new
    topic from its start."""
    from aiokafka_lite.admin import AIOKafkaAdminClient

    topic = await new_topic(partitions=1)
    await _produce(kafka_bootstrap, topic, [dict(value=b"old") for _ in range(10)])
    rows, exc = _available_now(spark, kafka_bootstrap, topic, tmp_path / "a")
    assert exc is None and len(rows) == 10
    async with AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap) as admin:
        await admin.delete_topics([topic])
        deadline = time.monotonic() + 60  # Apache Kafka deletes asynchronously
        while True:
            try:
                await new_topic(partitions=1, name=topic)
                break
            except RuntimeError:  # TOPIC_ALREADY_EXISTS while the deletion completes
                assert time.monotonic() < deadline, f"{topic} could not be re-created in 60 s"
                await asyncio.sleep(0.2)
    await _produce(kafka_bootstrap, topic, [dict(value=b"new") for _ in range(3)])
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    rows, exc = _available_now(spark, kafka_bootstrap, topic, tmp_path / "a")
    assert exc is not None and rows == []
    assert f"{topic}-0: the offset went back from 10 to 3" in str(exc), exc
    rows, exc = _available_now(
        spark, kafka_bootstrap, topic, tmp_path / "b", failOnDataLoss="false"
    )
    assert exc is None and rows == [(0, 0), (0, 1), (0, 2)]


async def test_streaming_deleted_partitions_are_data_loss(kafka_bootstrap, new_topic, caplog):
    """A partition the checkpoint has that no longer exists (its topic deleted): planning the
    next micro-batch fails, or with failOnDataLoss=false drops it with a warning."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from aiokafka_lite.spark.datasource import KafkaStreamReader

    topic = await new_topic(partitions=1)
    gone = topic + "-gone"  # never created: what a deleted topic looks like
    base = {"kafka.bootstrap.servers": kafka_bootstrap, "subscribe": f"{topic},{gone}"}
    start = {topic: {"0": 0}, gone: {"0": 7}}
    strict = KafkaStreamReader(parse_options(base, streaming=True))
    with pytest.raises(errors.IllegalStateError, match=f"partitions {gone}-0 have been deleted"):
        strict.latestOffset(start, ReadAllAvailable())
    lenient = KafkaStreamReader(parse_options({**base, "failOnDataLoss": "false"}, streaming=True))
    with caplog.at_level("WARNING", logger="aiokafka_lite.spark"):
        assert lenient.latestOffset(start, ReadAllAvailable()) == {topic: {"0": 0}}
    assert any(f"partitions {gone}-0 have been deleted" in m for m in caplog.messages)


async def test_poll_timeout_bounds_a_stalled_read(kafka_bootstrap, new_topic):
    """kafkaConsumer.pollTimeoutMs: a task that gets no records for that long fails (here a
    range planned past the end of the partition) instead of waiting forever."""
    from aiokafka_lite import sync
    from aiokafka_lite.spark._io import read_range
    from aiokafka_lite.spark._offsets import OffsetRange

    topic = await new_topic(partitions=1)
    await _produce(kafka_bootstrap, topic, [dict(value=b"%d" % i) for i in range(3)])
    opts = parse_options(
        {"kafka.bootstrap.servers": kafka_bootstrap, "kafkaConsumer.pollTimeoutMs": "1500"}
    )
    rows: list[int] = []

    def read() -> None:
        for batch in sync.iterate(lambda: read_range(opts, OffsetRange(topic, 0, 0, 5))):
            rows.extend(batch.column("offset").to_pylist())

    started = time.monotonic()
    with pytest.raises(errors.KafkaTimeoutError, match=r"kafkaConsumer\.pollTimeoutMs=1500"):
        await asyncio.to_thread(read)
    assert 1.5 <= time.monotonic() - started < 30


@pytest.mark.skip_broker("tansu", reason="DeleteRecords makes Tansu panic and drop the connection")
async def test_read_task_data_loss(kafka_bootstrap, new_topic):
    """A task whose records vanished after planning (deleted, or the partition now ends before
    them): fails naming the partition and offsets, or with failOnDataLoss=false reads what is
    left."""
    from aiokafka_lite import sync
    from aiokafka_lite.admin import AIOKafkaAdminClient, RecordsToDelete
    from aiokafka_lite.spark._io import read_range
    from aiokafka_lite.spark._offsets import OffsetRange

    topic = await new_topic(partitions=1)
    await _produce(kafka_bootstrap, topic, [dict(value=b"%d" % i) for i in range(10)])
    async with AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap) as admin:
        await admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(4)})

    def read(start: int, end: int, **options: str) -> list[int]:
        opts = parse_options({"kafka.bootstrap.servers": kafka_bootstrap, **options})
        rng = OffsetRange(topic, 0, start, end)
        return [
            o
            for batch in sync.iterate(lambda: read_range(opts, rng), item_timeout=60)
            for o in batch.column("offset").to_pylist()
        ]

    with pytest.raises(
        errors.IllegalStateError, match=rf"{topic}-0: offsets \[1, 4\) were deleted"
    ):
        await asyncio.to_thread(read, 1, 8)
    assert await asyncio.to_thread(read, 1, 8, failOnDataLoss="false") == [4, 5, 6, 7]
    with pytest.raises(errors.IllegalStateError, match=rf"{topic}-0: offsets \[12, 15\) are past"):
        await asyncio.to_thread(read, 12, 15)
    assert await asyncio.to_thread(read, 12, 15, failOnDataLoss="false") == []


def test_refusals_are_worded_as_spark_words_them():
    """The texts of Spark's connector for the same refusals (our option names added)."""
    base = {"kafka.bootstrap.servers": "h:1"}
    cases = [
        ({}, False, "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka"),
        ({**base, "startingOffsets": "latest"}, False, "starting offset can't be latest for batch"),
        ({**base, "endingOffsets": "earliest"}, False, "ending offset can't be earliest for batch"),
        ({**base, "startingOffsets": '{"t": {"0": -1}}'}, False, "Starting offset not allowed"),
        ({**base, "endingOffsets": '{"t": {"0": -2}}'}, False, "Ending offset not allowed"),
        ({**base, "endingOffsets": "latest"}, True, "ending offset not valid in streaming"),
        ({**base, "endingTimestamp": "1"}, True, "ending timestamp not valid in streaming"),
        ({**base, "minPartitions": "0"}, False, "minPartitions must be positive"),
        (
            {**base, "kafka.key.deserializer": "x"},
            False,
            "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
            "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize "
            "the keys.",
        ),
    ]
    for options, streaming, text in cases:
        with pytest.raises(errors.IllegalArgumentError) as info:
            parse_options(options, streaming=streaming)
        assert text in str(info.value), (options, str(info.value))


def test_admission_control_follows_sparks_read_limits(monkeypatch):
    """latestOffset's decisions with minOffsetsPerTrigger + maxOffsetsPerTrigger set (Spark's
    composite limit), on a fake clock and fake partition ends."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

    from aiokafka_lite.spark.datasource import KafkaStreamReader

    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    ends = {a: 3, b: 2}
    now = [100.0]
    monkeypatch.setattr(
        KafkaStreamReader, "_bounds", lambda self: {tp: (0, e) for tp, e in ends.items()}
    )

    def reader(**options: str) -> KafkaStreamReader:
        opts = {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "maxTriggerDelay": "1m"}
        r = KafkaStreamReader(parse_options({**opts, **options}, streaming=True))
        r._clock = lambda: now[0]
        return r

    def offsets(x: int, y: int) -> dict[str, dict[str, int]]:
        return {"t": {"0": x, "1": y}}

    assert reader(minOffsetsPerTrigger="10").getDefaultReadLimit() == ReadMinRows(10)
    r = reader(minOffsetsPerTrigger="10", maxOffsetsPerTrigger="15")
    limit = r.getDefaultReadLimit()
    assert limit == ReadMaxRows(15)
    # the first batch of a run is never held back (5 < 10)
    assert r.latestOffset(offsets(0, 0), limit) == offsets(3, 2)
    ends.update({a: 9, b: 5})  # 9 new offsets: held back, the same offsets come back
    now[0] += 30
    assert r.latestOffset(offsets(3, 2), limit) == offsets(3, 2)
    ends.update({a: 23, b: 12})  # 30 new: admitted, capped at 15 in proportion (20:10)
    assert r.latestOffset(offsets(3, 2), limit) == offsets(13, 7)
    ends.update({a: 24, b: 12})  # 16 new: admitted, the cap applies again
    assert r.latestOffset(offsets(13, 7), limit) == offsets(24, 11)
    assert r.latestOffset(offsets(24, 11), limit) == offsets(24, 11)  # 1 new: held back
    now[0] += 59
    assert r.latestOffset(offsets(24, 11), limit) == offsets(24, 11)
    now[0] += 1  # maxTriggerDelay since the last batch: admitted though below the minimum
    assert r.latestOffset(offsets(24, 11), limit) == offsets(24, 12)
    # the engine's ReadAllAvailable wins over the options
    ends.update({a: 30, b: 30})
    assert r.latestOffset(offsets(24, 12), ReadAllAvailable()) == offsets(30, 30)
    # availableNow: never held back, everything up to the offsets at its start, in capped steps
    r = reader(minOffsetsPerTrigger="1000", maxOffsetsPerTrigger="20")
    r.prepareForTriggerAvailableNow()
    ends.update({a: 50, b: 50})  # written after the run started: not read
    steps = [offsets(0, 0)]
    while len(steps) < 10:
        steps.append(r.latestOffset(steps[-1], r.getDefaultReadLimit()))
        if steps[-1] == steps[-2]:
            break
    assert steps == [
        offsets(0, 0),
        offsets(10, 10),
        offsets(20, 20),
        offsets(30, 30),
        offsets(30, 30),
    ]


# ------------------------------------------------------------------ OAUTHBEARER options


def _unsecured_jws(sub: str = "spark", lifetime: float = 3600.0) -> str:
    """An unsecured JWS (``alg: none``), as Apache Kafka's unsecured validator accepts it."""
    import base64

    def b64(doc: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    now = time.time()  # iat in whole seconds: see test_oauth.unsecured_jws
    claims = {"sub": sub, "iat": int(now), "exp": now + lifetime}
    return f"{b64({'alg': 'none'})}.{b64(claims)}."


def make_test_provider() -> Any:
    """``kafka.sasl.oauth.token.provider=test_spark:make_test_provider`` in the tests below."""
    from aiokafka_lite.abc import AbstractTokenProvider

    class Unsecured(AbstractTokenProvider):
        async def token(self) -> str:
            return _unsecured_jws()

    return Unsecured()


OAUTH_JAAS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
    'clientId="spark-app" clientSecret="s3cr:et" scope="kafka" extension_logicalCluster="lkc-1";'
)


def test_oauthbearer_options_make_a_token_provider():
    """Java's client-credentials options (JAAS line, or Kafka 4.1's option names) become an
    OIDCTokenProvider where the client is created; Kafka's own login callback handler is
    accepted, a Java class of the application's is refused naming the Python replacement."""
    from aiokafka_lite.auth import OIDCTokenProvider
    from aiokafka_lite.consumer import AIOKafkaConsumer
    from aiokafka_lite.spark._offsets import check_client_options, client_kwargs

    base = {
        "kafka.bootstrap.servers": "h:1",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
    }
    handler = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
    java_style = parse_options(
        {
            **base,
            "kafka.sasl.jaas.config": OAUTH_JAAS,
            "kafka.sasl.login.callback.handler.class": handler,
        }
    )
    kip_1139 = parse_options(
        {
            **base,
            "kafka.sasl.oauthbearer.client.credentials.client.id": "spark-app",
            "kafka.sasl.oauthbearer.client.credentials.client.secret": "s3cr:et",
            "kafka.sasl.oauthbearer.scope": "kafka",
        }
    )
    for opts in (java_style, kip_1139):
        assert check_client_options(opts) == []
        kw = client_kwargs(AIOKafkaConsumer, opts)
        provider = kw["sasl_oauth_token_provider"]
        assert isinstance(provider, OIDCTokenProvider)
        assert (provider.token_endpoint, provider.client_id, provider.scope) == (
            "https://idp.example/token",
            "spark-app",
            "kafka",
        )
        assert kw["sasl_mechanism"] == "OAUTHBEARER" and "ssl_context" in kw
    assert java_style.client["sasl_oauth_extensions"] == {"logicalCluster": "lkc-1"}
    assert client_kwargs(AIOKafkaConsumer, java_style)[
        "sasl_oauth_token_provider"
    ].extensions() == {"logicalCluster": "lkc-1"}
    own = parse_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "kafka.sasl.mechanism": "OAUTHBEARER",
            "kafka.sasl.oauth.token.provider": "test_spark:make_test_provider",
        }
    )
    assert check_client_options(own) == []
    provider = client_kwargs(AIOKafkaConsumer, own)["sasl_oauth_token_provider"]
    assert asyncio.run(provider.token()).count(".") == 2

    mech = {"kafka.bootstrap.servers": "h:1", "kafka.sasl.mechanism": "OAUTHBEARER"}
    with pytest.raises(errors.IllegalArgumentError, match="needs a token source"):
        parse_options(mech)
    with pytest.raises(errors.IllegalArgumentError, match="client id and secret"):
        parse_options({**base})
    with pytest.raises(errors.IllegalArgumentError, match=r"kafka\.sasl\.oauth\.token\.provider"):
        parse_options({**mech, "kafka.sasl.login.callback.handler.class": "com.acme.MyHandler"})
    with pytest.raises(errors.IllegalArgumentError, match="module:callable"):
        parse_options({**mech, "kafka.sasl.oauth.token.provider": "not a callable"})
    for spec, why in (
        ("test_spark:_reader", "raised TypeError"),  # needs arguments
        ("test_spark:_unsecured_jws", "returned str, not an aiokafka_lite.abc"),
    ):
        bad = parse_options({**mech, "kafka.sasl.oauth.token.provider": spec})
        with pytest.raises(errors.KafkaConfigurationError, match=why):
            client_kwargs(AIOKafkaConsumer, bad)
    missing = parse_options({**mech, "kafka.sasl.oauth.token.provider": "no_such_mod:make"})
    with pytest.raises(errors.KafkaConfigurationError, match="cannot load"):
        client_kwargs(AIOKafkaConsumer, missing)


async def test_oauthbearer_client_credentials_through_spark(spark, broker, new_topic):
    """Spark options as a Java Spark job writes them: the JAAS line's client credentials reach a
    token endpoint (served here, handing out tokens the broker's validator accepts) from the
    driver and the executors, and the broker's OAUTHBEARER listener lets the job write and read."""
    if broker.kind != "apache" or broker.sasl_bootstrap is None:
        pytest.skip(f"[{broker.kind}] only the apache broker has an OAUTHBEARER listener")
    import http.server
    import threading
    import urllib.parse

    seen: list[tuple[str, dict[str, str]]] = []

    class TokenEndpoint(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            seen.append((self.headers.get("Authorization", ""), dict(urllib.parse.parse_qsl(body))))
            doc = json.dumps(
                {"access_token": _unsecured_jws(), "token_type": "Bearer", "expires_in": 3600}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(doc)))
            self.end_headers()
            self.wfile.write(doc)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), TokenEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        topic = await new_topic(partitions=2)
        options = {
            "kafka.bootstrap.servers": broker.sasl_bootstrap,
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "OAUTHBEARER",
            "kafka.sasl.jaas.config": OAUTH_JAAS,
            "kafka.sasl.login.callback.handler.class": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
            ),
            "kafka.sasl.oauthbearer.token.endpoint.url": (
                f"http://127.0.0.1:{server.server_address[1]}/token"
            ),
            # Java's KIP-1082 switch (off by default: the secret would go as given)
            "kafka.sasl.oauthbearer.header.urlencode": "true",
        }
        rows = [(f"k{i}", f"v{i}") for i in range(20)]
        (
            spark.createDataFrame(rows, "key string, value string")
            .write.format("aiokafka_lite")
            .options(**options)
            .option("topic", topic)
            .mode("append")
            .save()
        )
        df = spark.read.format("aiokafka_lite").options(**options).option("subscribe", topic).load()
        got = sorted((r.key.decode(), r.value.decode()) for r in df.collect())
        assert got == sorted(rows)
    finally:
        server.shutdown()
        server.server_close()
    import base64

    expected = "Basic " + base64.b64encode(b"spark-app:s3cr%3Aet").decode()
    assert seen and all(auth == expected for auth, _ in seen)
    assert all(form == {"grant_type": "client_credentials", "scope": "kafka"} for _, form in seen)


async def test_streaming_commits_offsets_to_group_for_monitoring(
    spark, kafka_bootstrap, new_topic, tmp_path
):
    """commitOffsetsToGroup: each committed micro-batch's end shows in the group (lag tools see
    the query's progress); a restart resumes from the checkpoint whatever the group holds; a
    group that refuses the commits (an active member) does not fail the query."""
    from aiokafka_lite import sync
    from aiokafka_lite.admin import AIOKafkaAdminClient
    from aiokafka_lite.consumer import AIOKafkaConsumer

    topic = await new_topic(partitions=2)
    group = topic + "-monitor"
    tps = [TopicPartition(topic, p) for p in range(2)]

    async def produce(n: int, tag: bytes) -> None:
        await _produce(
            kafka_bootstrap, topic, [dict(value=tag + b"%d" % i, partition=i % 2) for i in range(n)]
        )

    async def group_offsets() -> dict[int, int]:
        async with AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap) as admin:
            got = await admin.list_consumer_group_offsets(group, partitions=tps)
        return {tp.partition: om.offset for tp, om in got.items() if om.offset >= 0}

    batches: list[list[tuple[int, int]]] = []
    group_at_batch: list[dict[int, int]] = []  # the group's offsets while each batch runs

    def collect(batch_df: Any, batch_id: int) -> None:
        rows = batch_df.select("partition", "offset").collect()
        batches.append(sorted((r.partition, r.offset) for r in rows))
        group_at_batch.append(sync.run(group_offsets(), timeout=30))

    def run_query() -> list[tuple[int, int]]:
        batches.clear()
        group_at_batch.clear()
        stream = (
            spark.readStream.format("aiokafka_lite")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "20")
            .option("commitOffsetsToGroup", group)
            .load()
        )
        query = (
            stream.writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120), "the availableNow query did not finish"
        assert query.exception() is None
        return sorted(x for b in batches for x in b)

    await produce(50, b"a")
    assert run_query() == sorted((p, o) for p in range(2) for o in range(25))
    assert [len(b) for b in batches] == [20, 20, 10]
    # while batch n runs, the group holds the end of batch n - 1; once the run ends, its last end
    assert group_at_batch == [{}, {0: 10, 1: 10}, {0: 20, 1: 20}]
    assert await group_offsets() == {0: 25, 1: 25}

    # the group is not where a restart resumes: one partition set back, one set ahead
    async with AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap) as admin:
        await admin.alter_consumer_group_offsets(group, {tps[0]: 5, tps[1]: 27})
        # an active member: the broker refuses commits from outside the group
        async with AIOKafkaConsumer(
            topic, bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False
        ) as member:
            await asyncio.wait_for(member.getmany(timeout_ms=0), 30)
            deadline = time.monotonic() + 30
            while not member.assignment():
                assert time.monotonic() < deadline, "the member never got an assignment"
                await member.getmany(timeout_ms=200)
            await produce(6, b"b")
            # nothing re-read, nothing skipped; the refused commits do not fail the query
            assert run_query() == sorted((p, o) for p in range(2) for o in range(25, 28))
            assert await group_offsets() == {0: 5, 1: 27}
        (described,) = await admin.describe_consumer_groups([group])
        assert described.groups[0][2] == "Empty"  # the member left: commits are accepted again
    await produce(4, b"c")
    assert run_query() == sorted((p, o) for p in range(2) for o in range(28, 30))
    assert await group_offsets() == {0: 30, 1: 30}
