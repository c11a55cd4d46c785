"""Groups: FindCoordinator, DescribeGroups (and ConsumerGroupDescribe for KIP-848 groups),
ListGroups, DeleteGroups, OffsetDelete."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..protocol import decode_data, encode_data
from ..protocol import messages as m
from ..structs import TopicPartition
from ._exec import (
    Coordinator,
    ItemError,
    at_coordinator,
    by_coordinator,
    find_coordinator,
    find_coordinator_request,
    parse_find_coordinator,
    to_node,
)

if TYPE_CHECKING:
    from ..client import KafkaClient

__all__ = [
    "Coordinator",
    "offset_delete_request",
    "GroupDescription",
    "GroupMember",
    "ListedGroup",
    "delete_groups",
    "delete_groups_request",
    "delete_offsets",
    "consumer_group_describe_request",
    "describe_groups",
    "describe_groups_request",
    "find_coordinator",
    "find_coordinator_request",
    "list_groups",
    "list_groups_request",
    "parse_consumer_group_describe",
    "parse_delete_groups",
    "parse_describe_groups",
    "parse_find_coordinator",
    "parse_list_groups",
]


# -------------------------------------------------------------------------- FindCoordinator


# ``Coordinator``, ``find_coordinator_request`` and ``parse_find_coordinator`` live below the
# client (``_wire``), the look-up in the executor (``_exec.find_coordinator``); re-exported here.


# ---------------------------------------------------------------------------- DescribeGroups


@dataclass(frozen=True)
class GroupMember:
    """A member of a described group; ``assignment`` is decoded for consumer groups."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes
    assignment: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class GroupDescription:
    """A DescribeGroups answer for one group."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[GroupMember, ...] = ()
    authorized_operations: int = -2147483648
    error: ItemError | None = None


_GROUP_ID_NOT_FOUND = 69


def describe_groups_request(
    groups: Sequence[str], include_authorized_operations: bool = False
) -> Any:
    """DescribeGroups of ``groups`` (all at one coordinator)."""
    return m.DescribeGroupsRequest(
        groups=list(groups), include_authorized_operations=include_authorized_operations
    )


def _assignment(protocol_type: str, data: bytes | None) -> tuple[TopicPartition, ...]:
    if protocol_type != "consumer" or not data:
        return ()
    try:
        assignment, _version = decode_data(m.ConsumerProtocolAssignment, bytes(data))
    except Exception:  # a member of another client family may write anything here
        return ()
    return tuple(
        TopicPartition(t.topic, p) for t in assignment.assigned_partitions for p in t.partitions
    )


def parse_describe_groups(resp: Any) -> dict[str, GroupDescription | ItemError]:
    """``{group_id: GroupDescription}``; coordinator errors come back as ItemError (retried),
    other group errors inside the description (aiokafka returns those too)."""
    out: dict[str, GroupDescription | ItemError] = {}
    for g in resp.groups:
        code = g.error_code
        if code == _GROUP_ID_NOT_FOUND:
            # v6+ (KIP-1043) answers an unknown group so; older versions, and aiokafka, a
            # group in state Dead without an error: that is kept
            code = 0
        err = ItemError(code, getattr(g, "error_message", None)) if code else None
        if err is not None and err.retriable:
            out[g.group_id] = err
            continue
        members = tuple(
            GroupMember(
                member_id=mb.member_id,
                group_instance_id=mb.group_instance_id,
                client_id=mb.client_id,
                client_host=mb.client_host,
                member_metadata=bytes(mb.member_metadata or b""),
                member_assignment=bytes(mb.member_assignment or b""),
                assignment=_assignment(g.protocol_type, mb.member_assignment),
            )
            for mb in g.members
        )
        out[g.group_id] = GroupDescription(
            group_id=g.group_id,
            state=g.group_state or ("Dead" if g.error_code == _GROUP_ID_NOT_FOUND else ""),
            protocol_type=g.protocol_type,
            protocol=g.protocol_data,
            members=members,
            authorized_operations=g.authorized_operations,
            error=err,
        )
    return out


def consumer_group_describe_request(
    groups: Sequence[str], include_authorized_operations: bool = False
) -> Any:
    """ConsumerGroupDescribe (KIP-848 groups) of ``groups`` (all at one coordinator)."""
    return m.ConsumerGroupDescribeRequest(
        group_ids=list(groups), include_authorized_operations=include_authorized_operations
    )


def parse_consumer_group_describe(resp: Any) -> dict[str, GroupDescription | ItemError]:
    """ConsumerGroupDescribe answers in DescribeGroups' shape: protocol type ``consumer``, the
    broker's assignor as the protocol, each member's current assignment (topic names) also
    encoded as the classic ConsumerProtocolAssignment, no member metadata."""
    out: dict[str, GroupDescription | ItemError] = {}
    for g in resp.groups:
        err = ItemError(g.error_code, g.error_message) if g.error_code else None
        if err is not None and err.retriable:
            out[g.group_id] = err
            continue
        members = []
        for mb in g.members:
            owned = [(t.topic_name, list(t.partitions)) for t in mb.assignment.topic_partitions]
            data = m.ConsumerProtocolAssignment(
                assigned_partitions=[
                    m.ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps)
                    for t, ps in owned
                ]
            )
            members.append(
                GroupMember(
                    member_id=mb.member_id,
                    group_instance_id=mb.instance_id,
                    client_id=mb.client_id,
                    client_host=mb.client_host,
                    member_metadata=b"",
                    member_assignment=encode_data(data, 0),
                    assignment=tuple(TopicPartition(t, p) for t, ps in owned for p in ps),
                )
            )
        out[g.group_id] = GroupDescription(
            group_id=g.group_id,
            state=g.group_state,
            protocol_type="consumer",
            protocol=g.assignor_name,
            members=tuple(members),
            authorized_operations=g.authorized_operations,
            error=err,
        )
    return out


async def describe_groups(
    client: KafkaClient,
    group_ids: Iterable[str],
    *,
    include_authorized_operations: bool = False,
    coordinator: int | None = None,
    timeout_ms: float | None = None,
) -> dict[str, GroupDescription | ItemError]:
    """DescribeGroups at each group's coordinator. A Kafka 4 broker describes a KIP-848 group
    that way as ``Dead`` with no members; those are asked again with ConsumerGroupDescribe
    (where the broker has it), so groups of either protocol are described."""
    found = await by_coordinator(
        client,
        group_ids,
        lambda groups: describe_groups_request(groups, include_authorized_operations),
        parse_describe_groups,
        timeout_ms=timeout_ms,
        what="DescribeGroups",
        coordinator=coordinator,
    )
    dead = [
        gid
        for gid, d in found.items()
        if isinstance(d, GroupDescription) and d.error is None and d.state == "Dead"
    ]
    if dead and client.supports(m.ConsumerGroupDescribeRequest):
        again = await by_coordinator(
            client,
            dead,
            lambda groups: consumer_group_describe_request(groups, include_authorized_operations),
            parse_consumer_group_describe,
            timeout_ms=timeout_ms,
            what="ConsumerGroupDescribe",
            coordinator=coordinator,
        )
        for gid, d in again.items():  # GROUP_ID_NOT_FOUND: no such group, keep "Dead"
            if isinstance(d, GroupDescription) and d.error is None:
                found[gid] = d
    return found


# -------------------------------------------------------------------------------- ListGroups


@dataclass(frozen=True)
class ListedGroup:
    """One group of a ListGroups answer, with the broker (its coordinator) that listed it."""

    group_id: str
    protocol_type: str
    state: str = ""
    group_type: str = ""
    coordinator: int = -1


def list_groups_request(states: Iterable[str] = (), types: Iterable[str] = ()) -> Any:
    """ListGroups (optionally only groups in ``states``, v4+, of ``types``: ``classic``,
    ``consumer``, ..., v5+)."""
    return m.ListGroupsRequest(states_filter=list(states), types_filter=list(types))


def parse_list_groups(resp: Any, node_id: int) -> list[ListedGroup] | ItemError:
    """The groups ``node_id`` coordinates, or its error."""
    if resp.error_code:
        return ItemError(resp.error_code)
    return [
        ListedGroup(g.group_id, g.protocol_type, g.group_state or "", g.group_type or "", node_id)
        for g in resp.groups
    ]


async def list_groups(
    client: KafkaClient,
    broker_ids: Iterable[int] | None = None,
    *,
    timeout_ms: float | None = None,
    states: Iterable[str] = (),
    types: Iterable[str] = (),
) -> list[ListedGroup]:
    """ListGroups of every broker (each lists the groups it coordinates), sorted by group id.

    ``states`` / ``types``: only groups in those states / of those types (case-insensitive;
    also applied to the answers of brokers too old to filter). A broker's error (e.g.
    COORDINATOR_LOAD_IN_PROGRESS) is raised, as aiokafka does.
    """
    want_states = {x.lower() for x in states}
    want_types = {x.lower() for x in types}
    if broker_ids is None:
        if not client.cluster.brokers():
            await client.force_metadata_update()
        broker_ids = sorted(int(b.nodeId) for b in client.cluster.brokers())
    nodes = list(broker_ids)
    answers = await asyncio.gather(
        *(
            to_node(
                client,
                list_groups_request(sorted(states), sorted(types)),
                node_id=n,
                timeout_ms=timeout_ms,
                what="ListGroups",
            )
            for n in nodes
        )
    )
    out: dict[str, ListedGroup] = {}
    for node, resp in zip(nodes, answers):
        parsed = parse_list_groups(resp, node)
        if isinstance(parsed, ItemError):
            raise parsed.exception(f"ListGroups on broker {node}")
        for g in parsed:
            if want_states and g.state.lower() not in want_states:
                continue
            if want_types and (g.group_type or "classic").lower() not in want_types:
                continue
            out[g.group_id] = g
    return [out[k] for k in sorted(out)]


# ------------------------------------------------------------------------------ DeleteGroups


def delete_groups_request(groups: Sequence[str]) -> Any:
    """DeleteGroups of ``groups`` (all at one coordinator)."""
    return m.DeleteGroupsRequest(groups_names=list(groups))


def parse_delete_groups(resp: Any) -> dict[str, int | ItemError]:
    """``{group_id: 0 | ItemError}``."""
    return {r.group_id: (ItemError(r.error_code) if r.error_code else 0) for r in resp.results}


async def delete_groups(
    client: KafkaClient, group_ids: Iterable[str], *, timeout_ms: float | None = None
) -> dict[str, ItemError | None]:
    """DeleteGroups at each coordinator: ``{group_id: None (deleted) | ItemError}``."""
    res = await by_coordinator(
        client,
        group_ids,
        delete_groups_request,
        parse_delete_groups,
        timeout_ms=timeout_ms,
        what="DeleteGroups",
    )
    return {g: (v if isinstance(v, ItemError) else None) for g, v in res.items()}


# ------------------------------------------------------------------------------ OffsetDelete


def offset_delete_request(group_id: str, partitions: Iterable[TopicPartition]) -> Any:
    """OffsetDelete of ``partitions``' committed offsets in ``group_id``."""
    by_topic: dict[str, list[Any]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(
            m.OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=tp.partition)
        )
    return m.OffsetDeleteRequest(
        group_id=group_id,
        topics=[
            m.OffsetDeleteRequest.OffsetDeleteRequestTopic(name=t, partitions=ps)
            for t, ps in by_topic.items()
        ],
    )


async def delete_offsets(
    client: KafkaClient,
    group_id: str,
    partitions: Iterable[TopicPartition],
    *,
    timeout_ms: float | None = None,
) -> dict[TopicPartition, int]:
    """OffsetDelete: ``{tp: error_code}`` (e.g. GROUP_SUBSCRIBED_TO_TOPIC per partition); a
    group-level error (e.g. NON_EMPTY_GROUP) is raised."""
    tps = list(partitions)

    def parse(resp: Any) -> dict[TopicPartition, int] | ItemError:
        if resp.error_code:
            return ItemError(resp.error_code)
        return {
            TopicPartition(t.name, p.partition_index): p.error_code
            for t in resp.topics
            for p in t.partitions
        }

    return await at_coordinator(
        client,
        group_id,
        lambda: offset_delete_request(group_id, tps),
        parse,
        timeout_ms=timeout_ms,
        what="OffsetDelete",
    )
