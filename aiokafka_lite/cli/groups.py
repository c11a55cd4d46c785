"""``aiokafka-lite groups list|describe``.

The admin client has no group calls yet, so this module speaks the group APIs itself through
:class:`aiokafka_lite.client.KafkaClient`: ListGroups (asked of every broker: each lists the groups
it coordinates), FindCoordinator + DescribeGroups (state, members, their assignments decoded from
the consumer protocol) and OffsetFetch (committed offsets) and ListOffsets (log end, for the lag; Tansu answers "latest"
with the newest batch's base offset + 1, so its lag is only right for one-record batches).
"""

from __future__ import annotations

import argparse
from typing import Any

from ._common import CliError, add_bootstrap, print_table, run

__all__ = ["register", "list_groups", "describe_group"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``groups`` command group."""
    p = sub.add_parser("groups", help="list and describe consumer groups",
                       description="Consumer group inspection.")  # fmt: skip
    gsub = p.add_subparsers(dest="groups_cmd", metavar="ACTION", required=True)
    q = gsub.add_parser("list", help="every group the brokers know, with its state")
    add_bootstrap(q)
    q.set_defaults(func=cmd_list)
    q = gsub.add_parser("describe", help="state, members, assignments and committed offsets")
    add_bootstrap(q)
    q.add_argument("groups", nargs="+", metavar="GROUP")
    q.set_defaults(func=cmd_describe)


def _client(args: argparse.Namespace) -> Any:
    from ..client import KafkaClient

    return KafkaClient(
        bootstrap_servers=args.bootstrap,
        client_id="aiokafka-lite-cli",
        request_timeout_ms=int(args.timeout * 1000),
        allow_auto_topic_creation=False,  # looking at a group must not recreate its topics
    )


def _raise(code: int, what: str) -> None:
    if code:
        from .. import errors as Errors

        err = Errors.for_code(code)
        raise CliError(f"{what}: {err.__name__} (error {code})")


async def list_groups(client: Any) -> list[dict[str, Any]]:
    """``[{"group", "state", "protocol_type", "coordinator"}]`` from every broker."""
    from ..protocol import messages as m

    out: dict[str, dict[str, Any]] = {}
    for broker in sorted(client.cluster.brokers(), key=lambda b: b.nodeId):
        resp = await client.send(broker.nodeId, m.ListGroupsRequest())
        _raise(resp.error_code, f"ListGroups on broker {broker.nodeId}")
        for g in resp.groups:
            out[g.group_id] = {
                "group": g.group_id,
                "state": g.group_state or "",
                "protocol_type": g.protocol_type,
                "coordinator": broker.nodeId,
            }
    return [out[k] for k in sorted(out)]


def _assignment(data: Any) -> list[tuple[str, int]]:
    from ..protocol import decode_data
    from ..protocol import messages as m

    if not data:
        return []
    try:
        assignment, _version = decode_data(m.ConsumerProtocolAssignment, bytes(data))
    except Exception:
        return []
    return [(tp.topic, p) for tp in assignment.assigned_partitions for p in tp.partitions]


async def describe_group(client: Any, group: str) -> dict[str, Any]:
    """State, protocol, members (with assignments) and committed offsets of ``group``."""
    from ..protocol import messages as m

    node = await client.find_coordinator(group)
    resp = await client.send(node, m.DescribeGroupsRequest(groups=[group]))
    described = next((g for g in resp.groups if g.group_id == group), None)
    if described is None:
        raise CliError(f"group {group!r}: not in the DescribeGroups answer")
    _raise(described.error_code, f"group {group!r}")
    members = []
    owner: dict[tuple[str, int], str] = {}
    for member in described.members:
        tps = _assignment(member.member_assignment) if described.protocol_type == "consumer" else []
        for tp in tps:
            owner[tp] = member.member_id
        members.append(
            {
                "member_id": member.member_id,
                "instance_id": member.group_instance_id,
                "client_id": member.client_id,
                "host": member.client_host,
                "partitions": tps,
            }
        )
    request = m.OffsetFetchRequest(
        group_id=group,
        topics=None,
        groups=[m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)],
    )
    oresp = await client.send(node, request)
    offsets: dict[tuple[str, int], int] = {}
    if oresp.groups:
        _raise(oresp.groups[0].error_code, f"committed offsets of {group!r}")
        topics = oresp.groups[0].topics
    else:
        _raise(oresp.error_code, f"committed offsets of {group!r}")
        topics = oresp.topics
    for t in topics:
        for p in t.partitions:
            if not p.error_code and p.committed_offset >= 0:
                offsets[(t.name, p.partition_index)] = p.committed_offset
    ends = await log_end_offsets(client, sorted(set(offsets) | set(owner)))
    return {
        "group": group,
        "ends": ends,
        "state": described.group_state,
        "protocol_type": described.protocol_type,
        "protocol": described.protocol_data,
        "coordinator": node,
        "members": members,
        "offsets": offsets,
        "owner": owner,
    }


async def log_end_offsets(client: Any, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Latest offset of each partition (ListOffsets to each leader); missing ones are left out."""
    from ..protocol import messages as m
    from ..structs import TopicPartition

    if not tps:
        return {}
    from .. import errors as Errors

    for topic in sorted({t for t, _ in tps}):
        try:  # a group may keep offsets of a deleted topic: no log end then
            await client.wait_for_topic(topic, min(2000, client.request_timeout_ms))
        except Errors.KafkaError:
            continue
    by_leader: dict[int, dict[str, list[int]]] = {}
    for topic, partition in tps:
        leader = client.cluster.leader_for_partition(TopicPartition(topic, partition))
        if leader is not None and leader >= 0:
            by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)
    out: dict[tuple[str, int], int] = {}
    for leader, topics in by_leader.items():
        request = m.ListOffsetsRequest(
            replica_id=-1,
            topics=[
                m.ListOffsetsRequest.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        m.ListOffsetsRequest.ListOffsetsPartition(partition_index=p, timestamp=-1)
                        for p in parts
                    ],
                )
                for topic, parts in topics.items()
            ],
        )
        resp = await client.send(leader, request)
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    continue
                offset = p.offset if p.offset >= 0 else max(p.old_style_offsets or [-1])
                if offset >= 0:
                    out[(t.name, p.partition_index)] = offset
    return out


