"""Sans-I/O Kafka wire codec: primitives, versioned message schemas and request framing.

Nothing here performs I/O or imports asyncio: bytes in, objects out; objects in, bytes out.
"""

from . import messages
from .frames import (
    decode_data,
    decode_response,
    encode_data,
    encode_request,
    is_flexible,
    read_correlation_id,
)
from .messages import REQUESTS_BY_KEY
from .schema import Struct

__all__ = [
    "REQUESTS_BY_KEY",
    "Struct",
    "decode_data",
    "decode_response",
    "encode_data",
    "encode_request",
    "is_flexible",
    "messages",
    "read_correlation_id",
]
