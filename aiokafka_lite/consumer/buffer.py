"""Per-partition buffer of fetched data, decoded lazily one record batch at a time.

A fetch response's ``records`` bytes for one partition become one :class:`PartitionBuffer`.
Nothing is decoded up front: ``take(n)`` decodes just enough batches to hand out ``n``
records, so a large response never holds the event loop for long.  The buffer applies the
consumer-side rules (pure functions, no I/O):

* records before the fetch position (inside a batch that starts earlier) are dropped;
* control batches (transaction markers) are skipped;
* ``read_committed``: records of aborted transactions (from the response's aborted
  transaction list) are skipped, and nothing at or past the last stable offset is returned;
* the position advances past every consumed batch (``last_offset + 1``), so control batches
  and compacted gaps never cause the same bytes to be fetched again;
* a record that cannot be decoded or deserialized stops the buffer there: the records before it
  are handed out, then ``take`` raises the error with ``position`` left AT the failing record
  (the position only ever moves past records that were handed out).  A deserializer error is
  not cached: the next ``take`` deserializes that record again (aiokafka's behaviour; a
  transient failure goes away, a permanent one is raised on every poll until a seek past it).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from aiokafka_lite.records.columns import TAKES_VIEWS, ColumnBuffers
from aiokafka_lite.records.reader import RecordBatch, iter_batches
from aiokafka_lite.records.v2_records import MIN_OFFSET
from aiokafka_lite.structs import ConsumerRecord, TopicPartition

from .decode import batch_to_records

__all__ = ["PartitionBuffer"]

_ABORT_MARKER = 0  # control record type: 0 abort, 1 commit


class PartitionBuffer:
    """Records of one partition from one fetch response, handed out in order."""

    __slots__ = (
        "tp",
        "position",
        "_batches",
        "_records",
        "_idx",
        "_batch_next",
        "_build",
        "_aborted",
        "_aborted_pids",
        "_lso",
        "exhausted",
        "start",
        "_error",
        "_retry",
    )

    def __init__(
        self,
        tp: TopicPartition,
        data: Any,
        fetch_offset: int,
        *,
        check_crcs: bool = True,
        aborted: Iterable[tuple[int, int]] | None = None,
        last_stable_offset: int | None = None,
        key_deserializer: Callable[[Any], Any] | None = None,
        value_deserializer: Callable[[Any], Any] | None = None,
    ) -> None:
        self.tp = tp
        self.position = fetch_offset  # next offset to hand out / fetch
        self.start = fetch_offset
        self._batches: Iterator[Any] = iter_batches(data, check_crcs=check_crcs)
        self._records: list[Any] = []
        self._idx = 0
        self._batch_next = fetch_offset
        self._build = _record_builder(tp, key_deserializer, value_deserializer)
        # read_committed only: heap of (first_offset, producer_id) not reached yet
        self._aborted: list[tuple[int, int]] | None = None
        self._aborted_pids: set[int] = set()
        self._lso = last_stable_offset if aborted is not None else None
        if aborted is not None:
            self._aborted = [(first, pid) for pid, first in aborted]
            heapq.heapify(self._aborted)
        self.exhausted = False
        self._error: BaseException | None = None
        self._retry: Any = None  # the batch whose deserialization failed, for the next take

    def take_one(self) -> Any:
        """The next record when it is not the last one decoded (no batch boundary, so no
        ``exhausted`` or position-jump bookkeeping); else None: use :meth:`take`."""
        idx = self._idx
        recs = self._records
        if idx + 1 < len(recs):
            rec = recs[idx]
            self._idx = idx + 1
            self.position = rec.offset + 1
            return rec
        return None

    def take(self, n: int) -> list[Any]:
        """Hand out up to ``n`` records (fewer when the buffer runs dry: then ``exhausted``).

        Raises the error of an undecodable record once the records before it were handed out
        (returned by an earlier call); ``position`` then is that record's offset."""
        if n == 1:  # `async for`: one record per call, no slicing
            idx = self._idx
            recs = self._records
            if idx < len(recs):
                rec = recs[idx]
                idx += 1
                if idx == len(recs):
                    self._records = []
                    self._idx = 0
                    self.position = self._batch_next
                else:
                    self._idx = idx
                    self.position = rec.offset + 1
                return [rec]
        out: list[Any] = []
        while n > 0:
            idx = self._idx
            recs = self._records
            avail = len(recs) - idx
            if avail > 0:
                if avail <= n:
                    chunk = recs[idx:] if idx else recs
                    self._records = []
                    self._idx = 0
                    self.position = self._batch_next
                else:
                    chunk = recs[idx : idx + n]
                    self._idx = idx + n
                    self.position = chunk[-1].offset + 1
                if out:
                    out.extend(chunk)
                else:
                    out = chunk
                n -= len(chunk)
                continue
            if self._error is not None:
                if out:
                    return out  # the error comes with the next call: nothing is lost
                err = self._error
                if self._retry is not None:  # a deserializer error: tried again next time
                    self._batches = itertools.chain((self._retry,), self._batches)
                    self._error = self._retry = None
                raise err
            try:
                more = self._next_batch()
            except Exception as exc:  # corrupt batch: position stays at its start
                self._error = exc
                continue
            if not more:
                self.exhausted = True
                break
        return out

    def take_arrow(self, n: int, headers: bool) -> ColumnBuffers:
        """:meth:`take_columns` into new buffers (``headers``: keep the header columns)."""
        cols = ColumnBuffers(headers)
        self.take_columns(n, cols)
        return cols

    def take_columns(self, n: int, cols: ColumnBuffers) -> int:
        """:meth:`take` into Arrow column buffers: up to ``n`` records appended to ``cols``
        without a Python object per record (v2 batches); returns how many. The same records,
        positions and errors as :meth:`take` (which needs no deserializers here)."""
        got = 0
        left = len(self._records) - self._idx
        if left > 0:  # decoded by an earlier take(): those first
            recs = self.take(min(n, left))
            rows = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs]
            cols.add_rows(rows, recs[0].timestamp_type, MIN_OFFSET, len(rows))
            got = len(rows)
        while got < n:
            if self._error is not None:
                if got:
                    return got  # the error comes with the next call
                err, self._error = self._error, None
                raise err
            try:
                batch = self._next_useful()
                if batch is None:
                    self.exhausted = True
                    break
                before = len(cols)
                if type(batch) is RecordBatch:
                    ts = batch.timestamp_type
                    left_out = cols.add_batch(
                        batch.records_section() if TAKES_VIEWS else batch.records_data(),
                        batch.record_count,
                        batch.base_offset,
                        batch.base_timestamp,
                        batch.max_timestamp if ts else None,
                        ts,
                        self.position,
                        n - got,
                    )
                else:  # legacy message sets
                    rows = batch.record_tuples()
                    left_out = cols.add_rows(rows, batch.timestamp_type, self.position, n - got)
            except Exception as exc:  # corrupt batch: position stays at its start
                self._error = exc
                continue
            got += len(cols) - before
            if left_out >= 0:  # the limit: the rest of this batch next time
                self.position = left_out
                self._batches = itertools.chain((batch,), self._batches)
                break
            self.position = self._batch_next
        return got

    def _next_useful(self) -> Any:
        """The next batch with records to hand out (control batches, aborted transactions
        and batches before the position skipped), ``_batch_next`` set past it; None when
        none is left."""
        for batch in self._batches:
            last = batch.last_offset
            if last < self.position:
                continue  # entirely before the position
            if self._lso is not None and batch.base_offset >= self._lso:
                self._batches = iter(())
                return None
            self._batch_next = last + 1
            aborted = self._aborted
            if aborted is not None and (batch.is_transactional or batch.is_control):
                # aborted transactions that started at or before this batch now apply
                while aborted and aborted[0][0] <= last:
                    self._aborted_pids.add(heapq.heappop(aborted)[1])
                if batch.is_control:
                    if batch.control_type == _ABORT_MARKER:
                        self._aborted_pids.discard(batch.producer_id)
                elif batch.producer_id in self._aborted_pids:
                    self.position = last + 1
                    continue
            if batch.is_control:
                self.position = last + 1
                continue
            return batch
        return None

    def _next_batch(self) -> bool:
        """Decode the next useful batch into ``_records``; False when none is left."""
        while True:
            batch = self._next_useful()
            if batch is None:
                return False
            try:
                recs = self._build(batch, self.position)
            except _BadRecord as bad:
                # hand out the records before the bad one, then raise at its offset; the
                # batch is deserialized again (from the bad record) by the take after that
                self._error = bad.error
                self._retry = batch
                if not bad.records:
                    self.position = max(self.position, bad.offset)
                    raise bad.error from None
                self._batch_next = bad.offset
                self._records = bad.records
                self._idx = 0
                return True
            if not recs:
                self.position = batch.last_offset + 1
                continue
            self._records = recs
            self._idx = 0
            return True


