"""Request/response framing: size prefix, request header v1/v2, response header v0/v1.

* A request frame is ``int32 size`` + header + body. Header v1 is ``api_key int16,
  api_version int16, correlation_id int32, client_id nullable string``; v2 (used with flexible
  request versions) appends an empty tagged-field section. The client id stays a classic
  (int16-length) string in both.
* A response payload (the frame after its size prefix) starts with ``correlation_id int32``; header
  v1 (flexible versions) adds a tagged-field section, except for ApiVersions responses, which
  always use header v0 so a client can parse them before it knows the broker's versions.
"""

from __future__ import annotations

import struct
from typing import Any

from ..errors import KafkaProtocolError
from .schema import Struct
from .types import read_uvarint

__all__ = [
    "encode_request",
    "decode_response",
    "read_correlation_id",
    "encode_data",
    "decode_data",
    "is_flexible",
]

_HEADER = struct.Struct(">ihhi")
_I16 = struct.Struct(">h")
_API_VERSIONS_KEY = 18


def is_flexible(cls: type[Struct], version: int) -> bool:
    """True when ``version`` of the message uses compact encodings and tagged fields."""
    rng = cls._flexible
    return rng is not None and rng[0] <= version <= rng[1]


def _check_version(cls: type[Struct], version: int) -> None:
    lo = getattr(cls, "SPEC_MIN_VERSION", None)
    if lo is None:
        lo = cls.REQUEST.SPEC_MIN_VERSION  # type: ignore[attr-defined]
        hi = cls.REQUEST.SPEC_MAX_VERSION  # type: ignore[attr-defined]
    else:
        hi = cls.SPEC_MAX_VERSION  # type: ignore[attr-defined]
    if not lo <= version <= hi:
        raise KafkaProtocolError(f"{cls.__name__} has no version {version} (valid {lo}-{hi})")


def encode_request(
    request: Struct, version: int, correlation_id: int, client_id: str | None
) -> bytearray:
    """Encode ``request`` as a complete frame (size prefix included)."""
    cls = type(request)
    encoder = cls._encoders.get(version)
    if encoder is None:
        _check_version(cls, version)
        encoder = cls.encoder(version)
    out = bytearray(_HEADER.pack(0, cls.API_KEY, version, correlation_id))  # type: ignore[attr-defined]
    if client_id is None:
        out += b"\xff\xff"
    else:
        cid = client_id.encode("utf-8")
        out += _I16.pack(len(cid))
        out += cid
    if is_flexible(cls, version):
        out.append(0)
    encoder(out, request)
    struct.pack_into(">i", out, 0, len(out) - 4)
    return out


def read_correlation_id(payload: bytes) -> int:
    """Return the correlation id that starts a response payload."""
    if len(payload) < 4:
        raise KafkaProtocolError(f"response of {len(payload)} bytes has no correlation id")
    return int.from_bytes(payload[:4], "big", signed=True)


def decode_response(request_class: type[Struct] | int, version: int, payload: bytes) -> Any:
    """Decode a response payload (after the size prefix) for the given request class/key."""
    if isinstance(request_class, int):
        from .messages import REQUESTS_BY_KEY

        request_class = REQUESTS_BY_KEY[request_class]
    resp: type[Struct] = request_class.RESPONSE  # type: ignore[attr-defined]
    decoder = resp._decoders.get(version)
    if decoder is None:
        _check_version(request_class, version)
        decoder = resp.decoder(version)
    pos = 4
    if len(payload) < 4:
        raise KafkaProtocolError(f"response of {len(payload)} bytes has no correlation id")
    if is_flexible(resp, version) and request_class.API_KEY != _API_VERSIONS_KEY:  # type: ignore[attr-defined]
        count, pos = read_uvarint(payload, pos)
        for _ in range(count):
            _tag, pos = read_uvarint(payload, pos)
            size, pos = read_uvarint(payload, pos)
            pos += size
            if pos > len(payload):
                raise KafkaProtocolError("response header tagged fields overrun the frame")
    try:
        obj, _ = decoder(payload, pos)
    except (IndexError, ValueError, struct.error, OverflowError) as exc:
        raise KafkaProtocolError(f"malformed {resp.__name__} v{version}: {exc}") from None
    return obj


def encode_data(obj: Struct, version: int) -> bytes:
    """Encode a standalone versioned structure as ``int16 version`` + body."""
    cls = type(obj)
    lo, hi = cls.MIN_VERSION, cls.MAX_VERSION  # type: ignore[attr-defined]
    if not lo <= version <= hi:
        raise KafkaProtocolError(f"{cls.__name__} has no version {version}")
    out = bytearray(_I16.pack(version))
    cls.encoder(version)(out, obj)
    return bytes(out)


def decode_data(cls: type[Struct], data: bytes) -> tuple[Any, int]:
    """Decode ``int16 version`` + body; newer versions are read as the newest known one
    (newer versions only append fields). Returns ``(object, version)``."""
    if len(data) < 2:
        raise KafkaProtocolError(f"{cls.__name__} of {len(data)} bytes has no version")
    version = _I16.unpack_from(data, 0)[0]
    if version < 0:
        raise KafkaProtocolError(f"{cls.__name__} has negative version {version}")
    use = min(version, cls.MAX_VERSION)  # type: ignore[attr-defined]
    try:
        obj, _ = cls.decoder(use)(data, 2)
    except (IndexError, ValueError, struct.error, OverflowError) as exc:
        raise KafkaProtocolError(f"malformed {cls.__name__} v{version}: {exc}") from None
    return obj, version
