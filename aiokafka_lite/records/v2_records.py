"""The v2 record decoding loop: every record of an uncompressed records section, checked
field by field, as ``(offset, timestamp, key, value, headers)`` tuples or as consumer record
objects built in the same pass (:func:`decode_records`). :mod:`~aiokafka_lite.records.reader`
parses the batches around it. Nothing here does I/O."""

from __future__ import annotations

from typing import Any

from aiokafka_lite.errors import CorruptRecordException
from aiokafka_lite.records._native import NATIVE, native

__all__ = ["MIN_OFFSET", "NATIVE", "Row", "decode_records", "py_decode_records"]

_native = native

#: Smallest possible v2 record: length, attributes, timestampDelta, offsetDelta,
#: keyLength, valueLength, headerCount - one byte each.
_MIN_RECORD = 7
#: ``min_offset`` default of :func:`decode_records`: keep every record.
MIN_OFFSET = -(1 << 63)
#: Below every offset (int64 base + a delta of at most 70 varint bits): the tuple mode's gate.
_EVERY = -(1 << 72)


def _uvarint(data: bytes, i: int) -> tuple[int, int]:
    """Unsigned varint at ``i`` (caller handles IndexError)."""
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


def _varint(data: bytes, i: int) -> tuple[int, int]:
    """Slow path: zig-zag varint at ``i``, decoded (caller handles IndexError)."""
    u, i = _uvarint(data, i)
    return (u >> 1) ^ -(u & 1), i


#: ``_ZZ[u]`` is the zig-zag decoding of ``u``, for every one- and two-byte varint (u < 2**14):
#: one list lookup instead of three integer operations (odd ``u``, a negative length, < 0).
_ZZ: list[int] = [(u >> 1) ^ -(u & 1) for u in range(1 << 14)]


def decode_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None = None,
    *,
    cls: type | None = None,
    topic: str = "",
    partition: int = -1,
    timestamp_type: int = 0,
    min_offset: int = MIN_OFFSET,
) -> list[Any]:
    """Decode ``count`` v2 records from an uncompressed records section (see
    :func:`py_decode_records`, the reference, for the result and the errors).

    With the compiled decoder installed it decodes the well-formed input; on anything it
    cannot decide alone (every malformed input among it) it hands over to
    :func:`py_decode_records`, so both paths return and raise the same."""
    if _native is not None:
        out: list[Any] | None = _native.decode_records(
            data,
            count,
            base_offset,
            base_timestamp,
            log_append_time,
            cls,
            topic,
            partition,
            timestamp_type,
            min_offset,
        )
        if out is not None:
            return out
    return py_decode_records(
        data,
        count,
        base_offset,
        base_timestamp,
        log_append_time,
        cls=cls,
        topic=topic,
        partition=partition,
        timestamp_type=timestamp_type,
        min_offset=min_offset,
    )


