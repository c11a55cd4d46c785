"""Interop with the Apache Kafka Java client as the reference (``tests/java_oracle.py``).

* records the Java producer writes (every codec, headers with null values, null keys and values,
  explicit timestamps, idempotent, transactions committed and aborted) are read by aiokafka_lite
  exactly: same partitions, offsets, keys, values, headers and timestamps, aborted records only
  under ``read_uncommitted``, control records never;
* the same matrix written by aiokafka_lite (``send``, ``send_many``, ``send_batch``) is read
  identically by the Java consumer, and keyed records land on the partition the Java producer
  picks (murmur2);
* LogAppendTime topics, an open transaction (both clients stop at the same last stable offset),
  and a Java producer fencing an open aiokafka_lite transaction with the same transactional id;
* a consumer group mixing Java and aiokafka_lite members (range, roundrobin, sticky) splits the
  partitions without overlap or gap, each client resumes from offsets the other committed (also
  offsets committed in an aiokafka_lite transaction), and no record is lost when a member of
  either kind leaves;
* the produce/consume matrix (a subset) and the group tests again on Apache Kafka 3.9.1 with the
  3.9.1 Java client, for the older protocol versions.

Runs on Apache Kafka only (the ``apache`` broker kind, plus the ``apache39`` fixture): the
embedded brokers are not the reference. Each Java call starts a JVM (about a second), so every
matrix is written by a few JVM runs and read back by one per isolation level.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import java_oracle
import pytest
from java_oracle import GroupMember, consume, partitions_for, produce

from aiokafka_lite import (
    AIOKafkaAdminClient,
    AIOKafkaConsumer,
    AIOKafkaProducer,
    NewTopic,
    TopicPartition,
)
from aiokafka_lite.consumer import (
    RangePartitionAssignor,
    RoundRobinPartitionAssignor,
    StickyPartitionAssignor,
)
from aiokafka_lite.errors import ProducerFenced

PARTITIONS = 3
ISOLATIONS = ["read_committed", "read_uncommitted"]


@dataclass(frozen=True)
class Target:
    """A broker and the Java client version to check against it."""

    bootstrap: str
    kafka_version: str | None  # the Java client's (None: the oracle's default, 4.4.0)


@pytest.fixture(params=["4.4", "3.9"])
def target(request: pytest.FixtureRequest, broker: Any) -> Target:
    """Apache Kafka 4.4 with the 4.4 Java client, or Apache Kafka 3.9.1 with the 3.9.1 client."""
    broker.skip_on("tansu", "noida", reason="the Java client is the reference on Apache Kafka only")
    version = None if request.param == "4.4" else "3.9.1"
    reason = java_oracle.unavailable_reason(version)
    if reason is not None:
        pytest.skip(reason)
    java_oracle.build(version)
    if version is None:
        return Target(str(broker.bootstrap), None)
    return Target(str(request.getfixturevalue("apache39").bootstrap), version)


@pytest.fixture
def bootstrap(broker: Any) -> str:
    """The session's Apache Kafka 4.4 broker, with the Java oracle built."""
    broker.skip_on("tansu", "noida", reason="the Java client is the reference on Apache Kafka only")
    reason = java_oracle.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    java_oracle.build()
    return str(broker.bootstrap)


async def new_topic(
    bootstrap: str, partitions: int = PARTITIONS, config: dict[str, str] | None = None
) -> str:
    """A new topic, once every partition has a leader (created with the aiokafka_lite admin
    client: a JVM less per test)."""
    name = f"java-interop-{uuid.uuid4().hex[:10]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1, topic_configs=config or {})])
        deadline = time.monotonic() + 30
        while True:
            described = await admin.describe_topics([name])
            found = described[0]["partitions"] if described else []
            if len(found) == partitions and all(p["leader"] >= 0 for p in found):
                return name
            assert time.monotonic() < deadline, f"topic {name} has no leaders after 30 s"
            await asyncio.sleep(0.05)
    finally:
        await admin.close()


# --------------------------------------------------------------------------------------------
# the matrix: what each producer configuration writes


@dataclass(frozen=True)
class Spec:
    """One producer configuration of the matrix (one Java run, one aiokafka_lite producer)."""

    name: str
    codec: str  # none, gzip, snappy, lz4, zstd
    idempotent: bool = True
    acks: str = "all"
    txn: str | None = None  # None, "commit" or "abort"


