"""The consumer's hot path: one v2 record batch straight into ConsumerRecords.

Building ConsumerRecords from the reader's ``(offset, timestamp, key, value, headers)`` tuples
would cost an extra tuple (and header list) per record; on a 200k-record consume those
allocations and the garbage collector's work on them were a quarter of the CPU.  So the
records reader's single decoding loop takes the record class as a factory
(:meth:`RecordBatch.make_records`) and creates each ConsumerRecord with one call: same checks
(lengths, varints, trailing bytes: :class:`CorruptRecordException`), no duplicate parser.
Legacy (v0/v1) batches take the reader's ``record_tuples()`` path in the buffer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiokafka_lite.records.reader import RecordBatch

__all__ = ["batch_to_records"]


def batch_to_records(
    batch: Any, topic: str, partition: int, position: int, make: Callable[..., Any]
) -> list[Any] | None:
    """ConsumerRecords (built with ``make``, ConsumerRecord's positional fields) of every
    record at or after ``position``; None when the batch is not a v2 batch (use the reader)."""
    if type(batch) is not RecordBatch:
        return None
    return batch.make_records(make, topic, partition, position)
