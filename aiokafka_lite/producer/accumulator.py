"""Record accumulator: per-partition batches, bounded by a :class:`MemoryPool`.

Records are appended straight into an open :class:`ProducerBatch` (one record-batch builder per
partition). A batch has ONE asyncio future; each record gets a light :class:`RecordHandle`
(batch, index, timestamp) that resolves to its own :class:`RecordMetadata` from the batch result.

Life of a batch: *open* (accepting records) -> *sealed* (full, or ready and about to be drained;
queued per partition in ``pending``) -> *in flight* (drained by the sender) -> done, or back to
the front of ``pending`` for a retry. A batch that is ready (lingered out, flushed, memory short)
but cannot go out now (leader unknown or unreachable, partition or node busy, an older batch
queued) stays open and keeps filling, as the Java client appends to the newest batch until it
is full or drained: during an outage records pile up in full batches, so ``send()`` blocks on
the bytes buffered, not on the number of lingered-out batches. Memory reserved when a batch
opened is released exactly once, when its future resolves (acknowledged, failed, expired,
aborted at close).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from aiokafka_lite.errors import KafkaError, KafkaTimeoutError
from aiokafka_lite.producer.batch import (
    _BATCH_OVERHEAD,
    BatchBuilder,
    BatchRecordMetadata,
    Headers,
    ProducerBatch,
    RecordHandle,
    _wake_waiters,
    estimate_record_size,
)
from aiokafka_lite.producer.memory import MemoryPool
from aiokafka_lite.records.batch_builder import RecordBatchBuilder
from aiokafka_lite.structs import TopicPartition

#: event-loop turns given when a batch fills (socket -> reader -> request task -> coalesced
#: write: up to 4 hops)
_FULL_BATCH_YIELDS = 4

__all__ = [
    "Accumulator",
    "BatchBuilder",
    "BatchRecordMetadata",
    "ProducerBatch",
    "RecordHandle",
    "estimate_record_size",
]


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
        #: a batch opened (the sender must look again by the end of its linger; at linger 0,
        #: by the end of the current event-loop turn)
        self.batch_opened: Callable[[ProducerBatch], None] = lambda batch: None
        #: a batch of this partition was sealed
        self.wake_sealed: Callable[[TopicPartition], None] = lambda tp: None
        #: a batch just filled up: start its request now; True if one was started
        self.kick: Callable[[], bool] | None = None
        self.sealed_full = False
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
                    return RecordHandle((batch, idx, ts))
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
            await self._after_full()
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
        return RecordHandle((batch, idx, ts))

    async def seal_full(self, batch: ProducerBatch) -> None:
        """A bulk append filled ``batch``: seal it and let the sender run (see _after_full)."""
        self._seal(batch)
        await self._after_full()

    async def _after_full(self) -> None:
        """A batch just filled up: start its request if its partition is free, then give the
        event loop a few turns. Each turn costs a few microseconds (one per ~100 records);
        they let a response that arrived meanwhile travel socket -> connection reader ->
        request task, which frees its memory and writes the partition's next batch, while
        the caller keeps appending, instead of a send() loop filling every batch before
        the first response is read (one in-flight batch per partition: the round trip is
        the limit)."""
        if self.kick is not None:
            self.kick()
        for _ in range(_FULL_BATCH_YIELDS):
            await asyncio.sleep(0)

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
        self.batch_opened(batch)
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
        await self._after_full()
        return RecordHandle((batch, 0, batch.first_ts))

    # ---- sealing and draining ----------------------------------------------------------------

    def _close_for_appends(self, batch: ProducerBatch) -> None:
        """No more records go into ``batch``: it leaves ``open`` (sealed, counted)."""
        batch.sealed = True
        if batch.builder is not None and not batch.user_batch:
            batch.count = batch.builder.record_count
        tp = batch.tp
        parts = self.open.get(tp.topic)
        if parts is not None and parts.get(tp.partition) is batch:
            del parts[tp.partition]

    def _seal(self, batch: ProducerBatch, wake: bool = True) -> None:
        if batch.sealed:
            return
        self._close_for_appends(batch)
        tp = batch.tp
        dq = self.pending.get(tp)
        if dq is None:
            dq = self.pending[tp] = deque()
        dq.append(batch)
        if wake:
            self.wake_sealed(tp)

    def seal_ready(self, now: float, sendable: Callable[[TopicPartition], bool]) -> float | None:
        """Seal the open batches that go out now, for the sender to drain at once: ready
        (linger elapsed; any age when flushing, closing or memory is short), with no sealed
        batch of their partition queued before them, and ``sendable(tp)`` (the sender can put
        a batch of ``tp`` into a request now). The others stay open and keep filling.

        Returns the earliest ``ready_at`` among batches not ready yet, or None.
        """
        force = self.flushing > 0 or self.pool.has_waiters or self.closed_error is not None
        pending = self.pending
        nxt: float | None = None
        to_seal: list[ProducerBatch] = []
        for parts in self.open.values():
            for batch in parts.values():
                if not force and batch.ready_at > now:
                    if nxt is None or batch.ready_at < nxt:
                        nxt = batch.ready_at
                elif not pending.get(batch.tp) and sendable(batch.tp):
                    to_seal.append(batch)
        for batch in to_seal:
            self._seal(batch, wake=False)
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
        self,
        batch: ProducerBatch,
        base_offset: int | None,
        append_time: int | None,
        log_start: int | None,
    ) -> None:
        """Resolve a batch's future with its base offset (None for acks=0) and release its
        memory."""
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
        """Fail open and queued (not in-flight) batches whose delivery timeout passed."""
        expired = [b for parts in self.open.values() for b in parts.values() if b.deadline <= now]
        for batch in expired:  # open: older than anything queued after it (never in flight)
            self._close_for_appends(batch)
            self._fail_batch(batch, self._expired_error(batch))
        for dq in self.pending.values():
            while dq and dq[0].deadline <= now and not dq[0].in_flight:
                batch = dq.popleft()
                self._fail_batch(batch, self._expired_error(batch))

    def _expired_error(self, batch: ProducerBatch) -> KafkaTimeoutError:
        return KafkaTimeoutError(
            f"batch for {batch.tp.topic}-{batch.tp.partition} expired after "
            f"{self.delivery_timeout * 1000:.0f} ms (delivery_timeout_ms)"
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
