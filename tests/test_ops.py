"""The operations layer's executor on a real broker: topic tracking, deadlines, cancellation."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from aiokafka_lite import errors as Errors
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.ops import offsets as offset_ops
from aiokafka_lite.structs import TopicPartition


async def test_naming_a_topic_tracks_it(broker, new_topic):
    """A client tracking no topics (Apache Kafka answers an empty Metadata list with none) still
    finds the leaders: the executor adds the topics it is asked about."""
    topic = await new_topic(partitions=2)
    async with KafkaClient(
        bootstrap_servers=broker.bootstrap, allow_auto_topic_creation=False
    ) as client:
        assert topic not in client.topics
        found = await offset_ops.list_offsets(
            client, {TopicPartition(topic, 0): offset_ops.EARLIEST, TopicPartition(topic, 1): -1}
        )
        assert {tp.partition: v.offset for tp, v in found.items()} == {0: 0, 1: 0}
        assert topic in client.topics


async def test_missing_partition_of_a_known_topic_fails_at_once(broker, new_topic):
    topic = await new_topic(partitions=1)
    async with KafkaClient(
        bootstrap_servers=broker.bootstrap, allow_auto_topic_creation=False
    ) as client:
        with pytest.raises(Errors.UnknownTopicOrPartitionError):
            await asyncio.wait_for(
                offset_ops.list_offsets(client, {TopicPartition(topic, 5): -1}, timeout_ms=60000),
                30,
            )


async def test_deadline_raises_the_last_retriable_error(broker):
    missing = TopicPartition(f"never-created-{uuid.uuid4().hex[:8]}", 0)
    async with KafkaClient(
        bootstrap_servers=broker.bootstrap, allow_auto_topic_creation=False
    ) as client:
        with pytest.raises(Errors.KafkaError) as exc:
            await asyncio.wait_for(
                offset_ops.list_offsets(client, {missing: -1}, timeout_ms=500), 30
            )
        assert exc.value.retriable  # e.g. leader not available: retried until the deadline
        with pytest.raises(Errors.UnknownTopicOrPartitionError):  # or at once, when asked to
            await asyncio.wait_for(
                offset_ops.list_offsets(
                    client, {missing: -1}, timeout_ms=60000, unknown_topic_is_error=True
                ),
                30,
            )


async def test_cancellation_propagates_from_a_retry_wait(broker):
    missing = TopicPartition(f"never-created-{uuid.uuid4().hex[:8]}", 0)
    async with KafkaClient(
        bootstrap_servers=broker.bootstrap, allow_auto_topic_creation=False
    ) as client:
        task = asyncio.ensure_future(
            offset_ops.list_offsets(client, {missing: -1}, timeout_ms=60000)
        )

        async def tracked() -> None:
            while missing.topic not in client.topics:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(tracked(), 30)  # the lookup is under way (retrying)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 30)
        assert task.cancelled()