# Aborted transactions between other writes (in this order for aiokafka_lite; the Java runs go
# three at a time), so that read_committed skips aborted batches and markers mid-partition.
SPECS = [
    Spec("gzip", "gzip"),
    Spec("txn-commit", "lz4", txn="commit"),
    Spec("txn-abort", "zstd", txn="abort"),
    Spec("plain", "none", idempotent=False, acks="1"),
    Spec("snappy", "snappy"),
    Spec("lz4", "lz4"),
    Spec("zstd", "zstd"),
    Spec("txn-commit-none", "none", txn="commit"),
    Spec("txn-abort-gzip", "gzip", txn="abort"),
]
# Apache Kafka 3.9.1 with the 3.9.1 client: one codec of each kind, a commit and an abort.
SPECS_39 = [
    Spec("plain", "none", idempotent=False, acks="1"),
    Spec("txn-commit", "gzip", txn="commit"),
    Spec("lz4", "lz4"),
    Spec("txn-abort", "snappy", txn="abort"),
    Spec("zstd", "zstd"),
]


def specs_for(target: Target) -> list[Spec]:
    return SPECS if target.kafka_version is None else SPECS_39


Headers = list[tuple[str, bytes | None]]


def sample_records(tag: str, base_ts: int) -> list[dict[str, Any]]:
    """The records one configuration writes: every shape of key, value, header and timestamp.

    ``partition`` is None where the producer's partitioner chooses (keyed: murmur2).
    """
    t = tag.encode()
    rng = random.Random(tag)
    records: list[dict[str, Any]] = [
        {
            "key": b"k-" + t,
            "value": b"v-" + t * 40,
            "headers": [("h", b"1"), ("null", None), ("h", b"dup"), ("\u00e9 \u2603", b"\x00\xff")],
            "timestamp": base_ts + 1,
        },
        {"key": None, "value": b"no-key-" + t, "partition": 1},
        {"key": b"tombstone-" + t, "value": None, "partition": 2, "headers": [("n", None)]},
        {"key": None, "value": None, "partition": 0, "timestamp": base_ts + 2},
        {"key": b"", "value": b"", "partition": 1, "headers": [("empty", b"")]},
        # no timestamp: the producer's clock (compared with what its send reported)
        {"key": bytes(range(256)), "value": bytes(range(256)) * 30, "partition": 0},
        {"key": b"random-" + t, "value": rng.randbytes(3000), "partition": 2},
        {"key": None, "value": b"sticky-" + t},  # null key, no partition: the producer's choice
        # more headers than a one-byte varint counts
        {
            "key": b"headers-" + t,
            "value": b"",
            "headers": [(f"h{i}", bytes([i])) for i in range(130)],
        },
        # larger than the codecs' blocks (snappy-java 32 KiB, lz4 64 KiB, zstd 128 KiB), half
        # compressible: the framing of multi-block payloads
        {"key": b"big-" + t, "value": (b"big-" + t) * 15_000 + rng.randbytes(40_000)},
    ]
    # many small records in a row: offset and length varints past one byte, a negative
    # timestamp delta (a record older than the batch's first)
    for i in range(150):
        records.append(
            {"key": None, "value": f"{i}".encode(), "timestamp": base_ts + (3 if i % 50 else -9)}
        )
        records[-1]["partition"] = 1
        records[-1]["headers"] = [("", b"")] if i % 7 == 0 else []
    for i in range(12):
        records.append(
            {
                "key": f"{tag}-key-{i}".encode(),
                "value": f"{tag}-value-{i}-".encode() * (1 + i % 7),
                "headers": [(f"i{j}", f"{i}.{j}".encode()) for j in range(i % 3)],
                "timestamp": base_ts + 10 + i,
            }
        )
    for record in records:
        record.setdefault("headers", [])
        record.setdefault("timestamp", None)
        record.setdefault("partition", None)
    return records


@dataclass
class Written:
    """A record as its producer reported it: where it went, and whether its transaction aborted."""

    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    aborted: bool


def expected(written: list[Written], isolation: str) -> dict[tuple[int, int], tuple[Any, ...]]:
    """What a consumer must read at ``isolation``: (partition, offset) -> record fields."""
    return {
        (w.partition, w.offset): (w.key, w.value, w.headers, w.timestamp, "CreateTime")
        for w in written
        if not (w.aborted and isolation == "read_committed")
    }


