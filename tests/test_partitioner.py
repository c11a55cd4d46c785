"""Partitioners: murmur2 bit-for-bit with the Java client, sticky spreading of unkeyed records."""

from __future__ import annotations

import asyncio
import os
import random

import pytest

from aiokafka_lite.producer import AIOKafkaProducer, DefaultPartitioner, murmur2
from aiokafka_lite.producer.partitioner import default_partition

# Values of org.apache.kafka.common.utils.Utils.murmur2 (signed 32-bit Java ints).
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def test_murmur2_java_vectors() -> None:
    for key, expected in JAVA_VECTORS.items():
        # aiokafka's convention: the same 32 bits, unsigned
        assert murmur2(key) == expected & 0xFFFFFFFF, key


def test_murmur2_matches_kafka_python_on_random_keys() -> None:
    from kafka.partitioner.default import murmur2 as kp_murmur2

    rnd = random.Random(7)
    for n in range(600):
        key = bytes(rnd.getrandbits(8) for _ in range(n % 67))
        # kafka-python returns the same 32 bits unsigned
        assert murmur2(key) & 0xFFFFFFFF == kp_murmur2(key) & 0xFFFFFFFF, key
        assert murmur2(bytearray(key)) == murmur2(memoryview(key)) == murmur2(key)


def test_default_partitioner_matches_aiokafka() -> None:
    from aiokafka.partitioner import DefaultPartitioner as AioDefault

    ours = DefaultPartitioner()
    for n_parts in (1, 3, 7, 64):
        parts = list(range(n_parts))
        for i in range(300):
            key = os.urandom(i % 29)
            assert ours(key, parts, parts) == AioDefault()(key, parts, parts)
            assert default_partition(key, n_parts) == ours(key, parts, parts)


async def test_keyed_partitions_match_librdkafka(kafka_bootstrap: str, new_topic) -> None:
    """confluent-kafka with ``partitioner=murmur2_random`` puts each key where we do."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = await new_topic(partitions=7)
    keys = [f"key-{i}".encode() for i in range(60)] + [os.urandom(i) for i in range(1, 20)]
    seen: dict[bytes, int] = {}

    def produce_with_librdkafka() -> None:
        p = confluent_kafka.Producer(
            {
                "bootstrap.servers": kafka_bootstrap,
                "partitioner": "murmur2_random",
                "linger.ms": 0,
            }
        )

        def on_delivery(err, msg) -> None:  # type: ignore[no-untyped-def]
            assert err is None, err
            seen[msg.key()] = msg.partition()

        for k in keys:
            p.produce(topic, value=b"v", key=k, on_delivery=on_delivery)
        assert p.flush(30) == 0

    await asyncio.to_thread(produce_with_librdkafka)
    assert len(seen) == len(keys)
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap) as producer:
        handles = [await producer.send(topic, b"v", key=k) for k in keys]
        mds = await asyncio.gather(*handles)
    for k, md in zip(keys, mds, strict=True):
        assert md.partition == seen[k] == default_partition(k, 7), k


async def test_unkeyed_records_stick_per_batch(kafka_bootstrap: str, new_topic) -> None:
    """Unkeyed records fill one partition's batch, then move to another (KIP-480)."""
    topic = await new_topic(partitions=4)
    async with AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, max_batch_size=2048, linger_ms=50
    ) as producer:
        handles = [await producer.send(topic, b"x" * 100) for _ in range(400)]
        mds = [await h for h in handles]
    parts = [md.partition for md in mds]
    runs: list[tuple[int, int]] = []  # (partition, run length)
    for p in parts:
        if runs and runs[-1][0] == p:
            runs[-1] = (p, runs[-1][1] + 1)
        else:
            runs.append((p, 1))
    assert len(set(parts)) >= 2, "unkeyed records never moved to another partition"
    # a 2 KiB batch holds ~17 records of 100 bytes: runs are whole batches, not single records
    assert all(n >= 10 for _, n in runs[:-1]), runs
    assert all(runs[i][0] != runs[i + 1][0] for i in range(len(runs) - 1))
    # offsets inside each run are consecutive (one batch or several consecutive ones)
    for i in range(1, len(mds)):
        if mds[i].partition == mds[i - 1].partition:
            assert mds[i].offset == mds[i - 1].offset + 1


def test_sticky_choice_lasts_until_its_batch_seals():
    """KIP-480: unkeyed records of a topic stay on one partition while the batch bound to the
    choice is open; once it is sealed the next choice is another partition (when there is one);
    only the first batch binds."""
    from types import SimpleNamespace

    from aiokafka_lite.producer.partitioner import StickyPartitions

    sticky = StickyPartitions()
    assert sticky.current("t") is None
    first = sticky.for_topic("t", [0, 1, 2], [0, 1, 2])
    assert sticky.for_topic("t", [0, 1, 2], [0, 1, 2]) is first  # no batch bound yet
    batch = SimpleNamespace(sealed=False)
    first.bind(batch)
    first.bind(SimpleNamespace(sealed=False))  # a later batch does not replace it
    assert sticky.current("t") is first and first.batch is batch
    assert sticky.for_topic("t", [0, 1, 2], [0, 1, 2]) is first
    batch.sealed = True
    second = sticky.for_topic("t", [0, 1, 2], [0, 1, 2])
    assert second is not first and second.partition != first.partition
    assert second.batch is None and sticky.current("t") is second
    assert sticky.for_topic("one", [5], []).partition == 5  # no partition available: any
