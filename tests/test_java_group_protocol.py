"""A KIP-848 group (``group.protocol=consumer``) shared by the Java ``KafkaConsumer`` and
aiokafka_lite members on Apache Kafka 4.4, with each server assignor: the assignments are
disjoint and cover every partition, every record is read once overall, commits of one client
are where the other starts, and a member leaving hands its partitions over."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from java_oracle import GroupMember, unavailable_reason
from share_helpers import alter_group_configs

from aiokafka_lite.consumer import AIOKafkaConsumer
from aiokafka_lite.structs import TopicPartition
from tests.test_consumer import produce

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(300)]

PARTITIONS = 6
PER_PARTITION = 10
SETTLE_S = 90.0  # readiness: a JVM starting on a busy machine


class JavaMember(GroupMember):
    """The Java client in a KIP-848 group (KafkaOracle's ``group-member-consumer``)."""

    command = "group-member-consumer"

    def __init__(self, bootstrap: str, topic: str, group: str, assignor: str) -> None:
        super().__init__(bootstrap, topic, group)
        self.args = [
            *("--bootstrap", bootstrap, "--topic", topic, "--group", group),
            *("--remote-assignor", assignor, "--run-ms", "280000", "--from", "beginning"),
        ]


def java_tps(java: GroupMember) -> set[TopicPartition]:
    return {TopicPartition(t, p) for t, p in java.assigned()}


class Group:
    """aiokafka_lite members committing after every batch, and what everyone read."""

    def __init__(self, java: JavaMember, lites: list[AIOKafkaConsumer]) -> None:
        self.java = java
        self.lites = lites
        self.seen: dict[tuple[int, int], int] = {}

    def reads(self) -> dict[tuple[int, int], int]:
        counts = dict(self.seen)
        for r in self.java.records:
            key = (r["partition"], r["offset"])
            counts[key] = counts.get(key, 0) + 1
        return counts

    def split(self, tps: set[TopicPartition], with_java: bool = True) -> bool:
        sets = [c.assignment() for c in self.lites]
        if with_java:
            sets.append(java_tps(self.java))
        return all(sets) and sum(map(len, sets)) == len(tps) and set().union(*sets) == tps

    async def poll_until(self, done: Any, what: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_S
        while not done():
            if loop.time() > deadline:
                raise AssertionError(
                    f"no {what} within {SETTLE_S:.0f}s: lite "
                    f"{[sorted(c.assignment()) for c in self.lites]}, java "
                    f"{sorted(java_tps(self.java))}; java events {self.java.events}; "
                    f"stderr tail {self.java.stderr[-3000:]}"
                )
            for c, batch in zip(
                self.lites, await asyncio.gather(*(c.getmany(timeout_ms=200) for c in self.lites))
            ):
                for recs in batch.values():
                    for r in recs:
                        self.seen[(r.partition, r.offset)] = (
                            self.seen.get((r.partition, r.offset), 0) + 1
                        )
                if batch:
                    await c.commit()


@pytest.mark.parametrize("assignor", ["uniform", "range"])
async def test_mixed_group_with_the_java_client(
    broker: Any, kafka_bootstrap: str, new_topic: Any, assignor: str
) -> None:
    broker.skip_on("tansu", "noida", "kafka", reason="KIP-848 groups of Apache Kafka 4.x")
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    topic = await new_topic(partitions=PARTITIONS)
    tps = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    group = f"mixed848-{uuid.uuid4().hex[:8]}"
    # the members learn each assignment and revocation a heartbeat later: 1 s, not Kafka's 5 s
    await alter_group_configs(kafka_bootstrap, group, consumer_heartbeat_interval_ms="1000")
    lites = [
        AIOKafkaConsumer(
            topic,
            bootstrap_servers=kafka_bootstrap,
            group_id=group,
            group_protocol="consumer",
            group_remote_assignor=assignor,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        for _ in range(2)
    ]
    java = JavaMember(kafka_bootstrap, topic, group, assignor).start()
    g = Group(java, lites)
    try:
        java.wait_assigned(SETTLE_S)
        for c in lites:
            await c.start()
        await g.poll_until(lambda: g.split(tps), "three-way split")
        # records written once the group is settled: each read exactly once
        await produce(kafka_bootstrap, topic, PER_PARTITION, PARTITIONS, prefix="a")
        await g.poll_until(lambda: len(g.reads()) == 60, "the first 60 records")
        # the second lite member leaves: its partitions go on from its commits
        leaving = lites[1].assignment()
        await lites[1].stop()
        g.lites = lites[:1]
        await g.poll_until(lambda: g.split(tps), "split after the lite member left")
        took = java_tps(java) & leaving
        await produce(kafka_bootstrap, topic, PER_PARTITION, PARTITIONS, prefix="b")
        await g.poll_until(lambda: len(g.reads()) == 120, "the next 60 records")
        # the Java member leaves: the lite member goes on from the Java client's commits
        java_had = java_tps(java)
        java.stop()
        await g.poll_until(lambda: lites[0].assignment() == tps, "hand-over from Java")
        for tp in java_had:
            assert await lites[0].committed(tp) == 2 * PER_PARTITION  # Java's commit
        await produce(kafka_bootstrap, topic, PER_PARTITION, PARTITIONS, prefix="c")
        await g.poll_until(lambda: len(g.reads()) == 180, "the last 60 records")
        twice = {k: n for k, n in g.reads().items() if n != 1}
        assert twice == {}, f"read more than once: {twice}"
        if assignor == "uniform":
            # uniform moves only the leaver's partitions, evenly: the Java member gets some.
            # range re-cuts contiguous ranges by member order, so the Java member may keep
            # its own and the lite member take all of the leaver's (both covered by split())
            assert took, "the Java member took none of the leaving member's partitions"
        assert not any(e["event"] == "commit_failed" for e in java.events), java.events
    finally:
        for c in lites:
            await c.stop()
        if java.running:
            java.stop(check=False)
