"""Consumer data safety against a real broker: commits in the revoke callback reach the
broker, deserializer errors skip nothing, offsets of topics the consumer does not track."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokafka_lite.consumer import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka_lite.structs import TopicPartition
from tests.test_consumer import drain, produce
from tests.test_group import FAST, _session_timeout, group_name, settle

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]
__all__ = ["_session_timeout"]  # autouse fixture: short session timeouts per broker


class CommitOnRevoke(ConsumerRebalanceListener):
    """Commits the consumer's positions when partitions are revoked (aiokafka/Java idiom)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.consumer: AIOKafkaConsumer | None = None
        self.delay = delay
        self.revoked: list[set[TopicPartition]] = []
        self.assignment_seen: list[set[TopicPartition]] = []
        self.errors: list[BaseException] = []

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        assert self.consumer is not None
        self.revoked.append(set(revoked))
        self.assignment_seen.append(self.consumer.assignment())
        if self.delay:
            await asyncio.sleep(self.delay)  # a slow save of application state
        try:
            await self.consumer.commit()
        except Exception as exc:
            self.errors.append(exc)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        pass


@pytest.mark.parametrize("slow", [False, True], ids=["fast", "slow-callback"])
async def test_commit_in_on_partitions_revoked(
    kafka_bootstrap: str, broker: Any, new_topic: Any, slow: bool
) -> None:
    """commit() inside on_partitions_revoked commits the positions reached so far; with a
    callback slower than session_timeout_ms the member stays alive (heartbeats continue)."""
    if slow:
        broker.skip_on("tansu", "noida", reason="toy brokers' session expiry differs")
    topic = await new_topic(partitions=2)
    await produce(kafka_bootstrap, topic, 5, 2)
    tps = {TopicPartition(topic, p) for p in range(2)}
    group = group_name()
    session = FAST["session_timeout_ms"]
    opts = dict(FAST, rebalance_timeout_ms=session * 5)
    listener = CommitOnRevoke(delay=session / 1000 * 1.3 if slow else 0.0)
    a = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False, **opts
    )
    listener.consumer = a
    b = AIOKafkaConsumer(
        topic, bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False, **opts
    )
    await a.start()
    try:
        a.subscribe([topic], listener=listener)
        got = await drain(a, 10)
        assert sorted((r.partition, r.offset) for r in got) == [
            (p, o) for p in range(2) for o in range(5)
        ]
        await b.start()
        await settle([a, b], tps, timeout=60)
        assert listener.revoked and listener.revoked[0] == tps
        assert listener.assignment_seen[0] == tps  # still assigned inside the callback
        assert listener.errors == []
        for tp in tps:  # what a had processed is committed: the next owner does not redo it
            assert await b.committed(tp) == 5
    finally:
        await b.stop()
        await a.stop()
