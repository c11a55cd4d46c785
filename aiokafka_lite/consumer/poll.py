"""The consumer's record path: :meth:`~Poller.getmany`, :meth:`~Poller.getone` and the next
record of ``async for``, which hand the application the records the fetcher buffered.

:class:`Poller` is a part of :class:`~aiokafka_lite.consumer.consumer.AIOKafkaConsumer`, which
delegates those calls to it. It holds the subscription state, the ``on_consume`` hooks and the
poll limits from the constructor, and the fetcher and coordinator from ``start()``
(:meth:`~Poller.attach`) until ``stop()`` (:meth:`~Poller.close`). Each call lets the
coordinator see the poll (``max_poll_interval_ms``), drains the fetcher's buffers, and
otherwise waits for data; the only per-record work beyond the fetcher's is the ``on_consume``
hook test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite.hooks import emit
from aiokafka_lite.structs import ConsumerRecord, TopicPartition

from .arrow import columns_table, read_schema, records_table
from .fetcher import Fetcher
from .group import Coordinator
from .subscription import SubscriptionState

__all__ = ["Poller"]

#: drain() from every assigned partition
_ALL: frozenset[TopicPartition] = frozenset()


class Poller:
    """getmany(), getone() and the next record of ``async for``, for one consumer."""

    def __init__(
        self,
        subscription: SubscriptionState,
        *,
        on_consume: tuple[Callable[..., Any], ...],
        max_poll_records: int,
        consumer_timeout: float,
    ) -> None:
        self._subscription = subscription
        #: on_consume hooks: called for every record handed out
        self._h_consume = on_consume
        self._max_poll_records = max_poll_records
        #: seconds one wait for data lasts before the loop looks again
        self._consumer_timeout = consumer_timeout
        self._fetcher: Fetcher | None = None
        self._coordinator: Coordinator | None = None
        self._closed = False

    def attach(self, fetcher: Fetcher, coordinator: Coordinator) -> None:
        """The consumer started: poll through these."""
        self._fetcher = fetcher
        self._coordinator = coordinator

    def close(self) -> None:
        """The consumer stopped: calls raise (or return nothing), waits end."""
        self._closed = True

    def _parts(self) -> tuple[Fetcher, Coordinator]:
        if self._closed:
            raise Errors.ConsumerStoppedError("consumer is stopped")
        if self._fetcher is None or self._coordinator is None:
            raise Errors.IllegalStateError("consumer is not started: call start() first")
        return self._fetcher, self._coordinator

    async def anext(self) -> ConsumerRecord[Any, Any]:
        """The next record for ``async for`` (StopAsyncIteration once stopped)."""
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
        self, partitions: tuple[TopicPartition, ...], timeout_ms: int, max_records: int | None
    ) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
        """:meth:`AIOKafkaConsumer.getmany`."""
        recs = await self._poll(partitions, timeout_ms, max_records, None)
        if recs and self._h_consume:
            self._consumed(recs)
        return recs

    async def _poll(
        self,
        partitions: tuple[TopicPartition, ...],
        timeout_ms: int,
        max_records: int | None,
        arrow: bool | None,
    ) -> dict[TopicPartition, Any]:
        """getmany()'s wait and drain (``arrow``: see ``Fetcher.drain``)."""
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
            recs = fetcher.drain(tps, n, arrow)
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
        partitions: tuple[TopicPartition, ...],
        timeout_ms: int,
        max_records: int | None,
        include_headers: bool,
    ) -> Any:
        """:meth:`AIOKafkaConsumer.getmany_arrow`: fetched v2 batches decoded straight into
        Arrow buffers, without a Python object per record (by the compiled codec when
        installed); with ``on_consume`` hooks or deserializers the records go through
        :meth:`getmany` instead, as those take record objects."""
        fetcher, _ = self._parts()
        if self._h_consume or fetcher.deserializes:
            recs = await self.getmany(partitions, timeout_ms, max_records)
            return records_table(recs, include_headers)
        schema = read_schema(include_headers)  # pyarrow missing: raised before any record moves
        cols = await self._poll(partitions, timeout_ms, max_records, include_headers)
        return columns_table(cols, schema)

    async def getone(self, partitions: tuple[TopicPartition, ...]) -> ConsumerRecord[Any, Any]:
        """:meth:`AIOKafkaConsumer.getone`."""
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
