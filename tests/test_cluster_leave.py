"""``stop()`` of a group member right after its group coordinator died (issue 30).

Two members share a group on the 3-node Apache Kafka cluster; the group coordinator is killed
(``kill -9``) and one member is stopped at once. The stopped member has to look the coordinator
up again and leave through the new one within its close bound (``request_timeout_ms``), so its
partitions go to the other member in seconds instead of at the end of its session (45 s: the
broker's ``group.consumer.session.timeout.ms`` / ``group.share.session.timeout.ms`` and the Java
client's ``session.timeout.ms``, used here for the classic members too).

For the classic and the consumer protocols two groups of ours go through the same kill: in one
the stopped member has committed everything it read (the interval commits), so its stop() has
only the leave to send (the case that failed: the leave was skipped while the coordinator was
unknown); in the other its only commit is the one at stop(), which has to reach the new
coordinator too (checked: the survivor's committed offsets).

Nobody can leave before the cluster has a new coordinator: the controller fences a killed broker
after ``broker.session.timeout.ms`` (9 s by default, kept), then the group moves. So the test
measures when that happened (a FindCoordinator of its own) and asserts the takeover at most 10 s
after it (before the fix: ~45 s after it, 54 s after the kill); the times from the kill are
reported too.

For the classic and the consumer (KIP-848) protocols the Java ``KafkaConsumer`` 4.4 is stopped
the same way, in a second group coordinated by the same node and killed by the same kill, with
its defaults (auto commit on, ``close()``'s 30 s): both takeover times are printed and recorded
(``pytest -s``); ours is asserted, Java's reported. The surviving member is ours in both
groups, so the times compare the stopped members. (Java 4.4's KIP-848 member does not retry its
leave when the coordinator is unknown: its partitions wait for the session.) For share groups the
Java ``KafkaShareConsumer`` 4.4 is closed the same way (``close()``'s default 30 s) beside one of
ours, in a second share group coordinated by the killed node.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import pytest
from cluster_helpers import create_topic, new_group, wait_until
from share_helpers import produce_values

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaShareConsumer
from aiokafka_lite import errors as Errors
from aiokafka_lite.admin import AIOKafkaAdminClient
from aiokafka_lite.structs import TopicPartition

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(240)]

#: the stopped member's close bound (its request_timeout_ms); the coordinator moves within it
CLOSE_MS = 20000
#: the session of the classic members (Java's default), as the broker's for the other protocols
SESSION_MS = 45000
#: what the test asserts: the stopped member's partitions are the other's within this, counted
#: from the coordinator's move
TAKEOVER_S = 10.0
#: how long the share test watches the Java member's partitions move (reported, not asserted)
JAVA_WATCH_S = 15.0
#: readiness (set-up) bounds, apart from what is asserted
READY_S = 60.0
PARTITIONS = 2
#: records per partition the stopped member reads before the kill (then commits at stop())
RECORDS = 5


def _report(record_property: Callable[[str, object], None], name: str, seconds: float) -> None:
    print(f"\n[cluster] {name}: {seconds:.2f} s")
    record_property(name, f"{seconds:.3f}")


async def _group_at(bootstrap: str, node: int | None = None) -> tuple[str, int]:
    """A fresh group id coordinated by ``node`` (any node when None)."""
    for _ in range(60):
        group, coordinator = await new_group(bootstrap)
        if node is None or coordinator == node:
            return group, coordinator
    raise AssertionError(f"no group id coordinated by node {node} in 60 tries")


def _consumer(
    bootstrap: str, topic: str, group: str, protocol: str, **extra: Any
) -> AIOKafkaConsumer:
    if protocol == "classic":
        extra["session_timeout_ms"] = SESSION_MS
    return AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        group_protocol=protocol,
        auto_offset_reset="earliest",
        request_timeout_ms=CLOSE_MS,
        **extra,
    )


def _java_member(bootstrap: str, topic: str, group: str, protocol: str) -> Any:
    """The Java KafkaConsumer with its defaults where they matter here: auto commit on,
    ``close()``'s 30 s, the classic session 45 s."""
    from java_oracle import GroupMember

    java = GroupMember(
        bootstrap,
        topic,
        group,
        assignor="roundrobin",
        run_ms=200_000,
        session_timeout_ms=SESSION_MS if protocol == "classic" else None,
    )
    if protocol == "consumer":
        java.command = "group-member-consumer"
        java.args = [
            *("--bootstrap", bootstrap, "--topic", topic, "--group", group),
            *("--run-ms", "200000", "--from", "beginning"),
        ]
    java.args += ["--auto-commit", "true", "--close-ms", "30000"]
    return java


async def _poll(consumer: Any) -> None:
    """The application's loop: poll and drop the records (the group is the subject)."""
    while True:
        await consumer.getmany(timeout_ms=200)


