"""The consumer's record path: :meth:`~PollMixin.getmany`, :meth:`~PollMixin.getone` and
``async for``, which hand the application the records the fetcher buffered.

:class:`PollMixin` is part of :class:`~aiokafka_lite.consumer.consumer.AIOKafkaConsumer`; it
reads the consumer's fetcher, coordinator and subscription state. Each call lets the
coordinator see the poll (``max_poll_interval_ms``), drains the fetcher's buffers, and
otherwise waits for data; the only per-record work beyond the fetcher's is the ``on_consume``
hook test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from aiokafka_lite import errors as Errors
from aiokafka_lite.hooks import emit
from aiokafka_lite.structs import ConsumerRecord, TopicPartition

from .arrow import columns_table, read_schema, records_table

if TYPE_CHECKING:
    from collections.abc import Callable

    from .fetcher import Fetcher
    from .group import Coordinator
    from .subscription import SubscriptionState

__all__ = ["PollMixin"]

#: drain() from every assigned partition
_ALL: frozenset[TopicPartition] = frozenset()

_Self = TypeVar("_Self", bound="PollMixin")


class PollMixin:
    """getmany(), getone() and ``async for`` (mixed into the consumer)."""

    if TYPE_CHECKING:  # the consumer's, set in its constructor and start()
        _subscription: SubscriptionState
        _fetcher: Fetcher | None
        _coordinator: Coordinator | None
        _closed: bool
        _h_consume: tuple[Callable[..., Any], ...]
        _max_poll_records: int
        _consumer_timeout: float

        def _parts(self) -> tuple[Fetcher, Coordinator]: ...

    def __aiter__(self: _Self) -> _Self:
        if self._closed:  # as aiokafka: iterating a stopped consumer is an error
            raise Errors.ConsumerStoppedError("consumer is stopped")
        return self

    async def __anext__(self) -> ConsumerRecord[Any, Any]:
        # getone() inlined for `async for`, one record per call: no second coroutine, no
        # partition set, no _parts() call (async-for over 50k records, cProfile on tansu:
        # 807k -> 607k calls).
        fetcher = self._fetcher
        coordinator = self._coordinator
        if self._closed or fetcher is None or coordinator is None:
            if self._closed:
                raise StopAsyncIteration
            self._parts()  # raises IllegalStateError: not started
            raise AssertionError("unreachable")
        coordinator.poll()
        rec = fetcher.drain_one()
        if rec is not None:
            if self._h_consume:
                emit(self._h_consume, rec)
            return rec  # type: ignore[no-any-return]
        drain = fetcher.drain
        while True:
            try:
                coordinator.poll()
                recs = drain(_ALL, 1)
            except Errors.ConsumerStoppedError:
                raise StopAsyncIteration from None
            if recs:
                for records in recs.values():
                    if self._h_consume:
                        emit(self._h_consume, records[0])
                    return records[0]  # type: ignore[no-any-return]
            await fetcher.wait_for_data(self._consumer_timeout)
            if self._closed:
                raise StopAsyncIteration

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
        """Records per partition: whatever is buffered now, else waits up to ``timeout_ms``
        for some; at most ``max_records`` (default ``max_poll_records``) in total."""
        recs = await self._poll(partitions, timeout_ms, max_records, None)
        if recs and self._h_consume:
            self._consumed(recs)
        return recs

    async def _poll(
        self,
        partitions: tuple[TopicPartition, ...],
        timeout_ms: int,
        max_records: int | None,
        arrow_headers: bool | None,
    ) -> dict[TopicPartition, Any]:
        """getmany()'s wait and drain (``arrow_headers``: see ``Fetcher.drain``)."""
        if max_records is not None and (not isinstance(max_records, int) or max_records < 1):
            raise ValueError("`max_records` must be a positive Integer")
        fetcher, coordinator = self._parts()
        tps = set(partitions)
        for tp in tps:
            self._subscription.state(tp)
        n = max_records or self._max_poll_records
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            coordinator.poll()
            recs = fetcher.drain(tps, n, arrow_headers)
            if recs:
                return recs
            remaining = deadline - loop.time()
            if remaining <= 0:
                return recs
            await fetcher.wait_for_data(min(remaining, self._consumer_timeout))
            if self._closed:  # stopped while waiting: nothing more comes (as aiokafka)
                return {}

    async def getmany_arrow(
        self,
        *partitions: TopicPartition,
        timeout_ms: int = 0,
        max_records: int | None = None,
        include_headers: bool = False,
    ) -> Any:
        """:meth:`getmany` as one ``pyarrow.Table`` with Spark's Kafka schema (key, value,
        topic, partition, offset, timestamp, timestampType, and headers when
        ``include_headers``): the same records, positions, commits and rebalances as
        :meth:`getmany`. Needs pyarrow (extra ``arrow``) and no deserializers.

        Fetched v2 batches are decoded straight into Arrow buffers, without a Python object
        per record (by the compiled codec when installed); with ``on_consume`` hooks the
        records go through :meth:`getmany` instead, as the hooks take record objects."""
        fetcher, _ = self._parts()
        if self._h_consume or fetcher.deserializes:
            recs = await self.getmany(*partitions, timeout_ms=timeout_ms, max_records=max_records)
            return records_table(recs, include_headers)
        schema = read_schema(include_headers)  # pyarrow missing: raised before any record moves
        cols = await self._poll(partitions, timeout_ms, max_records, include_headers)
        return columns_table(cols, schema)

    async def getone(self, *partitions: TopicPartition) -> ConsumerRecord[Any, Any]:
        """The next record (from ``partitions`` if given); waits as long as it takes."""
        fetcher, coordinator = self._parts()
        tps = set(partitions)
        for tp in tps:
            self._subscription.state(tp)
        while True:
            coordinator.poll()
            recs = fetcher.drain(tps, 1)
            if recs:
                record: ConsumerRecord[Any, Any] = next(iter(recs.values()))[0]
                if self._h_consume:
                    emit(self._h_consume, record)
                return record
            await fetcher.wait_for_data(self._consumer_timeout)
            if self._closed:
                raise Errors.ConsumerStoppedError("consumer is stopped")

    def _consumed(self, recs: Mapping[TopicPartition, list[ConsumerRecord[Any, Any]]]) -> None:
        hooks = self._h_consume
        for records in recs.values():
            for record in records:
                emit(hooks, record)
