"""KIP-848 consumer groups (``group_protocol="consumer"``) against a real broker: the broker's
assignors, hand-over when a member leaves, static membership across a restart, commits read by
another member, commits in the revoke callback, regex subscription, the settings refused at
construction and the error on brokers without the consumer protocol."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from share_helpers import alter_group_configs

from aiokafka_lite import SubscriptionPattern
from aiokafka_lite import errors as Errors
from aiokafka_lite.admin import AIOKafkaAdminClient
from aiokafka_lite.consumer import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka_lite.protocol import messages as m
from aiokafka_lite.structs import TopicPartition
from tests.test_consumer import produce

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(180)]

NO_KIP848 = ("tansu", "noida")
SKIP_REASON = "the broker has no KIP-848 consumer groups (ConsumerGroupHeartbeat)"
#: the broker's default group.consumer.heartbeat.interval.ms is 5 s: a hand-over takes a few
SETTLE_S = 60.0


def group_name() -> str:
    return f"g848-{uuid.uuid4().hex[:10]}"


def member(bootstrap: str, group: str, *topics: str, **kwargs: Any) -> AIOKafkaConsumer:
    kwargs.setdefault("auto_offset_reset", "earliest")
    kwargs.setdefault("retry_backoff_ms", 50)
    return AIOKafkaConsumer(
        *topics, bootstrap_servers=bootstrap, group_id=group, group_protocol="consumer", **kwargs
    )


class Recorder(ConsumerRebalanceListener):
    """Records every callback; optionally commits in on_partitions_revoked."""

    def __init__(self, consumer: AIOKafkaConsumer | None = None) -> None:
        self.consumer = consumer
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []
        self.commit_errors: list[BaseException] = []

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events.append(("revoked", frozenset(revoked)))
        if self.consumer is not None and revoked:
            try:
                positions = {tp: await self.consumer.position(tp) for tp in revoked}
                await self.consumer.commit(positions)
            except Errors.KafkaError as exc:
                self.commit_errors.append(exc)

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append(("assigned", frozenset(assigned)))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.events.append(("lost", frozenset(lost)))


async def poll_until(
    consumers: list[AIOKafkaConsumer],
    done: Any,
    what: str,
    timeout: float = SETTLE_S,
    seen: dict[tuple[str, int, int], int] | None = None,
) -> None:
    """Poll every consumer (counting the records in ``seen``) until ``done()`` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():
        if loop.time() > deadline:
            raise AssertionError(
                f"no {what} within {timeout:.0f}s: {[sorted(c.assignment()) for c in consumers]}"
            )
        batches = await asyncio.gather(*(c.getmany(timeout_ms=200) for c in consumers))
        if seen is not None:
            for batch in batches:
                for recs in batch.values():
                    for r in recs:
                        key = (r.topic, r.partition, r.offset)
                        seen[key] = seen.get(key, 0) + 1


def partition_of(consumers: list[AIOKafkaConsumer], tps: set[TopicPartition]) -> Any:
    """A predicate: the consumers' assignments are disjoint, non-empty and cover ``tps``."""

    def check() -> bool:
        sets = [c.assignment() for c in consumers]
        return all(sets) and sum(map(len, sets)) == len(tps) and set().union(*sets) == tps

    return check


async def test_classic_only_settings_refused() -> None:
    for kwargs in (
        {"session_timeout_ms": 30000},
        {"heartbeat_interval_ms": 1000},
        {"partition_assignment_strategy": ("range",)},
    ):
        with pytest.raises(ValueError, match="cannot be set when group_protocol='consumer'"):
            AIOKafkaConsumer(group_id="g", group_protocol="consumer", **kwargs)
    with pytest.raises(ValueError, match="group_protocol must be"):
        AIOKafkaConsumer(group_id="g", group_protocol="cooperative")
    with pytest.raises(ValueError, match="needs group_protocol='consumer'"):
        AIOKafkaConsumer(group_id="g", group_remote_assignor="uniform")
    # the defaults (and the classic protocol with any of them) are fine
    for ok in (
        AIOKafkaConsumer(group_id="g", group_protocol="consumer", group_remote_assignor="range"),
        AIOKafkaConsumer(group_id="g", session_timeout_ms=30000),
    ):
        await ok.stop()


