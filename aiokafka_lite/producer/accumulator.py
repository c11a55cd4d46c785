"""Record accumulator: per-partition batches, bounded by a :class:`MemoryPool`.

Records are appended straight into an open :class:`ProducerBatch` (one record-batch builder per
partition). A batch has ONE asyncio future; each record gets a light :class:`RecordHandle`
(batch, index, timestamp) that resolves to its own :class:`RecordMetadata` from the batch result.

Life of a batch: *open* (accepting records) -> *sealed* (full, lingered out, flushed or memory is
short; queued per partition in ``pending``) -> *in flight* (drained by the sender) -> done, or
back to the front of ``pending`` for a retry. Memory reserved when it opened is released when its
future resolves.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Container, Iterable, Sequence
from typing import Any, NamedTuple

from aiokafka_lite.errors import KafkaError, KafkaTimeoutError
from aiokafka_lite.producer.memory import MemoryPool
from aiokafka_lite.records.batch_builder import RecordBatchBuilder
from aiokafka_lite.structs import RecordMetadata, TopicPartition

__all__ = ["Accumulator", "ProducerBatch", "RecordHandle", "BatchBuilder", "BatchRecordMetadata"]

Headers = Sequence[tuple[str, bytes | None]]
_BATCH_OVERHEAD = 61  # record batch v2 header
_RECORD_OVERHEAD = 22  # worst-case varints + attributes per record


def estimate_record_size(key: bytes | None, value: bytes | None, headers: Headers | None) -> int:
    """Upper bound of one record's encoded size inside a batch (uncompressed)."""
    size = _RECORD_OVERHEAD + (len(key) if key is not None else 0)
    if value is not None:
        size += len(value)
    if headers:
        for hk, hv in headers:
            size += len(hk) * 3 + 10 + (len(hv) if hv is not None else 0)
    return size


class ProducerBatch:
    """One record batch for one partition, plus its delivery state."""

    __slots__ = (
        "tp",
        "builder",
        "future",
        "reserved",
        "created",
        "ready_at",
        "deadline",
        "attempts",
        "retry_at",
        "buffer",
        "sequence",
        "producer_id",
        "producer_epoch",
        "sealed",
        "in_flight",
        "count",
        "first_ts",
        "user_batch",
        "handle_extra",
        "waiters",
    )

    def __init__(
        self,
        tp: TopicPartition,
        builder: Any,
        future: asyncio.Future[Any],
        reserved: int,
        now: float,
        linger: float,
        delivery_timeout: float,
    ) -> None:
        self.tp = tp
        self.builder = builder
        self.future = future
        self.reserved = reserved
        self.created = now
        self.ready_at = now + linger
        self.deadline = now + delivery_timeout
        self.attempts = 0
        self.retry_at = 0.0
        self.buffer: bytearray | bytes | None = None
        self.sequence = -1
        self.producer_id = -1
        self.producer_epoch = -1
        self.sealed = False
        self.in_flight = False
        self.count = 0
        self.first_ts = 0
        self.user_batch = False
        self.handle_extra: Any = None
        self.waiters: list[asyncio.Future[None]] | None = None

    def build(self) -> bytearray | bytes:
        """Encode (and compress) once; later calls return the same bytes."""
        buf = self.buffer
        if buf is None:
            buf = self.buffer = self.builder.build()
            self.builder = None
        return buf

    def __repr__(self) -> str:
        return f"<ProducerBatch {self.tp.topic}-{self.tp.partition} n={self.count} seq={self.sequence}>"


def _wake_waiters(batch: ProducerBatch) -> None:
    waiters = batch.waiters
    if waiters is not None:
        batch.waiters = None
        for w in waiters:
            if not w.done():
                w.set_result(None)


