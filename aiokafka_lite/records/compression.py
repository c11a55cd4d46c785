"""Compression codecs for Kafka record batches, backed by ``cramjam``.

Codec ids are the values of the low three bits of a batch's ``attributes``:
0 none, 1 gzip, 2 snappy, 3 lz4 (LZ4 frame format), 4 zstd.

Encoding:

* snappy is written as one *raw* snappy block (what librdkafka writes and
  what every broker accepts);
* LZ4 as an LZ4 frame of independent 64 KiB blocks without checksums, the
  layout the Java client writes (its reader rejects linked blocks, KIP-57);
* gzip and zstd in their standard containers.

Decoding is always bounded: the caller gives ``max_size`` and output never
grows past it.  Data that is not valid for its codec, or that would expand
beyond the limit, raises :class:`~aiokafka_lite.errors.CorruptRecordException`;
an id outside 0..4 raises :class:`~aiokafka_lite.errors.UnsupportedCodecError`.
Snappy decoding also understands the "xerial" framing produced by older Java
and Python clients (an 8-byte magic header, two version ints, then
``[int32 length][raw snappy block]`` chunks).
"""

from __future__ import annotations

import struct
from typing import Any

import cramjam

from aiokafka_lite.errors import CorruptRecordException, UnsupportedCodecError

__all__ = [
    "CODEC_NONE",
    "CODEC_GZIP",
    "CODEC_SNAPPY",
    "CODEC_LZ4",
    "CODEC_ZSTD",
    "CODEC_MASK",
    "CODEC_NAMES",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "codec_id",
    "compress",
    "decompress",
]

CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_ZSTD = 4
#: Mask selecting the codec id from a batch's attributes.
CODEC_MASK = 0x07

#: Codec id -> the name used by ``compression_type`` settings.
CODEC_NAMES = {
    CODEC_NONE: None,
    CODEC_GZIP: "gzip",
    CODEC_SNAPPY: "snappy",
    CODEC_LZ4: "lz4",
    CODEC_ZSTD: "zstd",
}
_BY_NAME = {
    "none": CODEC_NONE,
    "gzip": CODEC_GZIP,
    "snappy": CODEC_SNAPPY,
    "lz4": CODEC_LZ4,
    "zstd": CODEC_ZSTD,
}

#: Default ceiling for one decompressed records section (64 MiB).
DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_LEN = 16  # magic (8) + version int32 + compatible-version int32
_INT32 = struct.Struct(">i")
_ERRORS = (cramjam.DecompressionError, ValueError, OSError)


