"""The classic group protocol's wire steps for one member: JoinGroup (KIP-394's
member-id-required retry), SyncGroup with the leader's assignment, Heartbeat, LeaveGroup.

:class:`ClassicExchanges` sends what the member's sans-I/O machine
(:mod:`aiokafka_lite.membership.classic`: eager or cooperative) builds, hands it each answer,
and returns what the machine decided; it is given everything it uses (the client, the machine,
the subscription state, the assignors, the timeouts) and holds no reference to its driver,
``consumer.group.ClassicCoordinator``, which decides when to join, revoke and assign. The
requests themselves are built in :mod:`aiokafka_lite.ops.membership`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite.errors import RetryAction, retry_action
from aiokafka_lite.membership import Action, Fatal, Leave, Rejoin, Retry, Revoke
from aiokafka_lite.membership.classic import ClassicMachine
from aiokafka_lite.ops._exec import find_coordinator
from aiokafka_lite.ops.membership import send_leave

from .assignors import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from .subscription import SubscriptionState

__all__ = ["JOIN_CONNECTION", "ClassicExchanges"]

log = logging.getLogger("aiokafka_lite.consumer.group")

#: the coordinator connection JoinGroup and SyncGroup go on: the broker holds a JoinGroup until
#: every member has joined (up to a heartbeat interval and more), and it handles one request
#: of a connection at a time, so on the commits' connection a commit sent meanwhile (a
#: cooperative member keeps consuming and committing through the rebalance) would wait for it
JOIN_CONNECTION = "group-join"


class ClassicExchanges:
    """The JoinGroup / SyncGroup / Heartbeat / LeaveGroup exchanges of one classic member."""

    def __init__(
        self,
        client: Any,
        machine: ClassicMachine,
        subscriptions: SubscriptionState,
        assignors: list[Any],
        *,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        heartbeat_interval_ms: int,
        retry_backoff_ms: int,
        wake: Callable[[], None],
    ) -> None:
        self.client = client
        self.machine = machine
        self._subs = subscriptions
        self._assignors = assignors
        self._session_timeout_ms = session_timeout_ms
        self._rebalance_timeout_ms = rebalance_timeout_ms
        self._heartbeat_interval = heartbeat_interval_ms / 1000
        self._timeouts = client.timeouts
        self._backoff = retry_backoff_ms / 1000
        self._wake = wake
        #: the leader's view of the last assignment it made: every member's topics, and the
        #: partition counts it was computed from (a change of those rejoins)
        self.group_topics: frozenset[str] = frozenset()
        self.snapshot: dict[str, int] | None = None
        #: set by each JoinGroup answer: the heartbeat interval starts again
        self.heartbeat_phase = asyncio.Event()

    # -- coordinator ---------------------------------------------------------------------------
    def forget_coordinator(self) -> None:
        """The coordinator moved or vanished: the next request looks it up again."""
        self.client.coordinators.forget(self.machine.group_id, 0)

    async def send(
        self, request: Any, timeout_ms: float | None = None, conn_group: str = "coordinator"
    ) -> Any:
        """``request`` to the group coordinator (looked up when unknown)."""
        node = await find_coordinator(self.client, self.machine.group_id, 0)
        try:
            return await self.client.send(
                node,
                request,
                group=conn_group,
                timeout_ms=timeout_ms or self._timeouts.request_ms,
            )
        except (Errors.KafkaConnectionError, Errors.NodeNotReadyError):
            self.forget_coordinator()
            raise

    def _coordinator_error(self, code: int) -> None:
        if retry_action(code, coordinator=True) is RetryAction.FIND_COORDINATOR:
            self.forget_coordinator()

    # -- JoinGroup / SyncGroup -----------------------------------------------------------------
    def subscription(self, assignor: Any, topics: frozenset[str]) -> bytes:
        """The member's subscription for ``assignor`` (owned partitions and generation for
        KIP-429 assignors)."""
        meta = assignor.metadata(topics)
        if isinstance(meta, ConsumerProtocolMemberMetadata):
            # as Java's coordinator: the partitions this member really owns now (none after
            # an eager revocation), with its generation (KIP-429's cooperative assignor)
            owned: dict[str, list[int]] = {}
            for tp in sorted(self._subs.assignment):
                owned.setdefault(tp.topic, []).append(tp.partition)
            meta = meta.with_owned(list(owned.items()), self.machine.generation)
        return encode_subscription(meta)

    async def join(self, topics: frozenset[str]) -> Any:
        """JoinGroup (with KIP-394's member-id-required round trip): the answer, or None to
        join again later (after the back-off, or once lost partitions are given up)."""
        m = self.machine
        self.group_topics, self.snapshot = frozenset(), None
        protocols = [(a.name, self.subscription(a, topics)) for a in self._assignors]
        for _ in range(5):  # at most one member-id-required round trip, a few retries
            send = m.join_request(protocols, self._session_timeout_ms, self._rebalance_timeout_ms)
            try:
                resp = await self.send(
                    send.request,
                    self._rebalance_timeout_ms + self._session_timeout_ms + 5000,
                    JOIN_CONNECTION,
                )
            except BaseException:
                m.join_failed()
                raise
            actions = m.join_answered(resp, bool(self._subs.assignment))
            if not actions:
                self.heartbeat_phase.set()  # the heartbeat interval starts again now
                return resp
            action = actions[0]
            if isinstance(action, Rejoin):
                continue
            if isinstance(action, Revoke):
                self._wake()  # the driver gives the partitions up, then joins anew
                return None
            if isinstance(action, Fatal):
                raise action.exc
            assert isinstance(action, Retry)
            self._coordinator_error(resp.error_code)
            break
        m.join_failed()
        await asyncio.sleep(self._backoff)
        return None

    async def sync(self, joined: Any) -> ConsumerProtocolMemberAssignment | None:
        """SyncGroup (the leader sends the assignment); None: join again."""
        m = self.machine
        try:
            assignments: dict[str, bytes] = {}
            if m.leader:
                assignments = await self._leader_assignment(joined)
            send = m.sync_request(assignments)
            resp = await self.send(send.request, self._rebalance_timeout_ms + 5000, JOIN_CONNECTION)
        except BaseException:
            m.join_failed()
            raise
        (action,) = m.sync_answered(resp.error_code)
        if isinstance(action, Fatal):
            raise action.exc
        if isinstance(action, Revoke):
            self._wake()
            return None
        if isinstance(action, Rejoin):
            self._coordinator_error(resp.error_code)
            return None
        return decode_assignment(resp.assignment or b"")

    async def _leader_assignment(self, joined: Any) -> dict[str, bytes]:
        """The elected leader runs the group's assignor over every member's subscription."""
        assignor = next((a for a in self._assignors if a.name == joined.protocol_name), None)
        if assignor is None:
            raise Errors.IllegalStateError(f"group chose unknown assignor {joined.protocol_name!r}")
        members = {mb.member_id: decode_subscription(mb.metadata) for mb in joined.members}
        all_topics = set().union(*(set(md.subscription) for md in members.values()))
        self.group_topics = frozenset(all_topics)
        client = self.client
        if not all_topics <= set(client.cluster.topics(False)):
            client.add_topics(sorted(all_topics))
            fut = client.request_update()
            with contextlib.suppress(Errors.KafkaError, asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(fut), self._timeouts.retry_ms / 1000)
        # the leader rejoins when these partition counts change (not when its own metadata
        # first learns a topic: that is what made every static restart rebalance)
        self.snapshot = {t: len(client.cluster.partitions_for_topic(t) or ()) for t in all_topics}
        if getattr(joined, "skip_assignment", False):
            # KIP-814: a static leader replacing itself in a stable group; the broker keeps
            # the current assignment and ignores any sent
            return {}
        result = assignor.assign(client.cluster, members)
        log.info(
            "group %s leader: assigned %s",
            self.machine.group_id,
            {mid: list(a.assignment) for mid, a in result.items()},
        )
        return {mid: encode_assignment(a) for mid, a in result.items()}

    # -- Heartbeat / LeaveGroup ----------------------------------------------------------------
    async def heartbeat_due(self) -> None:
        """Sleep until the next heartbeat is due: ``heartbeat_interval_ms`` after the last one,
        or after the last JoinGroup answer when that came later (as the Java client resets its
        heartbeat timer there, and aiokafka restarts its heartbeat task after a join).

        The broker answers the JoinGroups of a rebalance together, so the members of a group
        then heartbeat in phase: when a later rebalance starts they all learn it from
        heartbeats answered at about the same moment, revoke and rejoin together, and the
        broker completes the join at once. With a phase of its own, an eager member would
        learn up to a heartbeat interval after the others, which all wait without partitions
        for its JoinGroup."""
        restarted = self.heartbeat_phase
        while True:
            try:
                await asyncio.wait_for(restarted.wait(), self._heartbeat_interval)
            except asyncio.TimeoutError:
                return
            restarted.clear()  # a join was answered: a whole interval from now

    async def heartbeat(self) -> list[Action] | None:
        """One Heartbeat; the machine's actions on its answer (None: not answered)."""
        m = self.machine
        sent_generation = m.generation
        try:
            resp = await self.send(m.heartbeat().request)
        except Errors.KafkaError as exc:
            log.debug("heartbeat failed: %r", exc)
            self.forget_coordinator()
            return None
        code = resp.error_code
        actions = m.heartbeat_answered(code, sent_generation)
        if code and not actions:
            if retry_action(code, coordinator=True) is RetryAction.FIND_COORDINATOR:
                self.forget_coordinator()
            else:
                log.warning("heartbeat error %s", Errors.for_code(code).__name__)
        return actions

    async def leave(
        self, reason: str, timeout: float | None = None, operation: str = "default"
    ) -> None:
        """LeaveGroup when the machine says so (not a static member: the broker keeps its
        partitions for it). A dead or moved coordinator is looked up again (every
        retry_backoff_ms) and the leave sent to the new one, all within ``timeout``: the
        other members get the partitions now, not at the end of this member's session.
        ``operation``: KIP-1092's (see ``ClassicMachine.leave``)."""
        for action in self.machine.leave(reason, operation):
            if isinstance(action, Leave):
                if timeout is None:
                    timeout = self._timeouts.retry_ms / 1000
                if timeout > 0:
                    await send_leave(
                        self.client, self.machine.group_id, action.request, timeout, action.what
                    )
                self.machine.left()
