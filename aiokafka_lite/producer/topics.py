"""The producer's partitions per topic, from the client's cluster metadata.

:class:`TopicPartitions` keeps, per topic the producer sends to, its partition ids (sorted),
the available ones (with a leader) and a frozenset of the ids for membership checks, computed
once and cached until the next metadata update (a cluster listener empties the cache). The
send paths read :attr:`TopicPartitions.cache` directly; a miss waits for the topic's metadata
through :meth:`TopicPartitions.get`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from aiokafka_lite import errors as Errors

if TYPE_CHECKING:
    from aiokafka_lite.client import KafkaClient

__all__ = ["Parts", "TopicPartitions"]

#: a topic's partition ids (sorted), its available ones (sorted), and the ids as a frozenset
Parts = tuple[list[int], list[int], frozenset[int]]


class TopicPartitions:
    """The partitions of each topic the producer sends to, cached between metadata updates."""

    __slots__ = ("_client", "_max_block_ms", "cache")

    def __init__(self, client: KafkaClient, max_block_ms: int) -> None:
        self._client = client
        self._max_block_ms = max_block_ms
        #: topic -> its Parts; emptied on every metadata update (see follow_metadata)
        self.cache: dict[str, Parts] = {}

    def follow_metadata(self) -> None:
        """Empty the cache on every metadata update from now on (called by start())."""
        # the listener holds the cache, not the producer: the client's background tasks keep
        # the cluster alive, and an unclosed producer must still be collectable (and warn)
        self._client.cluster.add_listener(_ClearOnMetadata(self.cache))

    async def get(self, topic: str) -> Parts:
        """The topic's partitions, waiting for its metadata up to ``max_block_ms``
        (KafkaTimeoutError after)."""
        cached = self.cache.get(topic)
        if cached is not None:
            return cached
        await self._client.wait_for_topic(topic, self._max_block_ms)
        cluster = self._client.cluster
        all_parts = sorted(cluster.partitions_for_topic(topic) or ())
        avail = sorted(cluster.available_partitions_for_topic(topic) or ())
        if not all_parts:
            raise Errors.KafkaTimeoutError(f"no partitions known for topic {topic!r}")
        cached = (all_parts, avail, frozenset(all_parts))
        self.cache[topic] = cached
        return cached

    async def with_partition(self, topic: str, partition: int) -> Parts:
        """For a partition the cache does not list: one metadata refresh (the topic may have
        grown), then the topic's partitions if it has that one, else IllegalArgumentError."""
        if isinstance(partition, int) and partition >= 0:
            try:
                await asyncio.wait_for(
                    asyncio.shield(self._client.request_update()), self._max_block_ms / 1000
                )
            except (asyncio.TimeoutError, Errors.KafkaError):
                pass
            self.cache.pop(topic, None)
            parts = await self.get(topic)
            if partition in parts[2]:
                return parts
        raise Errors.IllegalArgumentError(
            f"partition {partition} of topic {topic!r} does not exist"
        )


class _ClearOnMetadata:
    """Cluster listener that empties a producer's topic cache on every metadata update."""

    __slots__ = ("_cache",)

    def __init__(self, cache: dict[str, Any]) -> None:
        self._cache = cache

    def __call__(self, cluster: Any) -> None:
        self._cache.clear()
