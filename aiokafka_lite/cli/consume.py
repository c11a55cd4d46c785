"""``aiokafka-lite consume TOPIC``: print records, kcat style.

Without ``--group`` every partition is assigned directly (no group, nothing committed); with
``--group`` the topic is subscribed through the group and offsets are auto-committed. Ctrl-C and
a closed stdout (``| head``) both end the run cleanly: the consumer is stopped, no traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import select
import stat
import sys
import time
from typing import Any, TextIO

from ._common import (
    CliError,
    add_bootstrap,
    non_negative_int,
    positive_float,
    positive_int,
    run,
    silence_stdout,
)

__all__ = ["register", "Formatter"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``consume`` command."""
    p = sub.add_parser(
        "consume",
        help="print the records of a topic",
        description="Print records as they arrive. --format takes a template with the fields "
        "{topic} {partition} {offset} {timestamp} {key} {value} {headers}, or 'json' for one "
        "JSON object per line (keys and values as UTF-8 text, base64 when not UTF-8).",
    )
    p.add_argument("topic", metavar="TOPIC")
    add_bootstrap(p)
    p.add_argument("-g", "--group", default=None, help="consume as a member of this group")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the oldest record (with --group: when the group has no offset)")  # fmt: skip
    p.add_argument(
        "-n", "--max", type=positive_int, default=None, metavar="N", help="stop after N records"
    )
    p.add_argument("-p", "--partition", type=non_negative_int, action="append", default=None,
                   metavar="P", help="only this partition (repeatable; not with --group)")  # fmt: skip
    p.add_argument("-o", "--offset", type=non_negative_int, default=None, metavar="N",
                   help="start at offset N of each partition (not with --group)")  # fmt: skip
    p.add_argument("--format", default="{value}", metavar="TEMPLATE|json",
                   help="output format (default: %(default)s)")  # fmt: skip
    p.add_argument("--idle-timeout", type=positive_float, default=None, metavar="SECONDS",
                   help="stop when no record arrived for this long")  # fmt: skip
    p.set_defaults(func=cmd_consume)


def _text(data: bytes | None) -> str:
    if data is None:
        return ""
    return bytes(data).decode("utf-8", "replace")


def _json_bytes(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(bytes(data)).decode()}


def _share_fields(record: Any) -> dict[str, Any]:
    count = getattr(record, "delivery_count", None)
    return {} if count is None else {"delivery_count": count}


class Formatter:
    """Turns a ConsumerRecord into one output line."""

    def __init__(self, spec: str) -> None:
        self.json = spec == "json"
        self.template = spec.encode().decode("unicode_escape") if not self.json else spec
        if not self.json:
            try:
                self.template.format(topic="t", partition=0, offset=0, timestamp=0, key="",
                                     value="", headers="", delivery_count=1)  # fmt: skip
            except (KeyError, IndexError, ValueError) as exc:
                raise CliError(f"bad --format template {spec!r}: {exc!r}", 2) from None

    def __call__(self, record: Any) -> str:
        headers = record.headers or ()
        if self.json:
            return json.dumps(
                {
                    "topic": record.topic,
                    "partition": record.partition,
                    "offset": record.offset,
                    "timestamp": record.timestamp,
                    "key": _json_bytes(record.key),
                    "value": _json_bytes(record.value),
                    "headers": [[k, _json_bytes(v)] for k, v in headers],
                    **_share_fields(record),
                },
                ensure_ascii=False,
            )
        return self.template.format(
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            timestamp=record.timestamp,
            key=_text(record.key),
            value=_text(record.value),
            headers=",".join(f"{k}={_text(v)}" for k, v in headers),
            delivery_count=getattr(record, "delivery_count", ""),  # share consumers' records
        )


def cmd_consume(args: argparse.Namespace) -> int:
    """Consume until --max, --idle-timeout, Ctrl-C or a closed stdout."""
    formatter = Formatter(args.format)
    if args.group and (args.partition is not None or args.offset is not None):
        raise CliError("--partition and --offset need a manual assignment: drop --group", 2)
    try:
        run(_consume(args, formatter, sys.stdout))
    except BrokenPipeError:
        silence_stdout()
    return 0


