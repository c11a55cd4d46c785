"""The classic group protocol's join for one member: JoinGroup (KIP-394's member-id-required
retry) and SyncGroup with the leader's assignment. The Heartbeats between joins and the
LeaveGroup are the member shell's (:class:`~aiokafka_lite.membership.MemberShell`, the one
heartbeat loop of every group protocol), driving the same machine.

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
from aiokafka_lite.membership import Fatal, Rejoin, Retry, Revoke
from aiokafka_lite.membership.classic import ClassicMachine
from aiokafka_lite.ops._exec import find_coordinator

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
    """The JoinGroup / SyncGroup exchanges of one classic member."""

    def __init__(
        self,
        client: Any,
        machine: ClassicMachine,
        subscriptions: SubscriptionState,
        assignors: list[Any],
        *,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        retry_backoff_ms: int,
        wake: Callable[[], None],
        join_answered: Callable[[], None],
    ) -> None:
        self.client = client
        self.machine = machine
        self._subs = subscriptions
        self._assignors = assignors
        self._session_timeout_ms = session_timeout_ms
        self._rebalance_timeout_ms = rebalance_timeout_ms
        self._timeouts = client.timeouts
        self._backoff = retry_backoff_ms / 1000
        self._wake = wake
        #: the leader's view of the last assignment it made: every member's topics, and the
        #: partition counts it was computed from (a change of those rejoins)
        self.group_topics: frozenset[str] = frozenset()
        self.snapshot: dict[str, int] | None = None
        #: told of each JoinGroup answer: the heartbeat interval starts again (the shell's)
        self._join_answered = join_answered

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
                self._join_answered()  # the heartbeat interval starts again now
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