class RecordHandle(tuple):  # type: ignore[type-arg]
    """Future-like result of one record: awaiting it gives its :class:`RecordMetadata`.

    A plain ``(batch, index, timestamp)`` tuple (created in C, no per-record Future). It also
    implements the asyncio Future protocol (``done``, ``result``, ``add_done_callback``, ...), so
    ``asyncio.gather``/``wait``/``wait_for`` accept it as they accept a Future. Cancelling a
    handle only detaches this waiter; the record is still delivered.
    """

    __slots__ = ()
    _asyncio_future_blocking = False  # marks the class as future-like for asyncio.isfuture()

    @property
    def _batch(self) -> ProducerBatch:
        return self[0]  # type: ignore[no-any-return]

    def __await__(self) -> Any:
        batch = self[0]
        if not batch.future.done():
            # Wait on a private future resolved together with the batch's (no extra loop hop):
            # cancelling the awaiting task then cancels only this waiter, never the batch.
            waiter = batch.future.get_loop().create_future()
            if batch.waiters is None:
                batch.waiters = [waiter]
            else:
                batch.waiters.append(waiter)
            yield from waiter.__await__()
        return self.result()

    def _is_cancelled(self) -> bool:
        extra = self[0].handle_extra
        return extra is not None and self[1] in extra.cancelled

    def done(self) -> bool:
        return self[0].future.done() or self._is_cancelled()

    def cancelled(self) -> bool:
        return self._is_cancelled()

    def result(self) -> RecordMetadata:
        batch = self[0]
        index = self[1]
        if batch.handle_extra is not None and index in batch.handle_extra.cancelled:
            raise asyncio.CancelledError()
        base, append_time, log_start = batch.future.result()
        tp = batch.tp
        offset = base + index if base >= 0 else -1
        if append_time is not None and append_time >= 0:
            return RecordMetadata(tp.topic, tp.partition, tp, offset, append_time, 1, log_start)
        return RecordMetadata(tp.topic, tp.partition, tp, offset, self[2], 0, log_start)

    def exception(self) -> BaseException | None:
        if self._is_cancelled():
            raise asyncio.CancelledError()
        return self[0].future.exception()  # type: ignore[no-any-return]

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self[0].future.get_loop()  # type: ignore[no-any-return]

    def cancel(self, msg: Any = None) -> bool:
        if self.done():
            return False
        self._extra().cancelled.add(self[1])
        self._run_callbacks(None)
        return True

    def _extra(self) -> _HandleExtra:
        batch = self[0]
        if batch.handle_extra is None:
            batch.handle_extra = _HandleExtra()
        return batch.handle_extra  # type: ignore[no-any-return]

    def add_done_callback(self, fn: Callable[[Any], None], *, context: Any = None) -> None:
        if self.done():
            self.get_loop().call_soon(fn, self, context=context)
            return
        extra = self._extra()
        cbs = extra.callbacks.get(self[1])
        if cbs is None:
            cbs = extra.callbacks[self[1]] = []
            self[0].future.add_done_callback(self._run_callbacks)
        cbs.append((fn, context))

    def remove_done_callback(self, fn: Callable[[Any], None]) -> int:
        extra = self[0].handle_extra
        cbs = extra.callbacks.get(self[1]) if extra is not None else None
        if not cbs:
            return 0
        keep = [(f, c) for f, c in cbs if f != fn]
        extra.callbacks[self[1]] = keep
        return len(cbs) - len(keep)

    def _run_callbacks(self, _fut: Any) -> None:
        extra = self[0].handle_extra
        cbs = extra.callbacks.pop(self[1], None) if extra is not None else None
        if cbs:
            loop = self.get_loop()
            for fn, ctx in cbs:
                loop.call_soon(fn, self, context=ctx)

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<RecordHandle {self[0].tp} #{self[1]} {state}>"


class _HandleExtra:
    """Rarely used per-batch state of record handles: cancelled indexes and done callbacks."""

    __slots__ = ("cancelled", "callbacks")

    def __init__(self) -> None:
        self.cancelled: set[int] = set()
        self.callbacks: dict[int, list[tuple[Callable[[Any], None], Any]]] = {}


_new_handle = tuple.__new__


class BatchRecordMetadata(NamedTuple):
    """What :meth:`BatchBuilder.append` returns: the record's offset inside the batch, its
    timestamp (epoch ms) and encoded size; ``crc`` is always None (v2 batches have one CRC)."""

    offset: int
    timestamp: int
    size: int

    @property
    def crc(self) -> None:
        return None


