"""The record object yielded by batch readers."""

from __future__ import annotations

__all__ = [
    "Record",
    "RecordTuple",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "NO_TIMESTAMP",
]

#: Timestamp types (batch attribute bit 3).
TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1
#: Timestamp of a legacy v0 message (it has none).
NO_TIMESTAMP = -1

#: ``(offset, timestamp, key, value, headers)`` as produced by ``RecordBatch.record_tuples()``.
RecordTuple = tuple[int, int, "bytes | None", "bytes | None", "list[tuple[str, bytes | None]]"]


class Record:
    """One decoded record.

    ``checksum`` is None for v2 batches (records carry no CRC there) and the
    message CRC for legacy v0/v1 messages.  ``serialized_key_size`` and
    ``serialized_value_size`` are -1 for a null key/value.
    """

    __slots__ = ("offset", "timestamp", "timestamp_type", "key", "value", "headers", "checksum")

    def __init__(
        self,
        offset: int,
        timestamp: int,
        timestamp_type: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]],
        checksum: int | None = None,
    ) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers
        self.checksum = checksum

    @property
    def serialized_key_size(self) -> int:
        """Size of the key in bytes, -1 if null."""
        return -1 if self.key is None else len(self.key)

    @property
    def serialized_value_size(self) -> int:
        """Size of the value in bytes, -1 if null."""
        return -1 if self.value is None else len(self.value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Record(offset={self.offset}, timestamp={self.timestamp}, timestamp_type={self.timestamp_type}, "
            f"key={self.key!r}, value={self.value!r}, headers={self.headers!r}, checksum={self.checksum})"
        )
