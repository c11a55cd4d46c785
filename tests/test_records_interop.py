"""records/: interoperability with aiokafka (Cython and Python) and kafka-python builders/readers."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite.records import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    RecordBatch,
    RecordBatchBuilder,
    iter_batches,
)

ALL_CODECS = [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD]


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def one_batch(buf: bytes | bytearray) -> RecordBatch:
    batches = list(iter_batches(buf))
    assert len(batches) == 1
    assert isinstance(batches[0], RecordBatch)
    return batches[0]


# --------------------------------------------------------------------------- cross-checks


def _records(
    n: int,
) -> list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    out: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = []
    for i in range(n):
        key = None if i % 4 == 0 else b"key-%d" % i
        value = None if i % 9 == 0 else (b"value-%d-" % i) * (i % 40)
        headers: list[tuple[str, bytes | None]] = (
            [("trace", b"%d" % i), ("empty", b""), ("none", None)] if i % 3 == 0 else []
        )
        out.append((1_700_000_000_000 + i * 37 - (i % 5) * 100, key, value, headers))
    return out


def _aiokafka_default(impl: str) -> tuple[type, type]:
    import aiokafka.record.default_records as d

    if impl == "py":
        return d._DefaultRecordBatchBuilderPy, d._DefaultRecordBatchPy  # type: ignore[attr-defined]
    return d.DefaultRecordBatchBuilder, d.DefaultRecordBatch


@pytest.mark.parametrize("impl", ["cython", "py"])
@pytest.mark.parametrize("codec", ALL_CODECS)
def test_aiokafka_builds_we_read(codec: int, impl: str) -> None:
    builder_cls, _ = _aiokafka_default(impl)
    builder = builder_cls(2, codec, 1, 1234, 5, 77, 1 << 20)
    recs = _records(300)
    for i, (ts, k, v, h) in enumerate(recs):
        assert builder.append(i, ts, k, v, h) is not None
    buf = bytes(builder.build())
    batch = one_batch(buf)
    assert batch.compression_type == codec and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (1234, 5, 77)
    assert batch.record_tuples() == [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(recs)]


@pytest.mark.parametrize("impl", ["cython", "py"])
@pytest.mark.parametrize("codec", ALL_CODECS)
def test_we_build_aiokafka_reads(codec: int, impl: str) -> None:
    _, batch_cls = _aiokafka_default(impl)
    builder = RecordBatchBuilder(codec, batch_size=1 << 20, producer_id=9, producer_epoch=2)
    recs = _records(300)
    for ts, k, v, h in recs:
        builder.append(ts, k, v, h)
    builder.set_producer_state(9, 2, 500)
    theirs = batch_cls(bytes(builder.build()))
    assert theirs.validate_crc()
    assert theirs.compression_type == codec and theirs.producer_id == 9
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs]
    assert got == [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(recs)]


@pytest.mark.parametrize("codec", [CODEC_NONE, CODEC_GZIP])
def test_kafka_python_round_trip(codec: int) -> None:
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

    recs = _records(100)
    theirs = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 1 << 20)
    for i, (ts, k, v, h) in enumerate(recs):
        theirs.append(i, ts, k, v, h)
    assert one_batch(bytes(theirs.build())).record_tuples() == [
        (i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(recs)
    ]
    ours = RecordBatchBuilder(codec)
    for ts, k, v, h in recs:
        ours.append(ts, k, v, h)
    batch = DefaultRecordBatch(bytes(ours.build()))
    assert batch.validate_crc()
    assert [(r.offset, r.key, r.value) for r in batch] == [
        (i, k, v) for i, (_, k, v, _) in enumerate(recs)
    ]


@pytest.mark.parametrize(
    ("magic", "codec"),
    [(0, CODEC_NONE), (0, CODEC_GZIP), (0, CODEC_SNAPPY)]
    + [(1, c) for c in (CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4)],
)
def test_aiokafka_legacy_sets(magic: int, codec: int) -> None:
    from aiokafka.record.legacy_records import LegacyRecordBatchBuilder

    # (lz4 needs magic >= 1 and zstd magic 2: aiokafka refuses the other combinations)
    expected = []
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i in range(20):
        key = None if i % 3 == 0 else b"k%d" % i
        value = b"v%d" % i * i
        builder.append(i, 1000 + i, key, value)
        expected.append((100 + i, 1000 + i if magic else -1, key, value, []))
    buf = bytes(builder.build())
    if codec == CODEC_NONE:
        buf = _renumber_legacy(buf, 100)
    else:
        # the broker gives the wrapper the offset of its last inner message; magic 1 inner
        # offsets are relative to it, magic 0 inner offsets are absolute (here 0..19)
        buf = i64(119) + buf[8:]
        if magic == 0:
            expected = [(i, *rest) for i, (_, *rest) in enumerate(expected)]
    records = [t for batch in iter_batches(buf) for t in batch.record_tuples()]
    assert records == expected


def _renumber_legacy(buf: bytes, first: int) -> bytes:
    out = bytearray()
    pos = 0
    n = first
    while pos < len(buf):
        (size,) = struct.unpack_from(">i", buf, pos + 8)
        out += i64(n) + buf[pos + 8 : pos + 12 + size]
        pos += 12 + size
        n += 1
    return bytes(out)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [CODEC_NONE, CODEC_GZIP])
def test_kafka_python_legacy_sets(magic: int, codec: int) -> None:
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i in range(10):
        builder.append(i, 2000 + i, b"k", b"value%d" % i)
    buf = bytes(builder.build())
    if codec != CODEC_NONE and magic == 1:
        buf = i64(9) + buf[8:]  # the broker stamps the wrapper with the last inner offset
    batches = list(iter_batches(buf))
    values = [v for b in batches for _, _, _, v, _ in b.record_tuples()]
    assert values == [b"value%d" % i for i in range(10)]
    offsets = [o for b in batches for o, _, _, _, _ in b.record_tuples()]
    assert offsets == list(range(10))


_blob = st.one_of(st.none(), st.binary(max_size=200))
_recs = st.lists(
    st.tuples(
        st.integers(0, 2**41),
        _blob,
        _blob,
        st.lists(st.tuples(st.text(max_size=8), _blob), max_size=3),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(records=_recs, codec=st.sampled_from(ALL_CODECS))
def test_interop_property(
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    codec: int,
) -> None:
    """Random records: aiokafka (Cython) -> our reader, and our builder -> aiokafka's reader."""
    from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

    expected = [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(records)]
    theirs = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 1 << 30)
    ours = RecordBatchBuilder(codec, batch_size=1 << 30)
    for i, (ts, k, v, h) in enumerate(records):
        theirs.append(i, ts, k, v, h)
        ours.append(ts, k, v, h)
    assert one_batch(bytes(theirs.build())).record_tuples() == expected
    batch = DefaultRecordBatch(bytes(ours.build()))
    assert batch.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch] == expected
