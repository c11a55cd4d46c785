"""RecordBatch v2 builder: the producer's hot path.

Batch layout (all integers big-endian)::

    offset  field                 type
    0       baseOffset            int64   (0: the broker assigns offsets)
    8       batchLength           int32   (bytes after this field)
    12      partitionLeaderEpoch  int32   (-1 from producers)
    16      magic                 int8    (2)
    17      crc                   uint32  CRC-32C of bytes 21..end
    21      attributes            int16   codec | tsType<<3 | txn<<4 | control<<5
    23      lastOffsetDelta       int32
    27      baseTimestamp         int64
    35      maxTimestamp          int64
    43      producerId            int64
    51      producerEpoch         int16
    53      baseSequence          int32
    57      recordCount           int32
    61      records...            (compressed as a whole when a codec is set)

Each record: varint length, int8 attributes (0), varlong timestampDelta,
varint offsetDelta, varint keyLength (-1 = null) + key, varint valueLength +
value, varint headerCount, then per header varint keyLength + utf-8 key,
varint valueLength (-1 = null) + value.

Records are encoded straight into one ``bytearray`` with precomputed varint
bytes; ``build()`` fills the header in place and returns that same buffer
(or a new one holding the compressed records section).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from typing import Any

from crc32c import crc32c

from aiokafka_lite.errors import IllegalArgumentError, IllegalStateError
from aiokafka_lite.records._native import native
from aiokafka_lite.records._varint import SMALL, encode_uvarint, encode_varint
from aiokafka_lite.records.compression import CODEC_NAMES, CODEC_NONE, compress

__all__ = [
    "RecordBatchBuilder",
    "restamp",
    "HEADER_SIZE",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "ATTR_CONTROL",
]

HEADER_SIZE = 61
_HEADER = struct.Struct(">qiibIhiqqqhii")
_PRODUCER_STATE = struct.Struct(">qhi")
_CRC = struct.Struct(">I")
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
_PRODUCER_OFFSET = 43

ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

#: Worst-case framing of one record besides key/value/header bytes:
#: length(5) + attributes(1) + timestampDelta(10) + offsetDelta(5) + keyLen(5) + valueLen(5) + headerCount(5)
_RECORD_OVERHEAD_MAX = 36

HeaderList = Sequence[tuple[str, "bytes | bytearray | memoryview | None"]]

_time_ns = time.time_ns


def _check_timestamp(timestamp_ms: int) -> None:
    # The fast path (first record, or delta in 0..8191) never needs more checks than this:
    # a base timestamp this far below the int64 limit keeps base + delta within int64.
    if not -(1 << 63) <= timestamp_ms < (1 << 63) - 8192:
        raise IllegalArgumentError(f"timestamp {timestamp_ms} ms is out of range")


#: offset deltas below this come from the tables below (2-byte varints at most)
_TABLE = 4096
#: attributes(0) + timestampDelta d (d < 8192)
_TS_DELTA = [b"\x00" + SMALL[d << 1] for d in range(8192)]
#: ``_ROWS[d][i]``: attributes(0) + timestampDelta d + offsetDelta i + null key, for d < 8
#: (rows built on first use; row 0 now)
_ROWS: list[list[bytes] | None] = [None] * 8


def _row(delta: int) -> list[bytes]:
    row = _ROWS[delta] = [_TS_DELTA[delta] + SMALL[i << 1] + b"\x01" for i in range(_TABLE)]
    return row


_HEAD0_NOKEY = _row(0)
#: ``_base_ts`` before the first record: no timestamp is within 8 ms of it
_NO_TS = -(1 << 70)


def _key_bytes(key: bytes | bytearray | memoryview | None) -> bytes:
    if key is None:
        return b"\x01"
    n = len(key)
    return (SMALL[n << 1] if n < 8192 else encode_uvarint(n << 1)) + key


def _encode_headers(headers: HeaderList) -> bytearray:
    """Encode the header count and headers of one record."""
    n = len(headers)
    out = bytearray(SMALL[n << 1] if n < 8192 else encode_uvarint(n << 1))
    for hkey, hval in headers:
        kb = hkey.encode() if isinstance(hkey, str) else bytes(hkey)
        n = len(kb)
        out += SMALL[n << 1] if n < 8192 else encode_uvarint(n << 1)
        out += kb
        if hval is None:
            out += b"\x01"
        else:
            n = len(hval)
            out += SMALL[n << 1] if n < 8192 else encode_uvarint(n << 1)
            out += hval
    return out


#: encoded header blocks by header content: applications send the same few header sets again
#: and again (tracing, content type), and a dict hit (tuple + hash + get: 0.17 us for two
#: headers) replaces _encode_headers (0.57 us); the producer's size estimate reads the same
#: entry. Cleared when full, so unique per-record headers cost a miss and never grow memory.
_HEADER_CACHE: dict[tuple[Any, ...], bytes] = {}
_HEADER_CACHE_MAX = 512


def encoded_headers(headers: HeaderList) -> bytes:
    """The header count and headers of one record, encoded (cached by content)."""
    try:
        key = tuple(headers)
        tail = _HEADER_CACHE.get(key)
    except (TypeError, ValueError):  # unhashable (a bytearray value, a list item): no cache
        return bytes(_encode_headers(_checked_headers(headers)))
    if tail is None:
        tail = bytes(_encode_headers(_checked_headers(headers)))
        if len(_HEADER_CACHE) >= _HEADER_CACHE_MAX:
            _HEADER_CACHE.clear()
        _HEADER_CACHE[key] = tail
    return tail


def _checked_headers(headers: HeaderList) -> HeaderList:
    for item in headers:
        hkey, hval = item
        if not isinstance(hkey, (str, bytes, bytearray, memoryview)):
            raise TypeError(f"header key must be str, got {type(hkey).__name__}")
        if hval is not None and not isinstance(hval, (bytes, bytearray, memoryview)):
            raise TypeError(f"header value must be bytes or None, got {type(hval).__name__}")
    return headers


def _headers_size(headers: HeaderList) -> int:
    size = 5
    for hkey, hval in headers:
        klen = len(hkey.encode()) if isinstance(hkey, str) else len(hkey)
        size += 5 + klen + 5 + (0 if hval is None else len(hval))
    return size


class RecordBatchBuilder:
    """Accumulate records into one RecordBatch v2.

    ``append`` returns the record's offset delta, or ``None`` when the record
    would push the batch past ``batch_size`` (the first record always fits,
    whatever its size).  ``build()`` finishes the batch and returns it as one
    ``bytearray``; the builder accepts no records afterwards.

    ``batch_size`` limits the *uncompressed* size, so a compressed batch
    never exceeds it either.
    """

    __slots__ = (
        "_buf",
        "_count",
        "_base_ts",
        "_max_ts",
        "_last_ts",
        "_limit",
        "_codec",
        "_attributes",
        "_producer_id",
        "_producer_epoch",
        "_base_sequence",
        "_built",
        "_level",
    )

    def __init__(
        self,
        compression_type: int = 0,
        *,
        batch_size: int = 16384,
        is_transactional: bool = False,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        timestamp_type: int = 0,
        is_control: bool = False,
        compression_level: int | None = None,
    ) -> None:
        if compression_type not in CODEC_NAMES:
            from aiokafka_lite.errors import UnsupportedCodecError

            raise UnsupportedCodecError(f"unknown compression codec id {compression_type}")
        self._codec = compression_type
        self._level = compression_level
        attributes = compression_type
        if timestamp_type:
            attributes |= ATTR_TIMESTAMP_TYPE
        if is_transactional:
            attributes |= ATTR_TRANSACTIONAL
        if is_control:
            attributes |= ATTR_CONTROL
        self._attributes = attributes
        self._buf = bytearray(HEADER_SIZE)
        self._count = 0
        self._base_ts = _NO_TS
        self._max_ts = -1
        self._last_ts = -1
        self._limit = batch_size
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._built = False

    # -- hot path -------------------------------------------------------
    def append(
        self,
        timestamp_ms: int | None,
        key: bytes | bytearray | memoryview | None,
        value: bytes | bytearray | memoryview | None,
        headers: HeaderList = (),
    ) -> int | None:
        """Append one record; return its offset delta, or None if it does not fit.

        ``timestamp_ms=None`` stamps the current wall-clock time (read it back
        with :attr:`last_timestamp`).  Header keys are ``str`` (UTF-8 encoded),
        header values ``bytes`` or None.
        """
        count = self._count
        if timestamp_ms is None:
            timestamp_ms = _time_ns() // 1000000
        delta = timestamp_ms - self._base_ts  # never 0..7 before the first record (sentinel)
        if 0 <= delta < 8 and key is None and value is not None and not headers and count < _TABLE:
            # fast path: null key, no headers, small timestamp delta: one table entry
            n = len(value)
            if n < 8100:
                row = _ROWS[delta]
                if row is None:
                    row = _row(delta)
                rec = row[count] + SMALL[n << 1]
                rl = len(rec) + n + 1
                lb = SMALL[rl << 1]
                buf = self._buf
                if len(buf) + len(lb) + rl > self._limit:
                    return None
                buf += lb + rec
                try:
                    buf += value
                except TypeError:  # e.g. a str value: take the record back out
                    del buf[len(buf) - len(lb) - len(rec) :]
                    raise
                buf += b"\x00"
                self._count = count + 1
                self._last_ts = timestamp_ms
                if delta and timestamp_ms > self._max_ts:
                    self._max_ts = timestamp_ms
                return count
        if not count:
            _check_timestamp(timestamp_ms)
            self._base_ts = self._max_ts = timestamp_ms
            delta = 0
        # attributes | timestampDelta | offsetDelta | key
        if count < _TABLE and 0 <= delta < 8192:
            rec = _TS_DELTA[delta] + SMALL[count << 1]
            rec += b"\x01" if key is None else _key_bytes(key)  # no call for a null key
        else:
            _check_timestamp(timestamp_ms)
            rec = b"\x00" + encode_varint(delta) + encode_uvarint(count << 1) + _key_bytes(key)
        if value is None:
            rec += b"\x01"
            n = 0
            value = b""
        else:
            n = len(value)
            rec += SMALL[n << 1] if n < 8192 else encode_uvarint(n << 1)
        tail = encoded_headers(headers) if headers else b"\x00"
        rl = len(rec) + n + len(tail)
        lb = SMALL[rl << 1] if rl < 8192 else encode_uvarint(rl << 1)
        buf = self._buf
        if count and len(buf) + len(lb) + rl > self._limit:
            return None
        buf += lb + rec
        try:
            buf += value
        except TypeError:
            del buf[len(buf) - len(lb) - len(rec) :]
            raise
        buf += tail
        self._count = count + 1
        self._last_ts = timestamp_ms
        if timestamp_ms > self._max_ts:  # only once the record is in (a refused one must not count)
            self._max_ts = timestamp_ms
        return count

    def append_values(
        self,
        timestamp_ms: int,
        values: Sequence[bytes | bytearray | memoryview | None],
        start: int = 0,
    ) -> int:
        """Bulk append: ``values[start:]`` as records with a null key, no headers and one
        timestamp, as many as fit; returns the index of the first value NOT appended
        (``len(values)`` when all were).  Offset deltas continue from :attr:`record_count`.

        The same bytes as one :meth:`append` per value, from one tight loop.
        """
        end = len(values)
        i = start
        append = self.append
        while i < end:
            count = self._count
            delta = timestamp_ms - self._base_ts
            if not 0 <= delta < 8 or count >= _TABLE:  # first record, old/new ms: one by one
                if append(timestamp_ms, None, values[i]) is None:
                    return i
                i += 1
                continue
            row = _ROWS[delta]
            if row is None:
                row = _row(delta)
            room = self._limit - len(self._buf)
            heads: list[bytes] = []
            add = heads.append
            off = count
            special = False  # stopped on a value the loop does not handle
            try:
                for j in range(i, end):
                    n = len(values[j])  # type: ignore[arg-type]  # None: TypeError
                    rec = row[off] + SMALL[n << 1]  # IndexError: table end or n >= 8192
                    rl = len(rec) + n + 1
                    lb = SMALL[rl << 1]  # IndexError: rl >= 8192
                    room -= len(lb) + rl
                    if room < 0:
                        break
                    add(lb + rec)
                    off += 1
            except (TypeError, IndexError):
                special = True
            k = off - count
            if k:
                parts: list[Any] = [b"\x00"] * (3 * k)
                parts[0::3] = heads
                parts[1::3] = values[i : i + k]
                self._buf += b"".join(parts)  # TypeError (e.g. a str value): nothing written
                self._count = off
                if timestamp_ms > self._max_ts:
                    self._max_ts = timestamp_ms
                self._last_ts = timestamp_ms
                i += k
            if not special:
                if i < end:
                    return i  # full
                break
            if append(timestamp_ms, None, values[i]) is None:
                return i
            i += 1
        return i

    def append_columns(
        self,
        rows: Any,
        start: int,
        end: int,
        timestamps: Any,
        timestamp_ms: int,
        key: Any,
        value: Any,
    ) -> tuple[int, int]:
        """Bulk append from Arrow buffers, compiled codec only (``aiokafka_lite_native``
        ``append_columns``: the record bytes :meth:`append` writes, without headers):
        positions ``start`` .. ``end - 1`` of ``rows`` (an int64 buffer of row numbers, or None
        for the rows themselves); ``timestamps`` an int64 ms buffer or None (every row
        ``timestamp_ms``); ``key``/``value`` None (null) or ``(validity, offsets, data,
        array offset)`` of a binary array. Returns ``(next, state)``: the first position not
        appended, and 0 (all in), 1 (the batch is full) or 2 (the row at ``next`` needs
        :meth:`append`: the first record of the batch, or a timestamp its checks must see)."""
        if native is None:
            raise RuntimeError("append_columns needs the compiled codec (aiokafka_lite_native)")
        nxt, state, max_ts, last_ts = native.append_columns(
            self._buf, self._count, self._base_ts if self._count else 0, self._limit, rows, start, end,
            timestamps, timestamp_ms, key, value,
        )  # fmt: skip
        if nxt > start:
            self._count += nxt - start
            self._last_ts = last_ts
            if max_ts > self._max_ts:
                self._max_ts = max_ts
        return nxt, state

    # -- accounting -----------------------------------------------------
    @property
    def record_count(self) -> int:
        """Number of records appended so far."""
        return self._count

    @property
    def last_timestamp(self) -> int:
        """Timestamp of the most recently appended record (-1 before the first)."""
        return self._last_ts

    @property
    def compression_type(self) -> int:
        """The codec id of this batch."""
        return self._codec

    def size_in_bytes(self) -> int:
        """Current uncompressed size of the batch including its 61-byte header."""
        return len(self._buf)

    def is_full(self) -> bool:
        """True once the batch has reached ``batch_size`` (uncompressed)."""
        return len(self._buf) >= self._limit

    @staticmethod
    def estimate_size_in_bytes(
        key_len: int | None, value_len: int | None, headers: HeaderList = ()
    ) -> int:
        """Upper bound of the size of a batch holding just this one record.

        Use it for memory accounting and for the max-request-size check
        before a record is appended.  ``None`` lengths mean a null field.
        """
        return (
            HEADER_SIZE
            + _RECORD_OVERHEAD_MAX
            + (key_len or 0)
            + (value_len or 0)
            + (_headers_size(headers) if headers else 0)
        )

    # -- producer state ---------------------------------------------------
    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Set the idempotence/transaction fields written by ``build()``."""
        if self._built:
            raise IllegalStateError("set_producer_state() after build(): use restamp()")
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence

    @property
    def producer_id(self) -> int:
        """Producer id that ``build()`` writes (-1: none)."""
        return self._producer_id

    # -- finish -----------------------------------------------------------
    def build(self) -> bytearray:
        """Finish the batch: compress the records section, write header and CRC.

        Returns one ``bytearray`` holding the complete batch.  Calling it
        again returns the same bytes.
        """
        buf = self._buf
        if self._built:
            return buf
        self._built = True
        # From now on append() and set_producer_state() raise (no per-append flag check).
        self.__class__ = _BuiltRecordBatchBuilder
        if self._codec != CODEC_NONE and self._count:
            packed = compress(self._codec, memoryview(buf)[HEADER_SIZE:], self._level)
            out = buf[:HEADER_SIZE]
            out += packed
            self._buf = buf = out
        count = self._count
        _HEADER.pack_into(
            buf,
            0,
            0,  # baseOffset
            len(buf) - 12,  # batchLength
            -1,  # partitionLeaderEpoch
            2,  # magic
            0,  # crc placeholder
            self._attributes,
            count - 1 if count else 0,
            self._base_ts if count else -1,
            self._max_ts if count else -1,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            count,
        )
        _CRC.pack_into(buf, _CRC_OFFSET, crc32c(memoryview(buf)[_ATTRIBUTES_OFFSET:]))
        return buf

    def __repr__(self) -> str:
        return (
            f"RecordBatchBuilder(codec={self._codec}, records={self._count}, "
            f"size={len(self._buf)}, built={self._built})"
        )


