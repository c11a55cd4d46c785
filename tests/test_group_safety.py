"""Consumer data safety against a real broker: commits in the revoke callback reach the
broker, deserializer errors skip nothing, offsets of topics the consumer does not track."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer as PeerProducer

from aiokafka_lite.consumer import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka_lite.structs import TopicPartition
from tests.faults import API, FaultProxy, Rule
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
        if not revoked:  # the first join: aiokafka calls the listener with nothing to revoke
            return
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
    broker.skip_on(
        "noida",
        reason="noida-db answers IllegalGeneration to commits while a rebalance is prepared",
    )
    if slow:
        broker.skip_on("tansu", reason="Tansu's session expiry differs from Kafka's")
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


def strict_value(value: bytes | None) -> bytes | None:
    """A value deserializer that rejects b"bad"."""
    if value == b"bad":
        raise ValueError("cannot deserialize b'bad'")
    return value


async def produce_values(bootstrap: str, topic: str, values: dict[int, list[bytes]]) -> None:
    """Write the values of each partition, batched together (one linger window)."""
    producer = PeerProducer(bootstrap_servers=bootstrap, linger_ms=200)
    await producer.start()
    try:
        futs = [await producer.send(topic, v, partition=p) for p, vs in values.items() for v in vs]
        await asyncio.gather(*futs)
    finally:
        await producer.stop()


@pytest.mark.parametrize("max_records", [None, 2])
async def test_deserializer_error_skips_nothing(
    kafka_bootstrap: str, new_topic: Any, max_records: int | None
) -> None:
    """A value deserializer fails on one record: every record before it (of every partition)
    is handed out exactly once, the error reaches the caller, the position stays AT the bad
    record on every later poll until the user seeks past it; nothing else is skipped."""
    topic = await new_topic(partitions=2)
    p0 = [b"a0", b"a1", b"a2", b"bad", b"a4", b"a5", b"a6", b"a7"]
    await produce_values(kafka_bootstrap, topic, {0: p0, 1: [b"b0", b"b1", b"b2", b"b3", b"b4"]})
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap,
        value_deserializer=strict_value,
        auto_offset_reset="earliest",
        max_poll_records=max_records,
    )
    await c.start()
    try:
        c.assign([tp0, tp1])
        got: list[tuple[int, int, bytes]] = []
        errors = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while loop.time() < deadline and (errors < 2 or len(got) < 8):
            try:
                batch = await c.getmany(timeout_ms=200)
            except ValueError:
                errors += 1
                assert await c.position(tp0) == 3
                continue
            for tp, recs in batch.items():
                got.extend((tp.partition, r.offset, r.value) for r in recs)
        assert errors >= 2  # raised again: the bad record is not skipped silently
        assert sorted(got) == [(0, o, p0[o]) for o in range(3)] + [
            (1, o, b"b%d" % o) for o in range(5)
        ]
        assert await c.position(tp0) == 3
        c.seek(tp0, 4)  # the user decides to skip the bad record
        rest = await drain(c, 4)
        assert [(r.partition, r.offset) for r in rest] == [(0, o) for o in range(4, 8)]
    finally:
        await c.stop()


@pytest.mark.parametrize("max_records", [None, 2])
async def test_transient_deserializer_error_is_tried_again(
    kafka_bootstrap: str, new_topic: Any, max_records: int | None
) -> None:
    """A deserializer that fails once on a record (a transient failure): the error reaches
    the caller once, the next poll deserializes that record again (as aiokafka does), and
    every record of both partitions is handed out exactly once, in order, with no seek."""
    topic = await new_topic(partitions=2)
    p0 = [b"a0", b"a1", b"a2", b"bad", b"a4", b"a5"]
    p1 = [b"b0", b"b1", b"b2"]
    await produce_values(kafka_bootstrap, topic, {0: p0, 1: p1})
    attempts: list[bytes] = []

    def flaky(value: bytes | None) -> bytes | None:
        if value == b"bad":
            attempts.append(value)
            if len(attempts) == 1:
                raise ValueError("backend briefly unavailable")
        return value

    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap,
        value_deserializer=flaky,
        auto_offset_reset="earliest",
        max_poll_records=max_records,
    )
    await c.start()
    try:
        c.assign([tp0, tp1])
        got: list[tuple[int, int, bytes]] = []
        errors = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while loop.time() < deadline and len(got) < len(p0) + len(p1):
            try:
                batch = await c.getmany(timeout_ms=200)
            except ValueError:
                errors += 1
                assert await c.position(tp0) == 3
                continue
            for tp, recs in batch.items():
                got.extend((tp.partition, r.offset, r.value) for r in recs)
        assert errors == 1
        assert attempts == [b"bad", b"bad"]  # deserialized again, not a cached error
        for p, values in ((0, p0), (1, p1)):
            assert [(o, v) for q, o, v in got if q == p] == list(enumerate(values))
    finally:
        await c.stop()


async def test_offsets_of_topics_the_consumer_does_not_track(
    kafka_bootstrap: str, broker: Any, new_topic: Any
) -> None:
    """beginning_offsets / end_offsets / offsets_for_times of a topic that is neither
    subscribed nor assigned answer at once (Apache Kafka answers a Metadata request naming no
    topic with none: the lookup must make the metadata track the topic)."""
    broker.skip_on("tansu", reason="ListOffsets latest is wrong on Tansu (DESIGN.md)")
    topic = await new_topic(partitions=2)
    other = await new_topic(partitions=1, name=f"{topic}-other")
    await produce(kafka_bootstrap, topic, 3, 2)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    alone = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap)
    member = AIOKafkaConsumer(other, bootstrap_servers=kafka_bootstrap, group_id=group_name())
    for c in (alone, member):
        await c.start()
    try:
        for c in (alone, member):
            # bounded well below request_timeout_ms (40 s): a lookup that hangs fails here
            assert await asyncio.wait_for(c.end_offsets(tps), 15) == {tp: 3 for tp in tps}
            assert await asyncio.wait_for(c.beginning_offsets(tps), 15) == {tp: 0 for tp in tps}
            found = await asyncio.wait_for(c.offsets_for_times({tps[1]: 0}), 15)
            assert found[tps[1]] is not None and found[tps[1]].offset == 0
    finally:
        for c in (alone, member):
            await c.stop()


async def _member_with_records(bootstrap: str, topic: str, **kw: Any) -> AIOKafkaConsumer:
    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group_name(), **FAST, **kw)
    await c.start()
    recs = await drain(c, 2, timeout=30)
    assert [r.offset for r in recs] == [0, 1]
    return c


async def test_stop_with_a_silent_coordinator_is_bounded(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    """stop() of a group member whose coordinator stopped answering, with nothing left to
    commit, returns without error long before request_timeout_ms: the LeaveGroup is a
    minimal-effort courtesy (waited for at most session_timeout_ms), as the Java client's."""
    topic = await new_topic(partitions=1)
    await produce(kafka_bootstrap, topic, 2)
    async with FaultProxy(kafka_bootstrap) as proxy:
        c = await _member_with_records(proxy.bootstrap, topic, request_timeout_ms=300_000)
        await c.commit()  # nothing left for the last auto commit
        proxy.silent = True
        # 60 s: far above session_timeout_ms (6 s at most here), far below request_timeout_ms
        loop = asyncio.get_running_loop()
        started = loop.time()
        await asyncio.wait_for(c.stop(), 60)  # returns, raises nothing
        took = loop.time() - started
    assert took < 60