def py_decode_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None = None,
    *,
    cls: type | None = None,
    topic: str = "",
    partition: int = -1,
    timestamp_type: int = 0,
    min_offset: int = MIN_OFFSET,
) -> list[Any]:
    """Decode ``count`` v2 records from an uncompressed records section.

    By default: returns ``(offset, timestamp, key, value, headers)`` tuples
    (:data:`RecordTuple`, headers a fresh list per record).

    With ``cls`` (a consumer record class: ConsumerRecord or a subclass, whose
    ``__init__`` only assigns its fields): returns one ``cls`` instance per
    record whose offset is ``>= min_offset``, made with ``object.__new__`` and
    its eleven fields assigned (``topic``, ``partition``, ``offset``,
    ``timestamp``, ``timestamp_type``, ``key``, ``value``, ``checksum`` None,
    ``serialized_key_size`` and ``serialized_value_size`` -1 for null,
    ``headers`` a tuple): the instance calling the class would build, at about
    half the cost of the call.

    When ``log_append_time`` is given every record takes that timestamp
    (batch timestamp type LogAppendTime).  Every length and varint is checked:
    truncation, negative lengths, a record length that does not match its
    fields and bytes after the last record raise ``CorruptRecordException``.
    """
    if cls is None:
        min_offset = _EVERY  # tuple mode: every record
    end = len(data)
    if count * _MIN_RECORD > end:
        raise CorruptRecordException(f"record count {count} does not fit in {end} bytes of records")
    out: list[Any] = [None] * count
    k = 0
    zz = _ZZ
    slow = _varint
    new = object.__new__
    r: Any
    i = 0
    # Every varint has a one-byte and (but the key length) a two-byte fast path: for a
    # two-byte varint b, b2 the unsigned value is b2 * 128 + b - 128 (specialized int ops).
    try:
        for _ in range(count):
            # record length
            b = data[i]
            if b < 0x80:
                n = zz[b]
                i += 1
            else:
                b2 = data[i + 1]
                if b2 < 0x80:
                    n = zz[b2 * 128 + b - 128]
                    i += 2
                else:
                    n, i = slow(data, i)
            if n < 6:
                raise CorruptRecordException(f"invalid record length {n}")
            rec_end = i + n
            # attributes (data[i], unused), then the timestamp delta
            b = data[i + 1]
            if b < 0x80:
                ts = base_timestamp + zz[b]
                i += 2
            else:
                b2 = data[i + 2]
                if b2 < 0x80:
                    ts = base_timestamp + zz[b2 * 128 + b - 128]
                    i += 3
                else:
                    n, i = slow(data, i + 1)
                    ts = base_timestamp + n
            # offset delta
            b = data[i]
            if b < 0x80:
                offset = base_offset + zz[b]
                i += 1
            else:
                b2 = data[i + 1]
                if b2 < 0x80:
                    offset = base_offset + zz[b2 * 128 + b - 128]
                    i += 2
                else:
                    n, i = slow(data, i)
                    offset = base_offset + n
            # key: -1 (varint 1) is null, any other negative length is an error
            b = data[i]
            if b == 1:
                key = None
                ksize = -1
                i += 1
            else:
                if b < 0x80:
                    ksize = zz[b]
                    i += 1
                else:
                    ksize, i = slow(data, i)
                if ksize < 0:
                    raise CorruptRecordException(f"negative key length {ksize}")
                key = data[i : i + ksize]
                i += ksize
            # value
            b = data[i]
            if b == 1:
                value = None
                vsize = -1
                i += 1
            else:
                if b < 0x80:
                    vsize = zz[b]
                    i += 1
                else:
                    b2 = data[i + 1]
                    if b2 < 0x80:
                        vsize = zz[b2 * 128 + b - 128]
                        i += 2
                    else:
                        vsize, i = slow(data, i)
                if vsize < 0:
                    raise CorruptRecordException(f"negative value length {vsize}")
                value = data[i : i + vsize]
                i += vsize
            # headers: none is the common case (a shared empty tuple, no allocation)
            if data[i] == 0:
                i += 1
                headers: Any = ()
            else:
                headers, i = _decode_headers(data, i, rec_end)
                if cls is not None:
                    headers = tuple(headers)
            if i != rec_end:
                raise CorruptRecordException(
                    f"record at offset {offset} has a length that does not match its fields"
                )
            if log_append_time is not None:
                ts = log_append_time
            if offset < min_offset:
                continue
            if cls is None:
                out[k] = (offset, ts, key, value, headers or [])
                k += 1
                continue
            r = new(cls)
            r.topic = topic
            r.partition = partition
            r.offset = offset
            r.timestamp = ts
            r.timestamp_type = timestamp_type
            r.key = key
            r.value = value
            r.checksum = None
            r.serialized_key_size = ksize
            r.serialized_value_size = vsize
            r.headers = headers
            out[k] = r
            k += 1
    except IndexError:
        raise CorruptRecordException("record data truncated inside a complete batch") from None
    if i != end:
        raise CorruptRecordException(
            f"{end - i} unexpected bytes after the last record of the batch"
        )
    del out[k:]
    return out


class Row:
    """A record's consumer fields (``RecordBatch.make_records`` decodes into these, then
    calls its factory with them)."""

    __slots__ = (
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestamp_type",
        "key",
        "value",
        "checksum",
        "serialized_key_size",
        "serialized_value_size",
        "headers",
    )

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    checksum: int | None
    serialized_key_size: int
    serialized_value_size: int
    headers: tuple[tuple[str, bytes | None], ...]


def _decode_headers(
    data: bytes, i: int, rec_end: int
) -> tuple[list[tuple[str, bytes | None]], int]:
    """Header count and headers at ``i``, each field checked against ``rec_end``."""
    zz = _ZZ
    b = data[i]
    if b < 0x80:
        n = zz[b]
        i += 1
    else:
        n, i = _varint(data, i)
    if n < 0 or n * 2 > rec_end - i:
        raise CorruptRecordException(f"invalid header count {n}")
    headers: list[tuple[str, bytes | None]] = []
    while n:
        n -= 1
        b = data[i]
        if b < 0x80:
            size = zz[b]
            i += 1
        else:
            size, i = _varint(data, i)
        if size < 0:
            raise CorruptRecordException("negative header key length")
        j = i + size
        if j > rec_end:
            raise CorruptRecordException("header key runs past the end of the record")
        try:
            hkey = data[i:j].decode()
        except UnicodeDecodeError:
            raise CorruptRecordException("header key is not valid UTF-8") from None
        b = data[j]
        if b < 0x80:
            size = zz[b]
            i = j + 1
        else:
            size, i = _varint(data, j)
        if size < 0:
            if size == -1:
                headers.append((hkey, None))
                continue
            raise CorruptRecordException("negative header value length")
        j = i + size
        if j > rec_end:
            raise CorruptRecordException("header value runs past the end of the record")
        headers.append((hkey, data[i:j]))
        i = j
    return headers, i
