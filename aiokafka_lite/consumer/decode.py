"""The consumer's hot loop: one v2 record batch straight into ConsumerRecords.

``aiokafka_lite.records`` decodes a batch into ``(offset, timestamp, key, value, headers)``
tuples; building ConsumerRecords from those costs an extra tuple and header list per record,
and on a 200k-record consume the allocations (and the garbage collector's work on them) are a
quarter of the CPU.  This module walks the records section once and creates the
ConsumerRecord directly.  It checks exactly what the records reader checks (lengths, varint
sizes, trailing bytes: :class:`CorruptRecordException` on any mismatch) and the test suite
compares it with the reader on random and malformed batches.  Legacy (v0/v1) batches and
anything unusual take the reader's path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiokafka_lite.errors import CorruptRecordException
from aiokafka_lite.records.reader import RecordBatch

__all__ = ["batch_to_records"]


def _uvarint(data: bytes, i: int) -> tuple[int, int]:
    u = 0
    shift = 0
    while True:
        b = data[i]
        i += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            return u, i
        shift += 7
        if shift > 63:
            raise CorruptRecordException("varint longer than 10 bytes in record")


def _headers(data: bytes, i: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    u, i = _uvarint(data, i)
    n = (u >> 1) ^ -(u & 1)
    if n < 0 or n > len(data) - i:
        raise CorruptRecordException(f"invalid header count {n}")
    out = []
    for _ in range(n):
        u, i = _uvarint(data, i)
        if u & 1:
            raise CorruptRecordException("negative header key length")
        j = i + (u >> 1)
        if j > len(data):
            raise CorruptRecordException("header key runs past the end of the record")
        try:
            key = data[i:j].decode()
        except UnicodeDecodeError:
            raise CorruptRecordException("header key is not valid UTF-8") from None
        u, i = _uvarint(data, j)
        if u == 1:
            value = None
        else:
            if u & 1:
                raise CorruptRecordException("negative header value length")
            j = i + (u >> 1)
            if j > len(data):
                raise CorruptRecordException("header value runs past the end of the record")
            value = data[i:j]
            i = j
        out.append((key, value))
    return tuple(out), i


def batch_to_records(
    batch: Any, topic: str, partition: int, position: int, make: Callable[..., Any]
) -> list[Any] | None:
    """ConsumerRecords (built with ``make``, ConsumerRecord's positional fields) of every
    record at or after ``position``; None when the batch is not a v2 batch (use the reader)."""
    if type(batch) is not RecordBatch:
        return None
    data = batch._records_data()
    count = batch.record_count
    end = len(data)
    if count * 7 > end:
        raise CorruptRecordException(f"record count {count} does not fit in {end} bytes of records")
    base_offset = batch.base_offset
    base_ts = batch.base_timestamp
    ts_type = batch.timestamp_type
    append_ts = batch.max_timestamp if ts_type else None
    out: list[Any] = []
    add = out.append
    uv = _uvarint
    i = 0
    try:
        for _ in range(count):
            b = data[i]
            if b < 0x80:
                u = b
                i += 1
            else:
                b2 = data[i + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    i += 2
                else:
                    u, i = uv(data, i)
            if u & 1 or u < 12:
                raise CorruptRecordException(f"invalid record length {(u >> 1) ^ -(u & 1)}")
            rec_end = i + (u >> 1)
            b = data[i + 1]  # i: attributes (unused), then the timestamp delta
            if b < 0x80:
                i += 2
                ts = base_ts + ((b >> 1) ^ -(b & 1))
            else:
                b2 = data[i + 2]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    i += 3
                else:
                    u, i = uv(data, i + 1)
                ts = base_ts + ((u >> 1) ^ -(u & 1))
            b = data[i]
            if b < 0x80:
                i += 1
                offset = base_offset + ((b >> 1) ^ -(b & 1))
            else:
                b2 = data[i + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    i += 2
                else:
                    u, i = uv(data, i)
                offset = base_offset + ((u >> 1) ^ -(u & 1))
            b = data[i]
            if b == 1:
                key = None
                ksize = -1
                i += 1
            else:
                if b < 0x80:
                    i += 1
                    u = b
                else:
                    u, i = uv(data, i)
                if u & 1:
                    raise CorruptRecordException(f"negative key length {(u >> 1) ^ -1}")
                ksize = u >> 1
                key = data[i : i + ksize]
                i += ksize
            b = data[i]
            if b == 1:
                value = None
                vsize = -1
                i += 1
            else:
                if b < 0x80:
                    i += 1
                    u = b
                else:
                    b2 = data[i + 1]
                    if b2 < 0x80:
                        u = (b & 0x7F) | (b2 << 7)
                        i += 2
                    else:
                        u, i = uv(data, i)
                if u & 1:
                    raise CorruptRecordException(f"negative value length {(u >> 1) ^ -1}")
                vsize = u >> 1
                value = data[i : i + vsize]
                i += vsize
            if data[i] == 0:
                i += 1
                headers: tuple[tuple[str, bytes | None], ...] = ()
            else:
                headers, i = _headers(data, i)
            if i != rec_end:
                raise CorruptRecordException(
                    f"record at offset {offset} has a length that does not match its fields"
                )
            if offset >= position:
                if append_ts is not None:
                    ts = append_ts
                add(
                    make(
                        topic,
                        partition,
                        offset,
                        ts,
                        ts_type,
                        key,
                        value,
                        None,
                        ksize,
                        vsize,
                        headers,
                    )
                )
    except IndexError:
        raise CorruptRecordException("record data truncated inside a complete batch") from None
    if i != end:
        raise CorruptRecordException(
            f"{end - i} unexpected bytes after the last record of the batch"
        )
    return out
