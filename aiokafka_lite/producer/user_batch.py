"""The batches a caller fills itself: :class:`BatchBuilder` (``producer.create_batch()``,
submitted with ``producer.send_batch()``, as aiokafka's) and what its ``append`` returns."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

from aiokafka_lite.producer.batch import Headers

__all__ = ["BatchBuilder", "BatchRecordMetadata"]


class BatchRecordMetadata(NamedTuple):
    """What :meth:`BatchBuilder.append` returns: the record's offset inside the batch, its
    timestamp (epoch ms) and encoded size; ``crc`` is always None (v2 batches have one CRC)."""

    offset: int
    timestamp: int
    size: int

    @property
    def crc(self) -> None:
        return None


class BatchBuilder:
    """A batch filled by the caller and submitted with ``producer.send_batch()`` (aiokafka API)."""

    def __init__(
        self,
        builder: Any,
        batch_size: int,
        key_serializer: Callable[[Any], bytes] | None,
        value_serializer: Callable[[Any], bytes] | None,
    ) -> None:
        self._builder = builder
        self._batch_size = batch_size
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._closed = False
        self._first_ts: int | None = None
        self._append = builder.append
        self._buf = builder._buf

    def append(
        self,
        *,
        timestamp: int | None = None,
        key: Any = None,
        value: Any = None,
        headers: Headers | None = None,
    ) -> BatchRecordMetadata | None:
        """Add one record; None when the batch is full or closed. ``timestamp`` is epoch ms."""
        if self._closed:
            return None
        if self._key_serializer is not None:
            key = self._key_serializer(key)
        if self._value_serializer is not None:
            value = self._value_serializer(value)
        ts = _time_ns() // 1000000 if timestamp is None else int(timestamp)
        buf = self._buf  # the builder's buffer: grows in place until build()
        before = len(buf)
        idx = self._append(ts, key, value, headers or ())
        if idx is None:
            self._closed = True
            return None
        if not idx:
            self._first_ts = ts
        return _new_meta(BatchRecordMetadata, (idx, ts, len(buf) - before))

    def close(self) -> None:
        """Refuse further appends (the batch may still be submitted)."""
        self._closed = True

    def record_count(self) -> int:
        """Number of records appended."""
        return int(self._builder.record_count)

    def size(self) -> int:
        """Encoded (uncompressed) size in bytes, batch header included."""
        return int(self._builder.size_in_bytes())


_new_meta = tuple.__new__
_time_ns = time.time_ns