def check_written(
    written: list[Written], records: list[dict[str, Any]], log_append_time: bool
) -> None:
    """The producer reported every record once, with the partitions and timestamps asked for
    (on a LogAppendTime topic, the broker's time instead)."""
    assert len({(w.partition, w.offset) for w in written}) == len(written)
    for w, record in zip(written, records, strict=True):
        if record["partition"] is not None:
            assert w.partition == record["partition"]
        if record["timestamp"] is not None and not log_append_time:
            assert w.timestamp == record["timestamp"]


# --------------------------------------------------------------------------------------------
# writers and readers


def write_java(
    target: Target, topic: str, specs: Sequence[Spec], log_append_time: bool = False
) -> list[Written]:
    """Each configuration's records, written by the Java producer (one JVM each, a few at once:
    where each record went comes from the producer's own report, not from the order)."""
    base_ts = int(time.time() * 1000) - 60_000

    def write(spec: Spec) -> list[Written]:
        records = sample_records(spec.name, base_ts)
        metadata = produce(
            target.bootstrap,
            topic,
            records,
            compression=spec.codec,
            idempotent=None if spec.txn else spec.idempotent,
            acks=None if spec.txn else spec.acks,
            transactional_id=f"java-interop-{uuid.uuid4().hex[:8]}" if spec.txn else None,
            txn=spec.txn,
            linger_ms=20,
            kafka_version=target.kafka_version,
        )
        written = [
            Written(
                m["partition"],
                m["offset"],
                m["timestamp"],
                r["key"],
                r["value"],
                list(r["headers"]),
                spec.txn == "abort",
            )
            for m, r in zip(metadata, records, strict=True)
        ]
        check_written(written, records, log_append_time)
        return written

    with ThreadPoolExecutor(max_workers=3) as pool:
        return [w for written in pool.map(write, specs) for w in written]


async def write_lite(
    bootstrap: str, topic: str, specs: Sequence[Spec], log_append_time: bool = False
) -> list[Written]:
    """Each configuration's records, written by an aiokafka_lite producer of that configuration."""
    base_ts = int(time.time() * 1000) - 60_000
    txn_id = f"lite-interop-{uuid.uuid4().hex[:8]}"
    written: list[Written] = []
    for spec in specs:
        records = sample_records(spec.name, base_ts)
        options: dict[str, Any] = {}
        if spec.txn:
            options["transactional_id"] = txn_id
        else:
            options["enable_idempotence"] = spec.idempotent
            options["acks"] = -1 if spec.acks == "all" else int(spec.acks)
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if spec.codec == "none" else spec.codec,
            linger_ms=20,
            **options,
        )
        await producer.start()
        try:
            if spec.txn:
                await producer.begin_transaction()
            futures = [
                await producer.send(
                    topic,
                    key=r["key"],
                    value=r["value"],
                    partition=r["partition"],
                    timestamp_ms=r["timestamp"],
                    headers=list(r["headers"]),
                )
                for r in records
            ]
            metadata = [await asyncio.wait_for(f, 30) for f in futures]
            # the bulk paths: send_many (unkeyed into one partition, and keyed) and send_batch
            many = bulk_records(spec.name, base_ts)
            for keyed in (False, True):
                part = [r for r in many if (r["key"] is not None) == keyed]
                handles = await producer.send_many(
                    topic,
                    [r["value"] for r in part],
                    keys=[r["key"] for r in part] if keyed else None,
                    partition=None if keyed else part[0]["partition"],
                    timestamp_ms=part[0]["timestamp"],
                    headers=part[0]["headers"],
                )
                metadata += [await asyncio.wait_for(h, 30) for h in handles]
                records += part
            batched = batch_records(spec.name, base_ts)
            batch = producer.create_batch()
            for r in batched:
                appended = batch.append(
                    key=r["key"], value=r["value"], timestamp=r["timestamp"], headers=r["headers"]
                )
                assert appended is not None
            first = await asyncio.wait_for(
                await producer.send_batch(batch, topic, partition=batched[0]["partition"]), 30
            )
            records += batched
            for i, r in enumerate(batched):
                ts = first.timestamp if log_append_time else r["timestamp"]
                metadata.append(RecordMetadata(topic, r["partition"], first.offset + i, ts))
            if spec.txn == "commit":
                await producer.commit_transaction()
            elif spec.txn == "abort":
                await producer.abort_transaction()
        finally:
            await producer.stop()
        these = [
            Written(
                m.partition,
                m.offset,
                m.timestamp,
                r["key"],
                r["value"],
                list(r["headers"]),
                spec.txn == "abort",
            )
            for m, r in zip(metadata, records, strict=True)
        ]
        check_written(these, records, log_append_time)
        written += these
    return written


