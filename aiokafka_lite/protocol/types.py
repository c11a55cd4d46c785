"""Primitive Kafka wire types: readers and writers (sans-I/O).

Readers take ``(buf, pos)`` and return ``(value, new_pos)``; writers append to a ``bytearray``.
Every reader checks lengths against the buffer before slicing or allocating, and raises
:class:`~aiokafka_lite.errors.KafkaProtocolError` on truncated or malformed input.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from ..errors import KafkaProtocolError

__all__ = [
    "Reader",
    "Writer",
    "ZERO_UUID",
    "read_uvarint",
    "write_uvarint",
    "read_varint",
    "read_varlong",
    "write_varint",
    "zigzag",
    "unzigzag",
    "read_length",
    "PRIMITIVES",
]

Reader = Callable[[bytes, int], "tuple[Any, int]"]
Writer = Callable[[bytearray, Any], None]

ZERO_UUID = uuid.UUID(int=0)

_i8 = struct.Struct(">b")
_i16 = struct.Struct(">h")
_i32 = struct.Struct(">i")
_i64 = struct.Struct(">q")
_u16 = struct.Struct(">H")
_u32 = struct.Struct(">I")
_f64 = struct.Struct(">d")


def _truncated(what: str, pos: int, need: int, have: int) -> KafkaProtocolError:
    return KafkaProtocolError(
        f"truncated {what} at byte {pos}: need {need} bytes, {max(have, 0)} left"
    )


def _fixed(st: struct.Struct, what: str) -> tuple[Reader, Writer]:
    size = st.size
    unpack_from = st.unpack_from
    pack = st.pack

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        end = pos + size
        if end > len(buf):
            raise _truncated(what, pos, size, len(buf) - pos)
        return unpack_from(buf, pos)[0], end

    def write(out: bytearray, value: Any) -> None:
        try:
            out += pack(value)
        except struct.error as exc:
            raise KafkaProtocolError(f"cannot encode {value!r} as {what}: {exc}") from None

    return read, write


# ---------------------------------------------------------------- varints


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """Read an unsigned varint (at most 5 bytes: values up to 2**35)."""
    result = 0
    shift = 0
    n = len(buf)
    while True:
        if pos >= n:
            raise _truncated("varint", pos, 1, 0)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise KafkaProtocolError(f"varint longer than 10 bytes ending at byte {pos}")


def write_uvarint(out: bytearray, value: int) -> None:
    """Append an unsigned varint."""
    if value < 0:
        raise KafkaProtocolError(f"cannot encode negative {value} as unsigned varint")
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def zigzag(value: int) -> int:
    """Map a signed integer to an unsigned one (ZigZag, 64-bit)."""
    return (value << 1) ^ (value >> 63)


def unzigzag(value: int) -> int:
    """Inverse of :func:`zigzag`."""
    return (value >> 1) ^ -(value & 1)


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a zigzag-encoded signed varint (int32 range)."""
    raw, pos = read_uvarint(buf, pos)
    value = unzigzag(raw)
    if not -0x80000000 <= value <= 0x7FFFFFFF:
        raise KafkaProtocolError(f"varint {value} out of int32 range")
    return value, pos


