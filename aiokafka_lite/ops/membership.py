"""Group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup request builders, and the
KIP-848 consumer protocol's ConsumerGroupHeartbeat.

Only the consumer's group coordinator sends these, on its own coordinator connection, and its
retry policy is part of the membership state machine (rejoin, member id reset, fencing), so
unlike the other families there is no executor coroutine here: the builders keep the request
shapes in this layer and the coordinator reads the responses' named fields.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from .. import errors as Errors
from ..protocol import messages as m
from ._exec import coordinator_call

__all__ = [
    "consumer_group_heartbeat_request",
    "heartbeat_request",
    "join_group_request",
    "leave_group_request",
    "send_leave",
    "sync_group_request",
]

log = logging.getLogger(__name__)


def join_group_request(
    group_id: str,
    *,
    member_id: str,
    group_instance_id: str | None,
    session_timeout_ms: int,
    rebalance_timeout_ms: int,
    protocols: Iterable[tuple[str, bytes]],
    protocol_type: str = "consumer",
) -> Any:
    """JoinGroup offering ``protocols`` (assignor name, encoded subscription) in order."""
    return m.JoinGroupRequest(
        group_id=group_id,
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        member_id=member_id,
        group_instance_id=group_instance_id,
        protocol_type=protocol_type,
        protocols=[
            m.JoinGroupRequest.JoinGroupRequestProtocol(name=name, metadata=metadata)
            for name, metadata in protocols
        ],
    )


def sync_group_request(
    group_id: str,
    *,
    generation: int,
    member_id: str,
    group_instance_id: str | None,
    protocol_name: str | None,
    assignments: Mapping[str, bytes],
    protocol_type: str = "consumer",
) -> Any:
    """SyncGroup; the leader passes ``{member_id: encoded assignment}``, followers ``{}``."""
    return m.SyncGroupRequest(
        group_id=group_id,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=group_instance_id,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignments=[
            m.SyncGroupRequest.SyncGroupRequestAssignment(member_id=mid, assignment=data)
            for mid, data in assignments.items()
        ],
    )


def heartbeat_request(
    group_id: str, *, generation: int, member_id: str, group_instance_id: str | None
) -> Any:
    """Heartbeat of one member."""
    return m.HeartbeatRequest(
        group_id=group_id,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=group_instance_id,
    )


def leave_group_request(
    group_id: str, member_id: str, reason: str, instance_id: str | None = None
) -> Any:
    """LeaveGroup of one member, both the v0-2 and the batched v3+ shape (``instance_id``: a
    static member's, which leaves for good: v3+)."""
    return m.LeaveGroupRequest(
        group_id=group_id,
        member_id=member_id,
        members=[
            m.LeaveGroupRequest.MemberIdentity(
                member_id=member_id, group_instance_id=instance_id, reason=reason
            )
        ],
    )


def consumer_group_heartbeat_request(
    group_id: str,
    *,
    member_id: str,
    member_epoch: int,
    instance_id: str | None = None,
    rack_id: str | None = None,
    rebalance_timeout_ms: int = -1,
    subscribed_topic_names: Iterable[str] | None = None,
    subscribed_topic_regex: str | None = None,
    server_assignor: str | None = None,
    owned: Mapping[Any, Iterable[int]] | None = None,
) -> Any:
    """ConsumerGroupHeartbeat (KIP-848). Epoch 0 joins, -1 leaves, -2 leaves as a static member
    that comes back; every optional field left None (rebalance timeout -1) means "unchanged
    since the last heartbeat". ``owned`` maps topic id -> the partitions this member owns."""
    return m.ConsumerGroupHeartbeatRequest(
        group_id=group_id,
        member_id=member_id,
        member_epoch=member_epoch,
        instance_id=instance_id,
        rack_id=rack_id,
        rebalance_timeout_ms=rebalance_timeout_ms,
        subscribed_topic_names=None
        if subscribed_topic_names is None
        else list(subscribed_topic_names),
        subscribed_topic_regex=subscribed_topic_regex,
        server_assignor=server_assignor,
        topic_partitions=None
        if owned is None
        else [
            m.ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=tid, partitions=sorted(ps))
            for tid, ps in owned.items()
        ],
    )


async def send_leave(client: Any, group_id: str, request: Any, timeout: float, what: str) -> None:
    """Send a group leave (LeaveGroup, or a Consumer/ShareGroupHeartbeat with a leave epoch) to
    the coordinator of ``group_id`` within ``timeout`` seconds, looking the coordinator up again
    (FindCoordinator through the client's cache) and retrying every ``retry_backoff_ms`` while
    it is unknown, dead, moving or loading. A refusal (the member is already gone) or the end of
    the budget is logged, never raised: the coordinator drops the member at the end of its
    session anyway. Cancellation propagates."""
    if timeout <= 0:
        log.info("group %s: no time left to send %s", group_id, what)
        return
    try:
        await asyncio.wait_for(
            coordinator_call(
                client,
                group_id,
                0,
                request,
                lambda r: int(r.error_code),
                timeout_ms=timeout * 1000,
                what=what,
            ),
            timeout,
        )
    except (Errors.KafkaError, asyncio.TimeoutError) as exc:
        log.info("group %s: %s not answered: %r", group_id, what, exc)
