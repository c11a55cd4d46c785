"""Cooperative incremental rebalancing of the classic protocol (KIP-429) against a real broker:
aiokafka_lite members with ``CooperativeStickyAssignor``, alone and in one group with the Java
``KafkaConsumer`` running Java's ``CooperativeStickyAssignor``.  While a member joins, the
partitions that do not move are never revoked (the listeners say so) and keep being consumed
(records from them arrive while the join is in progress); afterwards the assignment is
balanced, disjoint and covering, and every record was read, more than once only on a
partition that moved (inside its uncommitted window)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from java_oracle import GroupMember, unavailable_reason

from aiokafka_lite import errors as Errors
from aiokafka_lite.consumer import (
    AIOKafkaConsumer,
    ConsumerRebalanceListener,
    CooperativeStickyAssignor,
)
from aiokafka_lite.producer import AIOKafkaProducer
from aiokafka_lite.structs import TopicPartition
from tests.faults import API, FaultProxy, Rule

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(240)]

PARTITIONS = 6
SETTLE_S = 90.0  # readiness bound (JVM start, busy machine); never what is asserted


class Recorder(ConsumerRebalanceListener):
    """Every callback with its time, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str, set[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events.append((time.monotonic(), "revoked", set(revoked)))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append((time.monotonic(), "assigned", set(assigned)))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.events.append((time.monotonic(), "lost", set(lost)))

    def since(self, t: float, kind: str) -> set[TopicPartition]:
        out: set[TopicPartition] = set()
        for when, k, tps in self.events:
            if when >= t and k == kind:
                out |= tps
        return out


class Member:
    """An aiokafka_lite member consuming in the background: commits after every batch,
    records (partition, offset) -> times read, and when each partition last delivered."""

    def __init__(self, bootstrap: str, topic: str, group: str, session_ms: int) -> None:
        self.listener = Recorder()
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            partition_assignment_strategy=(CooperativeStickyAssignor,),
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            heartbeat_interval_ms=300,
            session_timeout_ms=session_ms,
            retry_backoff_ms=50,
        )
        self.consumer.subscribe([topic], listener=self.listener)
        self.reads: dict[tuple[int, int], int] = {}
        self.arrivals: dict[int, list[float]] = {}
        self.commit_errors: list[BaseException] = []
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.consumer.start()
        self._task = asyncio.create_task(self._consume())

    async def _consume(self) -> None:
        c = self.consumer
        while True:
            batch = await c.getmany(timeout_ms=100)
            now = time.monotonic()
            for tp, recs in batch.items():
                self.arrivals.setdefault(tp.partition, []).append(now)
                for r in recs:
                    key = (r.partition, r.offset)
                    self.reads[key] = self.reads.get(key, 0) + 1
            if batch:
                try:
                    await c.commit()
                except Errors.CommitFailedError as exc:
                    # RebalanceInProgressError (a subclass): the rebalance goes on, poll again;
                    # else a rebalance ended the generation: the uncommitted window re-reads
                    self.commit_errors.append(exc)

    def assignment(self) -> set[TopicPartition]:
        return set(self.consumer.assignment())

    def arrived_between(self, partition: int, t0: float, t1: float) -> bool:
        return any(t0 <= t <= t1 for t in self.arrivals.get(partition, ()))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.consumer.stop()


