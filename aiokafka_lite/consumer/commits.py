"""What the consumer's ``commit()`` commits, checked as aiokafka checks it, and the commit a
stopped consumer still makes.

Plain functions of the subscription state and the coordinator; the OffsetCommit / OffsetFetch
requests themselves are the coordinator's (:mod:`aiokafka_lite.consumer.offsets`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite._settings import ClientSettings
from aiokafka_lite.hooks import HookSet
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

from .group import Coordinator
from .subscription import SubscriptionState

__all__ = ["commit_after_stop", "offsets_to_commit", "validate_offsets"]


def offsets_to_commit(
    group_id: str | None,
    subs: SubscriptionState,
    coordinator: Coordinator,
    offsets: Mapping[TopicPartition, Any] | None,
) -> dict[TopicPartition, OffsetAndMetadata]:
    """commit()'s checks and what it commits (``offsets`` validated, or the positions)."""
    if group_id is None:
        raise Errors.IllegalOperation("commit() requires a group_id")
    # aiokafka's rules and exception classes, in its order
    if not subs.subscribed and not subs.user_assigned:
        raise Errors.IllegalStateError("Not subscribed to any topics")
    if not subs.assignment and coordinator.uses_group and not coordinator.assigned_once.is_set():
        raise Errors.IllegalStateError("No partitions assigned")
    if offsets is None:
        return {
            tp: OffsetAndMetadata(st.position, "")
            for tp, st in subs.assignment.items()
            if st.position is not None
        }
    to_commit = validate_offsets(offsets)
    # (with the assignment revoked, e.g. max_poll_interval_ms exceeded, the group
    # answers: CommitFailedError says why)
    for tp in to_commit:
        if subs.assignment and not subs.is_assigned(tp):
            raise Errors.IllegalStateError(f"Partition {tp} is not assigned")
    return to_commit


def validate_offsets(offsets: Any) -> dict[TopicPartition, OffsetAndMetadata]:
    """commit()'s ``offsets`` as aiokafka validates them: a non-empty dict of TopicPartition ->
    offset, (offset, metadata) or OffsetAndMetadata (ValueError / TypeError otherwise)."""
    if not offsets or not isinstance(offsets, Mapping):
        raise ValueError(f"offsets must be a non-empty dict, got {offsets!r}")
    out = {}
    for tp, value in offsets.items():
        if not isinstance(tp, TopicPartition):
            raise TypeError(f"Key should be TopicPartition instance, got {tp!r}")
        if isinstance(value, int):
            offset, metadata = value, ""
        else:
            try:
                offset, metadata = value
            except (TypeError, ValueError) as exc:
                raise ValueError(f"bad offset for {tp}: {value!r}") from exc
            if not isinstance(metadata, str):
                raise TypeError(f"Metadata should be a string, got {metadata!r}")
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset for {tp} must be a non-negative int, got {offset!r}")
        out[tp] = OffsetAndMetadata(offset, metadata)
    return out


async def commit_after_stop(
    coordinator: Coordinator,
    settings: ClientSettings,
    hooks: HookSet,
    to_commit: Mapping[TopicPartition, OffsetAndMetadata],
) -> None:
    """commit() after stop(): aiokafka's client reconnects on demand, so its commit goes out
    with the membership stop() left (generation -1 after the LeaveGroup). Ours connects a
    short-lived client with the consumer's settings for it."""
    client = settings.new_client(hooks)
    try:
        await client.start()
        await coordinator.commit_through(client, to_commit)
    finally:
        await client.close()