async def test_stop_still_commits_through_a_slow_coordinator(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    """The last auto commit at stop() keeps its try (no silent loss): a commit the broker
    gets only after half the session timeout still lands, and the group's next member starts
    right after the records handed out."""
    topic = await new_topic(partitions=1)
    await produce(kafka_bootstrap, topic, 3)
    tp = TopicPartition(topic, 0)
    group = group_name()
    async with FaultProxy(kafka_bootstrap) as proxy:
        c = AIOKafkaConsumer(
            topic,
            bootstrap_servers=proxy.bootstrap,
            group_id=group,
            request_timeout_ms=60_000,
            max_poll_records=2,
            **FAST,
        )
        await c.start()
        got: list[Any] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while not got and loop.time() < deadline:
            got = (await c.getmany(timeout_ms=1000)).get(tp, [])
        assert got
        handed_out = got[-1].offset + 1
        # held before the broker sees it (a late answer would not show a cut-short try)
        rule = proxy.add(
            Rule(
                API.OFFSET_COMMIT,
                "delay",
                seconds=FAST["session_timeout_ms"] / 2000,
                direction="request",
            )
        )
        await asyncio.wait_for(c.stop(), 60)
        assert rule.hits == 1
    check = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group)
    await check.start()
    try:
        assert await check.committed(tp) == handed_out
    finally:
        await check.stop()


