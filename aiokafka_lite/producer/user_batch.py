"""The batches a caller fills itself: :class:`BatchBuilder` (``producer.create_batch()``,
submitted with ``producer.send_batch()``, as aiokafka's) and what its ``append`` returns."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

from aiokafka_lite.producer.batch import Headers
from aiokafka_lite.records._native import native

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
    """A batch filled by the caller and submitted with ``producer.send_batch()`` (aiokafka API).

    With the compiled codec and no serializers, ``append`` is the compiled twin of the method
    below (``aiokafka_lite_native`` ``batch_appender``): the same records, bytes, metadata and
    errors (tests/test_records_native.py compares them), without a Python frame per record."""

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
        self._native: Any = None
        if _batch_appender is not None and key_serializer is None and value_serializer is None:
            try:
                self._native = _batch_appender(builder, BatchRecordMetadata, _append_to)
            except TypeError:  # not a RecordBatchBuilder: the Python path
                pass
            else:
                self.append = self._native  # type: ignore[method-assign]

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
        builder = self._builder  # its append, looked up now: after build() it raises
        buf = builder._buf  # the builder's buffer: grows in place until build()
        before = len(buf)
        idx = builder.append(ts, key, value, headers or ())
        if idx is None:
            self._closed = True
            return None
        return _new_meta(BatchRecordMetadata, (idx, ts, len(buf) - before))

    @property
    def _first_ts(self) -> int | None:
        """The first record's timestamp (None before it)."""
        builder = self._builder
        return int(builder._base_ts) if builder.record_count else None

    def close(self) -> None:
        """Refuse further appends (the batch may still be submitted)."""
        self._closed = True
        if self._native is not None:
            self._native.closed = True

    def record_count(self) -> int:
        """Number of records appended."""
        return int(self._builder.record_count)

    def size(self) -> int:
        """Encoded (uncompressed) size in bytes, batch header included."""
        return int(self._builder.size_in_bytes())


def _append_to(
    builder: Any, ts: int, key: Any, value: Any, headers: Headers | None
) -> BatchRecordMetadata | None:
    """One record into the RecordBatchBuilder ``builder``: its metadata, None when it is full
    (the compiled appender's path for any record it does not encode itself)."""
    buf = builder._buf  # the builder's buffer: grows in place until build()
    before = len(buf)
    idx = builder.append(ts, key, value, headers or ())
    if idx is None:
        return None
    return _new_meta(BatchRecordMetadata, (idx, ts, len(buf) - before))


_new_meta = tuple.__new__
_time_ns = time.time_ns
#: the compiled appender (None without the codec, or with a build of it older than this code)
_batch_appender = getattr(native, "batch_appender", None)