@dataclass
class RecordMetadata:
    """Where a record of a :meth:`send_batch` batch went (its base offset + its index)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


def bulk_records(tag: str, base_ts: int) -> list[dict[str, Any]]:
    """For ``send_many``: unkeyed records for partition 0 sharing headers, then keyed ones."""
    unkeyed = [
        {
            "key": None,
            "value": f"{tag}-many-{i}".encode(),
            "headers": [("bulk", b"1"), ("nil", None)],
            "timestamp": base_ts + 500,
            "partition": 0,
        }
        for i in range(200)
    ]
    keyed = [
        {
            "key": f"{tag}-many-key-{i}".encode(),
            "value": f"{tag}-many-{i}".encode() * 3,
            "headers": [],
            "timestamp": base_ts + 501,
            "partition": None,
        }
        for i in range(60)
    ]
    return unkeyed + keyed


def batch_records(tag: str, base_ts: int) -> list[dict[str, Any]]:
    """For ``send_batch``: one batch for partition 2, timestamps going back and forth."""
    records: list[dict[str, Any]] = [
        {"key": None, "value": b"b0", "headers": [("x", None)], "timestamp": base_ts + 600},
        {"key": b"bk", "value": None, "headers": [("", b"")], "timestamp": base_ts + 610},
        {"key": b"", "value": b"", "headers": [], "timestamp": base_ts + 590},
    ]
    records += [
        {
            "key": f"{i}".encode(),
            "value": f"{tag}-batched-{i}".encode() * 2,
            "headers": [("i", str(i).encode())] * (i % 2),
            "timestamp": base_ts + 620 + i,
        }
        for i in range(150)
    ]
    for record in records:
        record["partition"] = 2
    return records


def java_read(target: Target, topic: str, isolation: str) -> dict[tuple[int, int], tuple[Any, ...]]:
    """Everything the Java consumer reads from the start to the end, by (partition, offset)."""
    records = consume(
        target.bootstrap,
        topic,
        isolation=isolation,
        until_end=True,
        timeout_ms=30_000,
        kafka_version=target.kafka_version,
    )
    read = {
        (r["partition"], r["offset"]): (
            r["key"],
            r["value"],
            r["headers"],
            r["timestamp"],
            r["timestamp_type"],
        )
        for r in records
    }
    assert len(read) == len(records), "the Java consumer read a record twice"
    return read


async def lite_read(
    bootstrap: str, topic: str, isolation: str, partitions: int = PARTITIONS, **options: Any
) -> dict[tuple[int, int], tuple[Any, ...]]:
    """Everything an aiokafka_lite consumer (no group) reads from the start up to the end offsets
    (the last stable offsets under read_committed), by (partition, offset)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **options,
    )
    await consumer.start()
    read: dict[tuple[int, int], tuple[Any, ...]] = {}
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)
        deadline = time.monotonic() + 30
        last = dict.fromkeys(range(partitions), -1)
        while True:
            positions = {tp: await consumer.position(tp) for tp in tps}
            if all(positions[tp] >= end[tp] for tp in tps):
                assert positions == end, "the consumer went past the end offsets"
                break
            assert time.monotonic() < deadline, f"stuck at {positions}, end offsets {end}"
            batches = await consumer.getmany(timeout_ms=200)
            for tp, records in batches.items():
                for r in records:
                    assert r.topic == topic
                    assert r.offset > last[tp.partition], "offsets must increase"
                    last[tp.partition] = r.offset
                    ts_type = {0: "CreateTime", 1: "LogAppendTime"}[r.timestamp_type]
                    row = (r.key, r.value, [(n, v) for n, v in r.headers], r.timestamp, ts_type)
                    read[(tp.partition, r.offset)] = row
    finally:
        await consumer.stop()
    return read


def assert_same(
    got: dict[tuple[int, int], tuple[Any, ...]], want: dict[tuple[int, int], tuple[Any, ...]]
) -> None:
    """Same records at the same positions; on failure, the first few differences."""
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    differ = [(at, got[at], want[at]) for at in sorted(set(got) & set(want)) if got[at] != want[at]]
    assert not (missing or extra or differ), (
        f"missing {missing[:10]} (of {len(missing)}), extra {extra[:10]} (of {len(extra)}), "
        f"different {differ[:3]} (of {len(differ)}): (got, want)"
    )


