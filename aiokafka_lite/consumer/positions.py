"""The consumer's positions and offset look-ups: ``seek*()``, :meth:`~Positions.position`,
the watermarks of the latest fetch, and ``offsets_for_times`` / ``beginning_offsets`` /
``end_offsets`` (ListOffsets through the fetcher).

:class:`Positions` is a part of :class:`~aiokafka_lite.consumer.consumer.AIOKafkaConsumer`,
which delegates those calls to it. It reads and moves the positions in the subscription state
it is given, and reaches the fetcher (ListOffsets) and coordinator (committed offsets,
positions to initialise) of a started consumer through the ``parts`` callable it is given
(which raises when the consumer is not started or stopped).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite._timeouts import Timeouts
from aiokafka_lite.cluster import ClusterMetadata
from aiokafka_lite.structs import OffsetAndTimestamp, TopicPartition

from .fetcher import EARLIEST, LATEST, Fetcher
from .group import Coordinator
from .subscription import SubscriptionState

__all__ = ["Positions", "check_tp"]


class Positions:
    """Seeks, positions, watermarks and offset look-ups of one consumer."""

    def __init__(
        self,
        subscription: SubscriptionState,
        parts: Callable[[], tuple[Fetcher, Coordinator]],
        timeouts: Timeouts,
    ) -> None:
        self._subscription = subscription
        #: the started consumer's fetcher and coordinator (raises when not started or stopped)
        self._parts = parts
        #: look-ups and position() wait up to ``retry_ms`` (an operation's budget)
        self._timeouts = timeouts

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """:meth:`AIOKafkaConsumer.seek`."""
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be a non-negative integer, got {offset!r}")
        self._subscription.seek(partition, offset)

    async def _list(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]]:
        fetcher, _ = self._parts()
        return await fetcher.list_offsets(timestamps, self._timeouts.retry_ms)

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """:meth:`AIOKafkaConsumer.seek_to_beginning`."""
        await self._seek_to(partitions, EARLIEST)

    async def seek_to_end(self, *partitions: TopicPartition) -> None:
        """:meth:`AIOKafkaConsumer.seek_to_end`."""
        await self._seek_to(partitions, LATEST)

    async def _seek_to(self, partitions: tuple[TopicPartition, ...], ts: int) -> None:
        tps = list(partitions) or list(self._subscription.assignment)
        for tp in tps:
            check_tp(tp)
            self._subscription.state(tp)
        found = await self._list({tp: ts for tp in tps})
        for tp, (offset, _) in found.items():
            if self._subscription.is_assigned(tp):
                self._subscription.seek(tp, offset)

    async def seek_to_committed(
        self, *partitions: TopicPartition
    ) -> dict[TopicPartition, int | None]:
        """:meth:`AIOKafkaConsumer.seek_to_committed`."""
        _, coordinator = self._parts()
        tps = list(partitions) or list(self._subscription.assignment)
        for tp in tps:
            check_tp(tp)
            self._subscription.state(tp)
        committed = await coordinator.committed(tps)
        out: dict[TopicPartition, int | None] = {}
        for tp in tps:
            om = committed.get(tp)
            out[tp] = om.offset if om is not None else None
            if om is not None and self._subscription.is_assigned(tp):
                self._subscription.seek(tp, om.offset)
        return out

    async def position(self, partition: TopicPartition) -> int:
        """:meth:`AIOKafkaConsumer.position`."""
        _, coordinator = self._parts()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeouts.retry_ms / 1000
        initialised = False
        subs = self._subscription
        first = True
        while True:
            if not first and not subs.is_assigned(partition) and subs.subscribed:
                # a rebalance took the assignment away while we waited: as aiokafka, wait for
                # the next one and look again (IllegalStateError if it lacks the partition)
                try:
                    await asyncio.wait_for(
                        subs.wait_for_assignment(), max(0.0, deadline - loop.time())
                    )
                except asyncio.TimeoutError:
                    raise Errors.KafkaTimeoutError(
                        f"position of {partition}: no new assignment within request_timeout_ms"
                    ) from None
            first = False
            st = subs.state(partition)
            if st.has_valid_position:
                return st.position  # type: ignore[return-value]
            if st.error is not None:
                exc, st.error = st.error, None
                raise exc
            if st.position is None and st.reset is None and not initialised:
                # not initialised yet: do it here rather than wait for the coordinator task,
                # which may be the caller (position() in on_partitions_assigned, as aiokafka
                # allows)
                initialised = True
                await coordinator._init_positions()
                continue
            if loop.time() >= deadline:
                raise Errors.KafkaTimeoutError(
                    f"position of {partition} unknown after request_timeout_ms"
                )
            await asyncio.sleep(0.01)

    def highwater(self, partition: TopicPartition) -> int | None:
        """:meth:`AIOKafkaConsumer.highwater`."""
        return self._subscription.state(partition).highwater

    def last_stable_offset(self, partition: TopicPartition) -> int | None:
        """:meth:`AIOKafkaConsumer.last_stable_offset`."""
        return self._subscription.state(partition).lso

    def last_poll_timestamp(self, partition: TopicPartition) -> int | None:
        """:meth:`AIOKafkaConsumer.last_poll_timestamp`."""
        return self._subscription.state(partition).last_poll_ms

    async def wait_positions(
        self, deadline: float, cluster: ClusterMetadata, stopped: Callable[[], bool]
    ) -> None:
        """Until every assigned partition ``cluster`` knows has a position (or until
        ``deadline``, loop time, or the consumer stopped)."""
        loop = asyncio.get_running_loop()
        subs = self._subscription

        def unset() -> bool:
            return any(
                tp.partition in (cluster.partitions_for_topic(tp.topic) or ())
                for tp in subs.missing_positions() + [tp for tp, _ in subs.pending_resets()]
            )

        while unset():
            # a partition whose position cannot be set (e.g. NoOffsetForPartitionError with
            # auto_offset_reset="none") holds its error for the next poll: return now, as
            # aiokafka's start() does, instead of waiting out the start timeout
            if loop.time() >= deadline or subs.errors or stopped():
                return
            await asyncio.sleep(0.01)

    def lags(self) -> dict[TopicPartition, int]:
        """High watermark minus position of each assigned partition fetched at least once."""
        lags = {}
        for tp, st in self._subscription.assignment.items():
            if st.highwater is not None and st.position is not None:
                lags[tp] = max(st.highwater - st.position, 0)
        return lags

    # -- offsets lookups -------------------------------------------------------------------
    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """:meth:`AIOKafkaConsumer.offsets_for_times`."""
        for tp, ts in timestamps.items():
            if not isinstance(ts, int) or ts < 0:
                raise ValueError(f"timestamp for {tp} must be a non-negative int")
        found = await self._list(timestamps)
        return {
            tp: (
                OffsetAndTimestamp(found[tp][0], found[tp][1])
                if tp in found and found[tp][0] >= 0
                else None
            )
            for tp in timestamps
        }

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """:meth:`AIOKafkaConsumer.beginning_offsets`."""
        found = await self._list({tp: EARLIEST for tp in partitions})
        return {tp: v[0] for tp, v in found.items()}

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """:meth:`AIOKafkaConsumer.end_offsets`."""
        found = await self._list({tp: LATEST for tp in partitions})
        return {tp: v[0] for tp, v in found.items()}


def check_tp(tp: Any) -> None:
    """TypeError unless ``tp`` is a TopicPartition (aiokafka's check)."""
    if not isinstance(tp, TopicPartition):
        raise TypeError(f"partitions must be TopicPartition instances, got {tp!r}")
