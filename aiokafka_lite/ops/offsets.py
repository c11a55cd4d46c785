"""Offsets: ListOffsets, OffsetFetch, OffsetCommit, DeleteRecords, and watermarks via Fetch.

Each operation is a sans-I/O ``*_request`` builder and ``parse_*`` parser (per-item results,
:class:`~aiokafka_lite.ops.ItemError` for per-item errors) plus one coroutine that runs them
through :mod:`aiokafka_lite.ops._exec` (routing, retries, deadline).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..protocol import messages as m
from ..structs import OffsetAndMetadata, TopicPartition
from ._exec import ItemError, at_coordinator, by_leader, raise_item_errors
from .fetch import NO_TOPIC_ID, fetch_request
from .fetch import max_version as fetch_max_version

if TYPE_CHECKING:
    from ..client import KafkaClient

__all__ = [
    "EARLIEST",
    "LATEST",
    "ListedOffset",
    "commit_offsets",
    "delete_records",
    "delete_records_request",
    "fetch_committed",
    "high_watermarks",
    "list_offsets",
    "list_offsets_request",
    "offset_commit_max_version",
    "offset_commit_request",
    "offset_fetch_max_version",
    "offset_fetch_request",
    "offsets_topic_names",
    "parse_delete_records",
    "parse_list_offsets",
    "parse_offset_commit",
    "parse_offset_fetch",
    "parse_watermark_fetch",
    "watermark_fetch_request",
]

#: ListOffsets timestamps with a special meaning
EARLIEST = -2
LATEST = -1


def _by_topic(items: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in items:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


# ------------------------------------------------------------------------------ ListOffsets


@dataclass(frozen=True)
class ListedOffset:
    """One partition's ListOffsets answer: ``offset`` is -1 when no record matches."""

    offset: int
    timestamp: int
    leader_epoch: int = -1


def list_offsets_request(timestamps: Mapping[TopicPartition, int], isolation_level: int = 0) -> Any:
    """ListOffsets for ``{tp: timestamp}`` (EARLIEST -2, LATEST -1, or ms since the epoch)."""
    by_topic: dict[str, list[Any]] = {}
    for tp, ts in timestamps.items():
        by_topic.setdefault(tp.topic, []).append(
            m.ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=tp.partition,
                current_leader_epoch=-1,
                timestamp=ts,
                max_num_offsets=1,
            )
        )
    return m.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation_level,
        topics=[
            m.ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=ps)
            for t, ps in by_topic.items()
        ],
    )


def parse_list_offsets(resp: Any) -> dict[TopicPartition, ListedOffset | ItemError]:
    """Per-partition offsets (v0's ``old_style_offsets`` folded into ``offset``)."""
    out: dict[TopicPartition, ListedOffset | ItemError] = {}
    for t in resp.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if p.error_code:
                out[tp] = ItemError(p.error_code)
                continue
            offset = p.offset
            if p.old_style_offsets:
                offset = p.old_style_offsets[0]
            out[tp] = ListedOffset(offset, p.timestamp, p.leader_epoch)
    return out


async def list_offsets(
    client: KafkaClient,
    timestamps: Mapping[TopicPartition, int],
    *,
    isolation_level: int = 0,
    timeout_ms: float | None = None,
    unknown_topic_is_error: bool = False,
) -> dict[TopicPartition, ListedOffset]:
    """ListOffsets at each partition's leader; raises the first non-retriable partition error.

    ``unknown_topic_is_error`` fails at once (UnknownTopicOrPartitionError) for a topic the
    metadata does not know, instead of waiting for it to appear until the deadline.
    """
    if not timestamps:
        return {}
    found = await by_leader(
        client,
        timestamps,
        lambda items: list_offsets_request(items, isolation_level),
        parse_list_offsets,
        timeout_ms=timeout_ms,
        what="ListOffsets",
        unknown_topic_is_error=unknown_topic_is_error,
    )
    raise_item_errors(found, "ListOffsets")
    return {tp: v for tp, v in found.items() if isinstance(v, ListedOffset)}


# ---------------------------------------------------------------- OffsetFetch / OffsetCommit

