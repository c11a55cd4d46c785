"""Consumer group membership over the KIP-848 consumer protocol (``group_protocol="consumer"``).

:class:`ConsumerGroupMember` replaces the classic :class:`~.group.Coordinator`'s JoinGroup /
SyncGroup / Heartbeat / LeaveGroup with ONE request, ConsumerGroupHeartbeat: the broker computes
the assignment (its ``uniform`` or ``range`` assignor) and hands every member its target
assignment, one member at a time, without a stop-the-world rebalance. Positions, commits, auto
commit and the no-group path are the classic coordinator's (inherited).

Two tasks share the work, as the classic coordinator's:

* the heartbeat task (:meth:`_heartbeat_loop`) sends ConsumerGroupHeartbeat every
  ``heartbeat_interval_ms`` the broker asks for (at once after a reconciliation, to acknowledge
  it, or after a subscription change), the full member state when joining or after an error and
  only what changed otherwise (as the Java client's ``HeartbeatState``); it records the member
  epoch and the target assignment (topic ids and partitions) and wakes the main task;
* the main task reconciles (:meth:`_rebalance`, called by the classic loop whenever
  :meth:`_needs_rejoin` says there is work): names resolved from the metadata (unknown topic ids
  wait and refresh it), revoke first (auto commit, ``on_partitions_revoked``), then assign
  (``on_partitions_assigned``), then the next heartbeat acknowledges by sending what it owns.
  A fenced member (FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID) gives everything up through
  ``on_partitions_lost`` (``on_partitions_revoked`` when the listener has none) and joins again
  with epoch 0, keeping its member id.

The member's state, epoch, target and the heartbeat's contents are the sans-I/O
:class:`~aiokafka_lite.membership.consumer.ConsumerMachine`'s (its transition table:
``CONSUMER_TRANSITIONS``; DESIGN.md draws it); this class sends, waits and reconciles.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from aiokafka_lite import errors as Errors
from aiokafka_lite.errors import RetryAction, retry_action
from aiokafka_lite.hooks import emit
from aiokafka_lite.membership import Action, Fatal, Rejoin, new_member_id
from aiokafka_lite.membership.consumer import (
    CONSUMER_PROTOCOL_NOT_SUPPORTED,
    ConsumerMachine,
    Owned,
)
from aiokafka_lite.ops.membership import send_leave
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

from .assignors import RoundRobinPartitionAssignor
from .group import Coordinator, _call_listener

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


class ConsumerGroupMember(Coordinator):
    """A consumer's group membership over the KIP-848 consumer protocol (same interface as the
    classic :class:`~.group.Coordinator`: ``generation`` is the member epoch)."""

    def __init__(
        self,
        client: Any,
        subscriptions: Any,
        *,
        server_assignor: str | None = None,
        client_rack: str | None = None,
        **kwargs: Any,
    ) -> None:
        #: the member's state, epoch, target and heartbeat contents (sans-I/O)
        self._m = ConsumerMachine(
            kwargs.get("group_id") or "",
            new_member_id(),
            instance_id=kwargs.get("group_instance_id"),
            rack_id=client_rack,
            server_assignor=server_assignor,
            # as Java: the coordinator may wait this long for a member to revoke
            rebalance_timeout_ms=int(kwargs.get("max_poll_interval_ms", 300000)),
            interval_s=kwargs.get("heartbeat_interval_ms", 3000) / 1000,  # until the broker says
        )
        super().__init__(client, subscriptions, **kwargs)
        self.member_id = self._m.member_id
        self._unresolved: frozenset[Any] = frozenset()
        self._hb_wake = asyncio.Event()
        self._hb_answered = asyncio.Event()  # set by every heartbeat answered without error
        self._hb_lock = asyncio.Lock()
        self._hb_subscription = (subscriptions.subscription_id, subscriptions.topics)

    @property
    def generation(self) -> int:
        """The member epoch (-1: not in the group), the machine's."""
        return self._m.epoch

    @generation.setter
    def generation(self, value: int) -> None:
        self._m.epoch = value

    @property
    def state(self) -> str:
        """The member state's name (``ConsumerState``)."""
        return self._m.state.value

    # -- interface of the classic coordinator ----------------------------------------------
    def poll(self) -> None:
        """Record a poll; after max_poll_interval_ms expired, join again."""
        self._last_poll = time.monotonic()
        if self._m.polled():
            self._hb_wake.set()
        if self.fatal is not None:
            exc, self.fatal = self.fatal, None
            raise exc

    async def close(self, leave: str = "default") -> None:
        """Commit (auto commit), leave with epoch -1 (-2 for a static member, so its restart
        keeps the assignment; ``leave``: KIP-1092's operation, see ``ConsumerMember.leave``) and
        stop the tasks."""
        await super().close(leave)

    def _leave_budget(self, remaining: float) -> float:
        """The whole rest of the close budget: the session is the broker's
        (``group.consumer.session.timeout.ms``), not ``session_timeout_ms``."""
        return remaining

    def _fetch_member(self) -> tuple[str | None, int]:
        return (self.member_id, self.generation) if self.generation > 0 else (None, -1)

    def _needs_rejoin(self) -> bool:
        """True when the main task has reconciling to do now."""
        m = self._m
        if m.lost_pending:
            return True
        target = m.target
        if target is None or m.epoch <= 0 or m.stale:
            return False
        return target is not m.reconciled or self._resolve(target)[0] != set(self._subs.assignment)

    def _membership_lost(self, code: int) -> None:
        """A commit answered UNKNOWN_MEMBER_ID (or another membership error): as Java's
        commit manager, the commit fails (CommitFailedError) and the membership is left to
        the heartbeats, which learn of a real fence from the broker."""
        log.info(
            "group %s: a commit answered %s; the heartbeat decides the membership",
            self.group_id,
            Errors.for_code(code).__name__,
        )

    def _track_topics(self) -> None:
        super()._track_topics()
        subs = self._subs
        if subs.broker_pattern is not None:  # assigned topic ids are named by all topics
            self._client.need_all_topics = True
        # a new subscribe(), or a client-side pattern matching other topics: tell the group
        # at once
        if (subs.subscription_id, subs.topics) != self._hb_subscription:
            self._hb_subscription = (subs.subscription_id, subs.topics)
            self._hb_wake.set()

    def _on_metadata(self, cluster: Any) -> None:
        super()._on_metadata(cluster)  # a str pattern is matched here
        subs = self._subs
        if self._unresolved or (subs.subscription_id, subs.topics) != self._hb_subscription:
            self._wake.set()

    # -- commits ---------------------------------------------------------------------------
    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """OffsetCommit with the member epoch. As the Java client's commitSync, a stale epoch
        fails with CommitFailedError (the automatic commits retry with the next epoch); a
        fenced epoch or an unknown member too (not retried: the partitions may be gone)."""
        try:
            await super().commit(offsets)
        except Errors.KafkaError as exc:
            if retry_action(exc) is not RetryAction.REFRESH_EPOCH:
                raise
            raise _StaleEpochCommit(
                f"Commit cannot be completed: the member epoch {self.generation} is stale ({exc})"
            ) from None

    async def _commit_positions(self) -> None:
        """Auto commit (interval, before a revocation, at close): a stale member epoch is
        retried with the epoch of the next heartbeat, within request_timeout_ms (as Java)."""
        await self._with_current_epoch(super()._commit_positions)

    async def committed(self, partitions: Iterable[TopicPartition]) -> Any:
        """OffsetFetch with the member epoch; a stale epoch is retried as the auto commit."""
        tps = list(partitions)
        return await self._with_current_epoch(
            lambda: super(ConsumerGroupMember, self).committed(tps)
        )

    async def _with_current_epoch(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call()``, again after the next heartbeat answer while it fails for a stale member
        epoch (until request_timeout_ms; not once closed or out of the group)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._request_timeout_ms / 1000
        while True:
            self._hb_answered.clear()
            try:
                return await call()
            except Errors.KafkaError as exc:
                # a stale epoch; OffsetFetch also waits out a fence (the heartbeat rejoins)
                action = retry_action(exc)
                if not isinstance(exc, _StaleEpochCommit) and action not in _NEXT_EPOCH:
                    raise
                if self._closed or self.generation <= 0 or loop.time() >= deadline:
                    raise
            self._hb_wake.set()  # a heartbeat now: its answer carries the current epoch
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._hb_answered.wait(), deadline - loop.time())

    # -- reconciliation (main task) --------------------------------------------------------
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

    async def _rebalance(self) -> None:
        subs = self._subs
        m = self._m
        if m.lost_pending:
            await self._give_up_partitions()
            return
        target = m.target
        if target is None:
            return
        wanted, _, unknown = self._resolve(target)
        if unknown != self._unresolved:
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
            await self._revoke_paused(revoked)
            subs.revoke_to(set(subs.assignment) - revoked)
            if m.lost_pending or m.target is not target:
                self._ack(subs)
                return  # fenced meanwhile, or a newer target: start over
        subs.assign_from_subscription(set(subs.assignment) | added)
        self._last_committed = {tp: o for tp, o in self._last_committed.items() if tp in wanted}
        self.rebalances += 1
        log.info(
            "group %s epoch %s: assigned %s (revoked %s)",
            self.group_id,
            self.generation,
            sorted(added),
            sorted(revoked),
        )
        if self._h_assigned:
            emit(self._h_assigned, self.group_id, set(added))
        if subs.listener is not None:  # as Java: also with nothing added
            await _call_listener(subs.listener.on_partitions_assigned, set(added))
        m.reconciled = target
        self._ack(subs)
        self.assigned_once.set()

    def _ack(self, subs: Any) -> None:
        """Owned partitions changed: the next heartbeat (sent now) acknowledges them."""
        owned: dict[Any, set[int]] = {}
        for tp in subs.assignment:
            owned.setdefault(self._client.cluster.topic_id(tp.topic), set()).add(tp.partition)
        self._m.owns({tid: frozenset(ps) for tid, ps in owned.items() if tid is not None})
        self._hb_wake.set()

    async def _give_up_partitions(self) -> None:
        """Fenced or stale: the partitions are lost (another member may own them already)."""
        subs = self._subs
        lost = set(subs.assignment)
        if lost:
            if self._h_revoked:
                emit(self._h_revoked, self.group_id, set(lost))
            listener = subs.listener
            if listener is not None:
                fn = getattr(listener, "on_partitions_lost", None) or listener.on_partitions_revoked
                await _call_listener(fn, lost)
            subs.revoke_to(())
        self._last_committed = {}
        self._m.gave_up()
        self._hb_wake.set()

    # -- heartbeats (heartbeat task) -------------------------------------------------------
    async def _heartbeat_loop(self) -> None:
        while not self._closed:
            delay = self._m.interval_s
            if self.fatal is None and self._should_heartbeat():
                if self.generation > 0 and self._poll_timed_out():
                    continue
                delay = await self._heartbeat_once()
                self._g_hb.ok()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._hb_wake.wait(), delay)
            self._hb_wake.clear()

    def _after_unexpected(self) -> None:
        """A task failed unexpectedly (``_supervise``): whatever the last heartbeat carried may
        not have reached the broker, so the next one sends the full state (as after any
        error)."""
        self._m.sent = None

    def _should_heartbeat(self) -> bool:
        m = self._m
        if not self.uses_group or m.lost_pending or m.stale:
            return False
        if m.join():  # (re)subscribed: join
            self._rejoin = False
        return True

    def _poll_timed_out(self) -> bool:
        if time.monotonic() - self._last_poll <= self._max_poll_interval:
            return False
        log.warning(
            "group %s: no getmany()/getone() for more than max_poll_interval_ms; leaving the "
            "group (it joins again on the next poll)",
            self.group_id,
        )
        self._m.poll_timed_out()  # the partitions are lost: the main task gives them up
        self._wake.set()
        self._hb_wake.set()
        task = asyncio.ensure_future(self._leave_group("max_poll_interval_ms exceeded"))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return True

    async def _heartbeat_once(self) -> float:
        """One heartbeat and its answer; the delay until the next one."""
        m = self._m
        async with self._hb_lock:
            if m.epoch < 0 or self._closed:
                return m.interval_s
            subs = self._subs
            send = m.heartbeat(subs.topics, subs.broker_pattern)
            try:
                resp = await self._send(send.request)
            except asyncio.CancelledError:
                raise
            except Errors.KafkaError as exc:
                if not isinstance(exc, Errors.UnsupportedVersionError):
                    log.info("group %s heartbeat failed: %r", self.group_id, exc)
                    self.coordinator_id = None
                return self._carry_out(m.failed(exc), self._backoff)
            code = resp.error_code
            if code == 0:
                self._hb_answered.set()
                return self._carry_out(m.answered(resp), m.interval_s)
            action = retry_action(code, coordinator=True)
            if action is RetryAction.FIND_COORDINATOR:
                self.coordinator_id = None
            return self._carry_out(m.refused(code, resp.error_message or "", action), self._backoff)

    def _carry_out(self, actions: Sequence[Action], delay: float) -> float:
        """The machine's actions after a heartbeat; the delay until the next one."""
        for action in actions:
            if isinstance(action, Fatal):
                log.error("group %s: %s", self.group_id, action.exc)
                self.fatal = action.exc
                self.assigned_once.set()
                delay = self._m.interval_s
            elif isinstance(action, Rejoin):
                log.warning(
                    "group %s member %s fenced (%s): rejoining",
                    self.group_id,
                    self.member_id,
                    self._m.why,
                )
                delay = 0.0
            else:  # a new target (Assign) or partitions lost (Revoke): the main task's work
                self._wake.set()
        return delay

    async def _leave_group(
        self, reason: str, timeout: float | None = None, operation: str = "default"
    ) -> None:
        """Leave with epoch -1 (a static member: -2, the broker keeps its assignment for its
        return within the session timeout; ``operation``: KIP-1092's)."""
        if self.group_id is None:
            return
        leave = self._m.leave(operation)
        if leave is None:
            return
        if timeout is None:
            timeout = self._request_timeout_ms / 1000
        if timeout > 0:
            # never beside a heartbeat in flight; a dead or moved coordinator is looked up
            # again and the leave sent to the new one within ``timeout`` (issue 30)
            async with self._hb_lock:
                await send_leave(self._client, self.group_id, leave.request, timeout, leave.what)
        log.info("group %s: member %s left (%s)", self.group_id, self.member_id, reason)
        self._m.left()


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
    **classic_only: Any,
) -> tuple[type[Coordinator], dict[str, Any]]:
    """The consumer's coordinator class for ``group_protocol`` and its extra arguments.

    ``"consumer"`` refuses the settings the broker owns under KIP-848 (session timeout and
    heartbeat interval are the group's broker configs, the assignor runs on the broker), as the
    Java client refuses them when they are set: a value other than the default is an error.
    """
    if group_protocol == "classic":
        if group_remote_assignor is not None:
            raise ValueError("group_remote_assignor needs group_protocol='consumer'")
        return Coordinator, {}
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
    return ConsumerGroupMember, {
        "server_assignor": group_remote_assignor,
        "client_rack": client_rack,
    }