def cmd_list(args: argparse.Namespace) -> int:
    """``groups list``."""

    async def main() -> list[dict[str, Any]]:
        async with _client(args) as client:
            return await list_groups(client)

    rows = [
        (g["group"], g["state"], g["protocol_type"], g["coordinator"])
        for g in run(main(), args.timeout)
    ]
    print_table(("GROUP", "STATE", "PROTOCOL TYPE", "COORDINATOR"), rows)
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    """``groups describe``."""

    async def main() -> list[dict[str, Any]]:
        async with _client(args) as client:
            return [await describe_group(client, g) for g in args.groups]

    for i, info in enumerate(run(main(), args.timeout)):
        if i:
            print()
        print(
            f"group {info['group']}: state {info['state'] or '-'}, protocol "
            f"{info['protocol_type'] or '-'}/{info['protocol'] or '-'}, coordinator {info['coordinator']}, "
            f"{len(info['members'])} member(s)"
        )
        tps = sorted(set(info["offsets"]) | set(info["owner"]))
        members = {mb["member_id"]: mb for mb in info["members"]}
        rows = []
        for tp in tps:
            member = members.get(info["owner"].get(tp, ""))
            committed, end = info["offsets"].get(tp), info["ends"].get(tp)
            lag = end - committed if committed is not None and end is not None else None
            rows.append(
                (
                    tp[0],
                    tp[1],
                    committed,
                    end,
                    lag,
                    member["member_id"] if member else None,
                    member["client_id"] if member else None,
                    member["host"] if member else None,
                )
            )
        for mb in info["members"]:
            if not mb["partitions"]:
                rows.append(
                    (None, None, None, None, None, mb["member_id"], mb["client_id"], mb["host"])
                )
        if rows:
            headers = (
                "TOPIC",
                "PARTITION",
                "COMMITTED",
                "LOG END",
                "LAG",
                "MEMBER",
                "CLIENT ID",
                "HOST",
            )
            print_table(headers, rows)
    return 0
