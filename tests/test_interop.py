"""Interoperability matrix against the real broker: records written by aiokafka_lite are read back
identically by aiokafka, confluent-kafka (librdkafka) and kafka-python, records they write are read
identically by aiokafka_lite, keyed records land on the same partitions, and committed offsets are
shared with peer consumers of the same group."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 3
# recent timestamps: a broker's time-based retention may delete records stamped long ago
BASE_TS = int(time.time() * 1000) - 60_000

Row = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes], ...], int]


def sample_rows(n: int = 24, *, allow_empty: bool = True) -> list[Row]:
    """(partition, key, value, headers, timestamp) rows with null keys/values and headers."""
    rows: list[Row] = []
    for i in range(n):
        key = None if i % 3 == 0 else f"key-{i}".encode()
        value = None if i % 5 == 0 else (f"value-{i}-".encode() * (1 + i % 4))
        if not allow_empty and key is None and value is None:
            value = b"v"
        headers = tuple((f"h{j}", f"hv{i}-{j}".encode()) for j in range(i % 3))
        rows.append((i % PARTITIONS, key, value, headers, BASE_TS + i))
    return rows


def as_set(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (r[0], r[4]))


# ------------------------------------------------------------------ writers


async def write_lite(bootstrap: str, topic: str, rows: list[Row], codec: str | None) -> None:
    async with AIOKafkaProducer(
        bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5
    ) as p:
        futs = [
            await p.send(topic, value=v, key=k, partition=part, timestamp_ms=ts, headers=list(h))
            for part, k, v, h, ts in rows
        ]
        for f in futs:
            await f


async def write_aiokafka(bootstrap: str, topic: str, rows: list[Row], codec: str | None) -> None:
    from aiokafka import AIOKafkaProducer as Peer

    p = Peer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5)
    await p.start()
    try:
        futs = [
            await p.send(topic, value=v, key=k, partition=part, timestamp_ms=ts, headers=list(h))
            for part, k, v, h, ts in rows
        ]
        await asyncio.gather(*futs)
    finally:
        await p.stop()


def write_confluent(bootstrap: str, topic: str, rows: list[Row], codec: str | None) -> None:
    from confluent_kafka import Producer as Peer

    p = Peer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec or "none",
            "linger.ms": 5,
            "broker.address.family": "v4",
        }
    )
    errors: list[Any] = []
    for part, k, v, h, ts in rows:
        p.produce(
            topic,
            value=v,
            key=k,
            partition=part,
            timestamp=ts,
            headers=list(h) or None,
            on_delivery=lambda err, _msg: errors.append(err) if err else None,
        )
    assert p.flush(20) == 0
    assert not errors


def write_kafka_python(bootstrap: str, topic: str, rows: list[Row], codec: str | None) -> None:
    from kafka import KafkaProducer as Peer

    p = Peer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5, api_version=(2, 6))
    try:
        futs = [
            p.send(topic, value=v, key=k, partition=part, timestamp_ms=ts, headers=list(h))
            for part, k, v, h, ts in rows
        ]
        p.flush(20)
        for f in futs:
            f.get(timeout=20)
    finally:
        p.close(timeout=5)


# ------------------------------------------------------------------ readers


async def read_lite(bootstrap: str, topic: str, n: int) -> list[Row]:
    c = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await c.start()
    try:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        out: list[Row] = []
        deadline = time.monotonic() + 20
        while len(out) < n and time.monotonic() < deadline:
            batches = await c.getmany(timeout_ms=500)
            for tp, msgs in batches.items():
                for m in msgs:
                    out.append((tp.partition, m.key, m.value, tuple(m.headers), m.timestamp))
        return out
    finally:
        await c.stop()


async def read_aiokafka(bootstrap: str, topic: str, n: int) -> list[Row]:
    from aiokafka import AIOKafkaConsumer as Peer
    from aiokafka import TopicPartition as PeerTP

    c = Peer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    await c.start()
    try:
        c.assign([PeerTP(topic, p) for p in range(PARTITIONS)])
        out: list[Row] = []
        deadline = time.monotonic() + 20
        while len(out) < n and time.monotonic() < deadline:
            for tp, msgs in (await c.getmany(timeout_ms=500)).items():
                for m in msgs:
                    out.append((tp.partition, m.key, m.value, tuple(m.headers), m.timestamp))
        return out
    finally:
        await c.stop()


def read_confluent(bootstrap: str, topic: str, n: int) -> list[Row]:
    from confluent_kafka import Consumer as Peer
    from confluent_kafka import TopicPartition as PeerTP

    c = Peer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"interop-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "broker.address.family": "v4",
        }
    )
    try:
        c.assign([PeerTP(topic, p, 0) for p in range(PARTITIONS)])
        out: list[Row] = []
        deadline = time.monotonic() + 20
        while len(out) < n and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append(
                (
                    msg.partition(),
                    msg.key(),
                    msg.value(),
                    tuple(msg.headers() or ()),
                    msg.timestamp()[1],
                )
            )
        return out
    finally:
        c.close()


def read_kafka_python(bootstrap: str, topic: str, n: int) -> list[Row]:
    from kafka import KafkaConsumer as Peer
    from kafka import TopicPartition as PeerTP

    c = Peer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        api_version=(2, 6),
        consumer_timeout_ms=20000,
    )
    try:
        c.assign([PeerTP(topic, p) for p in range(PARTITIONS)])
        c.seek_to_beginning()
        out: list[Row] = []
        for m in c:
            out.append((m.partition, m.key, m.value, tuple(m.headers), m.timestamp))
            if len(out) >= n:
                break
        return out
    finally:
        c.close()


async def _run(fn: Any, *args: Any) -> Any:
    if asyncio.iscoroutinefunction(fn):
        return await fn(*args)
    return await asyncio.to_thread(fn, *args)


READERS = {
    "aiokafka": read_aiokafka,
    "confluent": read_confluent,
    "kafka-python": read_kafka_python,
}
WRITERS = {
    "aiokafka": write_aiokafka,
    "confluent": write_confluent,
    "kafka-python": write_kafka_python,
}


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c or "none")
async def test_lite_writes_peers_read(
    kafka_bootstrap: str, new_topic: Any, codec: str | None
) -> None:
    """Every codec, null keys and values, headers, explicit timestamps: each peer reads exactly
    what aiokafka_lite wrote, and so does aiokafka_lite itself."""
    topic = await new_topic(PARTITIONS)
    rows = sample_rows()
    await write_lite(kafka_bootstrap, topic, rows, codec)
    expected = as_set(rows)
    assert as_set(await read_lite(kafka_bootstrap, topic, len(rows))) == expected
    for name, reader in READERS.items():
        if name == "kafka-python" and codec == "zstd":
            pytest.importorskip("zstandard", reason="kafka-python needs zstandard for zstd")
        got = await _run(reader, kafka_bootstrap, topic, len(rows))
        assert as_set(got) == expected, name


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c or "none")
async def test_peers_write_lite_reads(
    kafka_bootstrap: str, new_topic: Any, writer: str, codec: str | None
) -> None:
    """Records written by each peer in each codec are read back exactly by aiokafka_lite."""
    if writer == "kafka-python" and codec in ("zstd", "snappy", "lz4"):
        mod = {"zstd": "zstandard", "snappy": "snappy", "lz4": "lz4"}[codec]
        pytest.importorskip(mod, reason=f"kafka-python needs {mod} for {codec}")
    topic = await new_topic(PARTITIONS)
    rows = sample_rows(allow_empty=False)
    await _run(WRITERS[writer], kafka_bootstrap, topic, rows, codec)
    assert as_set(await read_lite(kafka_bootstrap, topic, len(rows))) == as_set(rows)


async def test_keyed_partitioning_matches_java_and_librdkafka(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    """Keyed records without an explicit partition land where the Java default partitioner
    (kafka-python's) and librdkafka's murmur2_random put them."""
    from confluent_kafka import Producer as Confluent

    topic = await new_topic(7)
    keys = [f"user-{i}".encode() for i in range(40)] + [b"", b"\x00\xff", "ключ".encode()]
    lite: dict[bytes, int] = {}
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap) as p:
        for k in keys:
            lite[k] = (await (await p.send(topic, b"x", key=k))).partition

    theirs: dict[bytes, int] = {}

    def confluent() -> None:
        c = Confluent(
            {
                "bootstrap.servers": kafka_bootstrap,
                "partitioner": "murmur2_random",
                "broker.address.family": "v4",
            }
        )
        for k in keys:
            c.produce(
                topic,
                b"y",
                key=k,
                on_delivery=lambda err, msg: theirs.__setitem__(msg.key(), msg.partition()),
            )
        assert c.flush(20) == 0

    await asyncio.to_thread(confluent)
    assert lite == theirs

    from kafka.partitioner.default import murmur2 as java_murmur2

    # the Java client's default: toPositive(murmur2(key)) % numPartitions
    assert {k: (java_murmur2(k) & 0x7FFFFFFF) % 7 for k in keys} == lite


async def test_committed_offsets_are_shared_with_peers(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    """An offset (and its metadata) committed by aiokafka_lite is what aiokafka reads for the same
    group, and the reverse."""
    from aiokafka import AIOKafkaConsumer as Peer
    from aiokafka import TopicPartition as PeerTP
    from aiokafka.structs import OffsetAndMetadata as PeerOAM

    from aiokafka_lite import OffsetAndMetadata

    topic = await new_topic(1)
    await write_lite(
        kafka_bootstrap, topic, [(0, b"k", b"v", (), BASE_TS + i) for i in range(5)], None
    )
    group = f"g-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(topic, 0)

    lite = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False
    )
    await lite.start()
    try:
        lite.assign([tp])
        await lite.commit({tp: OffsetAndMetadata(3, "from-lite")})
        assert await lite.committed(tp) == 3
    finally:
        await lite.stop()

    peer = Peer(bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False)
    await peer.start()
    try:
        ptp = PeerTP(topic, 0)
        peer.assign([ptp])
        assert await peer.committed(ptp) == 3
        await peer.commit({ptp: PeerOAM(4, "from-aiokafka")})
    finally:
        await peer.stop()

    lite = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False
    )
    await lite.start()
    try:
        lite.assign([tp])
        assert await lite.committed(tp) == 4
        await lite.seek_to_committed(tp)
        assert await lite.position(tp) == 4
        rec = await asyncio.wait_for(lite.getone(), 10)
        assert rec.offset == 4
    finally:
        await lite.stop()
