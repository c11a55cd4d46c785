"""Bulk and fast paths of the producer against a real broker.

``send_many`` without keys/headers encodes runs of values straight into batches
(``RecordBatchBuilder.append_values``) and keeps several batches per partition queued while
one is in flight; ``send()`` has a fast path for unkeyed records into the open sticky batch.
Order, offsets, values (None, empty, larger than a batch) and memory bounds must be exactly
those of the record-by-record path.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokafka_lite import errors as Errors
from aiokafka_lite.producer import AIOKafkaProducer
from tests.test_producer import read_back


async def test_send_many_bulk_order_offsets_and_odd_values(kafka_bootstrap: str, new_topic) -> None:
    topic = await new_topic(partitions=2)
    values: list[bytes | bytearray | None] = [b"%05d" % i + b"." * (i % 150) for i in range(3000)]
    values[10] = None
    values[11] = b""
    values[500] = bytearray(b"ba" * 10)
    values[1200] = b"L" * 20000  # larger than a batch: a batch of its own
    async with AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, max_batch_size=4096, linger_ms=50
    ) as producer:
        handles = await producer.send_many(topic, values, partition=1)
        assert len(handles) == len(values)
        mds = await asyncio.wait_for(asyncio.gather(*handles), 30)
        assert [md.offset for md in mds] == list(range(len(values)))
        assert {md.partition for md in mds} == {1}
        assert all(md.timestamp == mds[0].timestamp for md in mds)
        assert producer._acc.pool.used == 0  # every batch's memory came back
    got = await read_back(kafka_bootstrap, topic, len(values), partitions=2)
    assert [r.partition for r in got] == [1] * len(values)
    assert [r.value for r in got] == [None if v is None else bytes(v) for v in values]
    assert [r.key for r in got] == [None] * len(values)


async def test_send_many_sticky_generator_serializer_and_small_memory(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = await new_topic(partitions=3)
    async with AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap,
        max_batch_size=2048,
        buffer_memory=5 * 2048,  # far less than the data: bulk sends wait for memory
        value_serializer=lambda v: v.encode(),
        linger_ms=5,
    ) as producer:
        handles = await producer.send_many(topic, (f"v{i:05d}" for i in range(4000)))
        mds = await asyncio.wait_for(asyncio.gather(*handles), 30)
        assert producer._acc.pool.used == 0
    parts = {md.partition for md in mds}
    assert len(parts) >= 2  # sticky partitioning moves on batch by batch
    got = await read_back(kafka_bootstrap, topic, 4000, partitions=3)
    by_part: dict[int, list[bytes]] = {}
    for r in got:
        by_part.setdefault(r.partition, []).append(r.value)
    mine: dict[int, list[bytes]] = {}
    for i, md in enumerate(mds):
        mine.setdefault(md.partition, []).append(f"v{i:05d}".encode())
    assert by_part == mine  # per-partition order is send order


async def test_send_fast_path_respects_gate_and_sizes(kafka_bootstrap: str, new_topic) -> None:
    topic = await new_topic(partitions=1)
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, max_batch_size=1024, max_request_size=100_000
    )
    with pytest.raises(Errors.IllegalStateError):
        await producer.send(topic, b"not started")
    await producer.start()
    try:
        first = [await producer.send(topic, b"r%d" % i) for i in range(300)]
        with pytest.raises(Errors.MessageSizeTooLargeError):
            await producer.send(topic, b"x" * 200_000)  # the open batch has no room: checked
        mds = await asyncio.wait_for(asyncio.gather(*first), 30)
        assert [md.offset for md in mds] == list(range(300))
    finally:
        await producer.stop()
    with pytest.raises(Errors.ProducerClosed):
        await producer.send(topic, b"after stop")


async def test_send_many_handles_sequence(kafka_bootstrap: str, new_topic) -> None:
    """The lazy handle sequence behaves like the list of per-record handles."""
    topic = await new_topic(partitions=1)
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, max_batch_size=1024) as producer:
        values = [b"%04d" % i * 10 for i in range(500)]  # 40 bytes: ~20 per batch
        handles = await producer.send_many(topic, values)
        assert len(handles) == 500
        listed = list(handles)
        assert len(listed) == 500
        assert handles[-1] == listed[-1] and handles[0] == listed[0] and handles[250] == listed[250]
        assert handles[10:13] == listed[10:13] and handles[::100] == listed[::100]
        with pytest.raises(IndexError):
            handles[500]
        last = await asyncio.wait_for(handles[-1], 30)
        mds = await asyncio.gather(*handles)
        assert [md.offset for md in mds] == list(range(500)) and last.offset == 499
        assert (await handles[-500]).offset == 0


async def test_done_callbacks_one_hook_per_batch(kafka_bootstrap: str, new_topic) -> None:
    topic = await new_topic(partitions=1)
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=200) as producer:
        handles = [await producer.send(topic, b"v%d" % i) for i in range(40)]
        batch = handles[0][0]
        assert all(h[0] is batch for h in handles)
        seen: list[tuple[int, int]] = []

        def cb(tag: int) -> Any:
            return lambda h: seen.append((tag, h.result().offset if not h.cancelled() else -1))

        dropped = cb(99)
        for i, h in enumerate(handles):
            h.add_done_callback(cb(i))
            if i % 10 == 0:
                h.add_done_callback(dropped)
        assert all(handles[i].remove_done_callback(dropped) == 1 for i in range(0, 40, 10))
        assert handles[1].remove_done_callback(dropped) == 0
        assert len(batch.future._callbacks) == 1  # type: ignore[attr-defined]
        assert handles[5].cancel()
        await asyncio.sleep(0)
        assert seen == [(5, -1)]  # a cancelled handle's callbacks run at once
        await producer.flush()
        await asyncio.sleep(0)
    assert sorted(seen) == sorted([(5, -1)] + [(i, i) for i in range(40) if i != 5])
