"""Consumer group membership, offset commits and position initialisation.

One :class:`Coordinator` per consumer.  Its main task:

* with a ``group_id`` and a topic/pattern subscription: finds the coordinator, joins the group
  (JoinGroup, including KIP-394's member-id-required retry), runs the assignor when elected
  leader, SyncGroup, applies the assignment and calls the rebalance listener; a heartbeat task
  keeps the membership alive and triggers a rejoin on REBALANCE_IN_PROGRESS and friends;
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
import inspect
import logging
import time
from collections.abc import Mapping
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite._supervise import Supervisor
from aiokafka_lite.errors import RetryAction, retry_action
from aiokafka_lite.hooks import HookSet, emit
from aiokafka_lite.ops._exec import find_coordinator
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

from . import classic
from .assignors import (
    COOPERATIVE,
    ConsumerProtocolMemberAssignment,
    rebalance_protocol,
)
from .offsets import OffsetsMixin
from .subscription import SubscriptionState

__all__ = ["Coordinator"]

log = logging.getLogger(__name__)

_SENT_GENERATION = classic.SENT_GENERATION
_GENERATION_LOST = classic.GENERATION_LOST


async def _call_listener(fn: Any, partitions: set[TopicPartition]) -> None:
    try:
        res = fn(partitions)
        if inspect.isawaitable(res):
            await res
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("rebalance listener %r failed", fn)


class Coordinator(OffsetsMixin):
    """Group membership + commits + position initialisation for one consumer."""

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
        request_timeout_ms: int = 40000,
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
        self._g_hb = self._sup.guard("group heartbeat", log)
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self._assignors = assignors or []
        #: KIP-429: every assignor supports the cooperative protocol (else eager, unchanged)
        self.cooperative = rebalance_protocol(self._assignors) == COOPERATIVE
        self._lost = False  # cooperative: the generation was lost, the partitions with it
        self._session_timeout_ms = session_timeout_ms
        self._rebalance_timeout_ms = rebalance_timeout_ms
        self._heartbeat_interval = heartbeat_interval_ms / 1000
        self._max_poll_interval = max_poll_interval_ms / 1000
        self._backoff = retry_backoff_ms / 1000
        self._request_timeout_ms = request_timeout_ms
        self._auto_commit = enable_auto_commit and group_id is not None
        self._auto_commit_interval = auto_commit_interval_ms / 1000
        self._exclude_internal = exclude_internal_topics
        self._require_stable = isolation_level == "read_committed"
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.leader_id: str | None = None
        self._rejoin = True
        self._joined_topics: frozenset[str] = frozenset()
        self._joined_subscription = -1  # SubscriptionState.subscription_id of the last join
        # partition counts the current assignment was computed from: set by the group leader
        # (over every member's topics) and without a group; None = a follower, whose leader
        # watches metadata for the group (Java's assignmentSnapshot)
        self._metadata_snapshot: dict[str, int] | None = None
        self._group_topics: frozenset[str] = frozenset()
        self._last_poll = time.monotonic()
        self._poll_expired = False
        self._last_committed: dict[TopicPartition, int] = {}
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._hb_task: asyncio.Task[None] | None = None
        self._closed = False
        self._outside_group = False
        self._revoking = False  # the revoke listener runs: keep heartbeating
        self._joining = False  # a JoinGroup is on its way (classic.join)
        #: set by each JoinGroup answer: the heartbeat interval starts again (classic.py)
        self._heartbeat_phase = asyncio.Event()
        self.fatal: BaseException | None = None
        #: set once the first assignment is applied, or a fatal error is stored (start() waits)
        self.assigned_once = asyncio.Event()
        self._revoke_announced = False  # on_partitions_revoked ran for the pending rebalance
        self.rebalances = 0
        self._h_commit = hooks.on_commit if hooks is not None else ()
        self._h_revoked = hooks.on_partitions_revoked if hooks is not None else ()
        self._h_assigned = hooks.on_partitions_assigned if hooks is not None else ()
        subscriptions.add_waker(self._wake.set)
        client.cluster.add_listener(self._on_metadata)

    # -- aiokafka's names for the settings (read by code written against its coordinator) ---
    @property
    def _heartbeat_interval_ms(self) -> int:
        return round(self._heartbeat_interval * 1000)

    @property
    def _retry_backoff_ms(self) -> int:
        return round(self._backoff * 1000)

    @property
    def _auto_commit_interval_ms(self) -> int:
        return round(self._auto_commit_interval * 1000)

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
        """Start the coordination task (and the heartbeat task when in a group)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="aiokafka_lite-coordinator")
            if self.group_id is not None:
                self._hb_task = asyncio.create_task(
                    self._g_hb.run(self._heartbeat_loop, self._after_unexpected),
                    name="aiokafka_lite-heartbeat",
                )

    def abandon(self) -> None:
        """Cancel the coordination tasks at once without awaiting, committing or leaving (the
        consumer was garbage-collected unstopped; the group expires the member)."""
        self._closed = True
        for t in (self._task, self._hb_task):
            if t is not None and not t.get_loop().is_closed():
                t.cancel()

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
        deadline = loop.time() + self._request_timeout_ms / 1000
        tasks = [t for t in (self._task, self._hb_task) if t is not None]
        for t in tasks:
            t.cancel()
        if tasks:  # never raises the tasks' errors; our own cancellation propagates
            await asyncio.wait(tasks, timeout=min(5.0, self._request_timeout_ms / 1000))
        if self._auto_commit and self.group_id is not None:
            try:
                await asyncio.wait_for(self._commit_positions(), deadline - loop.time())
            except (Errors.KafkaError, asyncio.TimeoutError) as exc:
                log.warning(
                    "group %s: the last auto commit at stop() failed: %r", self.group_id, exc
                )
        # also with the coordinator unknown or dead: the leave looks it up again
        budget = self._leave_budget(deadline - loop.time())
        await self._leave_group("consumer stopped", max(0.0, budget), leave)

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
        closed_client, self._client = self._client, client
        self.coordinator_id = None
        self._outside_group = True
        try:
            await self.commit_offsets(self._subs.assignment, offsets)
        finally:
            self._outside_group = False
            self._client = closed_client
            self.coordinator_id = None

    def poll(self) -> None:
        """Record that the application polled (max_poll_interval_ms bookkeeping); raise a
        fatal group error if one happened."""
        self._last_poll = time.monotonic()
        if self._poll_expired:
            self._poll_expired = False
            self._rejoin = True
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
                delay = self._g_main.failed(exc)
                self._after_unexpected()
                await asyncio.sleep(delay)
                continue
            self._g_main.ok()
            if self.uses_group and self._needs_rejoin():
                await asyncio.sleep(0)  # a failed join/sync already backed off: go again
                continue
            timeout = 1.0
            if self._auto_commit and self._subs.assignment:
                timeout = max(0.0, min(timeout, self._next_auto_commit - time.monotonic()))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    async def _step(self) -> None:
        subs = self._subs
        if subs.subscribed and not subs.user_assigned:
            self._track_topics()
            if self.group_id is None:
                self._assign_all()
            elif self._needs_rejoin():
                await self._rebalance()
        elif self.group_id is not None and self.member_id and self.generation >= 0:
            await self._leave_group("unsubscribed")  # unsubscribe() or switch to assign()
            self._rejoin = True
        if subs.missing_positions():
            await self._init_positions()
        if self._auto_commit and time.monotonic() >= self._next_auto_commit:
            self._next_auto_commit = time.monotonic() + self._auto_commit_interval
            try:
                await self._commit_positions()
            except Errors.CommitFailedError as exc:
                log.warning("auto commit failed: %s", exc)

    def _track_topics(self) -> None:
        subs = self._subs
        if subs.pattern is not None:
            self._client.need_all_topics = True
        else:
            # the leader also follows the other members' topics (it assigns them)
            self._client.set_topics(sorted(subs.topics | self._group_topics))

    def _needs_rejoin(self) -> bool:
        if self._poll_expired:
            return False
        subs = self._subs
        if (
            self._rejoin
            or self.generation < 0
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

    async def _coordinator(self) -> int:
        assert self.group_id is not None
        return await find_coordinator(self._client, self.group_id, 0)

    async def _send(
        self, request: Any, timeout_ms: float | None = None, conn_group: str = "coordinator"
    ) -> Any:
        node = await self._coordinator()
        try:
            return await self._client.send(
                node,
                request,
                group=conn_group,
                timeout_ms=timeout_ms or self._request_timeout_ms,
            )
        except (Errors.KafkaConnectionError, Errors.NodeNotReadyError):
            self.coordinator_id = None
            raise

    def _coordinator_error(self, code: int) -> bool:
        """True (and the coordinator forgotten) when ``code`` says it moved or timed out."""
        if retry_action(code, coordinator=True) is RetryAction.FIND_COORDINATOR:
            self.coordinator_id = None
            return True
        return False

    def _membership_lost(self, code: int) -> bool | None:
        """REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID: rejoin (the latter
        with a new member id).  A cooperative member whose generation is gone (the latter two)
        loses its partitions before it rejoins; not when the answer is to a request of an
        older generation than the current one (as Java's ``generationUnchanged()``), nor on
        ILLEGAL_GENERATION while its JoinGroup is out (the join's answer brings the new
        generation; see DESIGN.md).  False when the partitions stay (REBALANCE_IN_PROGRESS and
        those two): a refused commit then raises RebalanceInProgressError, as Java."""
        sent_generation = _SENT_GENERATION.get()
        if self.cooperative and sent_generation is not None and sent_generation != self.generation:
            log.debug(
                "group %s: %s answered a request of generation %s; ignored",
                self.group_id,
                Errors.for_code(code).__name__,
                sent_generation,
            )
            return False
        if self.cooperative and self._joining and code == Errors.IllegalGenerationError.errno:
            # the generation moved on while our JoinGroup is out: the join's answer (on its own
            # connection, so it may be read after this one) brings the new generation, and the
            # partitions stay ours (Java reads both on one connection, in order)
            log.debug("group %s: %s during a join; not lost", self.group_id, "ILLEGAL_GENERATION")
            self._rejoin = True
            return False
        if code == Errors.UnknownMemberIdError.errno:
            self.member_id = ""
            self.generation = -1
        if self.cooperative and code in _GENERATION_LOST:
            self._lost = True
            self.generation = -1
        self._rejoin = True
        self._wake.set()
        return code in _GENERATION_LOST

    # -- rebalance -------------------------------------------------------------------------
    async def _rebalance(self) -> None:
        subs = self._subs
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
        await self._coordinator()
        self._metadata_snapshot = None  # set again by _assign if this member leads
        self._group_topics = frozenset()
        joined = await self._join(topics)
        if not joined:
            return
        assignment = await self._sync(joined)
        if assignment is None:
            return
        self._joined_topics = topics
        self._joined_subscription = subscription_id
        self._rejoin = False
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
                self._rejoin = True
            kept = self._last_committed
            self._last_committed = {tp: o for tp, o in kept.items() if tp in tps}
        else:
            self._last_committed = {}
        subs.assign_from_subscription(tps)
        log.info("group %s generation %s: assigned %s", self.group_id, self.generation, sorted(tps))
        if self._h_assigned:
            emit(self._h_assigned, self.group_id, set(added))
        if subs.listener is not None:
            await _call_listener(subs.listener.on_partitions_assigned, set(added))
        self.assigned_once.set()

    async def _prepare_eager_join(self) -> None:
        subs = self._subs
        # revoke everything (eager protocol): commit first so the next owner starts right
        if subs.assignment and self._auto_commit:
            try:
                await self._commit_positions()
            except Errors.KafkaError as exc:
                log.warning("commit before rebalance failed: %r", exc)
        revoked = set(subs.assignment)
        # also with nothing to revoke (first join), as aiokafka; once per rebalance, not per
        # retried JoinGroup. The assignment, positions and heartbeats stay alive through the
        # callback, so commit() in it commits (the standard place to save progress).
        if revoked or not self._revoke_announced:
            self._revoke_announced = True
            if self._h_revoked:
                emit(self._h_revoked, self.group_id, set(revoked))
            if subs.listener is not None:
                await self._revoke(revoked)
        if revoked:
            subs.revoke_to(())

    async def _prepare_cooperative_join(self) -> None:
        """KIP-429 before JoinGroup: the partitions stay assigned and consumed through the
        join, except those lost with the generation (``on_partitions_lost``) and those of
        topics no longer subscribed (revoked)."""
        subs = self._subs
        if self._lost:
            self._lost = False
            lost = set(subs.assignment)
            if lost:
                log.info("group %s: generation lost with partitions %s", self.group_id, lost)
                if self._h_revoked:
                    emit(self._h_revoked, self.group_id, set(lost))
                listener = subs.listener
                if listener is not None:
                    fn = getattr(listener, "on_partitions_lost", None)
                    await self._revoke(lost, fn)
                subs.revoke_to(())
            return
        if subs.assignment and self._auto_commit and self.generation >= 0:
            try:
                await self._commit_positions()
            except Errors.KafkaError as exc:
                log.warning("commit before rebalance failed: %r", exc)
        gone = {tp for tp in subs.assignment if tp.topic not in subs.topics}
        if gone:
            await self._revoke_paused(gone)
            subs.revoke_to(set(subs.assignment) - gone)

    async def _revoke_paused(self, revoked: set[TopicPartition]) -> None:
        """Stop fetching ``revoked`` (paused: nothing more is handed out), commit (auto commit)
        and call ``on_partitions_revoked`` with them; the other partitions keep going. The
        revoke steps every incremental protocol shares (cooperative, and KIP-848's
        ``ConsumerGroupMember._rebalance``), in Java's order."""
        subs = self._subs
        for tp in revoked:
            subs.assignment[tp].paused = True
        subs.changed()
        if self._auto_commit:
            try:
                await self._commit_positions()
            except Errors.KafkaError as exc:
                log.warning("commit before revoking %s failed: %r", sorted(revoked), exc)
        if self._h_revoked:
            emit(self._h_revoked, self.group_id, set(revoked))
        if subs.listener is not None:
            await self._revoke(revoked)

    async def _commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        token = _SENT_GENERATION.set(self.generation)
        try:
            await super()._commit(offsets)
        finally:
            _SENT_GENERATION.reset(token)

    async def _revoke(self, revoked: set[TopicPartition], fn: Any = None) -> None:
        self._revoking = True
        try:
            await _call_listener(fn or self._subs.listener.on_partitions_revoked, revoked)
        finally:
            self._revoking = False

    def _subscription(self, assignor: Any, topics: frozenset[str]) -> bytes:
        return classic.subscription(self, assignor, topics)

    async def _join(self, topics: frozenset[str]) -> Any:
        return await classic.join(self, topics)

    async def _sync(self, joined: Any) -> ConsumerProtocolMemberAssignment | None:
        return await classic.sync(self, joined)

    async def _assign(self, joined: Any) -> dict[str, bytes]:
        return await classic.leader_assignment(self, joined)

    async def _leave_group(
        self, reason: str, timeout: float | None = None, operation: str = "default"
    ) -> None:
        await classic.leave(self, reason, timeout, operation)

    async def _heartbeat_loop(self) -> None:
        await classic.heartbeat_loop(self)

    def _after_unexpected(self) -> None:
        """The heartbeat or main task failed unexpectedly (``_supervise``); it goes on after
        its back-off. Classic: nothing to forget (a Heartbeat carries no state)."""

    # -- commits ---------------------------------------------------------------------------
