"""``aiokafka-lite share consume|list|describe``: share groups (KIP-932) from the shell.

``consume`` joins a share group and prints the records it acquires (``--format`` also knows
``{delivery_count}``), acknowledging each as ``--ack`` says (accept by default; ``release``
gives every record back, ``reject`` archives it: handy to drain poison messages). ``describe``
shows a share group's members, their assignments and the group's start offset and lag per
partition.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from ._common import CliError, add_bootstrap, positive_float, positive_int, print_table, run

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``share`` command group."""
    p = sub.add_parser(
        "share",
        help="consume from, list and describe share groups (Kafka 4 queues)",
        description="Share groups (KIP-932): members share partitions, records are "
        "acknowledged one by one.",
    )
    ssub = p.add_subparsers(dest="share_cmd", metavar="ACTION", required=True)
    q = ssub.add_parser("consume", help="print the records a share-group member acquires")
    q.add_argument("topic", metavar="TOPIC")
    add_bootstrap(q)
    q.add_argument("-g", "--group", required=True, help="the share group")
    q.add_argument("--ack", choices=("accept", "release", "reject"), default="accept",
                   help="acknowledge every record so (default: %(default)s)")  # fmt: skip
    q.add_argument(
        "-n", "--max", type=positive_int, default=None, metavar="N", help="stop after N records"
    )
    q.add_argument("--format", default="{value}", metavar="TEMPLATE|json",
                   help="output format, as consume's, plus {delivery_count}")  # fmt: skip
    q.add_argument("--idle-timeout", type=positive_float, default=None, metavar="SECONDS",
                   help="stop when no record arrived for this long")  # fmt: skip
    q.set_defaults(func=cmd_consume)
    q = ssub.add_parser("list", help="every share group")
    add_bootstrap(q)
    q.set_defaults(func=cmd_list)
    q = ssub.add_parser("describe", help="members, assignments, start offsets and lag")
    add_bootstrap(q)
    q.add_argument("groups", nargs="+", metavar="GROUP")
    q.set_defaults(func=cmd_describe)


def _admin(args: argparse.Namespace) -> Any:
    from ..admin import AIOKafkaAdminClient

    return AIOKafkaAdminClient(
        bootstrap_servers=args.bootstrap,
        client_id="aiokafka-lite-cli",
        request_timeout_ms=int(args.timeout * 1000),
    )


def cmd_consume(args: argparse.Namespace) -> int:
    """Consume until --max, --idle-timeout or Ctrl-C; acknowledgements sent before exiting."""
    from .consume import Formatter

    formatter = Formatter(args.format)
    run(_consume(args, formatter))
    return 0


async def _consume(args: argparse.Namespace, formatter: Any) -> None:
    from ..share import AcknowledgeType, AIOKafkaShareConsumer

    kind = AcknowledgeType[args.ack.upper()]
    consumer = AIOKafkaShareConsumer(
        args.topic,
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id="aiokafka-lite-cli",
        request_timeout_ms=int(args.timeout * 1000),
        acknowledgement_mode="explicit",
    )
    await asyncio.wait_for(consumer.start(), args.timeout)
    try:
        remaining = args.max
        last = time.monotonic()
        while remaining is None or remaining > 0:
            batches = await consumer.getmany(timeout_ms=200, max_records=remaining)
            lines = []
            for records in batches.values():
                for record in records:
                    lines.append(formatter(record))
                    consumer.acknowledge(record, kind)
            if lines:
                if remaining is not None:
                    remaining -= len(lines)
                sys.stdout.write("\n".join(lines) + "\n")
                sys.stdout.flush()
                last = time.monotonic()
            elif args.idle_timeout is not None and time.monotonic() - last >= args.idle_timeout:
                break
        failed = {tp: e for tp, e in (await consumer.commit()).items() if e is not None}
        if failed:
            raise CliError(
                "acknowledgements failed: "
                + ", ".join(f"{tp.topic}-{tp.partition}: {e!r}" for tp, e in failed.items())
            )
    finally:
        await asyncio.wait_for(consumer.stop(), args.timeout)


def cmd_list(args: argparse.Namespace) -> int:
    """Print every share group with its state and coordinator."""

    async def go() -> list[Any]:
        async with _admin(args) as admin:
            return list(await admin.list_share_groups())

    groups = run(go(), args.timeout * 3)
    print_table(
        ("GROUP", "STATE", "COORDINATOR"), [(g.group_id, g.state, g.coordinator) for g in groups]
    )
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    """Members and assignments, then start offset and lag per partition, of each group."""

    async def go() -> list[tuple[Any, dict[Any, Any]]]:
        async with _admin(args) as admin:
            described = await admin.describe_share_groups(args.groups)
            out = []
            for gid in args.groups:
                desc = described[gid]
                if desc.error is not None:
                    raise desc.error.exception(f"share group {gid!r}")
                out.append((desc, await admin.list_share_group_offsets(gid)))
            return out

    for desc, offsets in run(go(), args.timeout * 3):
        print(f"share group {desc.group_id}: {desc.state}, epoch {desc.group_epoch}")
        print_table(
            ("MEMBER", "CLIENT", "HOST", "PARTITIONS"),
            [
                (
                    mb.member_id,
                    mb.client_id,
                    mb.client_host,
                    ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(mb.assignment)),
                )
                for mb in desc.members
            ],
        )
        print_table(
            ("TOPIC", "PARTITION", "START OFFSET", "LAG"),
            [(tp.topic, tp.partition, o.start_offset, o.lag) for tp, o in sorted(offsets.items())],
        )
    return 0
