"""Interop with the Apache Kafka Java client as the reference (``tests/java_oracle.py``).

* records the Java producer writes (every codec, headers with null values, null keys and values,
  explicit timestamps, idempotent, transactions committed and aborted) are read by aiokafka_lite
  exactly: same partitions, offsets, keys, values, headers and timestamps, aborted records only
  under ``read_uncommitted``, control records never;
* the same matrix written by aiokafka_lite is read identically by the Java consumer, and keyed
  records land on the partition the Java producer picks (murmur2);
* a consumer group mixing Java and aiokafka_lite members (range and roundrobin) splits the
  partitions without overlap or gap, each client resumes from offsets the other committed, and no
  record is lost when a member of either kind leaves;
* the produce/consume matrix (a subset) again on Apache Kafka 3.9.1 with the 3.9.1 Java client,
  for the older protocol versions.

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
from dataclasses import dataclass
from typing import Any

import java_oracle
import pytest
from java_oracle import GroupMember, consume, create_topic, partitions_for, produce

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka_lite.consumer import RangePartitionAssignor, RoundRobinPartitionAssignor

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


def new_topic(bootstrap: str, partitions: int = PARTITIONS, kafka_version: str | None = None) -> str:
    name = f"java-interop-{uuid.uuid4().hex[:10]}"
    assert create_topic(bootstrap, name, partitions, kafka_version=kafka_version)
    return name


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


# In production order: aborted transactions between other writes, so that read_committed has to
# skip aborted batches and markers in the middle of each partition, and at the end of one.
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
    ]
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


def check_written(written: list[Written], records: list[dict[str, Any]]) -> None:
    """The producer reported every record once, with the partitions and timestamps asked for."""
    assert len({(w.partition, w.offset) for w in written}) == len(written)
    for w, record in zip(written, records, strict=True):
        if record["partition"] is not None:
            assert w.partition == record["partition"]
        if record["timestamp"] is not None:
            assert w.timestamp == record["timestamp"]


# --------------------------------------------------------------------------------------------
# writers and readers


def write_java(target: Target, topic: str, specs: Sequence[Spec]) -> list[Written]:
    """Each configuration's records, written by the Java producer (one JVM each)."""
    base_ts = int(time.time() * 1000) - 60_000
    txn_id = f"java-interop-{uuid.uuid4().hex[:8]}"
    written: list[Written] = []
    for spec in specs:
        records = sample_records(spec.name, base_ts)
        metadata = produce(
            target.bootstrap,
            topic,
            records,
            compression=spec.codec,
            idempotent=None if spec.txn else spec.idempotent,
            acks=None if spec.txn else spec.acks,
            transactional_id=txn_id if spec.txn else None,
            txn=spec.txn,
            linger_ms=20,
            kafka_version=target.kafka_version,
        )
        these = [
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
        check_written(these, records)
        written += these
    return written


async def write_lite(bootstrap: str, topic: str, specs: Sequence[Spec]) -> list[Written]:
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
        check_written(these, records)
        written += these
    return written


def java_read(
    target: Target, topic: str, isolation: str
) -> dict[tuple[int, int], tuple[Any, ...]]:
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
    bootstrap: str, topic: str, isolation: str, partitions: int = PARTITIONS
) -> dict[tuple[int, int], tuple[Any, ...]]:
    """Everything an aiokafka_lite consumer (no group) reads from the start up to the end offsets
    (the last stable offsets under read_committed), by (partition, offset)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
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
    topic = new_topic(target.bootstrap, kafka_version=target.kafka_version)
    written = write_java(target, topic, specs_for(target))
    assert any(w.aborted for w in written) and any(not w.aborted for w in written)
    for isolation in ISOLATIONS:
        got = await lite_read(target.bootstrap, topic, isolation)
        assert_same(got, expected(written, isolation))


# --------------------------------------------------------------------------------------------
# aiokafka_lite producer -> Java consumer


async def test_lite_producer_to_java_consumer(target: Target) -> None:
    topic = new_topic(target.bootstrap, kafka_version=target.kafka_version)
    written = await write_lite(target.bootstrap, topic, specs_for(target))
    for isolation in ISOLATIONS:
        got = await asyncio.to_thread(java_read, target, topic, isolation)
        assert_same(got, expected(written, isolation))


async def test_keyed_records_land_where_the_java_producer_puts_them(bootstrap: str) -> None:
    partitions = 12
    topic = new_topic(bootstrap, partitions)
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