class Writer:
    """Writes one record to every partition every 50 ms; what was written."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=2)
        self.topic = topic
        self.written: set[tuple[int, int]] = set()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.producer.start()
        self._task = asyncio.create_task(self._write())

    async def _write(self) -> None:
        i = 0
        while True:
            futs = [
                await self.producer.send(self.topic, b"v%d" % i, partition=p)
                for p in range(PARTITIONS)
            ]
            for md in await asyncio.gather(*futs):
                self.written.add((md.partition, md.offset))
            i += 1
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._task = None
        await self.producer.stop()


def java_tps(java: GroupMember) -> set[TopicPartition]:
    return {TopicPartition(t, p) for t, p in java.assigned()}


def java_since(java: GroupMember, n_events: int, kind: str) -> set[TopicPartition]:
    out: set[TopicPartition] = set()
    for e in java.events[n_events:]:
        if e["event"] == kind:
            out |= {TopicPartition(t, p) for t, p in e.get("partitions", ())}
    return out


async def wait_until(cond: Any, what: str, state: Any) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_S
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"no {what} within {SETTLE_S:.0f}s: {state()}")
        await asyncio.sleep(0.05)


def split(sets: list[set[TopicPartition]], tps: set[TopicPartition]) -> bool:
    return sum(map(len, sets)) == len(tps) and set().union(*sets) == tps


def check_handovers(
    written: set[tuple[int, int]],
    readers: dict[tuple[int, int], list[str]],
    moves: set[tuple[int, str, str]],
) -> None:
    """Every record read; one read twice only by the two members of a hand-over of its
    partition (``(partition, from, to)`` in ``moves``): the old owner's uncommitted window,
    read again by the new owner from the last commit. Never twice by one member, never on a
    partition that stayed, never by members between which it did not move."""
    missing = written - readers.keys()
    assert not missing, f"{len(missing)} records never read, e.g. {sorted(missing)[:5]}"
    bad = {
        k: who
        for k, who in readers.items()
        if len(who) > 1
        and not any(p == k[0] and sorted(who) == sorted((src, dst)) for p, src, dst in moves)
    }
    assert not bad, f"re-read outside a hand-over's window: {bad}; hand-overs {sorted(moves)}"


def check_reads(
    written: set[tuple[int, int]], reads: dict[tuple[int, int], int], moved: set[int]
) -> None:
    missing = written - reads.keys()
    assert not missing, f"{len(missing)} records never read, e.g. {sorted(missing)[:5]}"
    twice = {k: n for k, n in reads.items() if n > 1}
    assert all(p in moved for p, _ in twice), f"re-read on a partition that did not move: {twice}"


async def test_join_keeps_unmoved_partitions_consuming(
    broker: Any, kafka_bootstrap: str, new_topic: Any
) -> None:
    # the cooperative rule needs the JoinGroup barrier (a generation waits for every known
    # member, each with its fresh subscription); seen in the leader's JoinGroup answers:
    broker.skip_on(
        "tansu",
        reason="Tansu completes a generation before every member rejoined: the others' owned "
        "partitions are stale or missing and they are fenced (lost)",
    )
    broker.skip_on(
        "noida",
        reason="noida-db answers the leader's JoinGroup with a member list missing members "
        "that are in the group, so the leader cannot see who owns what",
    )
    session_ms = 6000
    topic = await new_topic(partitions=PARTITIONS)
    tps = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    group = f"coop-{uuid.uuid4().hex[:8]}"
    writer = Writer(kafka_bootstrap, topic)
    members = [Member(kafka_bootstrap, topic, group, session_ms) for _ in range(3)]
    a, b, c = members
    state = lambda: [sorted(m.assignment()) for m in members]  # noqa: E731
    try:
        await writer.start()
        await a.start()
        await b.start()
        await wait_until(
            lambda: (
                split([a.assignment(), b.assignment()], tps)
                and all(len(m.assignment()) == 3 for m in (a, b))
            ),
            "3/3 split",
            state,
        )
        before = {id(m): m.assignment() for m in (a, b)}
        t_join = time.monotonic()
        await c.start()
        await wait_until(lambda: bool(c.assignment()), "a partition for the new member", state)
        t_c_assigned = time.monotonic()
        await wait_until(
            lambda: (
                split([m.assignment() for m in members], tps)
                and all(len(m.assignment()) == 2 for m in members)
            ),
            "2/2/2 split",
            state,
        )
        # the cooperative rule: the new member got each partition only after its previous
        # owner had revoked it (a follow-up rebalance), never both owning it at once
        for t_given, kind, given in c.listener.events:
            for tp in given if kind == "assigned" else ():
                owner = a if tp in before[id(a)] else b
                revoked_at = [t for t, k, r in owner.listener.events if k == "revoked" and tp in r]
                assert revoked_at and revoked_at[0] < t_given, (tp, owner.listener.events)
        moved: set[int] = set()
        for m in (a, b):
            kept = before[id(m)] & m.assignment()
            gone = before[id(m)] - m.assignment()
            assert len(kept) == 2 and len(gone) == 1, (before[id(m)], m.assignment())
            moved |= {tp.partition for tp in gone}
            # only what moved was revoked; nothing lost; nothing re-assigned to it
            assert m.listener.since(t_join, "revoked") == gone, m.listener.events
            assert m.listener.since(t_join, "lost") == set()
            assert m.listener.since(t_join, "assigned") == set(), m.listener.events
            # the kept partitions delivered records while the join was in progress
            for tp in kept:
                assert m.arrived_between(tp.partition, t_join, t_c_assigned), (
                    f"{tp} of a kept assignment delivered nothing during the rebalance"
                )
        assert {tp.partition for tp in c.assignment()} == moved
        # every record read; twice only on a moved partition (its uncommitted window)
        await writer.stop()
        reads: dict[tuple[int, int], int] = {}

        def merged() -> dict[tuple[int, int], int]:
            reads.clear()
            for m in members:
                for k, n in m.reads.items():
                    reads[k] = reads.get(k, 0) + n
            return reads

        await wait_until(
            lambda: writer.written <= merged().keys(),
            "every record read",
            lambda: len(writer.written - merged().keys()),
        )
        check_reads(writer.written, merged(), moved)
    finally:
        await writer.stop()
        for m in members:
            await m.stop()


async def test_mixed_group_with_java_cooperative_sticky(
    broker: Any, kafka_bootstrap: str, new_topic: Any
) -> None:
    broker.skip_on("tansu", "noida", reason="the Java client's group runs on Apache Kafka")
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    topic = await new_topic(partitions=PARTITIONS)
    tps = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    group = f"coopj-{uuid.uuid4().hex[:8]}"
    writer = Writer(kafka_bootstrap, topic)
    java = GroupMember(kafka_bootstrap, topic, group, assignor="cooperative-sticky", run_ms=200_000)
    lites = [Member(kafka_bootstrap, topic, group, 10000) for _ in range(2)]
    a, b = lites

    def state() -> Any:
        return {
            "lite": [sorted(m.assignment()) for m in lites],
            "java": sorted(java_tps(java)),
            "java_events": java.events,
            "stderr": java.stderr[-2000:],
        }

    try:
        await writer.start()
        java.start()
        await asyncio.to_thread(java.wait_assigned, SETTLE_S)
        first_java = java_tps(java)  # alone in the group: every partition
        await a.start()
        await wait_until(
            lambda: split([java_tps(java), a.assignment()], tps) and len(a.assignment()) == 3,
            "Java/lite 3/3 split",
            state,
        )
        before_java, before_a = java_tps(java), a.assignment()
        n_java = len(java.events)
        t_join = time.monotonic()
        await b.start()
        await wait_until(
            lambda: (
                split([java_tps(java), a.assignment(), b.assignment()], tps)
                and len(b.assignment()) == 2
                and len(a.assignment()) == 2
            ),
            "2/2/2 split",
            state,
        )
        gone_java = before_java - java_tps(java)
        gone_a = before_a - a.assignment()
        assert len(gone_java) == 1 and len(gone_a) == 1, state()
        # no side revoked a partition that stayed; none lost any
        assert java_since(java, n_java, "revoked") == gone_java, java.events
        assert java_since(java, n_java, "lost") == set(), java.events
        assert a.listener.since(t_join, "revoked") == gone_a, a.listener.events
        assert a.listener.since(t_join, "lost") == set(), a.listener.events
        assert b.assignment() == gone_java | gone_a
        await writer.stop()
        # the hand-overs: Java -> a when a joined, then Java -> b and a -> b when b joined.
        # The first ones count too: the Java member's commitSync() after its last poll before
        # revoking is refused while the group rebalances (Java's rule: no commit outside a
        # stable generation, RebalanceInProgressException) and it commits nothing in its
        # revoke callback, so a starts from Java's previous commit and reads that poll's
        # records of the partitions it took again
        moves = {(tp.partition, "java", "a") for tp in before_a & first_java}
        moves |= {(tp.partition, "java", "b") for tp in gone_java}
        moves |= {(tp.partition, "a", "b") for tp in gone_a}

        def readers() -> dict[tuple[int, int], list[str]]:
            out: dict[tuple[int, int], list[str]] = {}
            for name, m in (("a", a), ("b", b)):
                for k, n in m.reads.items():
                    out.setdefault(k, []).extend([name] * n)
            for r in java.records:
                out.setdefault((r["partition"], r["offset"]), []).append("java")
            return out

        await wait_until(
            lambda: writer.written <= readers().keys(),
            "every record read",
            lambda: len(writer.written - readers().keys()),
        )
        check_handovers(writer.written, readers(), moves)
    finally:
        await writer.stop()
        for m in lites:
            await m.stop()
        if java.running:
            java.stop(check=False)


async def test_rolling_upgrade_stays_eager_until_all_cooperative(
    broker: Any, kafka_bootstrap: str, new_topic: Any
) -> None:
    """Java's documented upgrade: members offering (cooperative-sticky, range) beside a member
    offering range alone form a ``range`` group; once every member offers cooperative-sticky
    the group picks it, and a member offering both still revokes everything on a rejoin
    (eager) because one of its assignors is eager."""
    broker.skip_on(
        "tansu",
        "noida",
        reason="cooperative rebalancing needs a JoinGroup that waits for every member",
    )
    topic = await new_topic(partitions=PARTITIONS)
    tps = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    group = f"coopu-{uuid.uuid4().hex[:8]}"

    def member(strategy: Any) -> tuple[AIOKafkaConsumer, Recorder]:
        listener = Recorder()
        c = AIOKafkaConsumer(
            bootstrap_servers=kafka_bootstrap,
            group_id=group,
            partition_assignment_strategy=strategy,
            auto_offset_reset="earliest",
            heartbeat_interval_ms=300,
            session_timeout_ms=6000,
        )
        c.subscribe([topic], listener=listener)
        return c, listener

    old, _ = member(("range",))
    both, both_listener = member(("cooperative-sticky", "range"))
    started = []
    try:
        for c in (old, both):
            await c.start()
            started.append(c)

        async def settled(members: list[AIOKafkaConsumer]) -> None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + SETTLE_S
            while not (
                split([c.assignment() for c in members], tps)
                and len({c._coordinator.generation for c in members}) == 1  # type: ignore[union-attr]
            ):
                assert loop.time() < deadline, [c.assignment() for c in members]
                await asyncio.gather(*(c.getmany(timeout_ms=100) for c in members))

        await settled([old, both])
        assert both._coordinator is not None and old._coordinator is not None
        assert both._coordinator.protocol == "range"
        assert both._coordinator.cooperative is False
        # the range-only member is replaced by one offering both: the group switches
        await old.stop()
        started.remove(old)
        await settled([both])  # it holds all six now
        new, _ = member(("cooperative-sticky", "range"))
        held = both.assignment()
        assert held == tps
        t_join = time.monotonic()
        await new.start()
        started.append(new)
        await settled([both, new])
        assert new._coordinator is not None
        assert new._coordinator.protocol == "cooperative-sticky"
        # still eager: the member revoked everything it held before joining
        assert both_listener.since(t_join, "revoked") >= held
    finally:
        for c in started:
            await c.stop()


@pytest.mark.parametrize("code", [22, 25])  # ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID
async def test_generation_lost_calls_on_partitions_lost(
    broker: Any, new_topic: Any, code: int
) -> None:
    """A heartbeat answered ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID (as after a session
    timeout): the cooperative member's partitions are lost, not revoked (it may not commit
    them: another member may own them already); it rejoins and gets them again."""
    from tests.faults import API, FaultProxy, Rule

    if code == 25:
        broker.skip_on(
            "noida",
            reason="not investigated: after on_partitions_lost the rejoin as a new member (the "
            "old member id still registered) got no assignment within 90 s on noida-db",
        )
    topic = await new_topic(partitions=2)
    tps = {TopicPartition(topic, p) for p in range(2)}
    async with FaultProxy(broker.bootstrap) as proxy:
        listener = Recorder()
        c = AIOKafkaConsumer(
            bootstrap_servers=proxy.bootstrap,
            group_id=f"coopl-{uuid.uuid4().hex[:8]}",
            partition_assignment_strategy=(CooperativeStickyAssignor,),
            heartbeat_interval_ms=300,
            session_timeout_ms=6000,
        )
        c.subscribe([topic], listener=listener)
        await c.start()
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + SETTLE_S
            while c.assignment() != tps:
                assert loop.time() < deadline, listener.events
                await c.getmany(timeout_ms=100)
            t0 = time.monotonic()
            proxy.add(Rule(API.HEARTBEAT, "error", error_code=code))
            while not (listener.since(t0, "lost") and c.assignment() == tps):
                assert loop.time() < deadline, listener.events
                await c.getmany(timeout_ms=100)
            assert listener.since(t0, "lost") == tps
            assert listener.since(t0, "revoked") == set()
            assert listener.since(t0, "assigned") == tps  # given back after the rejoin
        finally:
            await c.stop()


async def test_a_commit_fenced_while_the_join_is_out_does_not_lose_the_partitions(
    broker: Any, kafka_bootstrap: str, new_topic: Any
) -> None:
    """JoinGroup has its own connection, so the answer of a commit sent for the old generation
    (ILLEGAL_GENERATION once the broker completed the join) can be read before the JoinGroup's
    answer, which brings the new generation. That is not a lost generation: the member keeps
    its partitions through the rebalance (no on_partitions_lost, no re-read from the last
    commit), as Java's member, which reads both answers on one connection, in order."""
    broker.skip_on(
        "tansu",
        "noida",
        reason="the cooperative rule needs the JoinGroup barrier (see the test above)",
    )
    topic = await new_topic(partitions=PARTITIONS)
    tps = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    group = f"coop-{uuid.uuid4().hex[:8]}"
    writer = Writer(kafka_bootstrap, topic)
    async with FaultProxy(broker.bootstrap) as proxy:
        a = Member(proxy.bootstrap, topic, group, 6000)
        b = Member(proxy.bootstrap, topic, group, 6000)
        state = lambda: [sorted(m.assignment()) for m in (a, b)]  # noqa: E731
        try:
            await writer.start()
            await a.start()
            await wait_until(lambda: a.assignment() == tps, "every partition for a", state)
            # every JoinGroup answer from now on comes 1.5 s late; a keeps committing meanwhile
            late = proxy.add(Rule(API.JOIN_GROUP, "delay", seconds=1.5, times=-1))
            t_join = time.monotonic()
            await b.start()
            await wait_until(
                lambda: split([a.assignment(), b.assignment()], tps) and bool(b.assignment()),
                "a split",
                state,
            )
            assert late.hits >= 2
            assert a.listener.since(t_join, "lost") == set(), a.listener.events
            kept = {tp.partition for tp in a.assignment()}
            await writer.stop()
            reads: dict[tuple[int, int], int] = {}
            for m in (a, b):
                for k, n in m.reads.items():
                    reads[k] = reads.get(k, 0) + n
            twice = {k: n for k, n in reads.items() if n > 1 and k[0] in kept}
            assert not twice, f"re-read on a partition a kept: {twice}"
        finally:
            await writer.stop()
            for m in (a, b):
                await m.stop()


