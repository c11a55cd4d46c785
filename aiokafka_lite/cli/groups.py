"""``aiokafka-lite groups list|describe|reset-offsets``: thin callers of the admin client.

``describe`` shows each partition's committed offset, log end and lag (Tansu answers ListOffsets
"latest" with the newest batch's base offset + 1, so its lag is only right for one-record
batches). ``reset-offsets`` moves an empty group's committed offsets like Kafka's
``kafka-consumer-groups --reset-offsets``: it prints the plan and changes nothing unless
``--execute`` is given.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from ._common import CliError, add_bootstrap, print_table, run

__all__ = ["register", "list_groups", "describe_group", "reset_offsets"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``groups`` command group."""
    p = sub.add_parser(
        "groups",
        help="list, describe and reset consumer groups",
        description="Consumer group inspection and offset resets.",
    )
    gsub = p.add_subparsers(dest="groups_cmd", metavar="ACTION", required=True)
    q = gsub.add_parser("list", help="every group the brokers know, with its state")
    add_bootstrap(q)
    q.set_defaults(func=cmd_list)
    q = gsub.add_parser("describe", help="state, members, assignments and committed offsets")
    add_bootstrap(q)
    q.add_argument("groups", nargs="+", metavar="GROUP")
    q.set_defaults(func=cmd_describe)

    q = gsub.add_parser(
        "reset-offsets",
        help="move an empty group's committed offsets (dry run unless --execute)",
        description="Plan (and with --execute, commit) new offsets for a group with no "
        "active members. Partitions: those of --topic, else every partition the group has "
        "committed.",
    )
    add_bootstrap(q)
    q.add_argument("group", metavar="GROUP")
    q.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC[:P,P...]",
        help="limit to a topic (optionally some partitions); repeatable",
    )
    to = q.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start")
    to.add_argument("--to-latest", action="store_true", help="the log end")
    to.add_argument(
        "--to-datetime",
        type=_datetime,
        metavar="ISO-8601",
        help="first offset at or after this time (e.g. 2026-01-31T12:00:00Z)",
    )
    to.add_argument("--to-offset", type=int, metavar="N", help="this offset (clamped to the log)")
    mode = q.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only show the plan (default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    q.set_defaults(func=cmd_reset)


def _datetime(text: str) -> dt.datetime:
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO-8601 date-time: {text!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def _admin(args: argparse.Namespace) -> Any:
    from ..admin import AIOKafkaAdminClient

    return AIOKafkaAdminClient(
        bootstrap_servers=args.bootstrap,
        client_id="aiokafka-lite-cli",
        request_timeout_ms=int(args.timeout * 1000),
    )


async def list_groups(admin: Any) -> list[dict[str, Any]]:
    """``[{"group", "state", "protocol_type", "coordinator"}]`` from every broker."""
    return [
        {
            "group": g.group_id,
            "state": g.state,
            "protocol_type": g.protocol_type,
            "coordinator": g.coordinator,
        }
        for g in await admin.list_groups()
    ]


async def _log_ends(admin: Any, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Latest offset of each partition of an existing topic (a group may keep offsets of a
    deleted topic: no log end then)."""
    from ..structs import TopicPartition

    if not tps:
        return {}
    described = await admin.describe_topics(sorted({t for t, _ in tps}))
    existing = {
        t["topic"]: {p["partition"] for p in t["partitions"]}
        for t in described
        if not t["error_code"]
    }
    wanted = {TopicPartition(t, p): "latest" for t, p in tps if p in existing.get(t, ())}
    found = await admin.list_offsets(wanted) if wanted else {}
    return {(tp.topic, tp.partition): v.offset for tp, v in found.items() if v.offset >= 0}


async def describe_group(admin: Any, group: str) -> dict[str, Any]:
    """State, protocol, members (with assignments) and committed offsets of ``group``."""
    from .. import errors as Errors

    desc = (await admin.describe_groups([group])).get(group)
    if desc is None:
        raise CliError(f"group {group!r}: not in the DescribeGroups answer")
    if desc.error is not None:
        err = Errors.for_code(desc.error.code)
        raise CliError(f"group {group!r}: {err.__name__} (error {desc.error.code})")
    owner: dict[tuple[str, int], str] = {}
    members = []
    for mb in desc.members:
        tps = [(tp.topic, tp.partition) for tp in mb.assignment]
        for tp in tps:
            owner[tp] = mb.member_id
        members.append(
            {
                "member_id": mb.member_id,
                "instance_id": mb.group_instance_id,
                "client_id": mb.client_id,
                "host": mb.client_host,
                "partitions": tps,
            }
        )
    committed = await admin.list_consumer_group_offsets(group)
    offsets = {
        (tp.topic, tp.partition): om.offset for tp, om in committed.items() if om.offset >= 0
    }
    return {
        "group": group,
        "ends": await _log_ends(admin, sorted(set(offsets) | set(owner))),
        "state": desc.state,
        "protocol_type": desc.protocol_type,
        "protocol": desc.protocol,
        "coordinator": await admin.find_coordinator(group),
        "members": members,
        "offsets": offsets,
        "owner": owner,
    }


def _partitions(specs: list[str]) -> list[tuple[str, list[int] | None]]:
    out: list[tuple[str, list[int] | None]] = []
    for spec in specs:
        topic, sep, parts = spec.partition(":")
        if not topic:
            raise CliError(f"--topic {spec!r}: no topic name", 2)
        if not sep:
            out.append((topic, None))
            continue
        try:
            out.append((topic, sorted({int(p) for p in parts.split(",") if p.strip()})))
        except ValueError:
            raise CliError(f"--topic {spec!r}: partitions must be numbers", 2) from None
    return out


async def reset_offsets(admin: Any, args: argparse.Namespace) -> list[tuple[Any, ...]]:
    """Plan (and with ``--execute`` commit) the reset; rows of (topic, partition, old, new)."""
    from ..structs import TopicPartition

    tps: list[TopicPartition] | None = None
    if args.topic:
        tps = []
        for topic, parts in _partitions(args.topic):
            if parts is None:
                described = await admin.describe_topics([topic])
                if not described or described[0]["error_code"]:
                    raise CliError(f"topic {topic!r} does not exist")
                parts = sorted(p["partition"] for p in described[0]["partitions"])
            tps.extend(TopicPartition(topic, p) for p in parts)
    if args.to_earliest:
        to: Any = "earliest"
    elif args.to_latest:
        to = "latest"
    elif args.to_datetime is not None:
        to = args.to_datetime
    else:
        to = args.to_offset
    before = await admin.list_consumer_group_offsets(args.group)
    planned = await admin.reset_consumer_group_offsets(
        args.group, to, tps, dry_run=not args.execute
    )
    rows = []
    for tp in sorted(planned):
        old = before.get(tp)
        rows.append((tp.topic, tp.partition, old.offset if old else None, planned[tp].offset))
    return rows


def cmd_list(args: argparse.Namespace) -> int:
    """``groups list``."""

    async def main() -> list[dict[str, Any]]:
        async with _admin(args) as admin:
            return await list_groups(admin)

    rows = [
        (g["group"], g["state"], g["protocol_type"], g["coordinator"])
        for g in run(main(), args.timeout)
    ]
    print_table(("GROUP", "STATE", "PROTOCOL TYPE", "COORDINATOR"), rows)
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    """``groups describe``."""

    async def main() -> list[dict[str, Any]]:
        async with _admin(args) as admin:
            return [await describe_group(admin, g) for g in args.groups]

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


def cmd_reset(args: argparse.Namespace) -> int:
    """``groups reset-offsets``."""

    async def main() -> list[tuple[Any, ...]]:
        async with _admin(args) as admin:
            return await reset_offsets(admin, args)

    rows = run(main(), args.timeout)
    print_table(("TOPIC", "PARTITION", "OLD OFFSET", "NEW OFFSET"), rows)
    if not args.execute:
        print("(dry run: nothing changed; add --execute to commit these offsets)")
    return 0