class _BadRecord(Exception):
    """A deserializer failed: the good records before it, its offset and the error."""

    def __init__(self, records: list[Any], offset: int, error: BaseException) -> None:
        super().__init__(offset)
        self.records = records
        self.offset = offset
        self.error = error


def _record_builder(
    tp: TopicPartition,
    key_deserializer: Callable[[Any], Any] | None,
    value_deserializer: Callable[[Any], Any] | None,
) -> Callable[[Any, int], list[Any]]:
    """A function turning a batch into ConsumerRecords at or after ``position``."""
    topic, partition = tp
    CR = ConsumerRecord
    kd = key_deserializer
    vd = value_deserializer

    def build(batch: Any, position: int) -> list[Any]:
        out = batch_to_records(batch, topic, partition, position, CR)
        if out is None:  # legacy message sets: the records reader's path
            out = legacy(batch, position)
        if kd is not None or vd is not None:
            for i, r in enumerate(out):  # like aiokafka: deserializers also see None
                try:
                    if kd is not None:
                        r.key = kd(r.key)
                    if vd is not None:
                        r.value = vd(r.value)
                except Exception as exc:
                    note = getattr(exc, "add_note", None)
                    if note is not None:
                        note(f"while deserializing {tp} offset {r.offset}")
                    raise _BadRecord(out[:i], r.offset, exc) from None
        return out

    def legacy(batch: Any, position: int) -> list[Any]:
        ts_type = batch.timestamp_type
        rows = batch.record_tuples()
        return [
            CR(
                topic,
                partition,
                off,
                ts,
                ts_type,
                k,
                v,
                None,
                -1 if k is None else len(k),
                -1 if v is None else len(v),
                tuple(h) if h else (),
            )
            for off, ts, k, v, h in rows
            if off >= position
        ]

    return build