#: OffsetCommit / OffsetFetch v10 name topics by id only (KIP-848 era, Kafka 4.1+): a request
#: with a topic whose id is unknown (an embedded broker, Metadata below v10), or an OffsetFetch of
#: every committed partition (its answer would name topics the client may never have looked up),
#: goes at most at v9, by name.
BY_NAME_OFFSETS_MAX_VERSION = 9


def _request_topics(request: Any) -> list[Any] | None:
    if isinstance(request, m.OffsetFetchRequest):
        return request.groups[0].topics  # type: ignore[no-any-return]
    return request.topics  # type: ignore[no-any-return]


def offset_commit_max_version(request: Any) -> int | None:
    """The highest version an OffsetCommit ``request`` may go out at (None: any)."""
    topics = _request_topics(request)
    if topics is None or any(t.topic_id == NO_TOPIC_ID for t in topics):
        return BY_NAME_OFFSETS_MAX_VERSION
    return None


#: the same rule for OffsetFetch
offset_fetch_max_version = offset_commit_max_version


def offsets_topic_names(request: Any) -> dict[Any, str]:
    """topic id -> name of an OffsetCommit / OffsetFetch request: a v10 answer names topics by
    id only."""
    return {t.topic_id: t.name for t in _request_topics(request) or () if t.topic_id != NO_TOPIC_ID}


def _topic_id(ids: Mapping[str, Any] | None, topic: str) -> Any:
    return (ids or {}).get(topic) or NO_TOPIC_ID


def offset_fetch_request(
    group_id: str,
    partitions: Iterable[TopicPartition] | None,
    require_stable: bool = False,
    *,
    member_id: str | None = None,
    member_epoch: int = -1,
    topic_ids: Mapping[str, Any] | None = None,
) -> Any:
    """OffsetFetch of ``group_id`` for ``partitions`` (None: every committed partition).
    ``member_id`` / ``member_epoch``: a KIP-848 member's (v9+), so a stale member is refused.
    ``topic_ids`` (name -> uuid, the cluster metadata's) lets it go at v10, by topic id
    (:func:`offset_fetch_max_version`)."""
    by_topic = None if partitions is None else _by_topic(partitions)
    return m.OffsetFetchRequest(
        group_id=group_id,
        topics=None
        if by_topic is None
        else [
            m.OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
            for t, ps in by_topic.items()
        ],
        groups=[
            m.OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id=group_id,
                member_id=member_id,
                member_epoch=member_epoch,
                topics=None
                if by_topic is None
                else [
                    m.OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                        name=t, topic_id=_topic_id(topic_ids, t), partition_indexes=ps
                    )
                    for t, ps in by_topic.items()
                ],
            )
        ],
        require_stable=require_stable,
    )


Committed = dict[TopicPartition, OffsetAndMetadata | ItemError]


def parse_offset_fetch(
    resp: Any, group_id: str, names: Mapping[Any, str] | None = None
) -> dict[str, Committed | ItemError]:
    """``{group_id: {tp: OffsetAndMetadata (offset -1: none) | ItemError}}``, or a group error.

    A retriable partition error (e.g. UNSTABLE_OFFSET_COMMIT) makes the whole group's answer
    that error, so the executor asks again. ``names``: topic id -> name for a v10 answer
    (:func:`offsets_topic_names` of the request).
    """
    code, topics = resp.error_code, resp.topics
    if resp.groups:  # v8+ batched shape
        g = next((g for g in resp.groups if g.group_id == group_id), resp.groups[0])
        code, topics = g.error_code, g.topics
    if code:
        return {group_id: ItemError(code)}
    out: Committed = {}
    for t in topics:
        topic = t.name or (names or {}).get(t.topic_id)
        if topic is None:
            continue  # an id the request did not ask for
        for p in t.partitions:
            tp = TopicPartition(topic, p.partition_index)
            if p.error_code:
                err = ItemError(p.error_code)
                if err.retriable and p.error_code != 3:  # 3: no such partition: no offset
                    return {group_id: err}
                out[tp] = err
                continue
            out[tp] = OffsetAndMetadata(p.committed_offset, p.metadata or "")
    return {group_id: out}