class _Ours:
    """Two aiokafka_lite members of one group, each polling in a task."""

    def __init__(self, members: list[Any]) -> None:
        self.members = members
        self.polls: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        for m in self.members:
            await m.start()
        self.polls = [asyncio.create_task(_poll(m)) for m in self.members]

    async def split(self, tps: set[TopicPartition]) -> bool:
        a, b = (m.assignment() for m in self.members)
        return bool(a) and bool(b) and not a & b and a | b == tps

    async def close(self) -> None:
        for task in self.polls:
            task.cancel()
        await asyncio.gather(*self.polls, return_exceptions=True)
        for m in self.members:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(m.stop(), CLOSE_MS / 1000 + 10)


class _Move:
    """When the group's coordinator moved off the killed node: a FindCoordinator of an admin
    client of its own (the members' coordinator caches stay theirs) names a live node. The
    controller fences a killed broker after ``broker.session.timeout.ms`` (9 s), so no member
    can leave (nor the others rebalance) before that; the takeover is asserted from here."""

    def __init__(self, bootstrap: str, group: str, dead: int) -> None:
        self.admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
        self.group = group
        self.dead = dead
        self.task: asyncio.Task[float] | None = None

    async def start(self) -> None:
        await self.admin.start()

    def watch(self) -> None:
        self.task = asyncio.create_task(self._watch())

    async def _watch(self) -> float:
        while True:
            with contextlib.suppress(Errors.KafkaError):
                if await self.admin.find_coordinator(self.group) != self.dead:
                    return time.monotonic()
            await asyncio.sleep(0.1)

    async def moved_at(self) -> float:
        assert self.task is not None
        return await asyncio.wait_for(self.task, READY_S)

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        await self.admin.close()


def _owns_all(survivor: Any, tps: set[TopicPartition]) -> asyncio.Task[float]:
    """When ``survivor`` owns ``tps`` (watched from now on; bounded by the session: a member
    that does not leave is dropped by its coordinator after it)."""

    async def watch() -> float:
        await wait_until(
            "the survivor owns every partition",
            lambda: survivor.assignment() == tps,
            SESSION_MS / 1000 + READY_S,
        )
        return time.monotonic()

    return asyncio.create_task(watch())


async def _stop_and_measure(
    stopped: Any, survivor: Any, tps: set[TopicPartition]
) -> tuple[float, float]:
    """Stop ``stopped`` (ours) now; (stop()'s duration, when ``survivor`` owned ``tps``)."""
    took_over = _owns_all(survivor, tps)
    started = time.monotonic()
    await asyncio.wait_for(stopped.stop(), CLOSE_MS / 1000 + 10)
    stop_s = time.monotonic() - started
    return stop_s, await took_over


def _check_and_report(
    record_property: Callable[[str, object], None],
    name: str,
    killed_at: float,
    moved_at: float,
    took_over_at: float,
) -> float:
    """Report the times from the kill and from the coordinator's move; the latter."""
    _report(record_property, f"{name}_coordinator_moved_s", moved_at - killed_at)
    _report(record_property, f"{name}_takeover_after_kill_s", took_over_at - killed_at)
    after_move = took_over_at - moved_at
    _report(record_property, f"{name}_takeover_after_move_s", after_move)
    return after_move


