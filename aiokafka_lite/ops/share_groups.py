"""Share-group administration (KIP-932): ShareGroupDescribe, DescribeShareGroupOffsets,
AlterShareGroupOffsets, DeleteShareGroupOffsets; all at the group's coordinator.

Listing share groups is ListGroups (:func:`~aiokafka_lite.ops.groups.list_groups`, type
``"share"``) and deleting them DeleteGroups (:func:`~aiokafka_lite.ops.groups.delete_groups`).
A share group's "offset" for a partition is its start offset (the first record not yet
accepted, rejected or archived), with the lag behind the log end on brokers with v1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..protocol import messages as m
from ..structs import TopicPartition
from ._exec import ItemError, at_coordinator, by_coordinator

if TYPE_CHECKING:
    from ..client import KafkaClient

__all__ = [
    "ShareGroupDescription",
    "ShareGroupMember",
    "ShareOffset",
    "alter_share_group_offsets",
    "delete_share_group_offsets",
    "describe_share_group_offsets",
    "describe_share_groups",
]


@dataclass(frozen=True)
class ShareGroupMember:
    """A member of a described share group and the partitions it is assigned."""

    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed_topics: tuple[str, ...]
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ShareGroupDescription:
    """A ShareGroupDescribe answer for one group (``state``: Empty, Stable, Dead ...)."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ShareGroupMember, ...] = ()
    authorized_operations: int = -2147483648
    error: ItemError | None = None


@dataclass(frozen=True)
class ShareOffset:
    """A share group's position in a partition: ``start_offset`` (-1: none yet) and ``lag``
    (-1 when the broker does not report it)."""

    start_offset: int
    leader_epoch: int
    lag: int = -1


def _describe_request(groups: Sequence[str], include_authorized_operations: bool) -> Any:
    return m.ShareGroupDescribeRequest(
        group_ids=list(groups), include_authorized_operations=include_authorized_operations
    )


def _parse_describe(resp: Any) -> dict[str, ShareGroupDescription | ItemError]:
    out: dict[str, ShareGroupDescription | ItemError] = {}
    for g in resp.groups:
        err = ItemError(g.error_code, g.error_message) if g.error_code else None
        if err is not None and err.retriable:
            out[g.group_id] = err
            continue
        members = tuple(
            ShareGroupMember(
                member_id=mb.member_id,
                member_epoch=mb.member_epoch,
                client_id=mb.client_id,
                client_host=mb.client_host,
                rack_id=mb.rack_id,
                subscribed_topics=tuple(mb.subscribed_topic_names),
                assignment=tuple(
                    TopicPartition(t.topic_name, p)
                    for t in (mb.assignment.topic_partitions if mb.assignment else ())
                    for p in t.partitions
                ),
            )
            for mb in g.members
        )
        out[g.group_id] = ShareGroupDescription(
            group_id=g.group_id,
            state=g.group_state or "",
            group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch,
            assignor=g.assignor_name or "",
            members=members,
            authorized_operations=g.authorized_operations,
            error=err,
        )
    return out


async def describe_share_groups(
    client: KafkaClient,
    group_ids: Iterable[str],
    *,
    include_authorized_operations: bool = False,
    timeout_ms: float | None = None,
) -> dict[str, ShareGroupDescription | ItemError]:
    """ShareGroupDescribe at each group's coordinator: ``{group_id: description}``
    (GROUP_ID_NOT_FOUND and the like in ``description.error``)."""
    return await by_coordinator(
        client,
        group_ids,
        lambda groups: _describe_request(groups, include_authorized_operations),
        _parse_describe,
        timeout_ms=timeout_ms,
        what="ShareGroupDescribe",
    )


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in partitions:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


async def describe_share_group_offsets(
    client: KafkaClient,
    group_id: str,
    partitions: Iterable[TopicPartition] | None = None,
    *,
    timeout_ms: float | None = None,
) -> dict[TopicPartition, ShareOffset | ItemError]:
    """The group's start offset (and lag) in ``partitions`` (None: every partition it has
    state for); a group-level error is raised, partition errors come back as ItemError."""
    topics = (
        None
        if partitions is None
        else [
            m.DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestTopic(
                topic_name=t, partitions=ps
            )
            for t, ps in _by_topic(partitions).items()
        ]
    )
    request = m.DescribeShareGroupOffsetsRequest(
        groups=[
            m.DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(
                group_id=group_id, topics=topics
            )
        ]
    )

    def parse(resp: Any) -> dict[TopicPartition, ShareOffset | ItemError] | ItemError:
        for g in resp.groups:
            if g.group_id != group_id:
                continue
            if g.error_code:
                return ItemError(g.error_code, g.error_message)
            out: dict[TopicPartition, ShareOffset | ItemError] = {}
            for t in g.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.topic_name, p.partition_index)
                    out[tp] = (
                        ItemError(p.error_code, p.error_message)
                        if p.error_code
                        else ShareOffset(p.start_offset, p.leader_epoch, p.lag)
                    )
            return out
        return ItemError(-1, f"no answer for group {group_id!r}")

    return await at_coordinator(
        client,
        group_id,
        lambda: request,
        parse,
        timeout_ms=timeout_ms,
        what="DescribeShareGroupOffsets",
    )


async def alter_share_group_offsets(
    client: KafkaClient,
    group_id: str,
    offsets: Mapping[TopicPartition, int],
    *,
    timeout_ms: float | None = None,
) -> dict[TopicPartition, ItemError | None]:
    """Set the group's start offset in each partition (the group must have no members);
    a group-level error is raised, partition errors are returned."""
    by_topic: dict[str, list[Any]] = {}
    for tp, offset in offsets.items():
        by_topic.setdefault(tp.topic, []).append(
            m.AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestPartition(
                partition_index=tp.partition, start_offset=offset
            )
        )
    request = m.AlterShareGroupOffsetsRequest(
        group_id=group_id,
        topics=[
            m.AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic(
                topic_name=t, partitions=ps
            )
            for t, ps in by_topic.items()
        ],
    )

    def parse(resp: Any) -> dict[TopicPartition, ItemError | None] | ItemError:
        if resp.error_code:
            return ItemError(resp.error_code, resp.error_message)
        return {
            TopicPartition(t.topic_name, p.partition_index): (
                ItemError(p.error_code, p.error_message) if p.error_code else None
            )
            for t in resp.responses
            for p in t.partitions
        }

    return await at_coordinator(
        client,
        group_id,
        lambda: request,
        parse,
        timeout_ms=timeout_ms,
        what="AlterShareGroupOffsets",
    )


async def delete_share_group_offsets(
    client: KafkaClient,
    group_id: str,
    topics: Iterable[str],
    *,
    timeout_ms: float | None = None,
) -> dict[str, ItemError | None]:
    """Forget the group's state for ``topics`` (the group must have no members); a group-level
    error is raised, topic errors are returned."""
    request = m.DeleteShareGroupOffsetsRequest(
        group_id=group_id,
        topics=[
            m.DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(topic_name=t)
            for t in dict.fromkeys(topics)
        ],
    )

    def parse(resp: Any) -> dict[str, ItemError | None] | ItemError:
        if resp.error_code:
            return ItemError(resp.error_code, resp.error_message)
        return {
            t.topic_name: (ItemError(t.error_code, t.error_message) if t.error_code else None)
            for t in resp.responses
        }

    return await at_coordinator(
        client,
        group_id,
        lambda: request,
        parse,
        timeout_ms=timeout_ms,
        what="DeleteShareGroupOffsets",
    )