async def test_without_a_group_id_every_partition_is_assigned(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    """group_protocol='consumer' without a group_id: no membership protocol at all, as classic
    (the consumer assigns itself every partition of the subscribed topic; no group traffic)."""
    topic = await new_topic(partitions=2)
    await produce(kafka_bootstrap, topic, 1, 2)
    c = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_protocol="consumer",
        auto_offset_reset="earliest",
    )
    await c.start()
    try:
        want = {TopicPartition(topic, 0), TopicPartition(topic, 1)}
        assert c.assignment() == want
        seen: set[TopicPartition] = set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while seen != want and loop.time() < deadline:
            for tp, recs in (await c.getmany(timeout_ms=500)).items():
                if recs:
                    seen.add(tp)
        assert seen == want
    finally:
        await c.stop()


@pytest.mark.skip_broker(*NO_KIP848, reason=SKIP_REASON)
@pytest.mark.parametrize("assignor", ["uniform", "range"])
async def test_server_assignor_splits_and_every_record_once(
    kafka_bootstrap: str, new_topic: Any, assignor: str
) -> None:
    topic = await new_topic(partitions=6)
    await produce(kafka_bootstrap, topic, 10, 6)
    tps = {TopicPartition(topic, p) for p in range(6)}
    group = group_name()
    consumers = [
        member(kafka_bootstrap, group, topic, group_remote_assignor=assignor) for _ in range(3)
    ]
    seen: dict[tuple[str, int, int], int] = {}
    try:
        for c in consumers:
            await c.start()
        await poll_until(
            consumers, partition_of(consumers, tps), "split of 6 partitions", seen=seen
        )
        sets = [c.assignment() for c in consumers]
        assert sorted(len(s) for s in sets) == [2, 2, 2]
        if assignor == "range":  # range: contiguous partitions of the topic
            for s in sets:
                ps = sorted(tp.partition for tp in s)
                assert ps == list(range(ps[0], ps[0] + len(ps))), sets
        await poll_until(consumers, lambda: len(seen) == 60, "every record", seen=seen)
        assert set(seen.values()) == {1}, "a record was read twice"
        assert all(c.group_generation > 0 for c in consumers)  # the member epoch
        # the admin describes the group (ConsumerGroupDescribe) and lists it
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        try:
            [resp] = await admin.describe_consumer_groups([group])
            [described] = resp.groups
            assert (described.group, described.protocol_type) == (group, "consumer")
            assert described.protocol == assignor
            assert len(described.members) == 3
            mine = await admin.describe_groups([group])
            owned = [set(mb.assignment) for mb in mine[group].members]
            assert sorted(map(frozenset, owned), key=sorted) == sorted(
                (frozenset(s) for s in sets), key=sorted
            )
            assert (group, "consumer") in await admin.list_consumer_groups()
            listed = await admin.list_groups(group_types=["consumer"], states=["stable"])
            assert group in {g.group_id for g in listed}
            listed = await admin.list_groups(group_types=["classic"])
            assert group not in {g.group_id for g in listed}
        finally:
            await admin.close()
    finally:
        for c in consumers:
            await c.stop()