def read_varlong(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a zigzag-encoded signed varlong (int64 range)."""
    raw, pos = read_uvarint(buf, pos)
    return unzigzag(raw), pos


def write_varint(out: bytearray, value: int) -> None:
    """Append a zigzag-encoded signed varint/varlong."""
    write_uvarint(out, zigzag(value))


def _read_bool(buf: bytes, pos: int) -> tuple[bool, int]:
    if pos >= len(buf):
        raise _truncated("bool", pos, 1, 0)
    return buf[pos] != 0, pos + 1


def _write_bool(out: bytearray, value: Any) -> None:
    out.append(1 if value else 0)


def _read_uuid(buf: bytes, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    if end > len(buf):
        raise _truncated("uuid", pos, 16, len(buf) - pos)
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def _write_uuid(out: bytearray, value: Any) -> None:
    if value is None:
        out += bytes(16)
    elif isinstance(value, uuid.UUID):
        out += value.bytes
    elif isinstance(value, (bytes, bytearray)) and len(value) == 16:
        out += value
    else:
        raise KafkaProtocolError(f"cannot encode {value!r} as uuid")


_r8, _w8 = _fixed(_i8, "int8")
_r16, _w16 = _fixed(_i16, "int16")
_r32, _w32 = _fixed(_i32, "int32")
_r64, _w64 = _fixed(_i64, "int64")
_ru16, _wu16 = _fixed(_u16, "uint16")
_ru32, _wu32 = _fixed(_u32, "uint32")
_rf64, _wf64 = _fixed(_f64, "float64")

#: Fixed-size primitives: type name -> (reader, writer).
PRIMITIVES: dict[str, tuple[Reader, Writer]] = {
    "int8": (_r8, _w8),
    "int16": (_r16, _w16),
    "int32": (_r32, _w32),
    "int64": (_r64, _w64),
    "uint16": (_ru16, _wu16),
    "uint32": (_ru32, _wu32),
    "float64": (_rf64, _wf64),
    "bool": (_read_bool, _write_bool),
    "uuid": (_read_uuid, _write_uuid),
}

read_int32 = _r32


# ---------------------------------------------------------------- lengths


def read_length(buf: bytes, pos: int, compact: bool, classic: Reader) -> tuple[int, int]:
    """Read a length prefix: ``classic`` (int16/int32) or compact (uvarint N+1); -1 is null."""
    if compact:
        raw, pos = read_uvarint(buf, pos)
        return raw - 1, pos
    return classic(buf, pos)


def make_string(compact: bool, nullable: bool) -> tuple[Reader, Writer]:
    """Build reader/writer for (compact) (nullable) strings."""

    def read(buf: bytes, pos: int) -> tuple[str | None, int]:
        n, pos = read_length(buf, pos, compact, _r16)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise KafkaProtocolError(f"invalid string length {n} at byte {pos}")
        end = pos + n
        if end > len(buf):
            raise _truncated("string", pos, n, len(buf) - pos)
        try:
            return bytes(buf[pos:end]).decode("utf-8"), end
        except UnicodeDecodeError as exc:
            raise KafkaProtocolError(f"string at byte {pos} is not UTF-8: {exc}") from None

    def write(out: bytearray, value: Any) -> None:
        if value is None:
            if not nullable:
                raise KafkaProtocolError("null given for a non-nullable string")
            if compact:
                out.append(0)
            else:
                out += b"\xff\xff"
            return
        data = value.encode("utf-8")
        n = len(data)
        if compact:
            write_uvarint(out, n + 1)
        else:
            if n > 0x7FFF:
                raise KafkaProtocolError(f"string of {n} bytes is too long for int16 length")
            out += _i16.pack(n)
        out += data

    return read, write


def make_bytes(compact: bool, nullable: bool, view: bool = False) -> tuple[Reader, Writer]:
    """Build reader/writer for (compact) (nullable) bytes; ``view`` returns memoryview slices."""

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        n, pos = read_length(buf, pos, compact, _r32)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise KafkaProtocolError(f"invalid bytes length {n} at byte {pos}")
        end = pos + n
        if end > len(buf):
            raise _truncated("bytes", pos, n, len(buf) - pos)
        if view:
            return memoryview(buf)[pos:end], end
        return bytes(buf[pos:end]), end

    def write(out: bytearray, value: Any) -> None:
        if value is None:
            if not nullable:
                raise KafkaProtocolError("null given for non-nullable bytes")
            if compact:
                out.append(0)
            else:
                out += b"\xff\xff\xff\xff"
            return
        n = len(value)
        if compact:
            write_uvarint(out, n + 1)
        else:
            out += _i32.pack(n)
        out += value

    return read, write