async def fetch_committed(
    client: KafkaClient,
    group_id: str,
    partitions: Iterable[TopicPartition] | None = None,
    *,
    require_stable: bool = False,
    timeout_ms: float | None = None,
    coordinator: int | None = None,
) -> Committed:
    """Committed offsets of ``group_id`` at its coordinator; raises a group-level error."""
    tps = None if partitions is None else list(partitions)
    ids = _known_ids(client, tps)
    return await at_coordinator(
        client,
        group_id,
        lambda: offset_fetch_request(group_id, tps, require_stable, topic_ids=ids),
        lambda resp: parse_offset_fetch(resp, group_id, {i: t for t, i in ids.items()})[group_id],
        timeout_ms=timeout_ms,
        what="OffsetFetch",
        coordinator=coordinator,
        max_version=offset_fetch_max_version,
    )


def _known_ids(client: KafkaClient, tps: Iterable[TopicPartition] | None) -> dict[str, Any]:
    """name -> topic id of the topics of ``tps`` the cluster metadata has an id for."""
    cluster = client.cluster
    topics = {tp.topic for tp in tps or ()}
    return {t: i for t in topics if (i := cluster.topic_id(t)) not in (None, NO_TOPIC_ID)}


# ----------------------------------------------------------------------------- OffsetCommit


def offset_commit_request(
    group_id: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
    *,
    generation: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
    topic_ids: Mapping[str, Any] | None = None,
) -> Any:
    """OffsetCommit of ``offsets`` (generation -1 / member "": a commit outside the group).
    ``topic_ids`` (name -> uuid) lets it go at v10, by topic id
    (:func:`offset_commit_max_version`)."""
    by_topic: dict[str, list[Any]] = {}
    for tp, om in offsets.items():
        offset, meta = (om.offset, om.metadata) if isinstance(om, tuple) else (int(om), "")
        by_topic.setdefault(tp.topic, []).append(
            m.OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=tp.partition,
                committed_offset=offset,
                committed_leader_epoch=-1,
                committed_metadata=meta or "",
            )
        )
    return m.OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=group_instance_id,
        retention_time_ms=-1,
        topics=[
            m.OffsetCommitRequest.OffsetCommitRequestTopic(
                name=t, topic_id=_topic_id(topic_ids, t), partitions=ps
            )
            for t, ps in by_topic.items()
        ],
    )


def parse_offset_commit(
    resp: Any, names: Mapping[Any, str] | None = None
) -> dict[TopicPartition, int]:
    """``{tp: error_code}`` (0 = committed); ``names``: topic id -> name for a v10 answer
    (:func:`offsets_topic_names` of the request)."""
    out: dict[TopicPartition, int] = {}
    for t in resp.topics:
        topic = t.name or (names or {}).get(t.topic_id)
        if topic is None:
            continue  # an id the request did not name
        for p in t.partitions:
            out[TopicPartition(topic, p.partition_index)] = p.error_code
    return out


async def commit_offsets(
    client: KafkaClient,
    group_id: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
    *,
    timeout_ms: float | None = None,
) -> dict[TopicPartition, int]:
    """Commit ``offsets`` for ``group_id`` from outside the group (its members must be gone:
    an active group answers UNKNOWN_MEMBER_ID). Returns ``{tp: error_code}``; coordinator
    errors are retried, a group-wide one left in every partition's code."""
    if not offsets:
        return {}

    ids = _known_ids(client, offsets)
    names = {i: t for t, i in ids.items()}

    def parse(resp: Any) -> dict[TopicPartition, int] | ItemError:
        codes = parse_offset_commit(resp, names)
        bad = {c for c in codes.values() if c}
        if len(bad) == 1 and ItemError(next(iter(bad))).retriable:
            return ItemError(next(iter(bad)))  # coordinator moved / loading: retried
        return codes

    return await at_coordinator(
        client,
        group_id,
        lambda: offset_commit_request(group_id, offsets, topic_ids=ids),
        parse,
        timeout_ms=timeout_ms,
        what="OffsetCommit",
        max_version=offset_commit_max_version,
    )


# ---------------------------------------------------------------------------- DeleteRecords


def delete_records_request(offsets: Mapping[TopicPartition, int], timeout_ms: int) -> Any:
    """DeleteRecords: delete everything before ``offsets[tp]`` (-1: the high watermark)."""
    by_topic: dict[str, list[Any]] = {}
    for tp, offset in offsets.items():
        by_topic.setdefault(tp.topic, []).append(
            m.DeleteRecordsRequest.DeleteRecordsPartition(
                partition_index=tp.partition, offset=offset
            )
        )
    return m.DeleteRecordsRequest(
        topics=[
            m.DeleteRecordsRequest.DeleteRecordsTopic(name=t, partitions=ps)
            for t, ps in by_topic.items()
        ],
        timeout_ms=timeout_ms,
    )


