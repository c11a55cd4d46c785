"""Consumer group membership, offset commits and position initialisation.

One :class:`Coordinator` per consumer.  Its main task:

* with a ``group_id`` and a topic/pattern subscription: finds the coordinator, joins the group
  (JoinGroup, including KIP-394's member-id-required retry), runs the assignor when elected
  leader, SyncGroup, applies the assignment and calls the rebalance listener; the member shell
  (:class:`~aiokafka_lite.membership.MemberShell`, the heartbeat loop of every group protocol)
  keeps the membership alive between joins, asks for a rejoin on REBALANCE_IN_PROGRESS and
  friends, leaves for lack of polls and at ``stop()``;
* without a ``group_id`` but with a subscription: assigns itself every partition of the
  subscribed topics and follows metadata changes;
* for every assigned partition without a position: the committed offset (OffsetFetch) or,
  lacking one, a reset per ``auto_offset_reset``.

Group traffic goes over the client's ``"coordinator"`` connection group, so it never queues
behind a long-poll fetch.  Rebalance protocol (Java's rule): eager (everything is revoked before
a join) unless every assignor offered supports ``"cooperative"`` (KIP-429): then the member
joins keeping its partitions, revokes after SyncGroup only those it no longer has, rejoins at
once when it revoked any, and calls ``on_partitions_lost`` when its generation is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite._supervise import Supervisor
from aiokafka_lite.errors import retry_action
from aiokafka_lite.hooks import HookSet
from aiokafka_lite.membership import MemberShell, Revoke
from aiokafka_lite.membership.classic import ClassicState, CooperativeMachine, EagerMachine
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

from .assignors import COOPERATIVE, rebalance_protocol
from .classic import ClassicExchanges
from .member import Coordinator, Reconciler
from .offsets import GroupOffsets
from .subscription import SubscriptionState

__all__ = ["ClassicCoordinator", "Coordinator"]

log = logging.getLogger(__name__)


class ClassicCoordinator:
    """Classic group membership for one consumer; commits and position initialisation are its
    :class:`~.offsets.GroupOffsets`, the listener calls its :class:`~.member.Reconciler`."""

    def __init__(
        self,
        client: Any,
        subscriptions: SubscriptionState,
        *,
        group_id: str | None,
        group_instance_id: str | None = None,
        assignors: list[Any] | None = None,
        session_timeout_ms: int = 10000,
        rebalance_timeout_ms: int = 10000,
        heartbeat_interval_ms: int = 3000,
        max_poll_interval_ms: int = 300000,
        retry_backoff_ms: int = 100,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        exclude_internal_topics: bool = True,
        isolation_level: str = "read_uncommitted",
        hooks: HookSet | None = None,
        supervisor: Supervisor | None = None,
    ) -> None:
        self._client = client
        self._subs = subscriptions
        #: unexpected errors of the main and heartbeat tasks (_supervise): the consumer hands
        #: its fetcher's, so its next getmany()/getone() raises them once
        self._sup = supervisor or Supervisor("consumer", retry_backoff_ms, log)
        self._g_main = self._sup.guard("group coordination", log)
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self._assignors = assignors or []
        #: KIP-429: every assignor supports the cooperative protocol (else eager, unchanged)
        self.cooperative = rebalance_protocol(self._assignors) == COOPERATIVE
        #: the member's phase, id, generation, protocol and leader (sans-I/O; its own
        #: transition table per protocol)
        machine = CooperativeMachine if self.cooperative else EagerMachine
        self._machine = machine(
            group_id or "", instance_id=group_instance_id, interval_s=heartbeat_interval_ms / 1000
        )
        self._session_timeout_ms = session_timeout_ms
        self._rebalance_timeout_ms = rebalance_timeout_ms
        self._heartbeat_interval = heartbeat_interval_ms / 1000
        self._backoff = retry_backoff_ms / 1000
        self._timeouts = client.timeouts  # stop()'s budget: retry_ms
        self._exclude_internal = exclude_internal_topics
        #: commits, committed offsets, auto commit (a component shared with KIP-848)
        self.offsets = GroupOffsets.of(client, subscriptions, self, locals())
        self._auto_commit = self.offsets.auto_commit
        self._wake = asyncio.Event()
        #: the heartbeats between joins, their timing and retries, the max poll interval, the
        #: leave (the shell of every group protocol; the machine says what each answer means)
        self.shell = MemberShell(
            client,
            self._machine,
            self._sup,
            on_assignment=self._wake.set,
            on_fatal=self._take_fatal,
            on_rejoin=self._wake.set,
            give_up=self._give_up,
            max_poll_interval_ms=max_poll_interval_ms,
            logger=log,
        )
        #: the listener calls and revoke steps (a component shared with KIP-848)
        self._reconcile = Reconciler(
            subscriptions,
            group_id,
            hooks,
            self._commit_positions,
            self._auto_commit,
            on_revoking=self._revoking,
        )
        self._joined_topics: frozenset[str] = frozenset()
        self._joined_subscription = -1  # SubscriptionState.subscription_id of the last join
        # partition counts the current assignment was computed from: set by the group leader
        # (over every member's topics) and without a group; None = a follower, whose leader
        # watches metadata for the group (Java's assignmentSnapshot)
        self._metadata_snapshot: dict[str, int] | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        #: the JoinGroup / SyncGroup exchanges (and the leader's assignor run)
        self._ex = ClassicExchanges(
            client,
            self._machine,
            subscriptions,
            self._assignors,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            wake=self._wake.set,
            join_answered=self.shell.restart_interval,
        )
        self.fatal: BaseException | None = None
        #: set once the first assignment is applied, or a fatal error is stored (start() waits)
        self.assigned_once = asyncio.Event()
        self._revoke_announced = False  # on_partitions_revoked ran for the pending rebalance
        self.rebalances = 0
        subscriptions.add_waker(self._wake.set)
        client.cluster.add_listener(self._on_metadata)

    # -- the machine's view ------------------------------------------------------------------
    @property
    def member_id(self) -> str:
        """The member id the coordinator gave ("" before the first join)."""
        return self._machine.member_id

    @property
    def generation(self) -> int:
        """The group generation (-1: not in one)."""
        return self._machine.generation

    @property
    def protocol(self) -> str | None:
        """The assignor the group chose."""
        return self._machine.protocol

    @property
    def leader_id(self) -> str | None:
        """The group leader's member id."""
        return self._machine.leader_id

    @property
    def state(self) -> str:
        """The member's phase (``ClassicState``)."""
        return self._machine.state.value

    # -- aiokafka's names for the settings (read by code written against its coordinator) ---
    @property
    def _heartbeat_interval_ms(self) -> int:
        return round(self._heartbeat_interval * 1000)

    @property
    def _retry_backoff_ms(self) -> int:
        return round(self._backoff * 1000)

    @property
    def _auto_commit_interval_ms(self) -> int:
        return round(self.offsets.auto_commit_interval * 1000)

    @property
    def _exclude_internal_topics(self) -> bool:
        return self._exclude_internal

    @property
    def _enable_auto_commit(self) -> bool:
        return self._auto_commit

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def uses_group(self) -> bool:
        """True when partitions come from group membership."""
        return self.group_id is not None and self._subs.subscribed and not self._subs.user_assigned

    def start(self) -> None:
        """Start the coordination task (and the member shell when in a group: it heartbeats
        while a generation is applied)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="aiokafka_lite-coordinator")
            if self.group_id is not None:
                self._track_membership()
                self.shell.start()

    def abandon(self) -> None:
        """Cancel the coordination tasks at once without awaiting, committing or leaving (the
        consumer was garbage-collected unstopped; the group expires the member)."""
        self._closed = True
        if self._task is not None and not self._task.get_loop().is_closed():
            self._task.cancel()
            self.shell.cancel()

    async def close(self, leave: str = "default") -> None:
        """Commit (auto commit), leave the group and stop tasks; ``leave``: KIP-1092's group
        membership operation, ``"default"`` (static members stay), ``"leave_group"`` or
        ``"remain_in_group"``."""
        if self._closed:
            return
        self._closed = True
        self._client.cluster.remove_listener(self._on_metadata)
        self._subs.remove_waker(self._wake.set)
        # the close bound: the tasks' end, the last commit and the leave share ONE
        # request_timeout_ms budget (aiokafka's stop() takes no timeout; Java's classic close()
        # is bounded by min(its timeout, request.timeout.ms)), so stop() stays bounded with a
        # silent coordinator. The commit (no silent loss) may use all of it; the leave then
        # gets what is left (see _leave_budget).
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeouts.retry_ms / 1000
        # the heartbeats stop before the last commit (no rebalance starts under it); the
        # shell's leave below awaits their end
        tasks = [t for t in (self._task, self.shell.cancel()) if t is not None]
        for t in tasks:
            t.cancel()
        if tasks:  # never raises the tasks' errors; our own cancellation propagates
            await asyncio.wait(tasks, timeout=min(5.0, self._timeouts.retry_ms / 1000))
        if self._auto_commit:
            try:
                await asyncio.wait_for(self._commit_positions(), deadline - loop.time())
            except (Errors.KafkaError, asyncio.TimeoutError) as exc:
                log.warning(
                    "group %s: the last auto commit at stop() failed: %r", self.group_id, exc
                )
        # also with the coordinator unknown or dead: the leave looks it up again
        if self.group_id is not None:
            budget = self._leave_budget(deadline - loop.time())
            await self.shell.leave(max(0.0, budget), leave)

    def _leave_budget(self, remaining: float) -> float:
        """How long the leave at :meth:`close` may take, of the ``remaining`` close budget: at
        most ``session_timeout_ms``, after which the coordinator drops the member anyway."""
        return min(remaining, self._session_timeout_ms / 1000)

    async def commit_through(
        self, client: Any, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """After :meth:`close`: commit ``offsets`` through ``client`` (a started client with the
        consumer's settings; the consumer's own is closed), by aiokafka's method name as
        every commit."""
        if not self._closed:
            raise Errors.IllegalStateError("commit_through() is for a closed coordinator")
        self.coordinator_id = None
        try:
            await self.offsets.commit_through(client, offsets)
        finally:
            self.coordinator_id = None

    def poll(self) -> None:
        """Record that the application polled (max_poll_interval_ms bookkeeping: a member
        that left for lack of polls joins again); raise a fatal group error if one happened."""
        if self.shell.polled():
            self._wake.set()
        if self.fatal is not None:
            exc, self.fatal = self.fatal, None
            raise exc

    def _on_metadata(self, cluster: Any) -> None:
        subs = self._subs
        if subs.pattern is not None:
            subs.match_pattern(cluster.topics(self._exclude_internal))
        if subs.subscribed and not subs.user_assigned:
            snap = self._metadata_snapshot
            if self.group_id is None:
                if self._snapshot(subs.topics) != snap:
                    self._wake.set()
            elif snap is not None and self._snapshot(snap) != snap:
                self._wake.set()

    def _snapshot(self, topics: Any) -> dict[str, int]:
        cluster = self._client.cluster
        return {t: len(cluster.partitions_for_topic(t) or ()) for t in topics}

    # -- main loop -------------------------------------------------------------------------
    async def _run(self) -> None:
        while not self._closed:
            self._wake.clear()
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
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
            except Exception as exc:  # a bug: surfaced once, retried with back-off
                delay = self._g_main.failed(exc)  # a Heartbeat carries no state to resync
                await asyncio.sleep(delay)
                continue
            self._g_main.ok()
            if self.uses_group and self._needs_rejoin():
                await asyncio.sleep(0)  # a failed join/sync already backed off: go again
                continue
            timeout = self.offsets.until_auto_commit(1.0)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    async def _step(self) -> None:
        subs = self._subs
        if self.group_id is not None:
            # unsubscribe() or a switch to assign(): the shell stops heartbeating and leaves
            self._track_membership()
        if subs.subscribed and not subs.user_assigned:
            self._track_topics()
            if self.group_id is None:
                self._assign_all()
            elif self._needs_rejoin():
                await self._rebalance()
        if subs.missing_positions():
            await self._init_positions()
        if self.offsets.auto_commit_due():
            try:
                await self._commit_positions()
            except Errors.CommitFailedError as exc:
                log.warning("auto commit failed: %s", exc)

    def _track_membership(self) -> None:
        """The machine (and so the shell) learns whether partitions come from the group:
        the shell's loop runs while they do; when they stop, it leaves the group."""
        uses_group = self.uses_group
        changed = uses_group != self._machine.subscribed
        self._machine.subscribe(self._subs.topics if uses_group else None)
        if changed:
            if not uses_group:
                self._machine.need_rejoin()
            self.shell.subscription_changed()

    def _track_topics(self) -> None:
        subs = self._subs
        if subs.pattern is not None:
            self._client.need_all_topics = True
        else:
            # the leader also follows the other members' topics (it assigns them)
            self._client.set_topics(sorted(subs.topics | self._ex.group_topics))

    def _needs_rejoin(self) -> bool:
        m = self._machine
        if m.state is ClassicState.POLL_TIMEOUT:
            return False
        subs = self._subs
        if (
            m.rejoin
            or m.generation < 0
            or subs.topics != self._joined_topics
            or subs.subscription_id != self._joined_subscription
        ):
            return True
        snap = self._metadata_snapshot
        return snap is not None and self._snapshot(snap) != snap

    def _assign_all(self) -> None:
        cluster = self._client.cluster
        tps = {
            TopicPartition(t, p)
            for t in self._subs.topics
            for p in (cluster.partitions_for_topic(t) or ())
        }
        self._metadata_snapshot = self._snapshot(self._subs.topics)
        if tps != set(self._subs.assignment):
            self._subs.assign_from_subscription(tps)
        self.assigned_once.set()

    # -- coordinator discovery and requests ------------------------------------------------
    @property
    def coordinator_id(self) -> int | None:
        """The group's coordinator, as the client's coordinator cache knows it (None: unknown);
        set to None to forget it."""
        if self.group_id is None:
            return None
        node: int | None = self._client.coordinators.get(self.group_id, 0)
        return node

    @coordinator_id.setter
    def coordinator_id(self, value: int | None) -> None:
        if self.group_id is None:
            return
        if value is None:
            self._client.coordinators.forget(self.group_id, 0)
        else:
            self._client.coordinators.put(self.group_id, 0, value)

    # -- what GroupOffsets reads (offsets.Membership) --------------------------------------
    @property
    def rebalancing(self) -> bool:
        """A rejoin is due or under way."""
        return self._machine.rejoin

    def fetch_member(self) -> tuple[str | None, int]:
        """Classic OffsetFetch carries no member."""
        return None, -1

    def membership_lost(self, code: int, sent_generation: int | None = None) -> bool | None:
        """A commit (or heartbeat) of ``sent_generation`` answered REBALANCE_IN_PROGRESS /
        ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID: the machine decides (a rejoin; a cooperative
        member's partitions lost with its generation; see DESIGN.md). False when the
        partitions stay (a refused commit then raises RebalanceInProgressError, as Java)."""
        lost = self._machine.membership_lost(code, sent_generation)
        if lost is False and sent_generation not in (None, self.generation):
            log.debug(
                "group %s: %s answered a request of generation %s; ignored",
                self.group_id,
                Errors.for_code(code).__name__,
                sent_generation,
            )
        self._wake.set()
        return lost

    # -- rebalance -------------------------------------------------------------------------
    async def _rebalance(self) -> None:
        subs = self._subs
        await self.shell.settled()  # the leave of an unsubscription goes first
        if self.cooperative:
            await self._prepare_cooperative_join()
        else:
            await self._prepare_eager_join()
        if subs.pattern is not None:
            # as the Java client: a pattern subscriber refreshes metadata before it joins, so a
            # new matching topic that another member saw (and started this rebalance for) is in
            # this member's subscription too; else a second rebalance follows the first
            await self._client.force_metadata_update()
        topics = subs.topics
        subscription_id = subs.subscription_id
        self._metadata_snapshot = None  # set again if this member leads
        joined = await self._ex.join(topics)
        if not joined:
            return
        assignment = await self._ex.sync(joined)
        self._metadata_snapshot = self._ex.snapshot
        if assignment is None:
            return
        self.shell.stable()  # the heartbeats go on (an interval after the JoinGroup)
        self._joined_topics = topics
        self._joined_subscription = subscription_id
        self._revoke_announced = False
        self.rebalances += 1
        for a in self._assignors:
            if a.name == self.protocol:
                a.on_assignment(assignment)
                if hasattr(a, "on_generation_assignment"):
                    a.on_generation_assignment(self.generation)
        tps = {TopicPartition(t, p) for t, ps in assignment.assignment for p in ps if t in topics}
        added = tps
        if self.cooperative:
            owned = set(subs.assignment)
            revoked = owned - tps
            added = tps - owned
            if revoked:
                # only what moved stops; then a follow-up rebalance hands it to its new owner
                await self._revoke_paused(revoked)
                self._machine.need_rejoin()
            self.offsets.keep_only(tps)
        else:
            self.offsets.keep_only(())
        subs.assign_from_subscription(tps)
        log.info("group %s generation %s: assigned %s", self.group_id, self.generation, sorted(tps))
        await self._reconcile.assigned(set(added))
        self.assigned_once.set()

    async def _prepare_eager_join(self) -> None:
        subs = self._subs
        # revoke everything (eager protocol): commit first so the next owner starts right
        if subs.assignment:
            await self._reconcile.commit_before("rebalance")
        revoked = set(subs.assignment)
        # also with nothing to revoke (first join), as aiokafka; once per rebalance, not per
        # retried JoinGroup. The assignment, positions and heartbeats stay alive through the
        # callback, so commit() in it commits (the standard place to save progress).
        if revoked or not self._revoke_announced:
            self._revoke_announced = True
            await self._reconcile.revoked(revoked)
        if revoked:
            subs.revoke_to(())

    async def _prepare_cooperative_join(self) -> None:
        """KIP-429 before JoinGroup: the partitions stay assigned and consumed through the
        join, except those lost with the generation (``on_partitions_lost``) and those of
        topics no longer subscribed (revoked)."""
        subs = self._subs
        machine = self._machine
        if machine.state is ClassicState.LOST:
            lost = set(subs.assignment)
            if lost:
                log.info("group %s: generation lost with partitions %s", self.group_id, lost)
                await self._reconcile.lost(lost)
                subs.revoke_to(())
            assert isinstance(machine, CooperativeMachine)
            machine.gave_up()
            return
        if subs.assignment and self.generation >= 0:
            await self._reconcile.commit_before("rebalance")
        gone = {tp for tp in subs.assignment if tp.topic not in subs.topics}
        if gone:
            await self._revoke_paused(gone)
            subs.revoke_to(set(subs.assignment) - gone)

    async def _revoke_paused(self, revoked: set[TopicPartition]) -> None:
        await self._reconcile.revoke_paused(revoked)

    # -- commits (GroupOffsets) ------------------------------------------------------------
    async def _commit_positions(self) -> None:
        await self.offsets.commit_positions()

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """OffsetCommit (GroupOffsets.commit_offsets)."""
        await self.offsets.commit_offsets(self._subs.assignment, offsets)

    async def commit_offsets(
        self, assignment: Any, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """aiokafka's name and signature for :meth:`commit`."""
        await self.offsets.commit_offsets(assignment, offsets)

    async def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """OffsetFetch: the committed offset of each partition (None when there is none)."""
        return await self.offsets.committed(partitions)

    async def _init_positions(self) -> None:
        await self.offsets.init_positions()

    # -- what the member shell asks ---------------------------------------------------------
    def _take_fatal(self) -> None:
        """A heartbeat was answered FENCED_INSTANCE_ID: the next poll raises it once; the
        member joins again."""
        self.fatal, self.shell.error = self.shell.error, None

    def _revoking(self, running: bool) -> None:
        """The revoke listener starts or ends: heartbeats go on while it runs before a join
        (a slow callback keeps the membership)."""
        self._machine.revoking = running
        if running:
            self.shell.wake()

    async def _give_up(self, action: Revoke) -> None:
        """No poll for ``max_poll_interval_ms``: everything is revoked (listener, no commit)
        while still a member, so commits in ``on_partitions_revoked`` work; the shell then
        sends the LeaveGroup, and the next poll joins again."""
        revoked = set(self._subs.assignment)
        if revoked:
            await self._reconcile.revoked(revoked)
        self._subs.revoke_to(())
