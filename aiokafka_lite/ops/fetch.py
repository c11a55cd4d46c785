"""Fetch: the one builder of Fetch requests (the consumer's fetcher and watermark lookups).

Parsing stays with the callers: the fetcher decodes record batches into its buffers, the
watermark lookup (:func:`aiokafka_lite.ops.offsets.high_watermarks`) keeps only watermarks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..protocol import messages as m
from ..structs import TopicPartition

__all__ = ["fetch_request"]


def fetch_request(
    positions: Mapping[TopicPartition, int],
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partition_max_bytes: int,
    isolation_level: int = 0,
) -> Any:
    """A session-less Fetch from ``positions[tp]`` for each partition."""
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
    return m.FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=[m.FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
    )