def parse_delete_records(resp: Any) -> dict[TopicPartition, int | ItemError]:
    """``{tp: new low watermark | ItemError}``."""
    out: dict[TopicPartition, int | ItemError] = {}
    for t in resp.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            out[tp] = ItemError(p.error_code) if p.error_code else p.low_watermark
    return out


async def delete_records(
    client: KafkaClient,
    offsets: Mapping[TopicPartition, int],
    *,
    timeout_ms: float | None = None,
) -> dict[TopicPartition, int | ItemError]:
    """DeleteRecords at each leader: ``{tp: low watermark | ItemError}``."""
    broker_timeout = int(timeout_ms if timeout_ms is not None else client.timeouts.broker_ms)
    return await by_leader(
        client,
        offsets,
        lambda items: delete_records_request(items, broker_timeout),
        parse_delete_records,
        timeout_ms=timeout_ms,
        what="DeleteRecords",
        unknown_topic_is_error=True,
    )


# ------------------------------------------------------------------- watermarks via Fetch


def watermark_fetch_request(
    fetch_at: Mapping[TopicPartition, int],
    isolation_level: int = 0,
    topic_ids: Mapping[str, Any] | None = None,
) -> Any:
    """A Fetch at ``fetch_at[tp]`` that returns at most one batch per partition: its answer
    carries the exact high watermark / last stable offset (``max_wait_ms=1``: Tansu answers 0
    with no partitions at all). Topics are named by id where ``topic_ids`` has one (KIP-516)."""
    return fetch_request(
        {tp: max(0, offset) for tp, offset in fetch_at.items()},
        max_wait_ms=1,
        min_bytes=0,
        max_bytes=1,
        partition_max_bytes=1,
        isolation_level=isolation_level,
        topic_ids=topic_ids,
    )


def parse_watermark_fetch(
    resp: Any, isolation_level: int = 0, names: Mapping[Any, str] | None = None
) -> dict[TopicPartition, int | ItemError]:
    """``{tp: high watermark (last stable offset under read_committed) | ItemError}``;
    ``names`` maps the topic ids of a v13+ answer back to names."""
    out: dict[TopicPartition, int | ItemError] = {}
    if resp.error_code:
        return {}  # the executor retries what is missing; a request-wide error is rare
    for t in resp.responses:
        topic = t.topic or (names or {}).get(t.topic_id)
        if topic is None:
            continue  # an id this lookup did not ask for
        for p in t.partitions:
            tp = TopicPartition(topic, p.partition_index)
            # OFFSET_OUT_OF_RANGE (1) still carries the watermark on Kafka and noida
            if p.error_code == 0 or (p.error_code == 1 and p.high_watermark >= 0):
                lso = p.last_stable_offset
                out[tp] = lso if isolation_level and lso >= 0 else p.high_watermark
            else:
                out[tp] = ItemError(p.error_code)
    return out


async def high_watermarks(
    client: KafkaClient,
    fetch_at: Mapping[TopicPartition, int],
    *,
    isolation_level: int = 0,
    timeout_ms: float | None = None,
) -> dict[TopicPartition, int]:
    """The exact end of each partition (see :func:`watermark_fetch_request`); ``fetch_at``
    gives an offset at or below the end, as close to it as known."""
    topics = {tp.topic for tp in fetch_at}

    def ids() -> dict[str, Any]:
        cluster = client.cluster
        return {t: i for t in topics if (i := cluster.topic_id(t)) is not None}

    found = await by_leader(
        client,
        fetch_at,
        lambda items: watermark_fetch_request(items, isolation_level, ids()),
        lambda resp: parse_watermark_fetch(resp, isolation_level, {i: t for t, i in ids().items()}),
        timeout_ms=timeout_ms,
        what="Fetch (high watermark)",
        max_version=fetch_max_version,
    )
    raise_item_errors(found, "Fetch (high watermark)")
    return {tp: v for tp, v in found.items() if isinstance(v, int)}
