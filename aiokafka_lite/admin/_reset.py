"""``AIOKafkaAdminClient.reset_consumer_group_offsets``: the new offsets of a group's partitions,
as ``kafka-consumer-groups --reset-offsets`` computes them (an aiokafka_lite extension)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .. import errors as Errors
from ..client import KafkaClient
from ..ops import ItemError
from ..ops import groups as group_ops
from ..ops import offsets as offset_ops
from ..structs import OffsetAndMetadata, TopicPartition

__all__ = ["EARLIEST", "LATEST", "reset_offsets"]

EARLIEST = "earliest"
LATEST = "latest"


async def reset_offsets(
    client: KafkaClient,
    group_id: str,
    to: str | int | _dt.datetime | Mapping[TopicPartition, int],
    partitions: list[TopicPartition] | None,
    *,
    dry_run: bool,
    commit: Callable[[str, dict[TopicPartition, OffsetAndMetadata]], Awaitable[Any]],
) -> dict[TopicPartition, OffsetAndMetadata]:
    """The new offsets (see the admin client's method), committed through ``commit`` unless
    ``dry_run``."""
    described = await group_ops.describe_groups(client, [group_id])
    desc = described.get(group_id)
    if isinstance(desc, ItemError):
        raise desc.exception(f"DescribeGroups of {group_id!r}")
    if desc is not None and desc.state not in ("Empty", "Dead", ""):
        raise Errors.NonEmptyGroup(
            f"group {group_id!r} is {desc.state} with {len(desc.members)} member(s): "
            "stop its consumers before resetting offsets"
        )
    if isinstance(to, Mapping):
        tps = list(partitions) if partitions else list(to)
    elif partitions:
        tps = list(partitions)
    else:
        committed = await offset_ops.fetch_committed(client, group_id)
        tps = sorted(tp for tp, om in committed.items() if isinstance(om, OffsetAndMetadata))
    if not tps:
        return {}
    tps = [TopicPartition(*tp) for tp in tps]
    earliest = await offset_ops.list_offsets(
        client, dict.fromkeys(tps, offset_ops.EARLIEST), unknown_topic_is_error=True
    )
    latest = await offset_ops.list_offsets(
        client, dict.fromkeys(tps, offset_ops.LATEST), unknown_topic_is_error=True
    )
    target: dict[TopicPartition, int] = {}
    if to == EARLIEST:
        target = {tp: earliest[tp].offset for tp in tps}
    elif to == LATEST:
        target = {tp: latest[tp].offset for tp in tps}
    elif isinstance(to, _dt.datetime):
        ms = int(to.timestamp() * 1000)
        found = await offset_ops.list_offsets(
            client, dict.fromkeys(tps, ms), unknown_topic_is_error=True
        )
        target = {
            tp: found[tp].offset if found[tp].offset >= 0 else latest[tp].offset for tp in tps
        }
    elif isinstance(to, Mapping):
        target = {tp: int(to[tp]) for tp in tps if tp in to}
        missing = [tp for tp in tps if tp not in to]
        if missing:
            raise Errors.IllegalArgumentError(f"no target offset for {missing}")
    elif isinstance(to, int) and not isinstance(to, bool):
        target = dict.fromkeys(tps, to)
    else:
        raise Errors.IllegalArgumentError(
            f"reset target {to!r}: expected 'earliest', 'latest', a datetime, an offset "
            "or {TopicPartition: offset}"
        )
    new = {
        tp: OffsetAndMetadata(max(earliest[tp].offset, min(off, latest[tp].offset)), "")
        for tp, off in target.items()
    }
    if not dry_run:
        await commit(group_id, new)
    return new
