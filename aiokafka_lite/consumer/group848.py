"""Consumer group membership over the KIP-848 consumer protocol (``group_protocol="consumer"``).

:class:`ConsumerGroupMember` is the consumer's driver of this protocol, made of parts it USES
(no base class): ONE request, ConsumerGroupHeartbeat, replaces the classic JoinGroup /
SyncGroup / Heartbeat / LeaveGroup; the broker computes the assignment (its ``uniform`` or
``range`` assignor) and hands every member its target assignment, one member at a time,
without a stop-the-world rebalance.

* the member's state, epoch, target and the heartbeat's contents: the sans-I/O
  :class:`~aiokafka_lite.membership.consumer.ConsumerMachine` (its transition table:
  ``CONSUMER_TRANSITIONS``; DESIGN.md draws it);
* the heartbeat loop, its timing, retries, the max poll interval and the leave: the
  :class:`~aiokafka_lite.membership.MemberShell` driving that machine;
* commits, committed offsets, auto commit and initial positions: a
  :class:`~.offsets.GroupOffsets`; the revoke steps (pause, commit, ``on_partitions_revoked``)
  and listener calls: a :class:`~.member.Reconciler` (both shared with the classic driver).

This class keeps the main task: it tells the machine the subscription, and reconciles each new
target (:meth:`_reconcile_target`): names resolved from the metadata (unknown topic ids wait
and refresh it), revoke first (paused, auto commit, ``on_partitions_revoked``), then assign
(``on_partitions_assigned``); the next heartbeat acknowledges by sending what it owns. A
fenced member (FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID) gives everything up through
``on_partitions_lost`` (``on_partitions_revoked`` when the listener has none) and joins again
with epoch 0, keeping its member id.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from aiokafka_lite import errors as Errors
from aiokafka_lite._supervise import Supervisor
from aiokafka_lite.errors import RetryAction, retry_action
from aiokafka_lite.hooks import HookSet
from aiokafka_lite.membership import MemberShell, new_member_id
from aiokafka_lite.membership.consumer import (
    CONSUMER_PROTOCOL_NOT_SUPPORTED,
    ConsumerMachine,
    Owned,
)
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

from .assignors import RoundRobinPartitionAssignor
from .group import ClassicCoordinator
from .member import Reconciler
from .offsets import GroupOffsets
from .subscription import SubscriptionState

__all__ = [
    "ConsumerGroupMember",
    "CONSUMER_PROTOCOL_NOT_SUPPORTED",
    "group_protocol_args",
    "new_member_id",
]

log = logging.getLogger(__name__)

_NEXT_EPOCH = (RetryAction.REFRESH_EPOCH, RetryAction.REJOIN)

T = TypeVar("T")


class _StaleEpochCommit(Errors.CommitFailedError):
    """A commit refused for a stale member epoch (the automatic commits retry it)."""


class ConsumerGroupMember:
    """A consumer's group membership over the KIP-848 consumer protocol (the consumer's
    :class:`~.member.Coordinator` interface: ``generation`` is the member epoch)."""

    def __init__(
        self,
        client: Any,
        subscriptions: SubscriptionState,
        *,
        group_id: str | None,
        group_instance_id: str | None = None,
        server_assignor: str | None = None,
        client_rack: str | None = None,
        heartbeat_interval_ms: int = 3000,
        max_poll_interval_ms: int = 300000,
        retry_backoff_ms: int = 100,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        exclude_internal_topics: bool = True,
        isolation_level: str = "read_uncommitted",
        hooks: HookSet | None = None,
        supervisor: Supervisor | None = None,
        **_classic_only: Any,  # assignors, session and rebalance timeouts: the broker's
    ) -> None:
        self._client = client
        self._subs = subscriptions
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self._backoff = retry_backoff_ms / 1000
        self._timeouts = client.timeouts  # stop()'s and a commit retry's budget: retry_ms
        self._exclude_internal = exclude_internal_topics
        sup = supervisor or Supervisor("consumer", retry_backoff_ms, log)
        self._g_main = sup.guard("group coordination", log)
        #: the member's state, epoch, target and heartbeat contents (sans-I/O)
        self.machine = ConsumerMachine(
            group_id or "",
            new_member_id(),
            instance_id=group_instance_id,
            rack_id=client_rack,
            server_assignor=server_assignor,
            # as Java: the coordinator may wait this long for a member to revoke
            rebalance_timeout_ms=max_poll_interval_ms,
            interval_s=heartbeat_interval_ms / 1000,  # until the broker says
        )
        #: heartbeats, their timing and retries, the max poll interval, the leave
        self.shell = MemberShell(
            client,
            self.machine,
            sup,
            on_assignment=self._wake_main,
            on_fatal=self._take_fatal,
            max_poll_interval_ms=max_poll_interval_ms,
            logger=log,
        )
        #: commits, committed offsets, auto commit, initial positions
        self.offsets = GroupOffsets.of(client, subscriptions, self, locals())
        #: the revoke steps and listener calls
        self._reconcile = Reconciler(
            subscriptions, group_id, hooks, self._commit_positions, self.offsets.auto_commit
        )
        self.fatal: BaseException | None = None
        #: set once the first assignment is reconciled, or a fatal error is stored
        self.assigned_once = asyncio.Event()
        self.rebalances = 0
        self._unresolved: frozenset[Any] = frozenset()
        self._told: tuple[Any, ...] | None = None  # the subscription the machine was told
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        subscriptions.add_waker(self._wake.set)
        client.cluster.add_listener(self._on_metadata)

    # -- what the consumer and GroupOffsets read -------------------------------------------
    @property
    def member_id(self) -> str:
        """This member's id (made by the client, kept for its lifetime)."""
        return self.machine.member_id

    @property
    def generation(self) -> int:
        """The member epoch (-1: not in the group), the machine's."""
        return self.machine.epoch

    @property
    def state(self) -> str:
        """The member state's name (``ConsumerState``)."""
        return self.machine.state.value

    @property
    def uses_group(self) -> bool:
        """True when partitions come from group membership."""
        return self.group_id is not None and self._subs.subscribed and not self._subs.user_assigned

    @property
    def rebalancing(self) -> bool:
        """Never refuses a commit on its own: the broker checks the member epoch."""
        return False

    def membership_lost(self, code: int, sent_generation: int | None = None) -> bool | None:
        """A commit answered UNKNOWN_MEMBER_ID (or another membership error): as Java's
        commit manager, the commit fails (CommitFailedError) and the membership is left to
        the heartbeats, which learn of a real fence from the broker."""
        log.info(
            "group %s: a commit answered %s; the heartbeat decides the membership",
            self.group_id,
            Errors.for_code(code).__name__,
        )
        return None

    def fetch_member(self) -> tuple[str | None, int]:
        """An OffsetFetch carries the member id and epoch while in the group."""
        return (self.member_id, self.generation) if self.generation > 0 else (None, -1)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Start the main task and the member shell (heartbeating once subscribed)."""
        if self._task is None:
            self._task = asyncio.create_task(
                self._g_main.run(self._run, self.machine.resync), name="aiokafka_lite-coordinator"
            )
            if self.group_id is not None:
                self.shell.start()

    def poll(self) -> None:
        """Record a poll (max_poll_interval_ms; a member that left for lack of polls joins
        again); raise a fatal group error if one happened."""
        self.shell.polled()
        if self.fatal is not None:
            exc, self.fatal = self.fatal, None
            raise exc

    def abandon(self) -> None:
        """Cancel the tasks at once without committing or leaving."""
        self._closed = True
        if self._task is not None and not self._task.get_loop().is_closed():
            self._task.cancel()
            self.shell.cancel()

    async def close(self, leave: str = "default") -> None:
        """Commit (auto commit), leave with epoch -1 (-2 for a static member, so its restart
        keeps the assignment; ``leave``: KIP-1092's operation, see ``ConsumerMachine.leave``)
        and stop the tasks, all within one request_timeout_ms budget (the leave gets the rest:
        the session is the broker's)."""
        if self._closed:
            return
        self._closed = True
        self._client.cluster.remove_listener(self._on_metadata)
        self._subs.remove_waker(self._wake.set)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeouts.retry_ms / 1000
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task], timeout=min(5.0, self._timeouts.retry_ms / 1000))
        if self.offsets.auto_commit:
            try:
                await asyncio.wait_for(self._commit_positions(), deadline - loop.time())
            except (Errors.KafkaError, asyncio.TimeoutError) as exc:
                log.warning(
                    "group %s: the last auto commit at stop() failed: %r", self.group_id, exc
                )
        # also with the coordinator unknown or dead: the leave looks it up again
        await self.shell.leave(max(0.0, deadline - loop.time()), leave)

    async def commit_through(
        self, client: Any, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """After :meth:`close`: commit ``offsets`` through ``client`` from outside the group."""
        if not self._closed:
            raise Errors.IllegalStateError("commit_through() is for a closed coordinator")
        await self.offsets.commit_through(client, offsets)

    def _wake_main(self) -> None:
        self._wake.set()

    def _take_fatal(self) -> None:
        """The shell met a fatal error: the next poll raises it once; the heartbeats go on."""
        self.fatal, self.shell.error = self.shell.error, None
        self.assigned_once.set()

    # -- the main task ---------------------------------------------------------------------
    async def _run(self) -> None:
        while not self._closed:
            self._wake.clear()
            try:
                await self._step()
            except Errors.KafkaError as exc:
                if retry_action(exc).retriable:
                    log.info("group coordination: %r; retrying", exc)
                    await asyncio.sleep(self._backoff)
                    continue
                log.error("group coordination failed: %r", exc)
                self.fatal = exc
                self.assigned_once.set()
                await asyncio.sleep(self._backoff * 10)
                continue
            self._g_main.ok()
            if self.uses_group and self._needs_reconcile():
                await asyncio.sleep(0)
                continue
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.offsets.until_auto_commit(1.0))

    async def _step(self) -> None:
        self._track_topics()
        if self.uses_group and self._needs_reconcile():
            await self._reconcile_target()
        if self._subs.missing_positions():
            await self._init_positions()
        if self.offsets.auto_commit_due():
            try:
                await self._commit_positions()
            except Errors.CommitFailedError as exc:
                log.warning("auto commit failed: %s", exc)

    def _track_topics(self) -> None:
        """The metadata follows the subscription; the machine is told of each change (the
        shell heartbeats at once, joins on the first subscription, leaves on none)."""
        subs = self._subs
        if self.uses_group:
            if subs.pattern is not None or subs.broker_pattern is not None:
                # a pattern's matches / assigned topic ids are named by all topics
                self._client.need_all_topics = True
            else:
                self._client.set_topics(sorted(subs.topics))
        told = (self.uses_group, subs.subscription_id, subs.topics, subs.broker_pattern)
        if told != self._told:
            self._told = told
            if not self.uses_group:
                self.machine.subscribe(None)
            elif subs.broker_pattern is not None:
                self.machine.subscribe(None, subs.broker_pattern)
            else:
                self.machine.subscribe(subs.topics)
            self.shell.subscription_changed()

    def _on_metadata(self, cluster: Any) -> None:
        subs = self._subs
        if subs.pattern is not None:  # a str pattern is matched here, on the client
            subs.match_pattern(cluster.topics(self._exclude_internal))
        if (
            self._unresolved
            or (
                self.uses_group,
                subs.subscription_id,
                subs.topics,
                subs.broker_pattern,
            )
            != self._told
        ):
            self._wake.set()

    # -- commits ---------------------------------------------------------------------------
    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """OffsetCommit with the member epoch. As the Java client's commitSync, a stale epoch
        fails with CommitFailedError (the automatic commits retry with the next epoch); a
        fenced epoch or an unknown member too (not retried: the partitions may be gone)."""
        await self.commit_offsets(self._subs.assignment, offsets)

    async def commit_offsets(
        self, assignment: Any, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """aiokafka's name and signature for :meth:`commit` (through
        ``GroupOffsets.commit_offsets``, which tracers patch)."""
        try:
            await self.offsets.commit_offsets(assignment, offsets)
        except Errors.KafkaError as exc:
            if retry_action(exc) is not RetryAction.REFRESH_EPOCH:
                raise
            raise _StaleEpochCommit(
                f"Commit cannot be completed: the member epoch {self.generation} is stale ({exc})"
            ) from None

    async def _commit_positions(self) -> None:
        """Auto commit (interval, before a revocation, at close): a stale member epoch is
        retried with the epoch of the next heartbeat, within request_timeout_ms (as Java)."""
        await self._with_current_epoch(self.offsets.commit_positions)

    async def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """OffsetFetch with the member epoch; a stale epoch is retried as the auto commit."""
        tps = list(partitions)
        return await self._with_current_epoch(lambda: self.offsets.committed(tps))

    async def _init_positions(self) -> None:
        await self.offsets.init_positions(self.committed)

    async def _with_current_epoch(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call()``, again after the next heartbeat answer while it fails for a stale member
        epoch (until request_timeout_ms; not once closed or out of the group)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeouts.retry_ms / 1000
        answered = self.shell.answered
        while True:
            answered.clear()
            try:
                return await call()
            except Errors.KafkaError as exc:
                # a stale epoch; OffsetFetch also waits out a fence (the heartbeat rejoins)
                action = retry_action(exc)
                if not isinstance(exc, _StaleEpochCommit) and action not in _NEXT_EPOCH:
                    raise
                if self._closed or self.generation <= 0 or loop.time() >= deadline:
                    raise
            self.shell.wake()  # a heartbeat now: its answer carries the current epoch
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(answered.wait(), deadline - loop.time())

    # -- reconciliation (main task) --------------------------------------------------------
    def _needs_reconcile(self) -> bool:
        """True when the main task has reconciling to do now."""
        m = self.machine
        if m.lost_pending:
            return True
        target = m.target
        if target is None or m.epoch <= 0 or m.stale:
            return False
        return target is not m.reconciled or self._resolve(target)[0] != set(self._subs.assignment)

    def _resolve(self, target: Owned) -> tuple[set[TopicPartition], Owned, frozenset[Any]]:
        """The target's partitions by name, the resolved part by id, and the unknown ids."""
        cluster = self._client.cluster
        names = {}
        for topic in cluster.topics(False):
            tid = cluster.topic_id(topic)
            if tid is not None:
                names[tid] = topic
        tps: set[TopicPartition] = set()
        resolved: Owned = {}
        unknown = []
        for tid, parts in target.items():
            name = names.get(tid)
            if name is None:
                unknown.append(tid)
                continue
            resolved[tid] = parts
            tps.update(TopicPartition(name, p) for p in parts)
        return tps, resolved, frozenset(unknown)

    async def _reconcile_target(self) -> None:
        subs = self._subs
        m = self.machine
        if m.lost_pending:
            await self._give_up_partitions()
            return
        target = m.target
        if target is None:
            return
        wanted, _, unknown = self._resolve(target)
        self._unresolved = unknown
        if unknown:  # their names come with the next metadata answer (this wakes us again)
            log.info("group %s: waiting for the metadata of topic ids %s", self.group_id, unknown)
            self._client.request_update()
        m.reconciling()
        owned = set(subs.assignment)
        revoked = owned - wanted
        added = wanted - owned
        if revoked:
            # as Java (and the cooperative classic member, the same steps): paused, so nothing
            # more of them is handed out and the commit is where the next owner starts; then
            # on_partitions_revoked
            await self._reconcile.revoke_paused(revoked)
            subs.revoke_to(set(subs.assignment) - revoked)
            if m.lost_pending or m.target is not target:
                self._ack()
                return  # fenced meanwhile, or a newer target: start over
        subs.assign_from_subscription(set(subs.assignment) | added)
        self.offsets.keep_only(wanted)
        self.rebalances += 1
        log.info(
            "group %s epoch %s: assigned %s (revoked %s)",
            self.group_id,
            self.generation,
            sorted(added),
            sorted(revoked),
        )
        await self._reconcile.assigned(set(added))
        m.reconciled = target
        self._ack()
        self.assigned_once.set()

    def _ack(self) -> None:
        """Owned partitions changed: the next heartbeat (sent now) acknowledges them."""
        owned: dict[Any, set[int]] = {}
        for tp in self._subs.assignment:
            owned.setdefault(self._client.cluster.topic_id(tp.topic), set()).add(tp.partition)
        self.machine.owns({tid: frozenset(ps) for tid, ps in owned.items() if tid is not None})
        self.shell.wake()

    async def _give_up_partitions(self) -> None:
        """Fenced or stale: the partitions are lost (another member may own them already)."""
        subs = self._subs
        lost = set(subs.assignment)
        if lost:
            await self._reconcile.lost(lost)
            subs.revoke_to(())
        self.offsets.keep_only(())
        self.machine.gave_up()
        self.shell.wake()


#: the consumer's defaults of the settings the consumer protocol has no use for
_CLASSIC_ONLY_DEFAULTS = {
    "session_timeout_ms": 10000,
    "heartbeat_interval_ms": 3000,
    "partition_assignment_strategy": (RoundRobinPartitionAssignor,),
}
SERVER_ASSIGNORS = ("uniform", "range")


def group_protocol_args(
    group_protocol: str,
    group_remote_assignor: str | None,
    client_rack: str | None,
    *,
    group_id: str | None,
    **classic_only: Any,
) -> tuple[type[ClassicCoordinator] | type[ConsumerGroupMember], dict[str, Any]]:
    """The consumer's coordinator class for ``group_protocol`` and its extra arguments.

    ``"consumer"`` refuses the settings the broker owns under KIP-848 (session timeout and
    heartbeat interval are the group's broker configs, the assignor runs on the broker), as the
    Java client refuses them when they are set: a value other than the default is an error.
    Without a ``group_id`` there is no membership protocol: the classic driver assigns every
    subscribed partition (after the same checks).
    """
    if group_protocol == "classic":
        if group_remote_assignor is not None:
            raise ValueError("group_remote_assignor needs group_protocol='consumer'")
        return ClassicCoordinator, {}
    if group_protocol != "consumer":
        raise ValueError(f"group_protocol must be 'classic' or 'consumer', got {group_protocol!r}")
    refused = []
    for name, value in classic_only.items():
        default = _CLASSIC_ONLY_DEFAULTS[name]
        if isinstance(value, (list, tuple)):
            value = tuple(value)
        if value != default:
            refused.append(name)
    if refused:
        raise ValueError(
            f"{', '.join(refused)} cannot be set when group_protocol='consumer': the broker "
            "decides them (group.consumer.session.timeout.ms, "
            "group.consumer.heartbeat.interval.ms, group_remote_assignor)"
        )
    if group_remote_assignor is not None and (
        not isinstance(group_remote_assignor, str) or not group_remote_assignor
    ):
        raise ValueError(f"group_remote_assignor must be a name, got {group_remote_assignor!r}")
    if group_id is None:
        return ClassicCoordinator, {}
    return ConsumerGroupMember, {
        "server_assignor": group_remote_assignor,
        "client_rack": client_rack,
    }
