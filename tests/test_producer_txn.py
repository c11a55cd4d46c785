"""Transactions: commit and abort, seen through a read_committed confluent-kafka consumer."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from aiokafka_lite import errors as Errors
from aiokafka_lite.producer import AIOKafkaProducer


def _consume_confluent(
    bootstrap: str, topic: str, isolation: str, expect_at_least: int, timeout: float = 15.0
) -> list[bytes]:
    """Values of ``topic`` partition 0 from the beginning, read with librdkafka."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        idle_since = None
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                if len(out) >= expect_at_least:
                    idle_since = idle_since or time.monotonic()
                    if time.monotonic() - idle_since > 1.0:
                        break
                continue
            if msg.error():
                continue
            idle_since = None
            out.append(msg.value())
        return out
    finally:
        c.close()


async def test_commit_and_abort(kafka_bootstrap: str, new_topic, broker: Any) -> None:
    pytest.importorskip("confluent_kafka")
    topic = await new_topic(partitions=1)
    txid = f"txn-{uuid.uuid4().hex[:8]}"
    async with AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, transactional_id=txid
    ) as producer:
        async with producer.transaction():
            handles = [await producer.send(topic, b"committed-%d" % i) for i in range(5)]
        mds = await asyncio.gather(*handles)
        assert [md.offset for md in mds] == list(range(5))

        await producer.begin_transaction()
        aborted = [await producer.send(topic, b"aborted-%d" % i) for i in range(3)]
        await producer.flush()
        await asyncio.gather(*aborted)
        await producer.abort_transaction()

        with pytest.raises(RuntimeError):
            async with producer.transaction():
                await producer.send(topic, b"aborted-by-exception")
                raise RuntimeError("boom")

        async with producer.transaction():
            await producer.send(topic, b"committed-last")

        with pytest.raises(Errors.IllegalOperation):
            await producer.send(topic, b"outside a transaction")

    committed = await asyncio.to_thread(
        _consume_confluent, kafka_bootstrap, topic, "read_uncommitted", 9
    )
    # every data record is in the log whatever happened to its transaction
    assert {b"committed-0", b"aborted-0", b"committed-last"} <= set(committed)
    if broker.kind == "tansu":
        pytest.skip("[tansu] Tansu does not filter aborted records for read_committed")
    visible = await asyncio.to_thread(
        _consume_confluent, kafka_bootstrap, topic, "read_committed", 6
    )
    assert visible == [b"committed-%d" % i for i in range(5)] + [b"committed-last"]


async def test_cancelled_commit_goes_on_and_stop_lets_it_finish(
    kafka_bootstrap: str, new_topic, broker: Any
) -> None:
    """A cancel of ``commit_transaction()``'s caller (``asyncio.wait_for`` timing out ...)
    does not cancel the commit (as aiokafka); a ``stop()`` right after it waits for the
    commit instead of leaving its task behind: the records are committed."""
    pytest.importorskip("confluent_kafka")
    if broker.kind == "tansu":
        pytest.skip("[tansu] Tansu does not filter aborted records for read_committed")
    topic = await new_topic(partitions=1)
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, transactional_id=f"txn-{uuid.uuid4().hex[:8]}"
    )
    await producer.start()
    try:
        await producer.begin_transaction()
        await producer.send(topic, b"committed-by-a-cancelled-call")
        task = asyncio.ensure_future(producer.commit_transaction())
        await asyncio.sleep(0)  # the commit starts, then its caller is cancelled
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        await producer.stop()
    visible = await asyncio.to_thread(
        _consume_confluent, kafka_bootstrap, topic, "read_committed", 1
    )
    assert visible == [b"committed-by-a-cancelled-call"]


async def test_send_offsets_to_transaction(kafka_bootstrap: str, new_topic) -> None:
    topic = await new_topic(partitions=1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

    async with (
        AIOKafkaProducer(
            bootstrap_servers=kafka_bootstrap, transactional_id=f"txo-{uuid.uuid4().hex[:8]}"
        ) as producer,
        producer.transaction(),
    ):
        await producer.send(topic, b"x")
        await producer.send_offsets_to_transaction(
            {TopicPartition(topic, 0): OffsetAndMetadata(42, "meta")}, group
        )

    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioTP

    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        assert await consumer.committed(AioTP(topic, 0)) == 42
    finally:
        await consumer.stop()


async def test_second_producer_fences_first(kafka_bootstrap: str, new_topic, broker: Any) -> None:
    topic = await new_topic(partitions=1)
    txid = f"fence-{uuid.uuid4().hex[:8]}"
    p1 = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=txid)
    p2 = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=txid)
    await p1.start()
    try:
        await p2.start()  # bumps the epoch: p1 is now a zombie
        try:
            await p1.begin_transaction()
            h = await p1.send(topic, b"zombie")
            with pytest.raises(Errors.KafkaError) as info:
                await asyncio.wait_for(p1.commit_transaction(), 30)
            if broker.kind == "tansu" and not isinstance(
                info.value, (Errors.ProducerFenced, Errors.InvalidProducerEpoch)
            ):
                pytest.skip(f"[tansu] fencing surfaced as {info.value!r}")
            assert isinstance(info.value, (Errors.ProducerFenced, Errors.InvalidProducerEpoch)), (
                info.value
            )
            assert h.done()
        finally:
            await p2.stop()
    finally:
        await p1.stop()


async def test_failed_record_makes_commit_fail_then_abort_recovers(
    kafka_bootstrap: str, new_topic, broker: Any
) -> None:
    broker.skip_on("tansu", reason="Tansu has no message size limit")
    topic = await new_topic(partitions=1)
    async with AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap,
        transactional_id=f"txf-{uuid.uuid4().hex[:8]}",
        max_request_size=8 * 1024 * 1024,
        max_batch_size=4 * 1024 * 1024,
    ) as producer:
        await producer.begin_transaction()
        big = await producer.send(topic, b"x" * (2 * 1024 * 1024))
        with pytest.raises(Errors.KafkaError):
            await asyncio.wait_for(producer.commit_transaction(), 30)
        assert big.done() and big.exception() is not None
        await asyncio.wait_for(producer.abort_transaction(), 30)
        async with producer.transaction():
            md = await (await producer.send(topic, b"after"))
        assert md.offset >= 0
    visible = await asyncio.to_thread(
        _consume_confluent, kafka_bootstrap, topic, "read_committed", 1
    )
    assert visible == [b"after"]