async def _partitions(args: argparse.Namespace) -> list[int]:
    from .. import errors as Errors
    from ..admin import AIOKafkaAdminClient

    async with AIOKafkaAdminClient(
        bootstrap_servers=args.bootstrap,
        client_id="aiokafka-lite-cli",
        request_timeout_ms=int(args.timeout * 1000),
    ) as admin:
        described = await admin.describe_topics([args.topic])
    topic = next((t for t in described if t["topic"] == args.topic), None)
    if topic is None or topic["error_code"] == Errors.UnknownTopicOrPartitionError.errno:
        raise CliError(f"topic {args.topic!r} does not exist")
    if topic["error_code"]:
        raise CliError(f"topic {args.topic!r}: {Errors.for_code(topic['error_code']).__name__}")
    return sorted(p["partition"] for p in topic["partitions"])


async def _consume(args: argparse.Namespace, formatter: Formatter, out: TextIO) -> None:
    from ..consumer import AIOKafkaConsumer
    from ..structs import TopicPartition

    timeout = args.timeout
    common: dict[str, Any] = dict(
        bootstrap_servers=args.bootstrap,
        client_id="aiokafka-lite-cli",
        request_timeout_ms=int(timeout * 1000),
        auto_offset_reset="earliest" if args.from_beginning else "latest",
    )
    if args.group:
        consumer = AIOKafkaConsumer(
            args.topic, group_id=args.group, enable_auto_commit=True, **common
        )
        await asyncio.wait_for(consumer.start(), timeout)
    else:
        parts = await asyncio.wait_for(_partitions(args), timeout)
        if args.partition is not None:
            missing = sorted(set(args.partition) - set(parts))
            if missing:
                raise CliError(f"topic {args.topic!r} has no partition {missing[0]}")
            parts = sorted(set(args.partition))
        consumer = AIOKafkaConsumer(group_id=None, enable_auto_commit=False, **common)
        await asyncio.wait_for(consumer.start(), timeout)
        tps = [TopicPartition(args.topic, p) for p in parts]
        consumer.assign(tps)
        if args.offset is not None:
            for tp in tps:
                consumer.seek(tp, args.offset)
        elif args.from_beginning:
            await asyncio.wait_for(consumer.seek_to_beginning(*tps), timeout)
        else:
            await asyncio.wait_for(consumer.seek_to_end(*tps), timeout)
    try:
        await _loop(args, consumer, formatter, out)
    finally:
        await asyncio.wait_for(consumer.stop(), timeout)


def _reader_gone(out: TextIO) -> bool:
    """True when ``out`` is a pipe or socket whose reading end is closed (``| head`` exited).

    A consumer waiting for records writes nothing, so it would only see EPIPE on the next
    record; polling the descriptor for POLLERR/POLLHUP lets it stop right away.
    """
    try:
        fd = out.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode) and not stat.S_ISSOCK(os.fstat(fd).st_mode):
            return False
        poller = select.poll()
        poller.register(fd, 0)  # POLLERR/POLLHUP are always reported
        return any(ev & (select.POLLERR | select.POLLHUP) for _fd, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


async def _loop(args: argparse.Namespace, consumer: Any, formatter: Formatter, out: TextIO) -> None:
    remaining = args.max
    last = time.monotonic()
    check_pipe = hasattr(select, "poll")
    while remaining is None or remaining > 0:
        batches = await consumer.getmany(timeout_ms=200, max_records=remaining)
        lines = []
        for records in batches.values():
            for record in records:
                lines.append(formatter(record))
        if lines:
            if remaining is not None:
                lines = lines[:remaining]
                remaining -= len(lines)
            out.write("\n".join(lines) + "\n")
            out.flush()
            last = time.monotonic()
        elif args.idle_timeout is not None and time.monotonic() - last >= args.idle_timeout:
            return
        elif check_pipe and _reader_gone(out):
            raise BrokenPipeError("stdout closed")
