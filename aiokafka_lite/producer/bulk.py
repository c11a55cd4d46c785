"""The producer's bulk sends: :meth:`~BulkSendMixin.send_many` (many records of one topic in
one call, appended run by run into the open batches) and the batches a user builds
(:meth:`~BulkSendMixin.create_batch`, :meth:`~BulkSendMixin.send_batch`).

:class:`BulkSendMixin` is part of :class:`~aiokafka_lite.producer.producer.AIOKafkaProducer`;
like ``send()`` it appends only through the accumulator (``append``, ``full``,
``add_user_batch``) or a batch's own ``append``/``append_values``, and shares the producer's
partition choice (the sticky partition of unkeyed records, the partitioner).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from aiokafka_lite import errors as Errors
from aiokafka_lite.producer.batch import BatchBuilder, RecordHandle, RecordHandles
from aiokafka_lite.records.batch_builder import RecordBatchBuilder

if TYPE_CHECKING:
    from aiokafka_lite.producer.accumulator import Accumulator
    from aiokafka_lite.producer.partitioner import StickyPartitions
    from aiokafka_lite.producer.topics import Parts, TopicPartitions
    from aiokafka_lite.producer.transaction import TransactionManager

__all__ = ["BulkSendMixin"]

_time_ns = time.time_ns


class BulkSendMixin:
    """send_many(), create_batch() and send_batch() (mixed into the producer)."""

    if TYPE_CHECKING:  # the producer's, set in its constructor
        _acc: Accumulator
        _topics: TopicPartitions
        _topic_cache: dict[str, Parts]
        _txn: TransactionManager | None
        _codec: int
        _batch_size: int
        _max_request_size: int
        _size_guard: int
        _key_serializer: Callable[[Any], bytes] | None
        _value_serializer: Callable[[Any], bytes] | None
        _partitioner: Callable[..., int]
        _sticky: StickyPartitions | None
        _h_send: tuple[Callable[..., Any], ...]

        async def send(
            self,
            topic: str,
            value: Any = None,
            key: Any = None,
            partition: int | None = None,
            timestamp_ms: int | None = None,
            headers: Sequence[tuple[str, bytes | None]] | None = None,
        ) -> RecordHandle: ...

        def _check_gate(self) -> None: ...

        def _check_size(self, key: Any, value: Any, headers: Any) -> None: ...

    async def send_many(
        self,
        topic: str,
        values: Iterable[Any],
        *,
        keys: Sequence[Any] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> Sequence[RecordHandle]:
        """Bulk path: queue many records of one topic in one call; one handle per record.

        Equivalent to ``[await send(topic, v, key=k, partition=partition, ...) ...]`` but
        without a coroutine per record: unkeyed records go straight into the partition's open
        batch (``partition`` if given, else the sticky partition), all stamped with one
        timestamp (``timestamp_ms`` or now). With ``keys`` each record is partitioned by key.
        Returns a sequence of handles, in order (unkeyed and without headers: a lazy
        :class:`~aiokafka_lite.producer.batch.RecordHandles`, else a list).
        """
        if keys is not None:
            return [
                await self.send(topic, v, k, partition, timestamp_ms, headers)
                for v, k in zip(values, keys, strict=True)
            ]
        if self._h_send:  # on_send hooks see every record: one send() each
            return [
                await self.send(topic, v, None, partition, timestamp_ms, headers) for v in values
            ]
        self._check_gate()
        parts = self._topic_cache.get(topic)
        if parts is None:
            parts = await self._topics.get(topic)
        if partition is not None and partition not in parts[2]:
            parts = await self._topics.with_partition(topic, partition)
        ts = _time_ns() // 1000000 if timestamp_ms is None else timestamp_ms
        vser = self._value_serializer
        kser = self._key_serializer
        key = kser(None) if kser is not None else None
        if vser is not None:
            vals = [vser(v) for v in values]
        else:
            vals = values if isinstance(values, list) else list(values)
        if key is not None or headers or self._batch_size > self._max_request_size:
            return await self._send_many_each(topic, vals, key, partition, ts, headers or (), parts)
        # Bulk path: null keys, no headers. Whole runs of values go into the open batch in one
        # RecordBatchBuilder.append_values() call; handles are made by C-level map(). No size
        # check: what fits in a batch (<= batch_size) fits in max_request_size; a value that
        # does not fit opens a batch of its own through Accumulator.append, checked there.
        acc = self._acc
        open_batches = acc.open
        sticky = self._sticky if partition is None else None
        part = partition
        out = RecordHandles()
        add_run = out._add
        i = 0
        n = len(vals)
        while i < n:
            st: Any = None
            if sticky is not None:  # a new batch moves to another partition (KIP-480)
                st = sticky.for_topic(topic, parts[0], parts[1])
                part = st[0]
            elif part is None:
                part = self._partitioner(None, parts[0], parts[1])
            assert part is not None
            batch = open_batches.get(topic, {}).get(part)
            if batch is None:  # open one with the next record (waits for memory if short)
                value = vals[i]
                if value is not None and len(value) > self._size_guard:
                    self._check_size(None, value, ())
                handle = await acc.append(topic, part, ts, None, value, ())
                batch = handle[0]
                add_run(batch, handle[1], 1, ts)
                i += 1
            if st is not None and st[1] is None:
                st[1] = batch
            if batch.sealed:  # closed for appends meanwhile (e.g. expired): open another
                continue
            first = batch.builder.record_count
            j = batch.append_values(ts, vals, i)
            if j > i:
                add_run(batch, first, j - i, ts)
                i = j
            if i < n:  # the batch is full
                await acc.full(batch)
        return out

    async def _send_many_each(
        self,
        topic: str,
        vals: Sequence[Any],
        key: Any,
        partition: int | None,
        ts: int,
        hdrs: Any,
        parts: Parts,
    ) -> list[RecordHandle]:
        """send_many() with a key or headers: record by record into the open batch."""
        guard = 0 if hdrs else self._size_guard
        acc = self._acc
        sticky = self._sticky if partition is None and key is None else None
        out: list[RecordHandle] = []
        add = out.append
        part = partition
        batch: Any = None
        for value in vals:
            if value is not None and len(value) > guard:
                self._check_size(key, value, hdrs)
            if batch is not None:  # a sealed batch's append takes nothing
                idx = batch.append(ts, key, value, hdrs)
                if idx is not None:
                    add(RecordHandle((batch, idx, ts)))
                    continue
            if sticky is not None:  # a new batch: KIP-480 moves to another partition
                part = sticky.for_topic(topic, parts[0], parts[1])[0]
            elif part is None:
                part = self._partitioner(key, parts[0], parts[1])
            assert part is not None
            handle = await acc.append(topic, part, ts, key, value, hdrs)
            batch = handle[0]
            if sticky is not None:
                st = sticky.state[topic]
                if st[1] is None:
                    st[1] = batch
            add(handle)
        return out

    def create_batch(self) -> BatchBuilder:
        """An empty :class:`BatchBuilder` to fill and pass to :meth:`send_batch`."""
        txn = self._txn
        builder = RecordBatchBuilder(
            self._codec,
            batch_size=self._batch_size,
            is_transactional=txn is not None and txn.transactional,
        )
        return BatchBuilder(builder, self._batch_size, self._key_serializer, self._value_serializer)

    async def send_batch(
        self, batch: BatchBuilder, topic: str, *, partition: int | None = None
    ) -> RecordHandle:
        """Queue a filled :class:`BatchBuilder` for ``partition`` (None: the partitioner
        chooses, as for an unkeyed record); resolves to the metadata of its first record
        (offset = the batch's base offset)."""
        self._check_gate()
        parts = await self._topics.get(topic)
        if partition is None:
            partition = self._partitioner(None, parts[0], parts[1])
        if partition not in parts[2]:
            await self._topics.with_partition(topic, partition)
        if not batch.record_count():
            raise Errors.IllegalArgumentError("cannot send an empty batch")
        if batch.size() > self._max_request_size:
            raise Errors.MessageSizeTooLargeError(
                f"the batch is {batch.size()} bytes, larger than max_request_size"
            )
        return await self._acc.add_user_batch(batch, topic, partition)
