"""Zig-zag varint helpers shared by the record builder and reader (internal).

Kafka's v2 record fields use protobuf-style zig-zag varints: ``u = (v << 1) ^
(v >> 63)``, then 7 bits per byte, low group first, high bit = "more".
"""

from __future__ import annotations

from aiokafka_lite.errors import CorruptRecordException

__all__ = [
    "SMALL",
    "SMALL_LIMIT",
    "encode_uvarint",
    "encode_varint",
    "varint_size",
    "decode_varint",
]


def encode_uvarint(u: int) -> bytes:
    """Encode a non-negative integer as an unsigned varint."""
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


#: Unsigned values below this come from the precomputed table ``SMALL``.
SMALL_LIMIT = 1 << 14
#: ``SMALL[u]`` is the unsigned varint encoding of ``u`` (one or two bytes).
SMALL: list[bytes] = [encode_uvarint(u) for u in range(SMALL_LIMIT)]


def encode_varint(v: int) -> bytes:
    """Encode a signed 64-bit integer as a zig-zag varint."""
    u = (v << 1) ^ (v >> 63)
    if u < SMALL_LIMIT:
        return SMALL[u]
    return encode_uvarint(u)


def varint_size(v: int) -> int:
    """Number of bytes ``encode_varint(v)`` produces."""
    u = (v << 1) ^ (v >> 63)
    n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


def decode_varint(data: bytes, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint at ``pos``; return ``(value, new_pos)``.

    Raises ``CorruptRecordException`` when the varint runs past the end of
    ``data`` or is longer than 10 bytes.
    """
    u = 0
    shift = 0
    end = len(data)
    while True:
        if pos >= end:
            raise CorruptRecordException("truncated varint in record")
        b = data[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            return (u >> 1) ^ -(u & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordException("varint longer than 10 bytes in record")