# --------------------------------------------------------------------------------------------
# Java producer -> aiokafka_lite consumer


async def test_java_producer_to_lite_consumer(target: Target) -> None:
    topic = await new_topic(target.bootstrap)
    written = write_java(target, topic, specs_for(target))
    assert any(w.aborted for w in written) and any(not w.aborted for w in written)
    for isolation in ISOLATIONS:
        got = await lite_read(target.bootstrap, topic, isolation)
        assert_same(got, expected(written, isolation))
    # fetches smaller than a batch: the broker cuts record sets in the middle of a batch
    small = {"max_partition_fetch_bytes": 3000, "fetch_max_bytes": 5000}
    got = await lite_read(target.bootstrap, topic, "read_committed", **small)
    assert_same(got, expected(written, "read_committed"))


# --------------------------------------------------------------------------------------------
# aiokafka_lite producer -> Java consumer


async def test_lite_producer_to_java_consumer(target: Target) -> None:
    topic = await new_topic(target.bootstrap)
    written = await write_lite(target.bootstrap, topic, specs_for(target))
    reads = [asyncio.to_thread(java_read, target, topic, isolation) for isolation in ISOLATIONS]
    for isolation, got in zip(ISOLATIONS, await asyncio.gather(*reads), strict=True):
        assert_same(got, expected(written, isolation))


async def test_log_append_time_topic(bootstrap: str) -> None:
    """On a LogAppendTime topic the broker stamps the records: both producers report the broker's
    time, and both consumers read it (type LogAppendTime) whoever wrote the record."""
    topic = await new_topic(bootstrap, config={"message.timestamp.type": "LogAppendTime"})
    specs = [Spec("lat-gzip", "gzip"), Spec("lat-txn", "none", txn="commit")]
    by_lite = await write_lite(bootstrap, topic, specs, log_append_time=True)
    by_java = await asyncio.to_thread(write_java, Target(bootstrap, None), topic, specs, True)
    written = by_lite + by_java
    explicit = {r["timestamp"] for r in sample_records("lat-gzip", 0)} - {None}
    assert not {w.timestamp for w in written} & explicit, "the broker's time, not the producer's"
    want = {
        at: (*row[:4], "LogAppendTime") for at, row in expected(written, "read_committed").items()
    }
    java = asyncio.to_thread(java_read, Target(bootstrap, None), topic, "read_committed")
    lite = lite_read(bootstrap, topic, "read_committed")
    for got in await asyncio.gather(java, lite):
        assert_same(got, want)


async def test_open_transaction_holds_read_committed_at_the_last_stable_offset(
    bootstrap: str,
) -> None:
    """While an aiokafka_lite transaction is open, read_committed consumers of both kinds stop
    at the same last stable offsets (the Java producer writes behind it meanwhile); once it
    commits, both read everything."""
    topic = await new_topic(bootstrap)
    target = Target(bootstrap, None)
    base_ts = int(time.time() * 1000) - 60_000
    early = await write_lite(bootstrap, topic, [Spec("early", "lz4")])
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=f"lite-open-{uuid.uuid4().hex[:8]}"
    )
    await producer.start()
    try:
        await producer.begin_transaction()
        pending = sample_records("open", base_ts)
        futures = [
            await producer.send(
                topic,
                key=r["key"],
                value=r["value"],
                partition=r["partition"],
                timestamp_ms=r["timestamp"],
                headers=list(r["headers"]),
            )
            for r in pending
        ]
        opened = [await asyncio.wait_for(f, 30) for f in futures]
        behind = await asyncio.to_thread(write_java, target, topic, [Spec("behind", "snappy")])
        stable = {
            p: min(m.offset for m in opened if m.partition == p)
            for p in range(PARTITIONS)
            if any(m.partition == p for m in opened)
        }
        visible = [w for w in early + behind if w.offset < stable.get(w.partition, 1 << 62)]
        assert len(visible) < len(early + behind), "some records must be behind the transaction"
        want = expected(visible, "read_committed")
        java = asyncio.to_thread(java_read, target, topic, "read_committed")
        lite = lite_read(bootstrap, topic, "read_committed")
        for got in await asyncio.gather(java, lite):
            assert_same(got, want)
        await producer.commit_transaction()
    finally:
        await producer.stop()
    txn = [
        Written(m.partition, m.offset, m.timestamp, r["key"], r["value"], r["headers"], False)
        for m, r in zip(opened, pending, strict=True)
    ]
    want = expected(early + txn + behind, "read_committed")
    java = asyncio.to_thread(java_read, target, topic, "read_committed")
    lite = lite_read(bootstrap, topic, "read_committed")
    for got in await asyncio.gather(java, lite):
        assert_same(got, want)


