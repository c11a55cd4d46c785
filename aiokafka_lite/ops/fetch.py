"""Fetch: the one builder of Fetch requests (the consumer's fetcher and watermark lookups).

Parsing stays with the callers: the fetcher decodes record batches into its buffers, the
watermark lookup (:func:`aiokafka_lite.ops.offsets.high_watermarks`) keeps only watermarks.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from ..protocol import messages as m
from ..structs import TopicPartition

__all__ = ["BY_NAME_MAX_VERSION", "NO_TOPIC_ID", "fetch_request", "max_version", "topic_names"]

#: the last Fetch version naming topics (v13+, KIP-516: by topic id only). A request naming a
#: topic whose id the metadata does not give (an embedded broker, Metadata below v10) is sent
#: at most at this version (the builder fills both fields; the connection picks the version).
BY_NAME_MAX_VERSION = 12

#: the zero uuid: "no id" in every topic id field
NO_TOPIC_ID = uuid.UUID(int=0)


def fetch_request(
    positions: Mapping[TopicPartition, int],
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partition_max_bytes: int,
    isolation_level: int = 0,
    topic_ids: Mapping[str, Any] | None = None,
) -> Any:
    """A session-less Fetch from ``positions[tp]`` for each partition, naming each topic by
    name and by its id in ``topic_ids`` (the metadata's): the version the connection picks
    decides which goes out (send it at most at :func:`max_version`)."""
    by_topic: dict[str, list[Any]] = {}
    for tp, offset in positions.items():
        by_topic.setdefault(tp.topic, []).append(
            m.FetchRequest.FetchTopic.FetchPartition(
                partition=tp.partition,
                current_leader_epoch=-1,
                fetch_offset=offset,
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=partition_max_bytes,
            )
        )
    ids = topic_ids or {}
    return m.FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=[
            m.FetchRequest.FetchTopic(topic=t, topic_id=ids.get(t) or NO_TOPIC_ID, partitions=ps)
            for t, ps in by_topic.items()
        ],
    )


def max_version(request: Any) -> int | None:
    """The highest version ``request`` may go out at: :data:`BY_NAME_MAX_VERSION` when a topic
    has no id (an embedded broker's metadata, Metadata below v10), else None (any)."""
    if any(t.topic_id == NO_TOPIC_ID for t in request.topics):
        return BY_NAME_MAX_VERSION
    return None


def topic_names(request: Any) -> dict[Any, str]:
    """topic id -> name of the topics ``request`` fetches: a v13+ answer names topics by id."""
    return {t.topic_id: t.topic for t in request.topics if t.topic_id != NO_TOPIC_ID}
