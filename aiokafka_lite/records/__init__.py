"""Kafka record batches, sans-I/O: build v2 batches, read v0/v1/v2, compress.

Producing::

    from aiokafka_lite.records import RecordBatchBuilder, CODEC_LZ4
    builder = RecordBatchBuilder(CODEC_LZ4, batch_size=16384)
    if builder.append(timestamp_ms, key, value, headers) is None:
        ...  # batch full: build it and start a new one
    builder.set_producer_state(producer_id, epoch, base_sequence)
    payload = builder.build()            # bytearray, ready for a ProduceRequest
    restamp(payload, producer_id, new_epoch, new_sequence)   # idempotent retry

Consuming::

    from aiokafka_lite.records import iter_batches
    for batch in iter_batches(partition_data.records, check_crcs=True):
        if batch.is_control:
            ...  # batch.control_type: 0 abort, 1 commit
        for offset, timestamp, key, value, headers in batch.record_tuples():
            ...
        # or, for a v2 RecordBatch, build the caller's records in the same single pass:
        records = batch.new_records(ConsumerRecord, topic, partition, min_offset=position)

Errors: ``CorruptRecordException`` for malformed or oversized data,
``UnsupportedCodecError`` for an unknown codec id.  Nothing here does I/O.
"""

from aiokafka_lite.records.batch_builder import HEADER_SIZE, RecordBatchBuilder, restamp
from aiokafka_lite.records.compression import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_MASK,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    codec_id,
    compress,
    decompress,
)
from aiokafka_lite.records.legacy import LegacyBatch
from aiokafka_lite.records.reader import (
    Batch,
    RecordBatch,
    decode_records,
    iter_batches,
    read_batches,
)
from aiokafka_lite.records.record import (
    NO_TIMESTAMP,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Record,
    RecordTuple,
)

#: Control record types (key field ``type`` of a control batch's record).
CONTROL_ABORT = 0
CONTROL_COMMIT = 1

__all__ = [
    "Batch",
    "CODEC_GZIP",
    "CODEC_LZ4",
    "CODEC_MASK",
    "CODEC_NONE",
    "CODEC_SNAPPY",
    "CODEC_ZSTD",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "HEADER_SIZE",
    "LegacyBatch",
    "NO_TIMESTAMP",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "RecordTuple",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "codec_id",
    "compress",
    "decode_records",
    "decompress",
    "iter_batches",
    "read_batches",
    "restamp",
]