async def test_pattern_group_hands_out_each_record_once_across_rebalances(
    kafka_bootstrap: str, broker: Any, new_topic: Any
) -> None:
    """aiokafka's test_manual_subscribe_pattern, hardened: a pattern matches two topics whose
    records carry the SAME values (one topic left over from an earlier run, with a committed
    offset in the group), a first member reads through a proxy that delays every fetch answer,
    a second member joins mid-way (a rebalance with auto commit). Across both members every
    (topic, partition, offset) from the committed offsets on is handed out exactly once, none
    is skipped, and the group ends committed at the log end."""
    broker.skip_on(
        "noida",
        reason="noida-db answers IllegalGeneration to commits while a rebalance is prepared "
        "(the commit before the revoke fails: redelivery is then correct at-least-once)",
    )
    prefix = f"pat-{uuid.uuid4().hex[:8]}"
    old = await new_topic(partitions=2, name=f"{prefix}-old")
    new = await new_topic(partitions=2, name=f"{prefix}-new")
    values = {p: [str(p * 10 + i).encode() for i in range(10)] for p in (0, 1)}
    for topic in (old, new):
        await produce_values(kafka_bootstrap, topic, values)
    group = group_name()
    # no auto commit: the last auto commit at stop() would write this consumer's own position
    # (its `latest` reset, 10, when that lands before the commit of 4: as aiokafka's)
    left = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False
    )
    await left.start()
    left.assign([TopicPartition(old, 0)])
    try:  # the earlier run got as far as offset 4 of the old topic's partition 0
        await left.commit({TopicPartition(old, 0): 4})
    finally:
        await left.stop()
    expected = {(t, p, o) for t in (old, new) for p in (0, 1) for o in range(10)}
    expected -= {(old, 0, o) for o in range(4)}

    seen: list[tuple[str, int, int]] = []

    async def poll(c: AIOKafkaConsumer) -> None:
        batch = await c.getmany(timeout_ms=200)
        seen.extend((r.topic, r.partition, r.offset) for rs in batch.values() for r in rs)

    kw: dict[str, Any] = dict(group_id=group, max_poll_records=3, **FAST)
    async with FaultProxy(kafka_bootstrap) as proxy:
        proxy.add(Rule(API.FETCH, "delay", seconds=0.2, times=-1))
        first = AIOKafkaConsumer(bootstrap_servers=proxy.bootstrap, **kw)
        first.subscribe(pattern=f"^{prefix}-")
        await first.start()
        second = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, **kw)
        second.subscribe(pattern=f"^{prefix}-")
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60
            while len(seen) < 8 and loop.time() < deadline:
                await poll(first)
            assert len(seen) >= 8, seen
            joined = asyncio.ensure_future(second.start())  # the rebalance starts mid-way
            while loop.time() < deadline and (not joined.done() or set(seen) != expected):
                await asyncio.gather(poll(first), poll(second) if joined.done() else poll(first))
            await joined
            assert second.assignment(), "the second member got no partitions: no rebalance"
        finally:
            await second.stop()  # the last auto commits
            await first.stop()
    dupes = sorted({k for k in seen if seen.count(k) > 1})
    assert not dupes, f"handed out more than once: {dupes}"
    assert set(seen) == expected, f"never handed out: {sorted(expected - set(seen))}"
    check = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group)
    await check.start()
    try:
        for t in (old, new):
            for p in (0, 1):
                assert await check.committed(TopicPartition(t, p)) == 10
    finally:
        await check.stop()
