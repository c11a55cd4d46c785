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

Member states (DESIGN.md draws the transitions): UNSUBSCRIBED, JOINING, STABLE, RECONCILING,
FENCED, STALE (max_poll_interval_ms passed), LEAVING, FATAL.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from aiokafka_lite import errors as Errors
from aiokafka_lite.errors import RetryAction, retry_action
from aiokafka_lite.hooks import emit
from aiokafka_lite.ops.membership import consumer_group_heartbeat_request, send_leave
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

#: the Java client's words when the cluster lacks KIP-848 (UnsupportedVersionException)
CONSUMER_PROTOCOL_NOT_SUPPORTED = (
    "The cluster does not support the new CONSUMER group protocol. Set "
    "group_protocol='classic' on the consumer to revert to the CLASSIC protocol until the "
    "cluster is upgraded."
)
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
_LOADING = Errors.GroupLoadInProgressError.errno  # COORDINATOR_LOAD_IN_PROGRESS
_UNSENT = object()
_NEXT_EPOCH = (RetryAction.REFRESH_EPOCH, RetryAction.REJOIN)

Owned = dict[Any, frozenset[int]]  # topic id -> partitions
T = TypeVar("T")


class _StaleEpochCommit(Errors.CommitFailedError):
    """A commit refused for a stale member epoch (the automatic commits retry it)."""