class BatchBuilder:
    """A batch filled by the caller and submitted with ``producer.send_batch()`` (aiokafka API)."""

    def __init__(
        self,
        builder: Any,
        batch_size: int,
        key_serializer: Callable[[Any], bytes] | None,
        value_serializer: Callable[[Any], bytes] | None,
    ) -> None:
        self._builder = builder
        self._batch_size = batch_size
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._closed = False
        self._first_ts: int | None = None

    def append(
        self,
        *,
        timestamp: int | None = None,
        key: Any = None,
        value: Any = None,
        headers: Headers | None = None,
    ) -> BatchRecordMetadata | None:
        """Add one record; None when the batch is full or closed. ``timestamp`` is epoch ms."""
        if self._closed:
            return None
        if self._key_serializer is not None:
            key = self._key_serializer(key)
        if self._value_serializer is not None:
            value = self._value_serializer(value)
        ts = _time_ns() // 1000000 if timestamp is None else int(timestamp)
        builder = self._builder
        before = builder.size_in_bytes()
        idx = builder.append(ts, key, value, headers or ())
        if idx is None:
            self._closed = True
            return None
        if not idx:
            self._first_ts = ts
        return _new_meta(BatchRecordMetadata, (idx, ts, builder.size_in_bytes() - before))

    def close(self) -> None:
        """Refuse further appends (the batch may still be submitted)."""
        self._closed = True

    def record_count(self) -> int:
        """Number of records appended."""
        return int(self._builder.record_count)

    def size(self) -> int:
        """Encoded (uncompressed) size in bytes, batch header included."""
        return int(self._builder.size_in_bytes())


_new_meta = tuple.__new__
_time_ns = time.time_ns