async def _read_to(
    stopped: Any, ends: dict[TopicPartition, int], committed: bool, what: str
) -> None:
    """Until ``stopped`` read its partitions to ``ends`` (with ``committed``: and committed)."""

    async def done() -> bool:
        for tp in stopped.assignment():
            if await stopped.position(tp) != ends[tp]:
                return False
            if committed and await stopped.committed(tp) != ends[tp]:
                return False
        return True

    try:
        await wait_until(what, done, READY_S)
    except AssertionError as exc:
        state = {
            tp.partition: (await stopped.position(tp), await stopped.committed(tp), ends[tp])
            for tp in stopped.assignment()
        }
        raise AssertionError(f"{exc}: partition -> (position, committed, end) {state}") from None


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_stop_after_a_coordinator_kill_hands_the_partitions_over(
    apache_cluster: Any, record_property: Callable[[str, object], None], protocol: str
) -> None:
    """Three groups coordinated by the node killed, one member of each stopped at once:
    ``idle`` (ours; everything it read is committed already, so stop() has only the leave to
    send: before the fix it skipped it), ``busy`` (ours; its only commit is the one at stop(),
    which has to reach the new coordinator too) and the Java member's group."""
    from java_oracle import java_available

    cluster = apache_cluster.process
    bootstrap = apache_cluster.bootstrap
    group, coordinator = await _group_at(bootstrap)
    busy_group = (await _group_at(bootstrap, coordinator))[0]
    with_java = java_available()
    java_group = (await _group_at(bootstrap, coordinator))[0] if with_java else None
    # the topic's leaders are the other nodes: the fetches go on through the kill
    topic = await create_topic(bootstrap, PARTITIONS, leader=coordinator % 3 + 1)
    tps = {TopicPartition(topic, p) for p in range(PARTITIONS)}

    idle = _Ours(
        [
            _consumer(bootstrap, topic, group, protocol, auto_commit_interval_ms=500),
            _consumer(bootstrap, topic, group, protocol),
        ]
    )
    busy = _Ours(
        [
            _consumer(bootstrap, topic, busy_group, protocol, auto_commit_interval_ms=600_000),
            _consumer(bootstrap, topic, busy_group, protocol),
        ]
    )
    move = _Move(bootstrap, group, coordinator)
    java: Any = None
    java_took_over: asyncio.Task[float] | None = None
    java_survivor: AIOKafkaConsumer | None = None
    java_poll: asyncio.Task[None] | None = None
    try:
        await idle.start()
        await busy.start()
        if java_group is not None:
            java = _java_member(bootstrap, topic, java_group, protocol)
            java.start()
            java_survivor = _consumer(bootstrap, topic, java_group, protocol)
            await java_survivor.start()
            java_poll = asyncio.create_task(_poll(java_survivor))
        await wait_until("idle's members share the partitions", lambda: idle.split(tps), READY_S)
        await wait_until("busy's members share the partitions", lambda: busy.split(tps), READY_S)
        for p in range(PARTITIONS):
            await produce_values(bootstrap, topic, [b"v"] * RECORDS, partition=p)
        ends = {tp: RECORDS for tp in tps}  # a fresh topic
        await _read_to(idle.members[0], ends, True, "idle's member read and committed")
        await _read_to(busy.members[0], ends, False, "busy's member read")
        busy_mine = busy.members[0].assignment()
        if java is not None and java_survivor is not None:
            survivor = java_survivor
            await wait_until(
                "the Java member and ours share the partitions",
                lambda: len(java.assigned()) == 1 and len(survivor.assignment()) == 1,
                READY_S,
            )

        await move.start()
        await asyncio.to_thread(cluster.node(coordinator).kill)
        killed_at = time.monotonic()
        move.watch()
        java_stop: asyncio.Future[Any] | None = None
        java_stopped: list[float] = []
        for pair in (idle, busy):
            pair.polls[0].cancel()
            await asyncio.gather(pair.polls[0], return_exceptions=True)
        if java is not None and java_survivor is not None:
            java_took_over = _owns_all(java_survivor, tps)
            java_stop = asyncio.ensure_future(asyncio.to_thread(java.stop, 60.0))
            java_stop.add_done_callback(lambda _: java_stopped.append(time.monotonic()))
        (stop_s, took_over_at), (busy_stop_s, busy_took_over_at) = await asyncio.gather(
            _stop_and_measure(idle.members[0], idle.members[1], tps),
            _stop_and_measure(busy.members[0], busy.members[1], tps),
        )
        moved_at = await move.moved_at()
        _report(record_property, f"{protocol}_ours_stop_s", stop_s)
        takeover_s = _check_and_report(
            record_property, f"{protocol}_ours", killed_at, moved_at, took_over_at
        )
        _report(record_property, f"{protocol}_ours_committing_stop_s", busy_stop_s)
        busy_takeover_s = _check_and_report(
            record_property, f"{protocol}_ours_committing", killed_at, moved_at, busy_took_over_at
        )
        if java_stop is not None and java_took_over is not None:
            _check_and_report(
                record_property, f"{protocol}_java", killed_at, moved_at, await java_took_over
            )
            await java_stop
            # the JVM's exit included (close() itself is a bit shorter)
            _report(record_property, f"{protocol}_java_stop_s", java_stopped[0] - killed_at)
        for took in (stop_s, busy_stop_s):
            assert took <= CLOSE_MS / 1000 + 2, f"stop() took {took:.1f} s"
        for took in (takeover_s, busy_takeover_s):
            assert took <= TAKEOVER_S, f"the partitions moved {took:.1f} s after the coordinator"
        # the commit at stop() went to the new coordinator: busy's survivor goes on after the read
        survivor = busy.members[1]
        committed = {tp: await survivor.committed(tp) for tp in busy_mine}
        assert committed == {tp: ends[tp] for tp in busy_mine}
    finally:
        if java_took_over is not None:
            java_took_over.cancel()
        if java_poll is not None:
            java_poll.cancel()
            await asyncio.gather(java_poll, return_exceptions=True)
        if java_survivor is not None:
            await java_survivor.stop()
        if java is not None and java.running:
            await asyncio.to_thread(java.stop, 60.0, check=False)
        await idle.close()
        await busy.close()
        await move.close()
        await asyncio.to_thread(cluster.bring_back)