def new_member_id() -> str:
    """A member id made by the client (KIP-1082), as the Java client's: a random UUID in
    Kafka's URL-safe base64 form (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


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
        super().__init__(client, subscriptions, **kwargs)
        self.member_id = new_member_id()
        self.generation = -1  # the member epoch: -1 = not in the group
        self._server_assignor = server_assignor
        self._rack = client_rack
        # as Java: the coordinator may wait this long for a member to revoke
        self._rebalance_timeout_ms = int(self._max_poll_interval * 1000)
        self.state = "UNSUBSCRIBED"
        self._interval = self._heartbeat_interval  # until the broker says
        self._target: Owned | None = None  # the latest target assignment (topic ids)
        self._reconciled: Owned | None = None  # the target the assignment was last made from
        self._owned: Owned = {}  # what this member owns, by topic id
        self._unresolved: frozenset[Any] = frozenset()
        self._sent: dict[str, Any] | None = None  # fields of the last heartbeat (None: send all)
        self._lost_pending = False  # fenced / stale: give the partitions up before rejoining
        self._hb_wake = asyncio.Event()
        self._hb_answered = asyncio.Event()  # set by every heartbeat answered without error
        self._hb_lock = asyncio.Lock()
        self._stale = False
        self._hb_subscription = (subscriptions.subscription_id, subscriptions.topics)

    # -- interface of the classic coordinator ----------------------------------------------
    def poll(self) -> None:
        """Record a poll; after max_poll_interval_ms expired, join again."""
        self._last_poll = time.monotonic()
        if self._stale and not self._lost_pending:
            self._stale = False
            self._hb_wake.set()
        if self.fatal is not None:
            exc, self.fatal = self.fatal, None
            raise exc

    async def close(self, leave: bool = True) -> None:
        """Commit (auto commit), leave with epoch -1 (-2 for a static member, so its restart
        keeps the assignment) and stop the tasks."""
        await super().close(leave)

    def _leave_budget(self, remaining: float) -> float:
        """The whole rest of the close budget: the session is the broker's
        (``group.consumer.session.timeout.ms``), not ``session_timeout_ms``."""
        return remaining

    def _fetch_member(self) -> tuple[str | None, int]:
        return (self.member_id, self.generation) if self.generation > 0 else (None, -1)

    def _needs_rejoin(self) -> bool:
        """True when the main task has reconciling to do now."""
        if self._lost_pending:
            return True
        target = self._target
        if target is None or self.generation <= 0 or self._stale:
            return False
        return target is not self._reconciled or self._resolve(target)[0] != set(
            self._subs.assignment
        )

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
        if self._lost_pending:
            await self._give_up_partitions()
            return
        target = self._target
        if target is None:
            return
        wanted, _, unknown = self._resolve(target)
        if unknown != self._unresolved:
            self._unresolved = unknown
        if unknown:  # their names come with the next metadata answer (this wakes us again)
            log.info("group %s: waiting for the metadata of topic ids %s", self.group_id, unknown)
            self._client.request_update()
        self.state = "RECONCILING"
        owned = set(subs.assignment)
        revoked = owned - wanted
        added = wanted - owned
        if revoked:
            # as Java (and the cooperative classic member): nothing more of them is handed
            # out from here on, so the commit below is where the next owner starts
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
            subs.revoke_to(set(subs.assignment) - revoked)
            if self._lost_pending or self._target is not target:
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
        self._reconciled = target
        self._ack(subs)
        self.assigned_once.set()

    def _ack(self, subs: Any) -> None:
        """Owned partitions changed: the next heartbeat (sent now) acknowledges them."""
        owned: dict[Any, set[int]] = {}
        for tp in subs.assignment:
            owned.setdefault(self._client.cluster.topic_id(tp.topic), set()).add(tp.partition)
        self._owned = {tid: frozenset(ps) for tid, ps in owned.items() if tid is not None}
        target = self._target or {}
        if self._owned == {t: p for t, p in target.items() if p}:
            self.state = "STABLE"
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
        self._owned = {}
        self._last_committed = {}
        self._lost_pending = False
        if not self._stale:
            self.state = "JOINING"
        self._hb_wake.set()

    def _fence(self, why: str) -> None:
        log.warning("group %s member %s fenced (%s): rejoining", self.group_id, self.member_id, why)
        self.state = "FENCED"
        self.generation = 0
        self._target = None
        self._sent = None
        self._lost_pending = True
        self._wake.set()

    # -- heartbeats (heartbeat task) -------------------------------------------------------
    def _request(self, epoch: int) -> Any:
        """The next heartbeat: everything when joining / after an error, else what changed."""
        subs = self._subs
        full = self._sent is None or epoch == 0
        sent: dict[str, Any] = {} if full else dict(self._sent or {})
        regex = subs.broker_pattern
        now: dict[str, Any] = {
            # a SubscriptionPattern sends no names (the broker matches it); a str pattern
            # sends the names it matched here, as a topic list (as Java's subscribe(Pattern))
            "names": () if regex is not None else tuple(sorted(subs.topics)),
            "regex": regex,
            "owned": self._owned,
            "assignor": self._server_assignor,
        }
        changed = {k: v for k, v in now.items() if full or sent.get(k, _UNSENT) != v}
        if full and regex is None:
            changed.pop("regex")  # never subscribed by regex: nothing to clear
        self._sent = now
        return consumer_group_heartbeat_request(
            self.group_id,  # type: ignore[arg-type]  # only with a group
            member_id=self.member_id,
            member_epoch=epoch,
            instance_id=self.group_instance_id,
            rack_id=self._rack if full else None,
            rebalance_timeout_ms=self._rebalance_timeout_ms if full else -1,
            subscribed_topic_names=changed.get("names"),
            # "" clears a regex sent before (as Java)
            subscribed_topic_regex=(changed["regex"] or "") if "regex" in changed else None,
            server_assignor=changed.get("assignor"),
            owned=changed.get("owned"),
        )

    async def _heartbeat_loop(self) -> None:
        while not self._closed:
            delay = self._interval
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
        self._sent = None

    def _should_heartbeat(self) -> bool:
        if not self.uses_group or self._lost_pending or self._stale:
            return False
        if self.generation < 0:
            self.generation = 0  # (re)subscribed: join
            self._sent = None
            self._rejoin = False
            self._owned = {}  # a join owns nothing (the broker refuses partitions then)
            self.state = "JOINING"
        return True

    def _poll_timed_out(self) -> bool:
        if time.monotonic() - self._last_poll <= self._max_poll_interval:
            return False
        log.warning(
            "group %s: no getmany()/getone() for more than max_poll_interval_ms; leaving the "
            "group (it joins again on the next poll)",
            self.group_id,
        )
        self._stale = True
        self.state = "STALE"
        self._target = None  # nothing is reconciled until the member joins again
        self._lost_pending = True
        self._wake.set()
        self._hb_wake.set()
        task = asyncio.ensure_future(self._leave_group("max_poll_interval_ms exceeded"))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return True

    async def _heartbeat_once(self) -> float:
        """One heartbeat and its answer; the delay until the next one."""
        async with self._hb_lock:
            if self.generation < 0 or self._closed:
                return self._interval
            request = self._request(self.generation)
            try:
                resp = await self._send(request)
            except asyncio.CancelledError:
                raise
            except Errors.UnsupportedVersionError:
                return self._fail(Errors.UnsupportedVersionError(CONSUMER_PROTOCOL_NOT_SUPPORTED))
            except Errors.KafkaError as exc:
                log.info("group %s heartbeat failed: %r", self.group_id, exc)
                self.coordinator_id = None
                self._sent = None
                return self._backoff
            return self._handle(resp)

    def _handle(self, resp: Any) -> float:
        code = resp.error_code
        if code == 0:
            if resp.heartbeat_interval_ms > 0:
                self._interval = resp.heartbeat_interval_ms / 1000
            self.generation = resp.member_epoch
            self._hb_answered.set()
            if self.state == "JOINING":
                self.state = "RECONCILING"
            if resp.assignment is not None:
                target = {
                    tp.topic_id: frozenset(tp.partitions) for tp in resp.assignment.topic_partitions
                }
                if target != self._target:
                    self._target = target
                    self._wake.set()
            return self._interval
        self._sent = None
        message = resp.error_message or ""
        if retry_action(code) is RetryAction.REJOIN:  # FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID
            self._fence(f"{Errors.for_code(code).__name__} {message}")
            return 0.0
        if self._coordinator_error(code) or code == _LOADING:
            return self._backoff
        if code == Errors.UnsupportedVersionError.errno:
            return self._fail(Errors.UnsupportedVersionError(CONSUMER_PROTOCOL_NOT_SUPPORTED))
        if retry_action(code) in (RetryAction.RETRY, RetryAction.REFRESH_METADATA):
            return self._backoff
        return self._fail(
            Errors.for_code(code)(f"ConsumerGroupHeartbeat of group {self.group_id!r}: {message}")
        )

    def _fail(self, exc: BaseException) -> float:
        log.error("group %s: %s", self.group_id, exc)
        self.state = "FATAL"
        self.fatal = exc
        self.assigned_once.set()
        return self._interval

    async def _leave_group(self, reason: str, timeout: float | None = None) -> None:
        """Leave with epoch -1 (a static member: -2, the broker keeps its assignment for its
        return within the session timeout)."""
        if self.group_id is None or self.generation < 0:
            return
        epoch = STATIC_LEAVE_EPOCH if self.group_instance_id is not None else LEAVE_EPOCH
        self.state = "LEAVING"
        request = consumer_group_heartbeat_request(
            self.group_id,
            member_id=self.member_id,
            member_epoch=epoch,
            instance_id=self.group_instance_id,
        )
        if timeout is None:
            timeout = self._request_timeout_ms / 1000
        if timeout > 0:
            # never beside a heartbeat in flight; a dead or moved coordinator is looked up
            # again and the leave sent to the new one within ``timeout`` (issue 30)
            async with self._hb_lock:
                await send_leave(
                    self._client, self.group_id, request, timeout, "ConsumerGroupHeartbeat (leave)"
                )
        log.info("group %s: member %s left (%s)", self.group_id, self.member_id, reason)
        self.generation = -1
        self._target = None
        self._reconciled = None
        self._owned = {}
        self._sent = None
        self.state = "UNSUBSCRIBED"


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