async def test_java_producer_fences_an_open_lite_transaction(bootstrap: str) -> None:
    """A Java producer starting with the transactional id of an open aiokafka_lite transaction
    aborts it (read_committed never shows its records) and fences the aiokafka_lite producer."""
    topic = await new_topic(bootstrap)
    target = Target(bootstrap, None)
    txn_id = f"lite-fenced-{uuid.uuid4().hex[:8]}"
    base_ts = int(time.time() * 1000) - 60_000
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
    await producer.start()
    try:
        await producer.begin_transaction()
        records = sample_records("fenced", base_ts)
        futures = [
            await producer.send(
                topic,
                key=r["key"],
                value=r["value"],
                partition=r["partition"],
                timestamp_ms=r["timestamp"],
                headers=r["headers"],
            )
            for r in records
        ]
        opened = [await asyncio.wait_for(f, 30) for f in futures]
        java = await asyncio.to_thread(
            produce, bootstrap, topic, sample_records("java", base_ts), transactional_id=txn_id
        )
        with pytest.raises(ProducerFenced):
            await producer.commit_transaction()
    finally:
        await producer.stop()
    lite_records = [
        Written(m.partition, m.offset, m.timestamp, r["key"], r["value"], r["headers"], True)
        for m, r in zip(opened, records, strict=True)
    ]
    java_records = [
        Written(
            m["partition"], m["offset"], m["timestamp"], r["key"], r["value"], r["headers"], False
        )
        for m, r in zip(java, sample_records("java", base_ts), strict=True)
    ]
    for isolation in ISOLATIONS:
        want = expected(lite_records + java_records, isolation)
        reads = await asyncio.gather(
            asyncio.to_thread(java_read, target, topic, isolation),
            lite_read(bootstrap, topic, isolation),
        )
        for got in reads:
            assert_same(got, want)


async def test_keyed_records_land_where_the_java_producer_puts_them(bootstrap: str) -> None:
    partitions = 12
    topic = await new_topic(bootstrap, partitions)
    rng = random.Random(20240611)
    keys = [b"", b"a", b"\x00", b"\xff\xff\xff\xff", "ключ".encode()]
    keys += [rng.randbytes(n % 67) for n in range(300)]  # every length mod 4, random bytes
    keys += [f"user-{i}".encode() for i in range(100)]
    java = await asyncio.to_thread(partitions_for, bootstrap, topic, keys)
    async with AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        futures = [await producer.send(topic, key=key, value=b"") for key in keys]
        lite = [(await asyncio.wait_for(f, 30)).partition for f in futures]
    assert lite == java
    assert len(set(java)) == partitions


# --------------------------------------------------------------------------------------------
# consumer groups with members of both kinds

# Members learn of a rebalance another one started from their next heartbeat: keep them short.
HEARTBEAT_MS = 300
ASSIGNORS = {
    "range": RangePartitionAssignor,
    "roundrobin": RoundRobinPartitionAssignor,
    "sticky": StickyPartitionAssignor,
}
# Five partitions between two members: what each assignor gives (in some order of the members).
SPLITS = {
    "range": {frozenset({0, 1, 2}), frozenset({3, 4})},
    "roundrobin": {frozenset({0, 2, 4}), frozenset({1, 3})},
}


async def wait_until(condition: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout:.0f}s")
        await asyncio.sleep(0.05)


async def write_values(
    bootstrap: str, topic: str, tag: str, n: int
) -> dict[tuple[int, int], bytes]:
    """``n`` keyed records (spread over the partitions); (partition, offset) -> value."""
    async with AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        futures = [
            await producer.send(topic, key=f"{tag}-{i}".encode(), value=f"{tag}-{i}".encode())
            for i in range(n)
        ]
        metadata = [await asyncio.wait_for(f, 30) for f in futures]
    return {(m.partition, m.offset): f"{tag}-{i}".encode() for i, m in enumerate(metadata)}