def _append_native(
    self: RecordBatchBuilder,
    timestamp_ms: int | None,
    key: bytes | bytearray | memoryview | None,
    value: bytes | bytearray | memoryview | None,
    headers: HeaderList = (),
) -> int | None:
    """:meth:`RecordBatchBuilder.append` through the compiled encoder: the same checks in the
    same order, the same bytes (tests/test_records_native.py compares them)."""
    count = self._count
    if timestamp_ms is None:
        timestamp_ms = _time_ns() // 1000000
    if not count:
        _check_timestamp(timestamp_ms)
        self._base_ts = self._max_ts = timestamp_ms
    elif not 0 <= timestamp_ms - self._base_ts < 8192:
        _check_timestamp(timestamp_ms)
    done = _append_record(
        self._buf,
        count,
        timestamp_ms - self._base_ts,
        key,
        value,
        encoded_headers(headers) if headers else None,
        self._limit,
    )
    if done is None:
        return None
    if done is not True:  # NotImplemented: a delta beyond int64, the Python encoder's case
        return _py_append(self, timestamp_ms, key, value, headers)
    self._count = count + 1
    self._last_ts = timestamp_ms
    if timestamp_ms > self._max_ts:
        self._max_ts = timestamp_ms
    return count


_py_append = RecordBatchBuilder.append
if native is not None:
    _append_record = native.append_record
    RecordBatchBuilder.append = _append_native  # type: ignore[method-assign]


class _BuiltRecordBatchBuilder(RecordBatchBuilder):
    """A builder after ``build()``: read-only."""

    __slots__ = ()

    def append(
        self,
        timestamp_ms: int | None,
        key: bytes | bytearray | memoryview | None,
        value: bytes | bytearray | memoryview | None,
        headers: HeaderList = (),
    ) -> int | None:
        """Always raises: the batch is already built."""
        raise IllegalStateError("RecordBatchBuilder.append() after build()")


def restamp(buf: bytearray, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
    """Rewrite producer id/epoch/base sequence of a built batch and fix its CRC, in place.

    For idempotent retries after an epoch bump or sequence reset.
    """
    _PRODUCER_STATE.pack_into(buf, _PRODUCER_OFFSET, producer_id, producer_epoch, base_sequence)
    _CRC.pack_into(buf, _CRC_OFFSET, crc32c(memoryview(buf)[_ATTRIBUTES_OFFSET:]))