def codec_id(compression_type: str | int | None) -> int:
    """Map a ``compression_type`` setting (``None``/"gzip"/.../an id) to a codec id."""
    if compression_type is None:
        return CODEC_NONE
    if isinstance(compression_type, int):
        if compression_type in CODEC_NAMES:
            return compression_type
    else:
        found = _BY_NAME.get(compression_type.lower())
        if found is not None:
            return found
    raise UnsupportedCodecError(f"unsupported compression type {compression_type!r}")


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress ``data`` with codec ``codec``; ``level`` is codec specific (None = default)."""
    if codec == CODEC_NONE:
        return bytes(data)
    if codec == CODEC_GZIP:
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == CODEC_SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == CODEC_LZ4:
        return _lz4_frame(data)
    if codec == CODEC_ZSTD:
        return bytes(cramjam.zstd.compress(data, level=level))
    raise UnsupportedCodecError(f"unknown compression codec id {codec}")


#: LZ4 frame header: magic 0x184D2204 (LE), FLG 0x60 (version 1, independent blocks,
#: no block or content checksum, no content size), BD 0x40 (64 KiB blocks), header checksum.
_LZ4_HEADER = b"\x04\x22\x4d\x18\x60\x40\x82"
_LZ4_BLOCK = 64 * 1024
_LZ4_END = b"\x00\x00\x00\x00"
_UINT32_LE = struct.Struct("<I")


def _lz4_frame(data: bytes | bytearray | memoryview) -> bytes:
    """LZ4 frame with independent 64 KiB blocks, the layout the Java client writes (KIP-57)."""
    view = memoryview(data)
    out = bytearray(_LZ4_HEADER)
    block = cramjam.lz4.compress_block
    pack = _UINT32_LE.pack
    for start in range(0, len(view), _LZ4_BLOCK):
        chunk = view[start : start + _LZ4_BLOCK]
        packed = block(chunk, store_size=False)
        if len(packed) < len(chunk):
            out += pack(len(packed))
            out += packed
        else:  # incompressible: stored raw, flagged by the high bit
            out += pack(len(chunk) | 0x80000000)
            out += chunk
    out += _LZ4_END
    return bytes(out)


def decompress(
    codec: int,
    data: bytes | bytearray | memoryview,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """Decompress ``data`` (codec ``codec``) into at most ``max_size`` bytes.

    Raises ``CorruptRecordException`` for invalid input or output that would
    exceed ``max_size``; ``UnsupportedCodecError`` for an unknown codec id.
    """
    if codec == CODEC_NONE:
        return bytes(data)
    if codec == CODEC_SNAPPY:
        return _snappy_decompress(data, max_size)
    mod: Any
    if codec == CODEC_GZIP:
        mod = cramjam.gzip
        hint = _gzip_size_hint(data)
    elif codec == CODEC_LZ4:
        mod = cramjam.lz4
        hint = 0
    elif codec == CODEC_ZSTD:
        mod = cramjam.zstd
        hint = 0
    else:
        raise UnsupportedCodecError(f"unknown compression codec id {codec}")
    return _bounded(mod, codec, data, max_size, hint)


def _gzip_size_hint(data: bytes | bytearray | memoryview) -> int:
    """The ISIZE trailer of a gzip member (size mod 2**32); only a hint."""
    if len(data) < 18:
        return 0
    return int.from_bytes(data[-4:], "little")


def _bounded(
    mod: object, codec: int, data: bytes | bytearray | memoryview, max_size: int, hint: int
) -> bytes:
    """Decompress into a buffer that doubles from a guess up to ``max_size``.

    cramjam's ``decompress_into`` stops when the output buffer is full (its
    work is bounded by the buffer), so a bomb costs at most ``max_size``.
    """
    into = mod.decompress_into  # type: ignore[attr-defined]
    size = hint + 1 if 0 < hint < max_size else max(4 * len(data), 64 * 1024)
    size = min(size, max_size + 1)
    while True:
        out = bytearray(size)
        try:
            n = into(data, out)
        except _ERRORS as exc:
            if "whole buffer" not in str(exc) and "smaller than" not in str(exc):
                raise CorruptRecordException(f"invalid {CODEC_NAMES[codec]} data: {exc}") from None
            n = size  # output did not fit
        except Exception as exc:  # cramjam may raise other types on garbage
            raise CorruptRecordException(f"invalid {CODEC_NAMES[codec]} data: {exc}") from None
        if n < size:
            del out[n:]
            return bytes(out)
        if size > max_size:
            raise CorruptRecordException(
                f"{CODEC_NAMES[codec]} data expands beyond the {max_size} byte limit"
            )
        size = min(size * 2, max_size + 1)


def _snappy_raw(block: bytes | bytearray | memoryview, budget: int) -> bytes:
    """Decode one raw snappy block whose declared length must fit ``budget``."""
    try:
        n = cramjam.snappy.decompress_raw_len(block)
    except Exception as exc:
        raise CorruptRecordException(f"invalid snappy data: {exc}") from None
    if n > budget:
        raise CorruptRecordException(f"snappy data expands beyond the size limit ({n} > {budget})")
    if n > 22 * len(block) + 64:  # one 3-byte snappy copy element yields at most 64 bytes
        raise CorruptRecordException(
            f"invalid snappy data: {len(block)} bytes cannot expand to {n}"
        )
    out = bytearray(n)
    try:
        written = cramjam.snappy.decompress_raw_into(block, out)
    except Exception as exc:
        raise CorruptRecordException(f"invalid snappy data: {exc}") from None
    if written != n:
        raise CorruptRecordException("invalid snappy data: length mismatch")
    return bytes(out)


def _snappy_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    if bytes(data[:8]) != _XERIAL_MAGIC:
        return _snappy_raw(data, max_size)
    view = memoryview(data)
    if len(view) < _XERIAL_HEADER_LEN:
        raise CorruptRecordException("truncated xerial snappy header")
    parts = []
    pos = _XERIAL_HEADER_LEN
    end = len(view)
    budget = max_size
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordException("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise CorruptRecordException(f"xerial snappy block length {length} out of range")
        chunk = _snappy_raw(view[pos : pos + length], budget)
        budget -= len(chunk)
        parts.append(chunk)
        pos += length
    return b"".join(parts)