class Accumulator:
    """Per-partition open batches and queues of sealed ones, bounded by ``buffer_memory``."""

    def __init__(
        self,
        *,
        batch_size: int,
        buffer_memory: int,
        linger_ms: float,
        delivery_timeout_ms: float,
        compression_type: int,
        max_block_ms: float,
        transactional: bool = False,
    ) -> None:
        self.batch_size = batch_size
        self.pool = MemoryPool(buffer_memory)
        self.linger = linger_ms / 1000
        self.delivery_timeout = delivery_timeout_ms / 1000
        self.compression_type = compression_type
        self.max_block = max_block_ms / 1000
        self.transactional = transactional
        self.open: dict[str, dict[int, ProducerBatch]] = {}
        self.pending: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.incomplete: set[ProducerBatch] = set()
        self.wakeup: Callable[[], None] = lambda: None
        #: a batch just filled up: start its request now; True if one was started
        self.kick: Callable[[], bool] | None = None
        self.sealed_full = False
        #: linger 0: called with a new batch after its first record; True if it was sent at once
        self.send_now: Callable[[ProducerBatch], bool] | None = None
        self.closed_error: KafkaError | None = None
        self.flushing = 0
        #: called with (batch, error) whenever a batch fails
        self.fail_hook: Callable[[ProducerBatch, BaseException], None] | None = None
        self._tps: dict[tuple[str, int], TopicPartition] = {}

    # ---- appending -------------------------------------------------------------------------

    def try_append(
        self,
        topic: str,
        partition: int,
        ts: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
    ) -> RecordHandle | None:
        """Append to the partition's open batch if it has room; None if a new batch is needed."""
        parts = self.open.get(topic)
        if parts is not None:
            batch = parts.get(partition)
            if batch is not None:
                idx = batch.builder.append(ts, key, value, headers)
                if idx is not None:
                    return _new_handle(RecordHandle, (batch, idx, ts))
                self._seal(batch)
                self.sealed_full = True
        return None

    async def append(
        self,
        topic: str,
        partition: int,
        ts: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
    ) -> RecordHandle:
        """Append one record, opening a batch (and waiting for memory) when needed."""
        handle = self.try_append(topic, partition, ts, key, value, headers)
        if handle is not None:
            return handle
        if self.sealed_full:
            self.sealed_full = False
            if self.kick is not None and self.kick():
                # let the new request reach the socket while the caller keeps appending
                await asyncio.sleep(0)
                handle = self.try_append(topic, partition, ts, key, value, headers)
                if handle is not None:
                    return handle
        size = max(self.batch_size, estimate_record_size(key, value, headers) + _BATCH_OVERHEAD)
        pool = self.pool
        if not pool.try_acquire(size):
            self.wakeup()  # memory is short: let the sender ship what is open
            await pool.acquire(size, self.max_block)
            if self.closed_error is not None:
                pool.release(size)
                raise self.closed_error
            # someone may have opened a batch for this partition while we waited
            handle = self.try_append(topic, partition, ts, key, value, headers)
            if handle is not None:
                pool.release(size)
                return handle
        batch = self._new_batch(topic, partition, size)
        try:
            idx = batch.builder.append(ts, key, value, headers)
            if idx is None:  # cannot happen for a first record; be safe
                raise KafkaError("record could not be added to an empty batch")
        except BaseException:  # e.g. TypeError for a str value: undo the empty batch
            del self.open[topic][partition]
            batch.sealed = True
            self._release(batch)
            raise
        batch.first_ts = ts
        if self.send_now is not None:
            self.send_now(batch)
        return _new_handle(RecordHandle, (batch, idx, ts))

    def _tp(self, topic: str, partition: int) -> TopicPartition:
        key = (topic, partition)
        tp = self._tps.get(key)
        if tp is None:
            tp = self._tps[key] = TopicPartition(topic, partition)
        return tp

    def _new_batch(self, topic: str, partition: int, size: int) -> ProducerBatch:
        builder = RecordBatchBuilder(
            self.compression_type,
            batch_size=self.batch_size,
            is_transactional=self.transactional,
        )
        loop = asyncio.get_running_loop()
        batch = ProducerBatch(
            self._tp(topic, partition),
            builder,
            loop.create_future(),
            size,
            time.monotonic(),
            self.linger,
            self.delivery_timeout,
        )
        self.open.setdefault(topic, {})[partition] = batch
        self.incomplete.add(batch)
        if self.send_now is None:
            self.wakeup()
        return batch

    async def add_user_batch(self, bb: BatchBuilder, topic: str, partition: int) -> RecordHandle:
        """Queue a caller-built batch (``send_batch``) as one sealed batch."""
        bb.close()
        size = max(bb.size(), _BATCH_OVERHEAD)
        if not self.pool.try_acquire(size):
            self.wakeup()
            await self.pool.acquire(size, self.max_block)
        loop = asyncio.get_running_loop()
        batch = ProducerBatch(
            self._tp(topic, partition),
            bb._builder,
            loop.create_future(),
            size,
            time.monotonic(),
            0.0,
            self.delivery_timeout,
        )
        batch.count = bb.record_count()
        batch.first_ts = bb._first_ts or 0
        batch.user_batch = True
        self.incomplete.add(batch)
        self._seal(batch)
        if self.kick is not None and self.kick():
            await asyncio.sleep(0)  # let the request reach the socket
        return _new_handle(RecordHandle, (batch, 0, batch.first_ts))

    # ---- sealing and draining ----------------------------------------------------------------

    def _seal(self, batch: ProducerBatch, wake: bool = True) -> None:
        if batch.sealed:
            return
        batch.sealed = True
        if batch.builder is not None and not batch.user_batch:
            batch.count = batch.builder.record_count
        tp = batch.tp
        parts = self.open.get(tp.topic)
        if parts is not None and parts.get(tp.partition) is batch:
            del parts[tp.partition]
        dq = self.pending.get(tp)
        if dq is None:
            dq = self.pending[tp] = deque()
        dq.append(batch)
        if wake:
            self.wakeup()

    def seal_ready(self, now: float, busy: Container[TopicPartition] = ()) -> float | None:
        """Seal open batches whose linger elapsed (all of them when flushing or memory is short).

        Batches of ``busy`` partitions (a batch in flight that must complete first) stay open
        to keep filling, unless forced. Returns the earliest ``ready_at`` among batches still
        open and not busy, or None.
        """
        force = self.flushing > 0 or self.pool.has_waiters or self.closed_error is not None
        nxt: float | None = None
        to_seal: list[ProducerBatch] = []
        for parts in self.open.values():
            for batch in parts.values():
                if not force and busy and batch.tp in busy:
                    continue
                if force or batch.ready_at <= now:
                    to_seal.append(batch)
                elif nxt is None or batch.ready_at < nxt:
                    nxt = batch.ready_at
        for batch in to_seal:
            self._seal(batch)
        return nxt

    def requeue(self, batch: ProducerBatch, retry_at: float) -> None:
        """Put a batch back for a retry, before later batches of its partition (by sequence)."""
        batch.in_flight = False
        batch.retry_at = retry_at
        dq = self.pending.get(batch.tp)
        if dq is None:
            dq = self.pending[batch.tp] = deque()
        i = 0
        if batch.sequence >= 0:
            for other in dq:
                if other.sequence < 0 or other.sequence > batch.sequence:
                    break
                i += 1
        dq.insert(i, batch)

    # ---- completion ----------------------------------------------------------------------------

    def complete(
        self, batch: ProducerBatch, base_offset: int, append_time: int | None, log_start: int | None
    ) -> None:
        """Resolve a batch's future with its base offset and release its memory."""
        batch.in_flight = False
        fut = batch.future
        if not fut.done():
            fut.set_result((base_offset, append_time, log_start))
            _wake_waiters(batch)
        self._release(batch)

    def _fail_batch(self, batch: ProducerBatch, exc: BaseException) -> None:
        batch.in_flight = False
        fut = batch.future
        if not fut.done():
            fut.set_exception(exc)
            fut.exception()  # mark retrieved: callers may never await a failed send
            _wake_waiters(batch)
            if self.fail_hook is not None:
                self.fail_hook(batch, exc)
        self._release(batch)

    fail = _fail_batch

    def _release(self, batch: ProducerBatch) -> None:
        if batch in self.incomplete:
            self.incomplete.discard(batch)
            self.pool.release(batch.reserved)

    def expire(self, now: float) -> None:
        """Fail queued (not in-flight) batches whose delivery timeout passed."""
        for dq in self.pending.values():
            while dq and dq[0].deadline <= now and not dq[0].in_flight:
                batch = dq.popleft()
                self._fail_batch(
                    batch,
                    KafkaTimeoutError(
                        f"batch for {batch.tp.topic}-{batch.tp.partition} expired after "
                        f"{self.delivery_timeout * 1000:.0f} ms (delivery_timeout_ms)"
                    ),
                )

    def abort_undrained(self, exc: BaseException) -> None:
        """Fail every batch that has not been handed to the sender yet."""
        for parts in list(self.open.values()):
            for batch in list(parts.values()):
                self._seal(batch)
        for dq in self.pending.values():
            while dq:
                self._fail_batch(dq.popleft(), exc)

    def pending_count(self) -> int:
        """Number of partitions with sealed batches waiting for the sender."""
        n = 0
        for dq in self.pending.values():
            if dq:
                n += 1
        return n

    def has_unsent(self) -> bool:
        """True while any batch is open or queued."""
        return any(self.open.values()) or any(self.pending.values())

    async def flush(self, timeout: float | None) -> None:
        """Seal everything open and wait until every batch created so far has completed."""
        waiting = [b.future for b in self.incomplete]
        if not waiting:
            return
        self.flushing += 1
        try:
            self.wakeup()
            _done, pending = await asyncio.wait(waiting, timeout=timeout)
            if pending:
                raise KafkaTimeoutError(f"flush timed out with {len(pending)} batches undelivered")
        finally:
            self.flushing -= 1


def iter_batches(dqs: Iterable[deque[ProducerBatch]]) -> Iterable[ProducerBatch]:
    """All batches in the given queues (helper for tests/diagnostics)."""
    for dq in dqs:
        yield from dq
