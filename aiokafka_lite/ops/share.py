"""Share groups (KIP-932): ShareGroupHeartbeat, ShareFetch and ShareAcknowledge, sans-I/O.

The share consumer (:mod:`aiokafka_lite.share`) runs these itself: its membership loop sends
the heartbeat through :func:`~aiokafka_lite.ops._exec.coordinator_call`, its fetcher keeps one
share session per leader (the session epochs are fetcher state). Here the requests are built
from plain values and the responses read into plain dataclasses, so nothing above this layer
touches a message class. Partitions are addressed by ``(topic_id, partition)`` on the wire;
the caller maps topic names to ids with the client's metadata.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..protocol import messages as m

__all__ = [
    "AckBatch",
    "HeartbeatResult",
    "SharePartitionData",
    "ShareResult",
    "TopicIdPartition",
    "parse_share_acknowledge",
    "parse_share_fetch",
    "parse_share_heartbeat",
    "share_acknowledge_request",
    "share_fetch_request",
    "share_heartbeat_request",
    "supports_renew",
    "supports_share_groups",
]

#: a partition as share requests address it
TopicIdPartition = tuple[uuid.UUID, int]


@dataclass(frozen=True)
class AckBatch:
    """Offsets ``first``..``last`` (inclusive) acknowledged with ``types``: one type for the
    whole range, or one per offset (0 gap, 1 accept, 2 release, 3 reject, 4 renew)."""

    first: int
    last: int
    types: tuple[int, ...]


@dataclass
class HeartbeatResult:
    """A ShareGroupHeartbeat answer: ``assignment`` is None when it did not change."""

    error_code: int
    error_message: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: dict[uuid.UUID, list[int]] | None


@dataclass
class SharePartitionData:
    """One partition of a ShareFetch/ShareAcknowledge answer.

    ``acquired``: ``(first_offset, last_offset, delivery_count)`` ranges of the records this
    member now holds; ``records``: the raw record batches (they may hold records that other
    members acquired: only the acquired offsets are this member's)."""

    error_code: int = 0
    error_message: str | None = None
    ack_error_code: int = 0
    ack_error_message: str | None = None
    leader_id: int = -1
    leader_epoch: int = -1
    records: Any = None
    acquired: list[tuple[int, int, int]] = field(default_factory=list)


@dataclass
class ShareResult:
    """A ShareFetch or ShareAcknowledge answer, partition by partition."""

    error_code: int
    error_message: str | None
    lock_timeout_ms: int
    partitions: dict[TopicIdPartition, SharePartitionData]


def supports_share_groups(client: Any) -> bool:
    """True when the brokers (as last negotiated by ``client``) have share groups."""
    return bool(
        client.supports(m.ShareGroupHeartbeatRequest)
        and client.supports(m.ShareFetchRequest)
        and client.supports(m.ShareAcknowledgeRequest)
    )


def supports_renew(client: Any) -> bool:
    """True when the brokers carry RENEW acknowledgements (KIP-1222: ShareFetch and
    ShareAcknowledge v2, Apache Kafka 4.2+)."""
    return bool(
        client.supports(m.ShareFetchRequest, 2) and client.supports(m.ShareAcknowledgeRequest, 2)
    )


# -- membership ------------------------------------------------------------------------------


def share_heartbeat_request(
    group_id: str,
    member_id: str,
    member_epoch: int,
    subscribed: Iterable[str] | None,
    rack_id: str | None = None,
) -> Any:
    """ShareGroupHeartbeat: epoch 0 joins, -1 leaves; ``subscribed`` None when unchanged."""
    return m.ShareGroupHeartbeatRequest(
        group_id=group_id,
        member_id=member_id,
        member_epoch=member_epoch,
        rack_id=rack_id,
        subscribed_topic_names=None if subscribed is None else sorted(subscribed),
    )


def parse_share_heartbeat(resp: Any) -> HeartbeatResult:
    """The answer's epoch, interval and (when sent) assignment by topic id."""
    assignment: dict[uuid.UUID, list[int]] | None = None
    if resp.assignment is not None:
        assignment = {}
        for tp in resp.assignment.topic_partitions:
            assignment.setdefault(tp.topic_id, []).extend(tp.partitions)
    return HeartbeatResult(
        error_code=resp.error_code,
        error_message=resp.error_message,
        member_epoch=resp.member_epoch,
        heartbeat_interval_ms=resp.heartbeat_interval_ms,
        assignment=assignment,
    )


# -- fetch and acknowledge -------------------------------------------------------------------


def _ack_batches(cls: Any, batches: Sequence[AckBatch]) -> list[Any]:
    return [
        cls(first_offset=b.first, last_offset=b.last, acknowledge_types=list(b.types))
        for b in batches
    ]


def _is_renew(acks: Mapping[TopicIdPartition, Sequence[AckBatch]]) -> bool:
    return any(4 in b.types for batches in acks.values() for b in batches)


def share_fetch_request(
    group_id: str,
    member_id: str,
    session_epoch: int,
    *,
    fetch: Iterable[TopicIdPartition],
    forget: Iterable[TopicIdPartition] = (),
    acks: Mapping[TopicIdPartition, Sequence[AckBatch]] | None = None,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    max_records: int,
    batch_size: int,
    strict_max_records: bool = False,
) -> Any:
    """ShareFetch: ``fetch`` are the partitions added to the session (all of them when the
    epoch is 0), ``forget`` those leaving it, ``acks`` acknowledgements per partition (a
    partition with acknowledgements is named in the request even when not added).

    ``strict_max_records`` asks for the record-limit acquire mode (KIP-1206, v2): the broker
    then acquires at most ``max_records`` records instead of whole batches."""
    acks = acks or {}
    P = m.ShareFetchRequest.FetchPartition
    by_topic: dict[uuid.UUID, dict[int, Any]] = {}
    for tid, part in fetch:
        by_topic.setdefault(tid, {})[part] = P(
            partition_index=part, partition_max_bytes=max_bytes, acknowledgement_batches=[]
        )
    for (tid, part), batches in acks.items():
        p = by_topic.setdefault(tid, {}).get(part)
        if p is None:
            p = by_topic[tid][part] = P(
                partition_index=part, partition_max_bytes=0, acknowledgement_batches=[]
            )
        p.acknowledgement_batches = _ack_batches(m.ShareFetchRequest.AcknowledgementBatch, batches)
    forgotten: dict[uuid.UUID, list[int]] = {}
    for tid, part in forget:
        forgotten.setdefault(tid, []).append(part)
    return m.ShareFetchRequest(
        group_id=group_id,
        member_id=member_id,
        share_session_epoch=session_epoch,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        max_records=max_records,
        batch_size=batch_size,
        share_acquire_mode=1 if strict_max_records else 0,
        is_renew_ack=_is_renew(acks),
        topics=[
            m.ShareFetchRequest.FetchTopic(topic_id=tid, partitions=list(parts.values()))
            for tid, parts in by_topic.items()
        ],
        forgotten_topics_data=[
            m.ShareFetchRequest.ForgottenTopic(topic_id=tid, partitions=parts)
            for tid, parts in forgotten.items()
        ],
    )


def share_acknowledge_request(
    group_id: str,
    member_id: str,
    session_epoch: int,
    acks: Mapping[TopicIdPartition, Sequence[AckBatch]],
) -> Any:
    """ShareAcknowledge of ``acks`` in an open session (epoch -1 also closes it)."""
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for (tid, part), batches in acks.items():
        by_topic.setdefault(tid, []).append(
            m.ShareAcknowledgeRequest.AcknowledgePartition(
                partition_index=part,
                acknowledgement_batches=_ack_batches(
                    m.ShareAcknowledgeRequest.AcknowledgementBatch, batches
                ),
            )
        )
    return m.ShareAcknowledgeRequest(
        group_id=group_id,
        member_id=member_id,
        share_session_epoch=session_epoch,
        is_renew_ack=_is_renew(acks),
        topics=[
            m.ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=tid, partitions=parts)
            for tid, parts in by_topic.items()
        ],
    )