@pytest.mark.skip_broker(*NO_KIP848, reason=SKIP_REASON)
async def test_leaving_member_hands_over_from_its_commits(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    topic = await new_topic(partitions=4)
    await produce(kafka_bootstrap, topic, 10, 4)
    tps = {TopicPartition(topic, p) for p in range(4)}
    group = group_name()
    # three hand-overs, each a heartbeat or two: 1 s heartbeats (the group config), not 5 s
    await alter_group_configs(kafka_bootstrap, group, consumer_heartbeat_interval_ms="1000")
    a = member(kafka_bootstrap, group, enable_auto_commit=False)
    b = member(kafka_bootstrap, group, enable_auto_commit=False)
    la, lb = Recorder(a), Recorder(b)
    a.subscribe([topic], listener=la)
    b.subscribe([topic], listener=lb)
    seen: dict[tuple[str, int, int], int] = {}
    try:
        await a.start()
        await b.start()
        await poll_until([a, b], partition_of([a, b], tps), "split", seen=seen)
        await poll_until([a, b], lambda: len(seen) == 40, "every record", seen=seen)
        mine = a.assignment()
        await a.commit()  # a's positions, then a leaves
        committed = {tp: await a.committed(tp) for tp in mine}
        assert all(v == 10 for v in committed.values()), committed
        await a.stop()
        await poll_until([b], lambda: b.assignment() == tps, "hand-over to b", seen=seen)
        # b starts a's partitions at a's commits: nothing read twice
        await produce(kafka_bootstrap, topic, 1, 4, prefix="after")
        await poll_until([b], lambda: len(seen) == 44, "the new records", seen=seen)
        assert set(seen.values()) == {1}
        assert ("assigned", frozenset(mine)) in lb.events
        for tp in mine:
            assert await b.committed(tp) == 10  # read by the other member
        # commits inside the revoke callback: b gives partitions to a newcomer
        c = member(kafka_bootstrap, group, topic, enable_auto_commit=False)
        await c.start()
        try:
            await poll_until([b, c], partition_of([b, c], tps), "split with c", seen=seen)
            revoked = set().union(*(p for kind, p in lb.events if kind == "revoked"))
            assert revoked and revoked == tps - b.assignment()
            assert lb.commit_errors == []
            for tp in revoked:
                assert await c.committed(tp) == 11  # committed by b while revoking
        finally:
            await c.stop()
    finally:
        await b.stop()


@pytest.mark.skip_broker(*NO_KIP848, reason=SKIP_REASON)
async def test_static_member_restart_keeps_partitions(kafka_bootstrap: str, new_topic: Any) -> None:
    topic = await new_topic(partitions=4)
    tps = {TopicPartition(topic, p) for p in range(4)}
    group = group_name()
    a = member(kafka_bootstrap, group, topic, group_instance_id="static-a")
    b = member(kafka_bootstrap, group, group_instance_id="static-b")
    lb = Recorder()
    b.subscribe([topic], listener=lb)
    try:
        await a.start()
        await b.start()
        await poll_until([a, b], partition_of([a, b], tps), "split")
        before_a, before_b = a.assignment(), b.assignment()
        events_b = list(lb.events)
        await a.stop()  # leaves with epoch -2: the broker keeps its partitions for it
        # the broker's view (ConsumerGroupDescribe), once the leave was answered: static-a is
        # still a member holding its partitions (a dynamic member's leave, -1, removes it at
        # once and moves its partitions to b in the target assignment)
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        try:
            described = (await admin.describe_groups([group]))[group]
        finally:
            await admin.close()
        held = {mb.group_instance_id: set(mb.assignment) for mb in described.members}
        assert held == {"static-a": before_a, "static-b": before_b}, held
        a = member(kafka_bootstrap, group, topic, group_instance_id="static-a")
        await a.start()
        await poll_until([a, b], lambda: a.assignment() == before_a, "a's partitions back")
        await poll_until([a, b], lambda: True, "one more poll")
        assert b.assignment() == before_b
        assert lb.events == events_b, "b saw a rebalance"
    finally:
        await a.stop()
        await b.stop()


@pytest.mark.skip_broker(*NO_KIP848, reason=SKIP_REASON)
async def test_regex_subscription_evaluated_by_the_broker(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    t1 = await new_topic(partitions=2, name=f"{prefix}-one")
    t2 = await new_topic(partitions=1, name=f"{prefix}-two")
    await new_topic(partitions=1, name=f"other-{prefix}")
    want = {TopicPartition(t1, 0), TopicPartition(t1, 1), TopicPartition(t2, 0)}
    c = member(kafka_bootstrap, group_name())
    c.subscribe(pattern=SubscriptionPattern(f"{prefix}-.*"))
    try:
        await c.start()
        await poll_until([c], lambda: c.assignment() == want, "the matching topics")
    finally:
        await c.stop()
    # the broker's RE2/J takes no look-ahead: start() says so
    bad = member(kafka_bootstrap, group_name())
    bad.subscribe(pattern=SubscriptionPattern(f"(?={prefix}){prefix}-.*"))
    with pytest.raises(Errors.InvalidRegularExpressionError):
        await bad.start()
    await bad.stop()


async def test_broker_without_consumer_protocol_fails_at_start(
    broker: Any, kafka_bootstrap: str, new_topic: Any
) -> None:
    broker.skip_on("apache", "kafka", reason="this broker has KIP-848 consumer groups")
    topic = await new_topic(partitions=1)
    c = member(kafka_bootstrap, group_name(), topic)
    with pytest.raises(Errors.UnsupportedVersionError, match="does not support the new CONSUMER"):
        await c.start()
    await c.stop()


@pytest.mark.skip_broker(*NO_KIP848, reason=SKIP_REASON)
async def test_fenced_member_loses_partitions_and_rejoins(broker: Any, new_topic: Any) -> None:
    from tests.faults import FaultProxy, Rule

    topic = await new_topic(partitions=2)
    tps = {TopicPartition(topic, p) for p in range(2)}
    async with FaultProxy(broker.bootstrap) as proxy:
        c = member(proxy.bootstrap, group_name())
        listener = Recorder()
        c.subscribe([topic], listener=listener)
        seen: dict[tuple[str, int, int], int] = {}
        try:
            await c.start()
            await poll_until([c], lambda: c.assignment() == tps, "the assignment")
            member_id = c._coordinator.member_id  # type: ignore[union-attr]
            fenced = proxy.add(
                Rule(m.ConsumerGroupHeartbeatRequest.API_KEY, "error", error_code=110)
            )
            rejoined = proxy.add(
                Rule(
                    m.ConsumerGroupHeartbeatRequest.API_KEY,
                    "observe",
                    direction="request",
                    when=lambda req: req.member_epoch == 0 and req.member_id == member_id,
                )
            )
            await poll_until([c], fenced.done.is_set, "a heartbeat answered FENCED_MEMBER_EPOCH")
            await poll_until(
                [c], lambda: ("lost", frozenset(tps)) in listener.events, "on_partitions_lost"
            )
            # joined again (epoch 0, the same member id), got its partitions back, consumes
            await poll_until([c], rejoined.done.is_set, "a heartbeat joining with epoch 0")
            await poll_until([c], lambda: c.assignment() == tps, "the assignment again")
            assert listener.events[-1] == ("assigned", frozenset(tps))
            assert c.group_generation > 0
            await produce(broker.bootstrap, topic, 5, 2)
            await poll_until([c], lambda: len(seen) == 10, "records after the rejoin", seen=seen)
        finally:
            await c.stop()


@pytest.mark.skip_broker(*NO_KIP848, reason=SKIP_REASON)
async def test_coordinator_moved_is_looked_up_again(broker: Any, new_topic: Any) -> None:
    from tests.faults import FaultProxy, Rule

    topic = await new_topic(partitions=2)
    tps = {TopicPartition(topic, p) for p in range(2)}
    async with FaultProxy(broker.bootstrap) as proxy:
        c = member(proxy.bootstrap, group_name())
        listener = Recorder()
        c.subscribe([topic], listener=listener)
        try:
            await c.start()
            await poll_until([c], lambda: c.assignment() == tps, "the assignment")
            events = list(listener.events)
            lookups = proxy.add(Rule(m.FindCoordinatorRequest.API_KEY, "observe", times=-1))
            moved = proxy.add(Rule(m.ConsumerGroupHeartbeatRequest.API_KEY, "error", error_code=16))
            await poll_until([c], moved.done.is_set, "a heartbeat answered NOT_COORDINATOR")
            await poll_until([c], lambda: lookups.hits > 0, "a FindCoordinator look-up")
            after = proxy.add(Rule(m.ConsumerGroupHeartbeatRequest.API_KEY, "observe"))
            await poll_until([c], after.done.is_set, "a heartbeat after the look-up")
            assert c.assignment() == tps
            assert listener.events == events  # the membership survived
        finally:
            await c.stop()


@pytest.mark.skip_broker(*NO_KIP848, reason=SKIP_REASON)
async def test_stale_member_epoch_on_commits(broker: Any, new_topic: Any) -> None:
    """As the Java client: the commit before a revocation retries a STALE_MEMBER_EPOCH answer
    with the next heartbeat's epoch (the next owner starts from it), commit() raises
    CommitFailedError."""
    from tests.faults import FaultProxy, Rule

    topic = await new_topic(partitions=2)
    tps = {TopicPartition(topic, p) for p in range(2)}
    group = group_name()
    await produce(broker.bootstrap, topic, 10, 2)
    async with FaultProxy(broker.bootstrap) as proxy:
        a = member(proxy.bootstrap, group, topic, auto_commit_interval_ms=600_000)
        b = member(broker.bootstrap, group, topic)
        seen: dict[tuple[str, int, int], int] = {}
        try:
            await a.start()
            await poll_until([a], lambda: len(seen) == 20, "a reads everything", seen=seen)
            # (the proxy rewrites the answer: the broker took the commit, so what tells the
            # retry is the second OffsetCommit; the interval commit is 10 minutes away)
            stale = proxy.add(Rule(m.OffsetCommitRequest.API_KEY, "error", error_code=113))
            commits = proxy.add(Rule(m.OffsetCommitRequest.API_KEY, "observe", times=-1))
            await b.start()  # a revokes a partition for b, committing first
            await poll_until([a, b], partition_of([a, b], tps), "split", seen=seen)
            assert stale.done.is_set()
            assert commits.hits == 2, "the commit answered STALE_MEMBER_EPOCH was not retried"
            await produce(broker.bootstrap, topic, 5, 2)
            await poll_until([a, b], lambda: len(seen) == 30, "the new records", seen=seen)
            assert set(seen.values()) == {1}, "b read again what a had committed"
            proxy.add(Rule(m.OffsetCommitRequest.API_KEY, "error", error_code=113))
            with pytest.raises(Errors.CommitFailedError, match="stale"):
                await a.commit()
        finally:
            await a.stop()
            await b.stop()


@pytest.mark.skip_broker(*NO_KIP848, reason=SKIP_REASON)
async def test_max_poll_interval_leaves_and_the_next_poll_rejoins(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    topic = await new_topic(partitions=2)
    tps = {TopicPartition(topic, p) for p in range(2)}
    c = member(kafka_bootstrap, group_name(), max_poll_interval_ms=2000)
    listener = Recorder()
    c.subscribe([topic], listener=listener)
    try:
        await c.start()
        await poll_until([c], lambda: c.assignment() == tps, "the assignment")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_S
        while ("lost", frozenset(tps)) not in listener.events:  # no poll meanwhile
            assert loop.time() < deadline, "no on_partitions_lost after max_poll_interval_ms"
            await asyncio.sleep(0.1)
        assert c.assignment() == set()
        await poll_until([c], lambda: c.assignment() == tps, "the assignment after polling")
        assert listener.events[-1] == ("assigned", frozenset(tps))
    finally:
        await c.stop()


@pytest.mark.skip_broker(*NO_KIP848, reason=SKIP_REASON)
async def test_subscription_changes_reach_the_group(kafka_bootstrap: str, new_topic: Any) -> None:
    first = await new_topic(partitions=2, name=f"sub-a-{uuid.uuid4().hex[:8]}")
    second = await new_topic(partitions=1, name=f"sub-b-{uuid.uuid4().hex[:8]}")
    c = member(kafka_bootstrap, group_name(), first)
    try:
        await c.start()
        want = {TopicPartition(first, 0), TopicPartition(first, 1)}
        await poll_until([c], lambda: c.assignment() == want, "the first topic")
        c.subscribe([second])  # the next heartbeat carries the new names
        await poll_until([c], lambda: c.assignment() == {TopicPartition(second, 0)}, "the second")
        c.unsubscribe()  # leaves the group
        await poll_until([c], lambda: c._coordinator.generation < 0, "the leave")  # type: ignore[union-attr]
        c.subscribe([first])  # joins again with epoch 0
        await poll_until([c], lambda: c.assignment() == want, "the first topic again")
    finally:
        await c.stop()


async def test_kafka_39_without_the_consumer_protocol_fails_at_start(apache39: Any) -> None:
    """Kafka 3.9 knows ConsumerGroupHeartbeat but runs only classic groups by default."""
    from tests.conftest import _create_topic_lite

    topic = f"k39-{uuid.uuid4().hex[:8]}"
    await _create_topic_lite(apache39.bootstrap, topic, 1, 1, {})
    c = member(apache39.bootstrap, group_name(), topic)
    with pytest.raises(Errors.UnsupportedVersionError, match="does not support the new CONSUMER"):
        await c.start()
    await c.stop()