class LiteMember:
    """An aiokafka_lite group member that reads in a loop and commits after every batch (as the
    Java ``GroupMember`` does), until :meth:`stop`."""

    def __init__(self, bootstrap: str, topic: str, group: str, assignor: str) -> None:
        self.consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            partition_assignment_strategy=(ASSIGNORS[assignor],),
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            heartbeat_interval_ms=HEARTBEAT_MS,
        )
        self.records: list[tuple[int, int, bytes | None]] = []  # (partition, offset, value)
        self.committed = 0  # how many of self.records are committed
        self.commit_errors: list[Exception] = []
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    def partitions(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    async def start(self) -> LiteMember:
        await self.consumer.start()
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        from aiokafka_lite.errors import KafkaError

        while not self._stopping:
            batches = await self.consumer.getmany(timeout_ms=100)
            read = [(r.partition, r.offset, r.value) for rs in batches.values() for r in rs]
            self.records += read
            if read:
                try:
                    await self.consumer.commit()
                except KafkaError as e:  # a rebalance overtook us: they will be read again
                    self.commit_errors.append(e)
                    continue
            self.committed = len(self.records)

    async def stop(self) -> None:
        """Finish the current round (and its commit), then leave the group."""
        self._stopping = True
        try:
            if self._task is not None:
                await asyncio.wait_for(self._task, 30)
        finally:
            await self.consumer.stop()


def java_partitions(member: GroupMember) -> set[int]:
    return {partition for _, partition in member.assigned()}


@pytest.mark.parametrize(
    ("target", "assignor", "leaver"),
    [
        *[
            ("4.4", a, leaver)
            for a in ("range", "roundrobin", "sticky")
            for leaver in ("java", "lite")
        ],
        ("3.9", "range", "java"),
        ("3.9", "roundrobin", "lite"),
    ],
    indirect=["target"],
)
async def test_mixed_group_splits_partitions_and_survives_a_leave(
    target: Target, assignor: str, leaver: str
) -> None:
    """Java and aiokafka_lite members share a group: the first member (the leader, whose
    assignor computes the split) is the survivor, the other leaves after reading its share."""
    bootstrap = target.bootstrap
    topic = await new_topic(bootstrap, 5)
    group = f"java-interop-{uuid.uuid4().hex[:8]}"
    everything = set(range(5))
    java = GroupMember(
        bootstrap,
        topic,
        group,
        assignor=assignor,
        heartbeat_interval_ms=HEARTBEAT_MS,
        kafka_version=target.kafka_version,
    )
    lite = LiteMember(bootstrap, topic, group, assignor)

    def java_wait(condition: Any, what: str) -> Any:
        return asyncio.to_thread(java.wait_for, lambda _: condition(), 60, what)

    try:
        if leaver == "java":
            await lite.start()
            await wait_until(lambda: lite.partitions() == everything, "lite assignment")
            java.start()
        else:
            java.start()
            await java_wait(lambda: java_partitions(java) == everything, "java assignment")
            await lite.start()

        def balanced() -> bool:
            a, b = java_partitions(java), lite.partitions()
            return bool(a) and bool(b) and not a & b and a | b == everything

        await wait_until(balanced, "split between the Java and aiokafka_lite members")
        split = {frozenset(java_partitions(java)), frozenset(lite.partitions())}
        if assignor == "sticky":  # balanced, and the first member keeps 3 of the partitions it had
            first = java_partitions(java) if leaver == "lite" else lite.partitions()
            assert sorted(len(s) for s in split) == [2, 3] and len(first) == 3
        else:
            assert split == SPLITS[assignor]

        before = await write_values(bootstrap, topic, "before", 60)

        def read_before() -> bool:
            seen = {(r["partition"], r["offset"]) for r in java.records}
            seen |= {(p, o) for p, o, _ in lite.records}
            return seen >= set(before) and lite.committed == len(lite.records)

        await wait_until(read_before, "all records read and committed")
        # each member read its own partitions' records, once
        java_read = [(r["partition"], r["offset"], r["value"]) for r in java.records]
        assert sorted(java_read + lite.records) == sorted((p, o, v) for (p, o), v in before.items())
        assert {p for p, _, _ in java_read} <= java_partitions(java)
        assert {p for p, _, _ in lite.records} <= lite.partitions()

        # the leaver leaves; the survivor takes everything over from the committed offsets
        java_seen, lite_seen = len(java.records), len(lite.records)
        if leaver == "java":
            await asyncio.to_thread(java.stop)
            await wait_until(lambda: lite.partitions() == everything, "lite taking over")
        else:
            await lite.stop()
            await java_wait(lambda: java_partitions(java) == everything, "java taking over")
        after = await write_values(bootstrap, topic, "after", 40)
        if leaver == "java":
            await wait_until(lambda: len(lite.records) >= lite_seen + len(after), "records")
            survivor = lite.records[lite_seen:]
        else:
            await java_wait(lambda: len(java.records) >= java_seen + len(after), "records")
            survivor = [(r["partition"], r["offset"], r["value"]) for r in java.records[java_seen:]]
        # exactly the new records: nothing read before is read again, nothing is lost
        assert sorted(survivor) == sorted((p, o, v) for (p, o), v in after.items())
        assert not lite.commit_errors
        assert not [e for e in java.events if e["event"] == "commit_failed"]
    finally:
        if java.process is not None and java.running:
            await asyncio.to_thread(java.stop)
        if lite._task is not None and not lite._stopping:
            await lite.stop()


async def test_committed_offsets_are_shared_between_java_and_lite(target: Target) -> None:
    """A Java consumer commits part of the topic, an aiokafka_lite member of the same group goes
    on from there and commits some more, and a Java consumer again reads exactly the rest."""
    bootstrap, version = target.bootstrap, target.kafka_version
    topic = await new_topic(bootstrap)
    group = f"java-interop-{uuid.uuid4().hex[:8]}"
    written = await write_values(bootstrap, topic, "r", 45)

    java_first = await asyncio.to_thread(
        consume,
        bootstrap,
        topic,
        group=group,
        max_records=10,
        commit=True,
        timeout_ms=30_000,
        kafka_version=version,
    )
    first = {(r["partition"], r["offset"]) for r in java_first}
    assert len(first) == 10

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        for tp in tps:  # what the Java consumer committed: one past the last record it read
            read = [o for p, o in first if p == tp.partition]
            assert await consumer.committed(tp) == (max(read) + 1 if read else None)
        second: list[tuple[int, int]] = []
        deadline = time.monotonic() + 60
        while len(second) < 20:
            assert time.monotonic() < deadline, f"read only {len(second)} of 20"
            batches = await consumer.getmany(timeout_ms=200, max_records=20 - len(second))
            second += [(r.partition, r.offset) for rs in batches.values() for r in rs]
        await consumer.commit(
            {
                tp: max(o for p, o in second if p == tp.partition) + 1
                for tp in tps
                if any(p == tp.partition for p, _ in second)
            }
        )
    finally:
        await consumer.stop()
    assert not first & set(second)
    # where the Java consumer had committed, the aiokafka_lite member went on from there
    for p in {p for p, _ in first}:
        on_p = [o for q, o in second if q == p]
        if on_p:
            assert min(on_p) == max(o for q, o in first if q == p) + 1

    java_last = await asyncio.to_thread(
        consume,
        bootstrap,
        topic,
        group=group,
        until_end=True,
        commit=True,
        timeout_ms=30_000,
        kafka_version=version,
    )
    last = {(r["partition"], r["offset"]) for r in java_last}
    assert len(last) == len(java_last)
    assert first | set(second) | last == set(written)
    assert len(first) + len(second) + len(last) == len(written)

    # offsets committed in an aiokafka_lite transaction: aborted ones never count, committed
    # ones are where the Java consumer of the group starts
    more = await write_values(bootstrap, topic, "t", 45)
    start = {p: min(o for q, o in more if q == p) for p in range(PARTITIONS)}
    assert all(len([o for q, o in more if q == p]) >= 3 for p in range(PARTITIONS))
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=f"lite-offsets-{uuid.uuid4().hex[:8]}"
    )
    await producer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        await producer.begin_transaction()
        await producer.send_offsets_to_transaction(
            {tp: start[tp.partition] + 1 for tp in tps}, group
        )
        await producer.abort_transaction()
        await producer.begin_transaction()
        await producer.send_offsets_to_transaction(
            {tp: start[tp.partition] + 2 for tp in tps}, group
        )
        await producer.commit_transaction()
    finally:
        await producer.stop()
    java_txn = await asyncio.to_thread(
        consume,
        bootstrap,
        topic,
        group=group,
        until_end=True,
        timeout_ms=30_000,
        kafka_version=version,
    )
    assert sorted((r["partition"], r["offset"]) for r in java_txn) == sorted(
        (p, o) for p, o in more if o >= start[p] + 2
    )
