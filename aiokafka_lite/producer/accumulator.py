"""Record accumulator: one queue per partition, bounded by a :class:`MemoryPool`.

Each partition's :class:`PartitionQueue` owns its batches: the open one records are appended
into, then the sealed ones (and those back for a retry) in order, and the count of those in
flight. A batch has ONE asyncio future; each record gets a light :class:`RecordHandle` (batch,
index, timestamp) that resolves to its own :class:`RecordMetadata` from the batch result.

Every change of a batch's state goes through :meth:`Accumulator._to`, which allows only the
transitions of :data:`~aiokafka_lite.producer.batch.BATCH_TRANSITIONS` (open -> sealed ->
in flight -> done | retry | failed; retry -> in flight; open, sealed, retry -> failed): no
other module writes a batch's state. The sender's sinks take batches (:meth:`take`) and report
outcomes (:meth:`complete`, :meth:`retry`, :meth:`fail`); the accumulator tells the sender what
happened through the one :class:`QueueEvents` object it is given.

A batch that is ready (lingered out, flushed, memory short) but cannot go out now (leader
unknown or unreachable, partition or node busy, an older batch queued) stays open and keeps
filling, as the Java client appends to the newest batch until it is full or drained: during an
outage records pile up in full batches, so ``send()`` blocks on the bytes buffered, not on the
number of lingered-out batches. Memory reserved when a batch opened is released exactly once,
when its future resolves (acknowledged, failed, expired, aborted at close).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from aiokafka_lite.errors import KafkaError, KafkaTimeoutError
from aiokafka_lite.producer.batch import (
    _BATCH_OVERHEAD,
    BATCH_TRANSITIONS,
    DONE,
    FAILED,
    IN_FLIGHT,
    OPEN,
    RETRY,
    SEALED,
    UNSENT,
    Headers,
    ProducerBatch,
    RecordHandle,
    _closed_append,
    _closed_append_values,
    _wake_waiters,
    estimate_record_size,
)
from aiokafka_lite.producer.memory import MemoryPool
from aiokafka_lite.producer.user_batch import BatchBuilder, BatchRecordMetadata
from aiokafka_lite.records.batch_builder import RecordBatchBuilder, restamp
from aiokafka_lite.structs import TopicPartition

#: event-loop turns given when a batch fills (socket -> reader -> request task -> coalesced
#: write: up to 4 hops)
_FULL_BATCH_YIELDS = 4

__all__ = [
    "Accumulator",
    "BatchBuilder",
    "BatchRecordMetadata",
    "PartitionQueue",
    "ProducerBatch",
    "QueueEvents",
    "RecordHandle",
    "estimate_record_size",
]


class PartitionQueue:
    """One partition's batches: ``open`` (taking records), ``queued`` (sealed or back for a
    retry, oldest first), and how many are ``in_flight``. ``sink`` is the sender's stream to
    the partition's leader (None while the leader is unknown); the sender moves the queue
    between sinks when the leader changes."""

    __slots__ = ("tp", "open", "queued", "in_flight", "sink")

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.open: ProducerBatch | None = None
        self.queued: deque[ProducerBatch] = deque()
        self.in_flight = 0
        self.sink: Any = None

    def __repr__(self) -> str:
        return f"<PartitionQueue {self.tp} queued={len(self.queued)} in_flight={self.in_flight}>"


class QueueEvents(Protocol):
    """What the accumulator tells the sender (the one object it is given)."""

    def batch_opened(self, q: PartitionQueue) -> None:
        """A batch opened in ``q``: look again by the end of its linger."""

    def batch_sealed(self, q: PartitionQueue) -> None:
        """A batch of ``q`` was queued (full, or a caller-built one)."""

    def batch_full(self) -> None:
        """A batch just filled up: start its request now if its partition is free."""

    def wake(self) -> None:
        """Ship what is open now (an append waits for buffer memory, or a flush began)."""

    def batch_failed(self, batch: ProducerBatch, exc: BaseException) -> None:
        """``batch`` failed (once per batch, also for batches never sent)."""


class _NoEvents:
    def batch_opened(self, q: PartitionQueue) -> None:
        pass

    def batch_sealed(self, q: PartitionQueue) -> None:
        pass

    def batch_full(self) -> None:
        pass

    def wake(self) -> None:
        pass

    def batch_failed(self, batch: ProducerBatch, exc: BaseException) -> None:
        pass


class Accumulator:
    """Per-partition queues of batches, bounded by ``buffer_memory``.

    The facade appends through :meth:`append` / :meth:`append_values` / :meth:`full` /
    :meth:`add_user_batch` and, for a batch it already holds (its sticky batch, or one looked
    up in the read-only ``open`` index), through the batch's own ``append`` methods, which
    take nothing once the batch is sealed.
    """

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
        self.queues: dict[TopicPartition, PartitionQueue] = {}
        #: read-only index of the open batches by topic and partition (the facade's lookup)
        self.open: dict[str, dict[int, ProducerBatch]] = {}
        self.incomplete: set[ProducerBatch] = set()
        #: batches open, sealed or back for a retry (kept by _to)
        self.unsent = 0
        self.events: QueueEvents = _NoEvents()
        self.closed_error: KafkaError | None = None
        self.flushing = 0
        self._full = False  # try_append sealed a full batch: append gives the sender a turn
        self._tps: dict[tuple[str, int], TopicPartition] = {}

    # ---- the state machine -------------------------------------------------------------------

    def _to(self, batch: ProducerBatch, state: str) -> None:
        """The one place a batch's state changes (see BATCH_TRANSITIONS)."""
        old = batch.state
        if state not in BATCH_TRANSITIONS[old]:
            raise KafkaError(f"{batch!r}: {old} -> {state} is not a batch transition")
        batch.state = state
        if old is OPEN:
            batch.sealed = True
            batch.append = _closed_append
            batch.append_values = _closed_append_values
            if not batch.user_batch and batch.builder is not None:
                batch.count = batch.builder.record_count
            q = self.queues[batch.tp]
            if q.open is batch:
                q.open = None
                tp = batch.tp
                del self.open[tp.topic][tp.partition]
        if (old in UNSENT) is not (state in UNSENT):
            self.unsent += 1 if state in UNSENT else -1

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
                idx = batch.append(ts, key, value, headers)
                if idx is not None:
                    return RecordHandle((batch, idx, ts))
                self._seal(batch)
                self._full = True
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
        if self._full:
            self._full = False
            await self._after_full()
            handle = self.try_append(topic, partition, ts, key, value, headers)
            if handle is not None:
                return handle
        size = max(self.batch_size, estimate_record_size(key, value, headers) + _BATCH_OVERHEAD)
        pool = self.pool
        if not pool.try_acquire(size):
            self.events.wake()
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
            idx = batch.append(ts, key, value, headers)
            if idx is None:  # cannot happen for a first record; be safe
                raise KafkaError("record could not be added to an empty batch")
        except BaseException:  # e.g. TypeError for a str value: undo the empty batch
            self._to(batch, FAILED)
            self._release(batch)
            batch.future.cancel()  # no record was in it: nobody waits on it
            raise
        batch.first_ts = ts
        return RecordHandle((batch, idx, ts))

    async def full(self, batch: ProducerBatch) -> None:
        """A bulk append (``append_values``) filled ``batch``: seal it and let the sender run."""
        if batch.state is OPEN:
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
        self.events.batch_full()
        for _ in range(_FULL_BATCH_YIELDS):
            await asyncio.sleep(0)

    def _queue(self, topic: str, partition: int) -> PartitionQueue:
        key = (topic, partition)
        tp = self._tps.get(key)
        if tp is None:
            tp = self._tps[key] = TopicPartition(topic, partition)
        q = self.queues.get(tp)
        if q is None:
            q = self.queues[tp] = PartitionQueue(tp)
        return q

    def _batch(self, q: PartitionQueue, builder: Any, size: int, linger: float) -> ProducerBatch:
        loop = asyncio.get_running_loop()
        batch = ProducerBatch(
            q.tp,
            builder,
            loop.create_future(),
            size,
            loop.time(),  # the one clock of deadlines (_timeouts)
            linger,
            self.delivery_timeout,
        )
        self.incomplete.add(batch)
        self.unsent += 1
        return batch

    def _new_batch(self, topic: str, partition: int, size: int) -> ProducerBatch:
        builder = RecordBatchBuilder(
            self.compression_type,
            batch_size=self.batch_size,
            is_transactional=self.transactional,
        )
        q = self._queue(topic, partition)
        batch = q.open = self._batch(q, builder, size, self.linger)
        self.open.setdefault(topic, {})[partition] = batch
        self.events.batch_opened(q)
        return batch

    async def add_user_batch(self, bb: BatchBuilder, topic: str, partition: int) -> RecordHandle:
        """Queue a caller-built batch (``send_batch``) as one sealed batch."""
        bb.close()
        size = max(bb.size(), _BATCH_OVERHEAD)
        if not self.pool.try_acquire(size):
            self.events.wake()
            await self.pool.acquire(size, self.max_block)
        q = self._queue(topic, partition)
        batch = self._batch(q, bb._builder, size, 0.0)
        batch.count = bb.record_count()
        batch.first_ts = bb._first_ts or 0
        batch.user_batch = True
        self._seal(batch)
        await self._after_full()
        return RecordHandle((batch, 0, batch.first_ts))

    # ---- sealing and draining ----------------------------------------------------------------

    def _seal(self, batch: ProducerBatch, wake: bool = True) -> None:
        self._to(batch, SEALED)
        q = self.queues[batch.tp]
        q.queued.append(batch)
        if wake:
            self.events.batch_sealed(q)

    def seal_ready(
        self, now: float, sendable: Callable[[PartitionQueue, ProducerBatch, float], bool]
    ) -> float | None:
        """Seal the open batches that go out now, for the sender to drain at once: ready
        (linger elapsed; any age when flushing, closing or memory is short), with no batch
        of their partition queued before them, and ``sendable(queue, batch, now)`` (the sender
        can put it into a request now). The others stay open and keep filling.

        Returns the earliest ``ready_at`` among batches not ready yet, or None.
        """
        force = self.flushing > 0 or self.pool.has_waiters or self.closed_error is not None
        queues = self.queues
        nxt: float | None = None
        to_seal: list[ProducerBatch] = []
        for parts in self.open.values():
            for batch in parts.values():
                if not force and batch.ready_at > now:
                    if nxt is None or batch.ready_at < nxt:
                        nxt = batch.ready_at
                    continue
                q = queues[batch.tp]
                if not q.queued and sendable(q, batch, now):
                    to_seal.append(batch)
        for batch in to_seal:
            self._seal(batch, wake=False)
        return nxt

    def take(self, q: PartitionQueue) -> ProducerBatch:
        """The head of ``q`` goes into a request: it is in flight."""
        batch = q.queued.popleft()
        self._to(batch, IN_FLIGHT)
        batch.attempts += 1
        q.in_flight += 1
        return batch

    def stamp(self, batch: ProducerBatch, producer_id: int, epoch: int, sequence: int) -> None:
        """Give a queued batch its idempotent producer state (again, after an epoch bump)."""
        batch.sequence = sequence
        batch.producer_id = producer_id
        batch.producer_epoch = epoch
        if batch.buffer is None:
            batch.builder.set_producer_state(producer_id, epoch, sequence)
            batch.build()
        else:
            restamp(batch.buffer, producer_id, epoch, sequence)  # type: ignore[arg-type]

    def mark_maybe_written(self, batch: ProducerBatch) -> None:
        """A request carrying ``batch`` ended without a definite answer: it may be in the log."""
        batch.maybe_written = True

    def fail_head(self, q: PartitionQueue, exc: BaseException) -> None:
        """The head of ``q`` cannot be sent (it cannot be encoded): fail it alone."""
        self.fail(q.queued.popleft(), exc)

    # ---- outcomes ------------------------------------------------------------------------------

    def _landed(self, batch: ProducerBatch) -> bool:
        """``batch`` leaves the in-flight state; False if it was final already (the answer to a
        request close() gave up on: nothing more to do)."""
        state = batch.state
        if state is DONE or state is FAILED:
            return False
        if state is IN_FLIGHT:
            self.queues[batch.tp].in_flight -= 1
        return True

    def complete(
        self,
        batch: ProducerBatch,
        base_offset: int | None,
        append_time: int | None,
        log_start: int | None,
    ) -> None:
        """Resolve a batch's future with its base offset (None for acks=0) and release its
        memory."""
        if not self._landed(batch):
            return
        self._to(batch, DONE)
        batch.future.set_result((base_offset, append_time, log_start))
        _wake_waiters(batch)
        self._release(batch)

    def retry(self, batch: ProducerBatch, retry_at: float) -> None:
        """Put an in-flight batch back for a retry, before later batches of its partition (by
        sequence)."""
        if not self._landed(batch):
            return
        self._to(batch, RETRY)
        batch.retry_at = retry_at
        dq = self.queues[batch.tp].queued
        i = 0
        if batch.sequence >= 0:
            for other in dq:
                if other.sequence < 0 or other.sequence > batch.sequence:
                    break
                i += 1
        dq.insert(i, batch)

    def fail(self, batch: ProducerBatch, exc: BaseException) -> None:
        """Fail ``batch`` (no longer in its queue, or in flight) with ``exc``."""
        if not self._landed(batch):
            return
        self._to(batch, FAILED)
        fut = batch.future
        fut.set_exception(exc)
        fut.exception()  # mark retrieved: callers may never await a failed send
        _wake_waiters(batch)
        self.events.batch_failed(batch, exc)
        self._release(batch)

    def _release(self, batch: ProducerBatch) -> None:
        if batch in self.incomplete:
            self.incomplete.discard(batch)
            self.pool.release(batch.reserved)

    def fail_queued(self, exc: BaseException, q: PartitionQueue | None = None) -> None:
        """Fail the queued (sealed or retry) batches of ``q``, or of every queue."""
        for queue in self.queues.values() if q is None else (q,):
            dq = queue.queued
            while dq:
                self.fail(dq.popleft(), exc)

    def expire(self, now: float) -> None:
        """Fail open and queued (not in-flight) batches whose delivery timeout passed."""
        expired = [b for parts in self.open.values() for b in parts.values() if b.deadline <= now]
        for batch in expired:  # open: older than anything queued after it (never in flight)
            self.fail(batch, self._expired_error(batch))
        for q in self.queues.values():
            dq = q.queued
            while dq and dq[0].deadline <= now:
                batch = dq.popleft()
                self.fail(batch, self._expired_error(batch))

    def _expired_error(self, batch: ProducerBatch) -> KafkaTimeoutError:
        return KafkaTimeoutError(
            f"batch for {batch.tp.topic}-{batch.tp.partition} expired after "
            f"{self.delivery_timeout * 1000:.0f} ms (delivery_timeout_ms)"
        )

    def abort_undrained(self, exc: BaseException) -> None:
        """Fail every batch that has not been handed to the sender yet (queued ones first,
        then the open one: oldest first in each partition)."""
        for q in list(self.queues.values()):
            dq = q.queued
            while dq:
                self.fail(dq.popleft(), exc)
            if q.open is not None:
                self.fail(q.open, exc)

    def close(self, exc: KafkaError) -> None:
        """No more appends: they and the appends waiting for memory raise ``exc``."""
        self.closed_error = exc
        self.pool.fail_waiters(exc)

    def has_unsent(self) -> bool:
        """True while any batch is open or queued."""
        return self.unsent > 0

    async def flush(self, timeout: float | None) -> None:
        """Seal everything open and wait until every batch created so far has completed."""
        waiting = [b.future for b in self.incomplete]
        if not waiting:
            return
        self.flushing += 1
        try:
            self.events.wake()
            _done, pending = await asyncio.wait(waiting, timeout=timeout)
            if pending:
                raise KafkaTimeoutError(f"flush timed out with {len(pending)} batches undelivered")
        finally:
            self.flushing -= 1
