"""The producer's append path: ``send()`` beyond its fast paths, the bulk sends
(:meth:`~RecordAppender.send_many`: many records of one topic in one call, appended run by run
into the open batches) and the batches a user builds (:meth:`~RecordAppender.create_batch`,
:meth:`~RecordAppender.send_batch`).

:class:`RecordAppender` is a part of :class:`~aiokafka_lite.producer.producer.AIOKafkaProducer`,
which delegates to it. It holds what it needs, given at construction: the accumulator, the
topics' partitions, the serializers, the partitioner and its sticky choice (the same
:class:`~aiokafka_lite.producer.partitioner.StickyPartitions` the producer's fast path reads),
the sizes, the ``on_send`` hooks. It appends only through the accumulator (``append``,
``full``, ``add_user_batch``) or a batch's own ``append``/``append_values``; of the producer it
knows only the ``check_gate`` callable it is given (started, not closed, in a transaction if
transactional).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite.hooks import apply_send
from aiokafka_lite.producer.accumulator import Accumulator
from aiokafka_lite.producer.batch import RecordHandle, RecordHandles, check_record_size
from aiokafka_lite.producer.partitioner import StickyChoice, StickyPartitions
from aiokafka_lite.producer.topics import Parts, TopicPartitions
from aiokafka_lite.producer.user_batch import BatchBuilder
from aiokafka_lite.records.batch_builder import RecordBatchBuilder, encoded_headers

__all__ = ["RecordAppender"]

_time_ns = time.time_ns
#: estimate_record_size's per-record overhead (22) plus the record batch header (61)
_RECORD_BOUND = 22 + 61


class RecordAppender:
    """The append path of one producer: its slow send(), send_many(), create_batch() and
    send_batch()."""

    def __init__(
        self,
        acc: Accumulator,
        topics: TopicPartitions,
        *,
        check_gate: Callable[[], None],
        on_send: tuple[Callable[..., Any], ...],
        codec: int,
        transactional: bool,
        batch_size: int,
        max_request_size: int,
        key_serializer: Callable[[Any], bytes] | None,
        value_serializer: Callable[[Any], bytes] | None,
        partitioner: Callable[..., int],
        sticky: StickyPartitions | None,
    ) -> None:
        self._acc = acc
        self._topics = topics
        self._topic_cache = topics.cache
        #: raises unless the producer may take records now
        self._check_gate = check_gate
        #: on_send hooks: while there are any, each record goes through send()
        self._h_send = on_send
        self._codec = codec
        self._transactional = transactional
        self._batch_size = batch_size
        self._max_request_size = max_request_size
        #: above this many key or value bytes a record's size is checked
        self._size_guard = max(0, (max_request_size - 4096) // 2)
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._partitioner = partitioner
        self._sticky = sticky
        self._acc_open = acc.open

    def _check_size(self, key: Any, value: Any, headers: Any) -> None:
        check_record_size(key, value, headers, self._max_request_size)

    async def send(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        serialized: bool,
    ) -> RecordHandle:
        """The producer's send() beyond its fast paths; ``serialized``: the serializers
        already ran (then the producer's gate was open: its fast path runs only then)."""
        if not serialized:
            self._check_gate()
        if not serialized:
            if self._key_serializer is not None:
                key = self._key_serializer(key)
            if self._value_serializer is not None:
                value = self._value_serializer(value)
        parts = self._topic_cache.get(topic)
        if parts is None:
            parts = await self._topics.get(topic)
        if partition is not None and partition not in parts[2]:
            parts = await self._topics.with_partition(topic, partition)
        if self._h_send:
            return await self._send_hooked(
                topic, value, key, partition, timestamp_ms, headers, parts
            )
        done = self.append_now(topic, value, key, partition, timestamp_ms, headers, parts)
        if type(done) is RecordHandle:
            return done
        return await self.append_wait(*done)

    async def _send_hooked(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        parts: Parts,
    ) -> RecordHandle:
        """send() with on_send hooks: the partition is chosen first (the hooks see it), then
        the record goes in with the headers the hooks returned."""
        sticky = None
        if partition is None:
            if key is None and self._sticky is not None:
                sticky = self._sticky.for_topic(topic, parts[0], parts[1])
                partition = sticky.partition
            else:
                partition = self._partitioner(key, parts[0], parts[1])
        assert partition is not None
        headers = apply_send(self._h_send, topic, partition, key, value, headers or ())
        done = self.append_now(topic, value, key, partition, timestamp_ms, headers, parts)
        handle = done if type(done) is RecordHandle else await self.append_wait(*done)
        if sticky is not None:
            sticky.bind(handle[0])  # later sends stay on this partition until the batch seals
        return handle

    def append_now(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        parts: Parts,
    ) -> RecordHandle | tuple[Any, ...]:
        """Size check, partition choice and the append into the partition's open batch when
        it has room: the record's handle; else the arguments of :meth:`append_wait`.
        ``partition`` is None or one of ``parts``; key and value are serialized."""
        guard = self._size_guard
        if headers is None:
            headers = ()
            if (value is not None and len(value) > guard) or (key is not None and len(key) > guard):
                self._check_size(key, value, headers)
        elif headers:
            # estimate_record_size inlined (two calls less per record with headers): the
            # record's upper bound from the cached encoded headers
            size = (
                _RECORD_BOUND
                + len(encoded_headers(headers))
                + (len(key) if key is not None else 0)
                + (len(value) if value is not None else 0)
            )
            if size > self._max_request_size:
                self._check_size(key, value, headers)
        elif (value is not None and len(value) > guard) or (key is not None and len(key) > guard):
            self._check_size(key, value, headers)
        sticky = None
        if partition is None:
            if key is None and self._sticky is not None:
                sticky = self._sticky.for_topic(topic, parts[0], parts[1])
                partition = sticky.partition
            else:
                partition = self._partitioner(key, parts[0], parts[1])
        ts = _time_ns() // 1000000 if timestamp_ms is None else timestamp_ms
        # fast path: the partition's open batch has room (see Accumulator.try_append)
        opened = self._acc_open.get(topic)
        if opened is not None:
            batch = opened.get(partition)
            if batch is not None:
                idx = batch.append(ts, key, value, headers)
                if idx is not None:
                    if sticky is not None:
                        sticky.bind(batch)  # later unkeyed sends take send()'s fast path
                    return RecordHandle((batch, idx, ts))
        return (topic, partition, ts, key, value, headers, sticky)

    async def append_wait(
        self,
        topic: str,
        partition: int,
        ts: int,
        key: Any,
        value: Any,
        headers: Any,
        sticky: StickyChoice | None,
    ) -> RecordHandle:
        """The accumulator's append: opens a batch, waiting for buffer memory if needed."""
        handle = await self._acc.append(topic, partition, ts, key, value, headers)
        if sticky is not None:
            sticky.bind(handle[0])
        return handle

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
        """:meth:`AIOKafkaProducer.send_many` (one handle per record, in order)."""
        if keys is not None:
            return [
                await self.send(topic, v, k, partition, timestamp_ms, headers, False)
                for v, k in zip(values, keys, strict=True)
            ]
        if self._h_send:  # on_send hooks see every record: one send() each
            return [
                await self.send(topic, v, None, partition, timestamp_ms, headers, False)
                for v in values
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
            st: StickyChoice | None = None
            if sticky is not None:  # a new batch moves to another partition (KIP-480)
                st = sticky.for_topic(topic, parts[0], parts[1])
                part = st.partition
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
            if st is not None:
                st.bind(batch)
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
        st: StickyChoice | None = None
        for value in vals:
            if value is not None and len(value) > guard:
                self._check_size(key, value, hdrs)
            if batch is not None:  # a sealed batch's append takes nothing
                idx = batch.append(ts, key, value, hdrs)
                if idx is not None:
                    add(RecordHandle((batch, idx, ts)))
                    continue
            if sticky is not None:  # a new batch: KIP-480 moves to another partition
                st = sticky.for_topic(topic, parts[0], parts[1])
                part = st.partition
            elif part is None:
                part = self._partitioner(key, parts[0], parts[1])
            assert part is not None
            handle = await acc.append(topic, part, ts, key, value, hdrs)
            batch = handle[0]
            if st is not None:
                st.bind(batch)
            add(handle)
        return out

    def create_batch(self) -> BatchBuilder:
        """An empty :class:`BatchBuilder` to fill and pass to :meth:`send_batch`."""
        builder = RecordBatchBuilder(
            self._codec, batch_size=self._batch_size, is_transactional=self._transactional
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
