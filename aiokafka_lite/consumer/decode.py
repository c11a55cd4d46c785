"""The consumer's hot path: one v2 record batch straight into ConsumerRecords.

Building ConsumerRecords from the reader's ``(offset, timestamp, key, value, headers)`` tuples
would cost an extra tuple (and header list) per record; on a 200k-record consume those
allocations and the garbage collector's work on them were a quarter of the CPU.  So the
records reader's single decoding loop creates the records itself
(:meth:`RecordBatch.new_records`): ``object.__new__(ConsumerRecord)`` and its eleven fields
assigned, which is the dataclass's ``__init__`` without the call (CPython packs the eleven
arguments of a class call into a tuple and enters a new frame for ``__init__``: 205 against
119 ns per record, timeit).  Same checks (lengths, varints, trailing bytes: :class:`CorruptRecordException`),
no duplicate parser.  Legacy (v0/v1) batches take the reader's ``record_tuples()`` path in the
buffer.
"""

from __future__ import annotations

from typing import Any

from aiokafka_lite.records.reader import RecordBatch

__all__ = ["batch_to_records"]


def batch_to_records(
    batch: Any, topic: str, partition: int, position: int, cls: type[Any]
) -> list[Any] | None:
    """ConsumerRecords (``cls``: ConsumerRecord or a subclass) of every record at or after
    ``position``; None when the batch is not a v2 batch (use the reader)."""
    if type(batch) is not RecordBatch:
        return None
    return batch.new_records(cls, topic, partition, position)