async def test_a_commit_refused_as_rebalancing_raises_rebalance_in_progress_like_java(
    broker: Any, new_topic: Any
) -> None:
    """A commit the coordinator refuses with REBALANCE_IN_PROGRESS (the group is between its
    JoinGroup and SyncGroup answers) does not mean the partitions moved: Java's consumer raises
    the retriable RebalanceInProgressException, rejoins and keeps them. Ours raises
    RebalanceInProgressError, a CommitFailedError subclass (aiokafka-style ``except`` clauses
    still catch it), and keeps consuming the same partitions; later commits go through. The
    same fault (the first OffsetCommit answer rewritten) on both clients, each through its own
    proxy in front of the same Apache Kafka."""
    broker.skip_on("tansu", "noida", reason="the Java client's group runs on Apache Kafka")
    if unavailable_reason():
        pytest.skip(unavailable_reason())
    topic = await new_topic(partitions=PARTITIONS)
    tps = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    writer = Writer(broker.bootstrap, topic)
    async with FaultProxy(broker.bootstrap) as pj, FaultProxy(broker.bootstrap) as pa:
        refused_java = pj.add(Rule(API.OFFSET_COMMIT, "error", error_code=27))
        refused_ours = pa.add(Rule(API.OFFSET_COMMIT, "error", error_code=27))
        java = GroupMember(
            pj.bootstrap, topic, f"coopr-j-{uuid.uuid4().hex[:8]}", assignor="cooperative-sticky"
        )
        ours = Member(pa.bootstrap, topic, f"coopr-a-{uuid.uuid4().hex[:8]}", 6000)
        try:
            await writer.start()
            java.start()
            await ours.start()
            for rule, who in ((refused_java, java.events), (refused_ours, ours.listener.events)):
                try:
                    await asyncio.wait_for(rule.done.wait(), SETTLE_S)
                except asyncio.TimeoutError:
                    raise AssertionError(  # noqa: B904 - the timeout says nothing more
                        f"no commit within {SETTLE_S}s: {who} {java.stderr[-3000:]}"
                    )
            await asyncio.to_thread(
                java.wait_for,
                lambda m: any(e["event"] == "commit_failed" for e in m.events),
                SETTLE_S,
                "the refused commit",
            )
            failed = [e for e in java.events if e["event"] == "commit_failed"]
            assert "RebalanceInProgressException" in failed[0]["error"], failed
            await wait_until(lambda: bool(ours.commit_errors), "the refused commit", lambda: 0)
            err = ours.commit_errors[0]
            assert isinstance(err, Errors.RebalanceInProgressError), repr(err)
            assert isinstance(err, Errors.CommitFailedError)
            # both keep every partition (nothing revoked or lost) and go on committing
            committed_java = len(java.records)
            await asyncio.to_thread(
                java.wait_for, lambda m: len(m.records) > committed_java + 20, SETTLE_S, "records"
            )
            assert java_tps(java) == tps and java_since(java, 0, "lost") == set()
            assert java_since(java, 0, "revoked") == set(), java.events
            # every partition's committed offset moves past what was read at the refusal
            read_then = {tp: 0 for tp in tps}
            for p, off in ours.reads:
                tp = TopicPartition(topic, p)
                read_then[tp] = max(read_then[tp], off)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + SETTLE_S
            while True:
                committed = {tp: await ours.consumer.committed(tp) for tp in tps}
                if all((committed[tp] or 0) > read_then[tp] for tp in tps):
                    break
                assert loop.time() < deadline, (committed, read_then, ours.commit_errors)
                await asyncio.sleep(0.2)
            assert ours.assignment() == tps
            assert not ours.listener.since(0, "lost") and not ours.listener.since(0, "revoked")
            # every refusal on either side said "rebalancing", none "your partitions are gone"
            # (ours may see two: the answer to a commit sent before the rejoin completed is
            # ILLEGAL_GENERATION; Java does not send one while it rejoins)
            failed = [e for e in java.events if e["event"] == "commit_failed"]
            assert all("RebalanceInProgressException" in e["error"] for e in failed), failed
            assert all(
                isinstance(e, Errors.RebalanceInProgressError) for e in ours.commit_errors
            ), ours.commit_errors
        finally:
            # everything is asserted above; its close() runs into its 10 s close timeout here
            java.stop(timeout=3, check=False)
            await writer.stop()
            await ours.stop()