def _leader(pd: Any) -> tuple[int, int]:
    leader = pd.current_leader
    if leader is None:
        return -1, -1
    return leader.leader_id, leader.leader_epoch


def parse_share_fetch(resp: Any) -> ShareResult:
    """Each partition's fetch and acknowledgement outcome, records and acquired ranges."""
    parts: dict[TopicIdPartition, SharePartitionData] = {}
    for t in resp.responses:
        for pd in t.partitions:
            leader_id, leader_epoch = _leader(pd)
            parts[(t.topic_id, pd.partition_index)] = SharePartitionData(
                error_code=pd.error_code,
                error_message=pd.error_message,
                ack_error_code=pd.acknowledge_error_code,
                ack_error_message=pd.acknowledge_error_message,
                leader_id=leader_id,
                leader_epoch=leader_epoch,
                records=pd.records,
                acquired=[
                    (a.first_offset, a.last_offset, a.delivery_count) for a in pd.acquired_records
                ],
            )
    return ShareResult(
        error_code=resp.error_code,
        error_message=resp.error_message,
        lock_timeout_ms=resp.acquisition_lock_timeout_ms or 0,
        partitions=parts,
    )


def parse_share_acknowledge(resp: Any) -> ShareResult:
    """Each partition's acknowledgement outcome (in ``ack_error_code``)."""
    parts: dict[TopicIdPartition, SharePartitionData] = {}
    for t in resp.responses:
        for pd in t.partitions:
            leader_id, leader_epoch = _leader(pd)
            parts[(t.topic_id, pd.partition_index)] = SharePartitionData(
                ack_error_code=pd.error_code,
                ack_error_message=pd.error_message,
                leader_id=leader_id,
                leader_epoch=leader_epoch,
            )
    return ShareResult(
        error_code=resp.error_code,
        error_message=resp.error_message,
        lock_timeout_ms=getattr(resp, "acquisition_lock_timeout_ms", 0) or 0,
        partitions=parts,
    )
