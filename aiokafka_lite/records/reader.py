"""Read the ``records`` bytes of a Fetch response: v2 batches and legacy message sets.

``iter_batches(buf)`` walks a buffer that may hold several batches of any
magic (0, 1 or 2) and may end with a partial batch (the broker cuts the
response at its size limit): the partial tail is skipped without error.
``read_batches(buf)`` does the same eagerly and also reports how many bytes
were left over, so a caller can tell "empty" from "first batch too large".

Every batch object exposes the same header fields whatever its magic, and
decodes its records lazily: ``records()`` yields :class:`Record` objects,
``record_tuples()`` returns ``(offset, timestamp, key, value, headers)``
tuples, ``new_records(cls, topic, partition)`` builds a consumer's
ConsumerRecords directly and ``make_records(make, topic, partition)`` calls
any factory with their fields; all come from the same single decoding loop,
:func:`decode_records`.

Malformed input raises ``CorruptRecordException`` (bad CRC, bad lengths,
truncated fields inside a complete batch, unknown magic, data that
decompresses beyond ``max_decompressed_size``) or ``UnsupportedCodecError``
(codec id 5-7); never any other exception type, never an allocation driven by
an advertised length.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import TypeVar

from crc32c import crc32c

from aiokafka_lite.errors import CorruptRecordException, UnsupportedCodecError
from aiokafka_lite.records.compression import (
    CODEC_MASK,
    CODEC_NAMES,
    CODEC_NONE,
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    decompress,
)
from aiokafka_lite.records.legacy import LEGACY_MIN_SIZE, LegacyBatch
from aiokafka_lite.records.record import Record, RecordTuple
from aiokafka_lite.records.v2_records import MIN_OFFSET, Row, decode_records

__all__ = [
    "RecordBatch",
    "iter_batches",
    "read_batches",
    "decode_records",
    "count_records",
    "Batch",
]

Buffer = bytes | bytearray | memoryview

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qiib")
_CONTROL_KEY = struct.Struct(">hh")
_HEADER_SIZE = 61
_V2_MIN_LENGTH = _HEADER_SIZE - 12

_T = TypeVar("_T")


class RecordBatch:
    """One RecordBatch v2 (magic 2), header parsed, records decoded on demand."""

    __slots__ = (
        "base_offset",
        "length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "record_count",
        "compression_type",
        "timestamp_type",
        "is_transactional",
        "is_control",
        "_view",
        "_max_size",
    )

    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    def __init__(
        self, view: memoryview, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
    ) -> None:
        """``view`` must hold exactly one complete batch (at least 61 bytes)."""
        if len(view) < _HEADER_SIZE:
            raise CorruptRecordException(
                f"record batch of {len(view)} bytes is shorter than its 61-byte header"
            )
        (
            self.base_offset,
            self.length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.record_count,
        ) = _HEADER.unpack_from(view, 0)
        self.attributes = attributes
        self.compression_type = attributes & CODEC_MASK
        self.timestamp_type = (attributes >> 3) & 1
        self.is_transactional = bool(attributes & 0x10)
        self.is_control = bool(attributes & 0x20)
        self._view = view
        self._max_size = max_decompressed_size
        if self.compression_type not in CODEC_NAMES:
            raise UnsupportedCodecError(
                f"record batch at offset {self.base_offset} uses unknown codec id {self.compression_type}"
            )
        if self.record_count < 0 or self.last_offset_delta < 0:
            raise CorruptRecordException(
                f"record batch at offset {self.base_offset}: negative record count or last offset delta"
            )

    # -- derived fields ---------------------------------------------------
    @property
    def last_offset(self) -> int:
        """Offset of the last record the batch was written with (base + lastOffsetDelta)."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset after this batch (compaction may have removed records inside it)."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def is_control_batch(self) -> bool:
        """aiokafka's name for :attr:`is_control`."""
        return self.is_control

    def size_in_bytes(self) -> int:
        """Size of the batch on the wire."""
        return self.length + 12

    def validate_crc(self) -> bool:
        """True if the stored CRC-32C matches the batch contents."""
        return bool(crc32c(self._view[21:]) == self.crc)

    # -- records ----------------------------------------------------------
    def records_data(self) -> bytes:
        """The records section after the header, decompressed (a copy when uncompressed)."""
        section = self._view[_HEADER_SIZE:]
        if self.compression_type == CODEC_NONE or (self.record_count == 0 and not section):
            return bytes(section)
        return decompress(self.compression_type, section, self._max_size)

    def records_section(self) -> bytes | memoryview:
        """:meth:`records_data` without the copy: the uncompressed section as a view of the
        fetched bytes (decompressed sections are new bytes anyway)."""
        if self.compression_type == CODEC_NONE:
            return self._view[_HEADER_SIZE:]
        return self.records_data()

    def record_tuples(self) -> list[RecordTuple]:
        """Decode every record into ``(offset, timestamp, key, value, headers)`` tuples."""
        return decode_records(
            self.records_data(),
            self.record_count,
            self.base_offset,
            self.base_timestamp,
            self.max_timestamp if self.timestamp_type else None,
        )

    def make_records(
        self,
        make: Callable[..., _T],
        topic: str,
        partition: int,
        min_offset: int = MIN_OFFSET,
    ) -> list[_T]:
        """One ``make(...)`` per record at or after ``min_offset``.

        ``make`` is called with a consumer record's positional fields:
        ``(topic, partition, offset, timestamp, timestamp_type, key, value,
        checksum=None, serialized_key_size, serialized_value_size, headers)``
        (see :func:`decode_records`).  For ConsumerRecord itself
        :meth:`new_records` gives the same records at a lower cost.
        """
        return [
            make(
                r.topic,
                r.partition,
                r.offset,
                r.timestamp,
                r.timestamp_type,
                r.key,
                r.value,
                None,
                r.serialized_key_size,
                r.serialized_value_size,
                r.headers,
            )
            for r in self.new_records(Row, topic, partition, min_offset)
        ]

    def new_records(
        self,
        cls: type[_T],
        topic: str,
        partition: int,
        min_offset: int = MIN_OFFSET,
    ) -> list[_T]:
        """The records at or after ``min_offset`` as ``cls`` instances, in one pass.

        ``cls`` is ConsumerRecord or a subclass whose ``__init__`` only assigns the
        fields: each instance is made with ``object.__new__`` and its eleven fields
        set, equal to ``cls(*fields)`` (see :func:`decode_records`).  The consumer's
        hot path.
        """
        return decode_records(
            self.records_data(),
            self.record_count,
            self.base_offset,
            self.base_timestamp,
            self.max_timestamp if self.timestamp_type else None,
            cls=cls,
            topic=topic,
            partition=partition,
            timestamp_type=self.timestamp_type,
            min_offset=min_offset,
        )

    def records(self) -> Iterator[Record]:
        """Yield the batch's records as :class:`Record` objects (checksum None)."""
        tst = self.timestamp_type
        for offset, timestamp, key, value, headers in self.record_tuples():
            yield Record(offset, timestamp, tst, key, value, headers, None)

    __iter__ = records

    @property
    def control_type(self) -> int | None:
        """For a control batch, the control record type (0 abort, 1 commit); else None."""
        if not self.is_control:
            return None
        tuples = self.record_tuples()
        if not tuples:
            return None
        key = tuples[0][2]
        if key is None or len(key) < 4:
            raise CorruptRecordException(
                f"control batch at offset {self.base_offset} has a malformed key"
            )
        return int(_CONTROL_KEY.unpack_from(key, 0)[1])

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset_delta={self.last_offset_delta}, "
            f"records={self.record_count}, codec={self.compression_type}, "
            f"transactional={self.is_transactional}, control={self.is_control}, "
            f"producer_id={self.producer_id}, producer_epoch={self.producer_epoch}, "
            f"base_sequence={self.base_sequence})"
        )


