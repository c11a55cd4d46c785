"""Reader for legacy message sets (magic 0 and 1), read-only.

Message layout (big-endian)::

    offset int64 | size int32 | crc uint32 | magic int8 | attributes int8 |
    [timestamp int64, magic 1 only] | key int32 length (-1 null) + bytes |
    value int32 length (-1 null) + bytes

``crc`` is CRC-32 (zlib) over magic..end.  Attribute bits 0-2 select a codec;
a compressed "wrapper" message's value is itself a message set.  For magic
1 wrappers the inner offsets are relative: absolute = wrapper offset - last
inner offset + inner offset.  Bit 3 (magic 1) means LogAppendTime: the inner
messages then take the wrapper's timestamp.  Magic-0 LZ4 wrappers written by
Kafka 0.8/0.9 carry a non-standard frame header checksum, repaired before decoding.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from aiokafka_lite.errors import CorruptRecordException, UnsupportedCodecError
from aiokafka_lite.records.compression import (
    CODEC_LZ4,
    CODEC_MASK,
    CODEC_NAMES,
    CODEC_NONE,
    decompress,
)
from aiokafka_lite.records.record import NO_TIMESTAMP, Record, RecordTuple

__all__ = ["LegacyBatch", "LEGACY_MIN_SIZE"]

#: Minimum ``size`` field per magic: crc + magic + attributes + [timestamp] + key len + value len.
LEGACY_MIN_SIZE = {0: 14, 1: 22}

_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes (18 bytes)
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

# (offset, timestamp, key, value, crc)
_Message = tuple[int, int, "bytes | None", "bytes | None", int]


_XXH_P1, _XXH_P2, _XXH_P3, _XXH_P4, _XXH_P5 = (
    2654435761,
    2246822519,
    3266489917,
    668265263,
    374761393,
)
_M32 = 0xFFFFFFFF


def _xxh32_short(data: bytes) -> int:
    """xxHash32 (seed 0) of fewer than 16 bytes: enough for an LZ4 frame descriptor."""
    n = len(data)
    acc = (_XXH_P5 + n) & _M32
    i = 0
    while i + 4 <= n:
        acc = (acc + int.from_bytes(data[i : i + 4], "little") * _XXH_P3) & _M32
        acc = (((acc << 17) | (acc >> 15)) & _M32) * _XXH_P4 & _M32
        i += 4
    while i < n:
        acc = (acc + data[i] * _XXH_P5) & _M32
        acc = (((acc << 11) | (acc >> 21)) & _M32) * _XXH_P1 & _M32
        i += 1
    acc ^= acc >> 15
    acc = (acc * _XXH_P2) & _M32
    acc ^= acc >> 13
    acc = (acc * _XXH_P3) & _M32
    return acc ^ (acc >> 16)


def _fix_old_kafka_lz4(frame: bytes) -> bytes:
    """Rewrite the LZ4 frame header checksum of a magic-0 message.

    Kafka 0.8/0.9 hashed the 4 magic bytes along with the frame descriptor,
    so standard decoders reject its header; recompute it over the descriptor.
    """
    if len(frame) < 7 or frame[:4] != b"\x04\x22\x4d\x18":
        return frame
    flg = frame[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)  # content size, dict id
    if len(frame) <= end:
        return frame
    hc = (_xxh32_short(frame[4:end]) >> 8) & 0xFF
    return frame[:end] + bytes((hc,)) + frame[end + 1 :]


def _read_bytes(view: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptRecordException("legacy message truncated in a key/value length")
    (n,) = _INT32.unpack_from(view, pos)
    pos += 4
    if n == -1:
        return None, pos
    if n < 0 or pos + n > end:
        raise CorruptRecordException(f"legacy message key/value length {n} out of range")
    return bytes(view[pos : pos + n]), pos + n


def _parse_body(view: memoryview, magic: int, end: int) -> tuple[int, bytes | None, bytes | None]:
    """Timestamp, key and value of the message occupying ``view[:end]`` (prefix already checked)."""
    pos = 18
    timestamp = NO_TIMESTAMP
    if magic == 1:
        if end < 26:
            raise CorruptRecordException("legacy v1 message truncated in its timestamp")
        (timestamp,) = _INT64.unpack_from(view, 18)
        pos = 26
    key, pos = _read_bytes(view, pos, end)
    value, pos = _read_bytes(view, pos, end)
    if pos != end:
        raise CorruptRecordException(f"legacy message has {end - pos} bytes after its value")
    return timestamp, key, value


class LegacyBatch:
    """One top-level legacy message: a single record, or a compressed wrapper of many.

    Exposes the same header fields as :class:`~aiokafka_lite.records.reader.RecordBatch`
    (producer fields are -1, flags False).
    """

    __slots__ = (
        "length",
        "magic",
        "crc",
        "attributes",
        "compression_type",
        "timestamp_type",
        "base_timestamp",
        "max_timestamp",
        "last_offset",
        "key",
        "value",
        "_view",
        "_check_crcs",
        "_max_size",
        "_messages",
    )

    length: int
    crc: int
    last_offset: int
    base_timestamp: int
    max_timestamp: int

    partition_leader_epoch = -1
    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    is_transactional = False
    is_control = False
    is_control_batch = False
    control_type = None

    def __init__(
        self, view: memoryview, check_crcs: bool = True, max_decompressed_size: int = 64 << 20
    ) -> None:
        """``view`` must hold exactly one complete message (offset and size fields included)."""
        if len(view) < 18:
            raise CorruptRecordException("legacy message shorter than its header")
        offset, self.length, self.crc, magic, attributes = _PREFIX.unpack_from(view, 0)
        if magic not in (0, 1):
            raise CorruptRecordException(f"unknown legacy message magic {magic}")
        self.magic = magic
        self.attributes = attributes
        self.compression_type = attributes & CODEC_MASK
        if self.compression_type not in CODEC_NAMES:
            raise UnsupportedCodecError(
                f"legacy message at offset {offset} uses unknown codec id {self.compression_type}"
            )
        self.timestamp_type = (attributes >> 3) & 1 if magic == 1 else 0
        self.last_offset = offset
        self._view = view
        self._check_crcs = check_crcs
        self._max_size = max_decompressed_size
        self._messages: list[_Message] | None = None
        ts, self.key, self.value = _parse_body(view, magic, len(view))
        self.base_timestamp = self.max_timestamp = ts

    def validate_crc(self) -> bool:
        """True if the stored CRC-32 matches the message contents."""
        return bool(zlib.crc32(self._view[16:]) == self.crc)

    def size_in_bytes(self) -> int:
        """Size of the message on the wire."""
        return self.length + 12

    def _decode(self) -> list[_Message]:
        if self._messages is not None:
            return self._messages
        if self.compression_type == CODEC_NONE:
            msgs = [(self.last_offset, self.base_timestamp, self.key, self.value, self.crc)]
        else:
            msgs = self._decode_inner()
        self._messages = msgs
        return msgs

    def _decode_inner(self) -> list[_Message]:
        if self.value is None:
            raise CorruptRecordException(
                f"compressed legacy message at offset {self.last_offset} has a null value"
            )
        packed = self.value
        if self.magic == 0 and self.compression_type == CODEC_LZ4:
            packed = _fix_old_kafka_lz4(packed)
        data = memoryview(decompress(self.compression_type, packed, self._max_size))
        end = len(data)
        pos = 0
        raw: list[_Message] = []
        while pos < end:
            if end - pos < 18:
                raise CorruptRecordException(
                    "truncated message inside a compressed legacy message set"
                )
            offset, size, crc, magic, attributes = _PREFIX.unpack_from(data, pos)
            if magic not in (0, 1) or size < LEGACY_MIN_SIZE[magic]:
                raise CorruptRecordException(
                    f"invalid inner legacy message (magic {magic}, size {size})"
                )
            stop = pos + 12 + size
            if stop > end:
                raise CorruptRecordException(
                    "truncated message inside a compressed legacy message set"
                )
            inner = data[pos:stop]
            if attributes & CODEC_MASK:
                raise CorruptRecordException("nested compression inside a legacy message set")
            if self._check_crcs and zlib.crc32(inner[16:]) != crc:
                raise CorruptRecordException(
                    f"CRC mismatch in inner legacy message at offset {offset}"
                )
            ts, key, value = _parse_body(inner, magic, len(inner))
            raw.append((offset, ts, key, value, crc))
            pos = stop
        if not raw:
            raise CorruptRecordException(
                f"compressed legacy message at offset {self.last_offset} is empty"
            )
        wrapper = self.last_offset
        if self.magic == 1:
            shift = wrapper - raw[-1][0]
            log_append = self.timestamp_type == 1
            wts = self.base_timestamp
            return [(o + shift, wts if log_append else t, k, v, c) for o, t, k, v, c in raw]
        return raw

    @property
    def base_offset(self) -> int:
        """Offset of the first record (decodes a compressed wrapper)."""
        return int(self._decode()[0][0])

    @property
    def record_count(self) -> int:
        """Number of records (decodes a compressed wrapper)."""
        return len(self._decode())

    @property
    def last_offset_delta(self) -> int:
        """last_offset - base_offset."""
        return self.last_offset - self.base_offset

    @property
    def next_offset(self) -> int:
        """The offset after this message."""
        return self.last_offset + 1

    def record_tuples(self) -> list[RecordTuple]:
        """Records as ``(offset, timestamp, key, value, headers)`` tuples."""
        return [(o, t, k, v, []) for o, t, k, v, _ in self._decode()]

    def records(self) -> Iterator[Record]:
        """Yield the records as :class:`Record` objects (checksum = message CRC)."""
        tst = self.timestamp_type
        for offset, ts, key, value, crc in self._decode():
            yield Record(offset, ts, tst, key, value, [], crc)

    __iter__ = records

    def __repr__(self) -> str:
        return (
            f"LegacyBatch(magic={self.magic}, last_offset={self.last_offset}, "
            f"codec={self.compression_type}, size={self.length + 12})"
        )
