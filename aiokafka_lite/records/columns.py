"""Records as Arrow column buffers, without a Python object per record: :class:`ColumnBuffers`.

The consumer's ``getmany_arrow()`` decodes fetched v2 batches into these growing bytearrays
and hands them to ``pyarrow.Array.from_buffers`` (``consumer.arrow``); nothing here imports
pyarrow. The buffers, in Arrow's little-endian layout (``bufs`` order):

====  =================================================================================
0-2   key: validity bitmap, int32 end offsets (after a leading 0), bytes
3-5   value: the same
6     offset: int64
7     timestamp: int64 microseconds (Arrow ``timestamp[us]``; LogAppendTime applied)
8     timestampType: int32
9-10  headers (only with ``headers=True``): list validity bitmap (null for a record with
      no headers, as Spark's source), int32 list offsets into the header entries
11-12 header keys: int32 offsets, UTF-8 bytes (never null)
13-15 header values: validity bitmap, int32 offsets, bytes
====  =================================================================================

A bitmap holds ceil(rows / 8) bytes, the bits past the last row 0. The compiled codec
(``aiokafka_lite_native.decode_columns``) fills them when installed; :meth:`add_rows` is the
pure-Python path, which writes the same bytes. On any input the compiled code does not take
whole it leaves the buffers untouched and the pure path decides, raising the one canonical
error (:func:`~aiokafka_lite.records.v2_records.py_decode_records`'s), so both paths return
and raise the same.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from aiokafka_lite.errors import CorruptRecordException
from aiokafka_lite.records._native import native

from .v2_records import py_decode_records

__all__ = ["ColumnBuffers", "TAKES_VIEWS"]

#: True when :meth:`ColumnBuffers.add_batch` is best given a view of the fetched bytes (the
#: compiled codec decodes it in place; a build older than that, and the pure path, want bytes)
TAKES_VIEWS = bool(getattr(native, "TAKES_VIEWS", False))

_INT64 = 1 << 63
_INT32 = (1 << 31) - 1
#: ``bufs`` indices of the int32 offset buffers, which start with a 0
_OFFSETS_PLAIN = (1, 4)
_OFFSETS_HEADERS = (10, 11, 14)


def _bits(bitmap: bytearray, start: int, valid: Sequence[bool]) -> None:
    """Validity bits ``start`` .. ``start + len(valid) - 1`` appended to ``bitmap``."""
    end = start + len(valid)
    need = (end + 7) >> 3
    if len(bitmap) < need:
        bitmap.extend(bytes(need - len(bitmap)))
    for k, ok in enumerate(valid, start):
        if ok:
            bitmap[k >> 3] |= 1 << (k & 7)


def _binary(values: Sequence[bytes | None], offsets: bytearray, data: bytearray, base: int) -> None:
    """Values appended: their end offsets (from ``base``, the bytes so far) and their bytes."""
    ends = []
    for v in values:
        if v:
            data += v
            base += len(v)
        ends.append(base)
    offsets += struct.pack(f"<{len(ends)}i", *ends)


class ColumnBuffers:
    """Growing Arrow buffers of one partition's records (see the module doc for the layout)."""

    __slots__ = ("bufs",)

    def __init__(self, headers: bool = False) -> None:
        self.bufs: list[bytearray] = [bytearray() for _ in range(16 if headers else 9)]
        for i in _OFFSETS_PLAIN + (_OFFSETS_HEADERS if headers else ()):
            self.bufs[i] += b"\0\0\0\0"

    @property
    def headers(self) -> bool:
        """True when the header buffers are kept."""
        return len(self.bufs) == 16

    def __len__(self) -> int:
        return len(self.bufs[6]) >> 3

    @property
    def header_count(self) -> int:
        """Header entries kept so far (all records)."""
        return (len(self.bufs[11]) >> 2) - 1 if self.headers else 0

    def add_batch(
        self,
        data: bytes | memoryview,
        count: int,
        base_offset: int,
        base_timestamp: int,
        log_append_time: int | None,
        timestamp_type: int,
        min_offset: int,
        limit: int,
    ) -> int:
        """Append the records at or after ``min_offset`` of an uncompressed v2 records
        section (bytes, or a view of them), at most ``limit`` of them; returns the offset of the first record the limit
        left out, else -1. The whole section is checked (``CorruptRecordException``, nothing
        appended) whatever the limit."""
        if native is not None:
            out = native.decode_columns(
                self.bufs,
                data,
                count,
                base_offset,
                base_timestamp,
                log_append_time,
                timestamp_type,
                min_offset,
                limit,
            )
            if out is not None:
                return int(out[1])
        if type(data) is not bytes:
            data = bytes(data)
        rows = py_decode_records(data, count, base_offset, base_timestamp, log_append_time)
        return self.add_rows(rows, timestamp_type, min_offset, limit)

    def add_rows(
        self, rows: Sequence[Any], timestamp_type: int, min_offset: int, limit: int
    ) -> int:
        """The pure-Python path: ``(offset, timestamp, key, value, headers)`` rows at or after
        ``min_offset`` appended, at most ``limit``; returns the offset of the first row the
        limit left out, else -1. All or nothing: a row Arrow cannot hold raises before any
        buffer changes."""
        kept = [r for r in rows if r[0] >= min_offset]
        left_out = -1
        if len(kept) > limit:
            left_out = kept[limit][0]
            del kept[limit:]
        if not kept:
            return left_out
        b = self.bufs
        keys = [r[2] for r in kept]
        values = [r[3] for r in kept]
        hs = [r[4] or () for r in kept] if self.headers else []
        flat = [h for rec in hs for h in rec]
        hkeys = [k.encode() for k, _ in flat]
        # every check before the first write: all or nothing
        for off, ts, *_ in kept:
            if not -_INT64 <= off < _INT64 or not -_INT64 <= ts * 1000 < _INT64:
                raise CorruptRecordException(
                    f"record at offset {off}: timestamp {ts} ms is out of Arrow's range"
                )
        for i, vals in ((2, keys), (5, values), (12, hkeys), (15, [v for _, v in flat])):
            if vals and len(b[i]) + sum(len(v) for v in vals if v) > _INT32:
                raise CorruptRecordException("a column of getmany_arrow() would pass 2 GiB")
        if self.header_count + len(flat) > _INT32:
            raise CorruptRecordException("too many headers for one getmany_arrow() call")
        n = len(self)
        _bits(b[0], n, [k is not None for k in keys])
        _binary(keys, b[1], b[2], len(b[2]))
        _bits(b[3], n, [v is not None for v in values])
        _binary(values, b[4], b[5], len(b[5]))
        m = len(kept)
        b[6] += struct.pack(f"<{m}q", *[r[0] for r in kept])
        b[7] += struct.pack(f"<{m}q", *[r[1] * 1000 for r in kept])
        b[8] += struct.pack(f"<{m}i", *[timestamp_type] * m)
        if self.headers:
            hn = self.header_count
            _bits(b[9], n, [bool(h) for h in hs])
            ends = []
            for rec in hs:
                hn += len(rec)
                ends.append(hn)
            b[10] += struct.pack(f"<{m}i", *ends)
            _bits(b[13], hn - len(flat), [v is not None for _, v in flat])
            _binary(hkeys, b[11], b[12], len(b[12]))
            _binary([v for _, v in flat], b[14], b[15], len(b[15]))
        return left_out
