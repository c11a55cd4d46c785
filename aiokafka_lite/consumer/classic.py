"""The classic group protocol's exchanges of a :class:`~aiokafka_lite.consumer.group.Coordinator`
member: JoinGroup (KIP-394's member-id-required retry), SyncGroup with the leader's assignment,
Heartbeat (and the ``max_poll_interval_ms`` leave), LeaveGroup. Functions of the member: the
Coordinator keeps the state machine (when to join, revoke, assign) and calls these for the wire
steps; the requests are built in :mod:`aiokafka_lite.ops.membership`."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from typing import TYPE_CHECKING, Any

from aiokafka_lite import errors as Errors
from aiokafka_lite.errors import RetryAction, retry_action
from aiokafka_lite.hooks import emit
from aiokafka_lite.ops.membership import (
    heartbeat_request,
    join_group_request,
    leave_group_request,
    send_leave,
    sync_group_request,
)

from .assignors import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

if TYPE_CHECKING:
    from .group import Coordinator

__all__ = [
    "heartbeat_loop",
    "join",
    "leader_assignment",
    "leave",
    "subscription",
    "sync",
]

log = logging.getLogger("aiokafka_lite.consumer.group")

#: the generation the heartbeat or OffsetCommit being answered was sent with (a late answer to
#: an older generation's request says nothing about the current one)
SENT_GENERATION: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "aiokafka_lite_sent_generation", default=None
)

#: the coordinator connection JoinGroup and SyncGroup go on: the broker holds a JoinGroup until
#: every member has joined (up to a heartbeat interval and more), and it handles one request
#: of a connection at a time, so on the commits' connection a commit sent meanwhile (a
#: cooperative member keeps consuming and committing through the rebalance) would wait for it
JOIN_CONNECTION = "group-join"

#: answers that end the member's generation: a cooperative member's partitions are lost
GENERATION_LOST = frozenset(
    {Errors.IllegalGenerationError.errno, Errors.UnknownMemberIdError.errno}
)


def subscription(m: Coordinator, assignor: Any, topics: frozenset[str]) -> bytes:
    """The member's subscription for ``assignor`` (owned partitions and generation for
    KIP-429 assignors)."""
    meta = assignor.metadata(topics)
    if isinstance(meta, ConsumerProtocolMemberMetadata) and meta.version >= 1:
        # as Java's coordinator: the partitions this member really owns now (none after
        # an eager revocation), with its generation (KIP-429's cooperative assignor)
        owned: dict[str, list[int]] = {}
        for tp in sorted(m._subs.assignment):
            owned.setdefault(tp.topic, []).append(tp.partition)
        meta = meta._replace(owned_partitions=list(owned.items()), generation_id=m.generation)
    return encode_subscription(meta)


async def join(m: Coordinator, topics: frozenset[str]) -> Any:
    """JoinGroup (with KIP-394's member-id-required round trip); None: join again later."""
    protocols = [(a.name, subscription(m, a, topics)) for a in m._assignors]
    for _ in range(5):  # at most one member-id-required round trip, a few retries
        request = join_group_request(
            m.group_id,  # type: ignore[arg-type]  # only called with a group
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            session_timeout_ms=m._session_timeout_ms,
            rebalance_timeout_ms=m._rebalance_timeout_ms,
            protocols=protocols,
        )
        m._joining = True
        try:
            resp = await m._send(
                request, m._rebalance_timeout_ms + m._session_timeout_ms + 5000, JOIN_CONNECTION
            )
        finally:
            m._joining = False
        code = resp.error_code
        if code == 0:
            m.generation = resp.generation_id
            m.member_id = resp.member_id
            m.protocol = resp.protocol_name
            m.leader_id = resp.leader
            m._heartbeat_phase.set()  # the heartbeat interval starts again now
            return resp
        if code == Errors.MemberIdRequired.errno:
            m.member_id = resp.member_id
            continue
        if code == Errors.UnknownMemberIdError.errno:
            m.member_id = ""
            if m.cooperative and m._subs.assignment:
                m._membership_lost(code)  # give the partitions up, then join anew
                return None
            continue
        if (
            m._coordinator_error(code)
            or retry_action(code).retriable
            or code == Errors.RebalanceInProgressError.errno
        ):
            await asyncio.sleep(m._backoff)
            return None
        raise Errors.for_code(code)(f"JoinGroup failed for group {m.group_id!r}")
    await asyncio.sleep(m._backoff)
    return None


async def sync(m: Coordinator, joined: Any) -> ConsumerProtocolMemberAssignment | None:
    """SyncGroup (the leader sends the assignment); None: rejoin."""
    assignments: dict[str, bytes] = {}
    if joined.leader == m.member_id:
        assignments = await leader_assignment(m, joined)
    request = sync_group_request(
        m.group_id,  # type: ignore[arg-type]  # only called with a group
        generation=m.generation,
        member_id=m.member_id,
        group_instance_id=m.group_instance_id,
        protocol_name=m.protocol,
        assignments=assignments,
    )
    resp = await m._send(request, m._rebalance_timeout_ms + 5000, JOIN_CONNECTION)
    code = resp.error_code
    if code == 0:
        return decode_assignment(resp.assignment or b"")
    if code == Errors.UnknownMemberIdError.errno:
        m.member_id = ""
    if m.cooperative and code in GENERATION_LOST:
        m._membership_lost(code)
    if retry_action(code) is RetryAction.REJOIN or m._coordinator_error(code):
        m._rejoin = True
        return None
    raise Errors.for_code(code)(f"SyncGroup failed for group {m.group_id!r}")


async def leader_assignment(m: Coordinator, joined: Any) -> dict[str, bytes]:
    """The elected leader runs the group's assignor over every member's subscription."""
    assignor = next((a for a in m._assignors if a.name == joined.protocol_name), None)
    if assignor is None:
        raise Errors.IllegalStateError(f"group chose unknown assignor {joined.protocol_name!r}")
    members = {mb.member_id: decode_subscription(mb.metadata) for mb in joined.members}
    all_topics = set().union(*(set(md.subscription) for md in members.values()))
    m._group_topics = frozenset(all_topics)
    if not all_topics <= set(m._client.cluster.topics(False)):
        m._client.add_topics(sorted(all_topics))
        fut = m._client.request_update()
        with contextlib.suppress(Errors.KafkaError, asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(fut), m._request_timeout_ms / 1000)
    # the leader rejoins when these partition counts change (not when its own metadata
    # first learns a topic: that is what made every static restart rebalance)
    m._metadata_snapshot = m._snapshot(all_topics)
    if getattr(joined, "skip_assignment", False):
        # KIP-814: a static leader replacing itself in a stable group; the broker keeps
        # the current assignment and ignores any sent
        return {}
    result = assignor.assign(m._client.cluster, members)
    log.info(
        "group %s leader: assigned %s",
        m.group_id,
        {mid: list(a.assignment) for mid, a in result.items()},
    )
    return {mid: encode_assignment(a) for mid, a in result.items()}


async def leave(
    m: Coordinator, reason: str, timeout: float | None = None, operation: str = "default"
) -> None:
    """LeaveGroup (``operation`` "default": not for a static member, the broker keeps its
    partitions for it; "leave_group": a static member too; "remain_in_group": none, KIP-1092)."""
    if m.group_id is None or (m.generation < 0 and not m.member_id):
        return
    stays = operation == "remain_in_group" or (
        m.group_instance_id is not None and operation != "leave_group"
    )
    if stays or not m.member_id:
        m.generation = -1
        return
    request = leave_group_request(m.group_id, m.member_id, reason, m.group_instance_id)
    if timeout is None:
        timeout = m._request_timeout_ms / 1000
    if timeout > 0:
        # a dead or moved coordinator is looked up again (every retry_backoff_ms) and the
        # leave sent to the new one, all within ``timeout``: the other members get the
        # partitions now, not at the end of this member's session (issue 30)
        await send_leave(m._client, m.group_id, request, timeout, "LeaveGroup")
    m.generation = -1
    m.member_id = ""


async def _heartbeat_due(m: Coordinator) -> None:
    """Sleep until the next heartbeat is due: ``heartbeat_interval_ms`` after the last one, or
    after the last JoinGroup answer when that came later (as the Java client resets its
    heartbeat timer there, and aiokafka restarts its heartbeat task after a join).

    The broker answers the JoinGroups of a rebalance together, so the members of a group then
    heartbeat in phase: when a later rebalance starts (a member joins or leaves) they all learn
    it from heartbeats answered at about the same moment, revoke and rejoin together, and the
    broker completes the join at once. With a phase of its own (e.g. from when the consumer was
    started), an eager member would learn up to a heartbeat interval after the others, which
    all wait without partitions for its JoinGroup."""
    restarted = m._heartbeat_phase
    while True:
        try:
            await asyncio.wait_for(restarted.wait(), m._heartbeat_interval)
        except asyncio.TimeoutError:
            return
        restarted.clear()  # a join was answered: a whole interval from now


async def heartbeat_loop(m: Coordinator) -> None:
    """Heartbeats every interval; rejoin, lost membership or fencing from the answers, and the
    leave when the application stopped polling for ``max_poll_interval_ms``."""
    while not m._closed:
        await _heartbeat_due(m)
        if not m.uses_group or m.generation < 0 or (m._rejoin and not m._revoking):
            continue
        if time.monotonic() - m._last_poll > m._max_poll_interval:
            log.warning(
                "group %s: no getmany()/getone() for more than max_poll_interval_ms; leaving "
                "the group (it rejoins on the next poll)",
                m.group_id,
            )
            m._poll_expired = True
            revoked = set(m._subs.assignment)
            if m._h_revoked and revoked:
                emit(m._h_revoked, m.group_id, set(revoked))
            if m._subs.listener is not None and revoked:
                await m._revoke(revoked)  # still a member: commits there work
            m._subs.revoke_to(())
            await m._leave_group("max_poll_interval_ms exceeded")
            continue
        sent_generation = m.generation
        request = heartbeat_request(
            m.group_id,  # type: ignore[arg-type]  # only called with a group
            generation=sent_generation,
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
        )
        try:
            resp = await m._send(request)
        except asyncio.CancelledError:
            raise
        except Errors.KafkaError as exc:
            log.debug("heartbeat failed: %r", exc)
            m.coordinator_id = None
            continue
        m._g_hb.ok()
        code = resp.error_code
        if code == 0:
            continue
        if code == Errors.FencedInstanceIdError.errno:
            m.fatal = Errors.FencedInstanceIdError(
                f"group_instance_id {m.group_instance_id!r} fenced"
            )
            m._rejoin = True
        elif retry_action(code) is RetryAction.REJOIN:
            token = SENT_GENERATION.set(sent_generation)
            try:
                m._membership_lost(code)
            finally:
                SENT_GENERATION.reset(token)
        elif m._coordinator_error(code):
            pass
        else:
            log.warning("heartbeat error %s", Errors.for_code(code).__name__)