Batch = RecordBatch | LegacyBatch


def iter_batches(
    buf: Buffer | None,
    *,
    check_crcs: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> Iterator[Batch]:
    """Yield each complete batch in ``buf``; a partial trailing batch is ignored.

    Magic 2 gives :class:`RecordBatch`, magic 0/1 :class:`LegacyBatch` (one per
    top-level message; a compressed wrapper holds several records); ``None``
    (a null records field) yields nothing.  With
    ``check_crcs`` each batch's CRC is verified before it is yielded.
    """
    if buf is None:  # a null records field
        return
    view = _byte_view(buf)
    pos = 0
    end = len(view)
    unpack = _PREFIX.unpack_from
    while end - pos >= 17:
        base_offset, length, _, magic = unpack(view, pos)
        if length < 0:
            raise CorruptRecordException(f"negative batch length {length} at offset {base_offset}")
        stop = pos + 12 + length
        if stop > end:
            return  # partial trailing batch
        batch_view = view[pos:stop]
        if magic == 2:
            if length < _V2_MIN_LENGTH:
                raise CorruptRecordException(
                    f"record batch length {length} at offset {base_offset} is too small"
                )
            batch: Batch = RecordBatch(batch_view, max_decompressed_size)
        elif magic == 0 or magic == 1:
            if length < LEGACY_MIN_SIZE[magic]:
                raise CorruptRecordException(
                    f"message size {length} at offset {base_offset} is too small"
                )
            batch = LegacyBatch(batch_view, check_crcs, max_decompressed_size)
        else:
            raise CorruptRecordException(
                f"unknown record batch magic {magic} at offset {base_offset}"
            )
        if check_crcs and not batch.validate_crc():
            raise CorruptRecordException(
                f"CRC mismatch in record batch at offset {base_offset} (stored {batch.crc:#010x})"
            )
        yield batch
        pos = stop


def count_records(buf: Buffer | None, position: int = 0) -> int:
    """Records in the complete batches of ``buf`` at or after offset ``position``, from the
    batch headers alone (nothing decoded, no CRC checked): control batches are not counted, a
    batch starting before ``position`` counts its records from there on (exact unless the
    log was compacted), a legacy (v0/v1) message counts 1 even when it wraps several."""
    if buf is None:
        return 0
    view = _byte_view(buf)
    pos = 0
    end = len(view)
    unpack = _PREFIX.unpack_from
    header = _HEADER.unpack_from
    n = 0
    while end - pos >= 17:
        base_offset, length, _, magic = unpack(view, pos)
        stop = pos + 12 + length
        if length < 0 or stop > end:
            break
        if magic == 2:
            if length >= _V2_MIN_LENGTH:
                h = header(view, pos)
                if not h[5] & 0x20:  # attributes: not a control batch
                    count = h[12]
                    if base_offset < position:
                        count -= position - base_offset
                    if count > 0:
                        n += count
        elif base_offset >= position:
            n += 1
        pos = stop
    return n


def read_batches(
    buf: Buffer | None,
    *,
    check_crcs: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> tuple[list[Batch], int]:
    """Parse every complete batch in ``buf``; return ``(batches, trailing_partial_bytes)``.

    ``trailing_partial_bytes > 0`` with no batches means the first batch is
    larger than the fetch size allowed.
    """
    if buf is None:
        return [], 0
    view = _byte_view(buf)
    batches = list(
        iter_batches(view, check_crcs=check_crcs, max_decompressed_size=max_decompressed_size)
    )
    return batches, len(view) - sum(b.size_in_bytes() for b in batches)


def _byte_view(buf: Buffer) -> memoryview:
    view = memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        try:
            view = view.cast("B")
        except TypeError as exc:
            raise CorruptRecordException(
                f"records buffer is not a contiguous byte buffer: {exc}"
            ) from None
    return view