async def test_share_stop_after_a_coordinator_kill_hands_the_partitions_over(
    apache_cluster: Any, record_property: Callable[[str, object], None]
) -> None:
    """Two share groups coordinated by the node killed: in ours, one of our two members is
    stopped at once (asserted); in the other, the Java ``KafkaShareConsumer`` 4.4 beside one of
    ours is closed at once with its default close bound (30 s) (reported)."""
    from java_oracle import ShareScript, java_available
    from share_helpers import configure_group, need_share_groups

    await need_share_groups(apache_cluster)
    cluster = apache_cluster.process
    bootstrap = apache_cluster.bootstrap
    group, coordinator = await _group_at(bootstrap)
    java_group = (await _group_at(bootstrap, coordinator))[0] if java_available() else None
    topic = await create_topic(bootstrap, PARTITIONS, leader=coordinator % 3 + 1)
    for g in (group, java_group):
        if g is not None:
            await configure_group(bootstrap, g, share_auto_offset_reset="earliest")
    tps = {TopicPartition(topic, p) for p in range(PARTITIONS)}

    def member(g: str) -> AIOKafkaShareConsumer:
        return AIOKafkaShareConsumer(
            topic, bootstrap_servers=bootstrap, group_id=g, request_timeout_ms=CLOSE_MS
        )

    ours = _Ours([member(group), member(group)])
    move = _Move(bootstrap, group, coordinator)
    java: ShareScript | None = None
    java_side: _Ours | None = None
    java_took_over: asyncio.Task[float] | None = None
    try:
        await ours.start()
        if java_group is not None:
            java = ShareScript(bootstrap, java_group)
            await asyncio.to_thread(java.start)
            await asyncio.to_thread(java.do, f"subscribe {topic}")
            java_side = _Ours([member(java_group)])
            await java_side.start()
        await wait_until("the two members share the partitions", lambda: ours.split(tps), READY_S)
        if java is not None and java_side is not None:
            survivor = java_side.members[0]

            async def java_holds_one() -> bool:
                assert java is not None
                await asyncio.to_thread(java.do, "poll 500")  # joins at its first poll
                return len(survivor.assignment()) == 1

            await wait_until(
                "the Java member and ours share the partitions", java_holds_one, READY_S
            )
        await move.start()
        await asyncio.to_thread(cluster.node(coordinator).kill)
        killed_at = time.monotonic()
        move.watch()
        java_close: asyncio.Future[Any] | None = None
        java_closed: list[float] = []
        if java is not None and java_side is not None:
            java_took_over = _owns_all(java_side.members[0], tps)
            java_close = asyncio.ensure_future(asyncio.to_thread(java.do, "close", 60.0))
            java_close.add_done_callback(lambda _: java_closed.append(time.monotonic()))
        ours.polls[0].cancel()
        await asyncio.gather(ours.polls[0], return_exceptions=True)
        stop_s, took_over_at = await _stop_and_measure(ours.members[0], ours.members[1], tps)
        moved_at = await move.moved_at()
        _report(record_property, "share_ours_stop_s", stop_s)
        takeover_s = _check_and_report(
            record_property, "share_ours", killed_at, moved_at, took_over_at
        )
        if java_close is not None and java_took_over is not None:
            # watched for JAVA_WATCH_S after the move only: measured (twice), Java's close() does
            # not retry its leave and the partitions wait for the 45 s session (55-57 s after
            # the kill), which this test need not sit through each run
            left = moved_at + JAVA_WATCH_S - time.monotonic()
            done, _ = await asyncio.wait([java_took_over], timeout=max(left, 0.1))
            if done:
                _check_and_report(
                    record_property, "share_java", killed_at, moved_at, java_took_over.result()
                )
            else:
                print(
                    f"\n[cluster] share_java: no takeover within {JAVA_WATCH_S:.0f} s of the move"
                )
                record_property("share_java_takeover_after_move_s", f">{JAVA_WATCH_S:.0f}")
            await java_close
            _report(record_property, "share_java_close_s", java_closed[0] - killed_at)
        assert stop_s <= CLOSE_MS / 1000 + 2, f"stop() took {stop_s:.1f} s"
        assert takeover_s <= TAKEOVER_S, (
            f"the partitions moved {takeover_s:.1f} s after the coordinator"
        )
    finally:
        if java_took_over is not None:
            java_took_over.cancel()
        if java_side is not None:
            await java_side.close()
        if java is not None and java.running:
            await asyncio.to_thread(java.stop, 60.0, check=False)
        await move.close()
        await ours.close()
        await asyncio.to_thread(cluster.bring_back)
