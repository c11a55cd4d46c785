"""Batches and record handles: the per-batch state and the per-record future-likes.

:class:`ProducerBatch` is one record batch for one partition with ONE asyncio future;
:class:`RecordHandle` is a ``(batch, index, timestamp)`` tuple that resolves to the record's
:class:`RecordMetadata` from the batch result; :class:`BatchBuilder` is the caller-filled batch
of ``create_batch()``/``send_batch()``.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple, overload

from aiokafka_lite.structs import RecordMetadata, TopicPartition

__all__ = [
    "BatchBuilder",
    "BatchRecordMetadata",
    "ProducerBatch",
    "RecordHandle",
    "RecordHandles",
    "estimate_record_size",
]

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

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # aiokafka's send() returns an asyncio.Future and code checks for one (FastStream's
        # publish(no_confirm=True) contract): isinstance() consults __class__ after type(), so
        # isinstance(handle, asyncio.Future) holds. type(handle) is still RecordHandle.
        return asyncio.Future

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
        if base is None:  # acks=0: the broker tells nothing; aiokafka resolves to None
            return None  # type: ignore[return-value]
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
        batch = self[0]
        extra = self._extra()
        entry = extra.callbacks.get(self[1])
        if entry is None:
            entry = extra.callbacks[self[1]] = (self, [])
            if not extra.hooked:  # one batch-future callback serves every handle of the batch
                extra.hooked = True
                batch.future.add_done_callback(extra.run_all)
        entry[1].append((fn, context))

    def remove_done_callback(self, fn: Callable[[Any], None]) -> int:
        extra = self[0].handle_extra
        entry = extra.callbacks.get(self[1]) if extra is not None else None
        if not entry:
            return 0
        cbs = entry[1]
        keep = [(f, c) for f, c in cbs if f != fn]
        removed = len(cbs) - len(keep)
        cbs[:] = keep
        return removed

    def _run_callbacks(self, _fut: Any) -> None:
        extra = self[0].handle_extra
        entry = extra.callbacks.pop(self[1], None) if extra is not None else None
        if entry:
            loop = self.get_loop()
            for fn, ctx in entry[1]:
                loop.call_soon(fn, self, context=ctx)

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<RecordHandle {self[0].tp} #{self[1]} {state}>"


class _HandleExtra:
    """Rarely used per-batch state of record handles: cancelled indexes and done callbacks."""

    __slots__ = ("cancelled", "callbacks", "hooked")

    def __init__(self) -> None:
        self.cancelled: set[int] = set()
        #: record index -> (the handle the callbacks were added on, [(fn, context)])
        self.callbacks: dict[int, tuple[RecordHandle, list[tuple[Callable[[Any], None], Any]]]] = {}
        self.hooked = False

    def run_all(self, fut: asyncio.Future[Any]) -> None:
        """The batch is done: schedule every handle's callbacks (in the order added per
        handle, handles in the order they got their first callback)."""
        callbacks = self.callbacks
        self.callbacks = {}
        loop = fut.get_loop()
        call_soon = loop.call_soon
        for handle, cbs in callbacks.values():
            for fn, ctx in cbs:
                call_soon(fn, handle, context=ctx)


_new_handle = tuple.__new__


class RecordHandles(Sequence[RecordHandle]):
    """What ``send_many()`` returns: one :class:`RecordHandle` per record, in order, made when
    read (a bulk send of many records builds no per-record objects it does not need).

    A read-only sequence: ``len``, indexing (negative too), slicing (a list), iteration.
    """

    __slots__ = ("_runs", "_ends", "_len")

    def __init__(self) -> None:
        self._runs: list[tuple[ProducerBatch, int, int]] = []  # (batch, first index, ts)
        self._ends: list[int] = []  # cumulative record count at the end of each run
        self._len = 0

    def _add(self, batch: ProducerBatch, first: int, count: int, ts: int) -> None:
        self._runs.append((batch, first, ts))
        self._len += count
        self._ends.append(self._len)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, i: int) -> RecordHandle: ...

    @overload
    def __getitem__(self, i: slice) -> list[RecordHandle]: ...

    def __getitem__(self, i: int | slice) -> RecordHandle | list[RecordHandle]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._len))]
        n = self._len
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("record handle index out of range")
        r = bisect_right(self._ends, i)
        batch, first, ts = self._runs[r]
        start = self._ends[r - 1] if r else 0
        return RecordHandle((batch, first + i - start, ts))

    def __iter__(self) -> Iterator[RecordHandle]:
        start = 0
        for (batch, first, ts), end in zip(self._runs, self._ends):
            for idx in range(first, first + end - start):
                yield RecordHandle((batch, idx, ts))
            start = end

    def __repr__(self) -> str:
        return f"<RecordHandles {self._len} records in {len(self._runs)} batch runs>"


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
        self._append = builder.append
        self._buf = builder._buf

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
        buf = self._buf  # the builder's buffer: grows in place until build()
        before = len(buf)
        idx = self._append(ts, key, value, headers or ())
        if idx is None:
            self._closed = True
            return None
        if not idx:
            self._first_ts = ts
        return _new_meta(BatchRecordMetadata, (idx, ts, len(buf) - before))

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
