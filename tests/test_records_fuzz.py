"""records/: property-based round trips and mutation fuzzing (no broker)."""

from __future__ import annotations

import random
import struct
import time
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiokafka_lite.errors import KafkaError
from aiokafka_lite.records import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    RecordBatchBuilder,
    compress,
    iter_batches,
    read_batches,
)

ALL_CODECS = [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD]

_blob = st.one_of(st.none(), st.binary(max_size=300))
_headers = st.lists(st.tuples(st.text(max_size=10), _blob), max_size=4)
_timestamps = st.integers(min_value=0, max_value=2**45)
_record = st.tuples(_timestamps, _blob, _blob, _headers)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(_record, min_size=0, max_size=40),
    codec=st.sampled_from(ALL_CODECS),
    transactional=st.booleans(),
    control=st.booleans(),
    producer=st.tuples(
        st.integers(-1, 2**63 - 1), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 1)
    ),
    base_offset=st.integers(0, 2**62),
)
def test_builder_reader_round_trip(
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    codec: int,
    transactional: bool,
    control: bool,
    producer: tuple[int, int, int],
    base_offset: int,
) -> None:
    builder = RecordBatchBuilder(
        codec, batch_size=1 << 30, is_transactional=transactional, is_control=control
    )
    for i, (ts, key, value, headers) in enumerate(records):
        assert builder.append(ts, key, value, headers) == i
    builder.set_producer_state(*producer)
    buf = builder.build()
    buf[0:8] = struct.pack(">q", base_offset)  # as the broker would (outside the CRC)
    (batch,) = iter_batches(bytes(buf) + bytes(buf[:40]))
    assert batch.record_count == len(records)
    assert (batch.is_transactional, batch.is_control) == (transactional, control)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == producer
    assert batch.compression_type == codec
    if records:
        assert batch.max_timestamp == max(r[0] for r in records)
        assert batch.last_offset == base_offset + len(records) - 1
    expected = [(base_offset + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(records)]
    assert batch.record_tuples() == expected
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records()] == expected


def _valid_buffers() -> list[bytes]:
    """A variety of valid record buffers to mutate."""
    out = []
    for codec in ALL_CODECS:
        builder = RecordBatchBuilder(codec, is_transactional=codec % 2 == 0, producer_id=5)
        for i in range(12):
            builder.append(
                1_000_000 + i * 1000,
                None if i % 3 == 0 else b"key%d" % i,
                b"value" * i,
                [("h", b"x"), ("n", None)] if i % 4 == 0 else (),
            )
        out.append(bytes(builder.build()))
    for magic in (0, 1):
        msgs = []
        for i in range(4):
            body = struct.pack(">bb", magic, 0)
            if magic:
                body += struct.pack(">q", 100 + i)
            body += struct.pack(">i", 1) + b"k" + struct.pack(">i", 3) + b"v%02d" % i
            msg = struct.pack(">I", zlib.crc32(body)) + body
            msgs.append(struct.pack(">qi", i, len(msg)) + msg)
        inner = b"".join(msgs)
        out.append(inner)
        for codec in (CODEC_GZIP, CODEC_SNAPPY):
            value = compress(codec, inner)
            body = struct.pack(">bb", magic, codec) + (struct.pack(">q", 7) if magic else b"")
            body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
            msg = struct.pack(">I", zlib.crc32(body)) + body
            out.append(struct.pack(">qi", 3, len(msg)) + msg)
    return out


def _consume(buf: bytes, check_crcs: bool) -> int:
    n = 0
    for batch in iter_batches(buf, check_crcs=check_crcs, max_decompressed_size=1 << 20):
        _ = (batch.base_offset, batch.last_offset, batch.record_count, batch.control_type)
        for rec in batch.records():
            n += 1 + (rec.serialized_value_size > 0)
    return n


def _mutations(buf: bytes, rng: random.Random) -> bytes:
    data = bytearray(buf)
    kind = rng.randrange(5)
    if kind == 0:  # flip bytes
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif kind == 1:  # truncate
        del data[rng.randrange(len(data)) :]
    elif kind == 2:  # insert garbage
        pos = rng.randrange(len(data))
        data[pos:pos] = rng.randbytes(rng.randint(1, 8))
    elif kind == 3:  # overwrite an int32 with an extreme value
        pos = rng.randrange(max(1, len(data) - 4))
        data[pos : pos + 4] = struct.pack(">i", rng.choice([-(2**31), -2, -1, 0, 2**31 - 1, 10**6]))
    else:  # delete a slice
        a = rng.randrange(len(data))
        del data[a : a + rng.randint(1, 16)]
    return bytes(data)


def test_mutated_input_raises_only_kafka_errors() -> None:
    rng = random.Random(20240611)
    deadline = time.monotonic() + 20
    count = 0
    for buf in _valid_buffers():
        assert _consume(buf, True) > 0
        for _ in range(1500):
            mutated = _mutations(buf, rng)
            for check in (False, True):
                start = time.perf_counter()
                try:
                    _consume(mutated, check)
                except KafkaError:
                    pass
                assert time.perf_counter() - start < 1.0, "decoding a mutated batch took too long"
            count += 1
        assert time.monotonic() < deadline
    assert count > 1000


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_kafka_errors(data: bytes) -> None:
    try:
        _consume(data, False)
    except KafkaError:
        pass


@pytest.mark.parametrize("codec", [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD])
def test_fuzzed_compressed_sections(codec: int) -> None:
    """Corrupt only the compressed payload and re-sign the CRC, so the codec sees garbage."""
    from crc32c import crc32c

    rng = random.Random(codec)
    builder = RecordBatchBuilder(codec)
    for i in range(50):
        builder.append(i, b"k", b"some repetitive value %d" % (i % 5))
    good = bytes(builder.build())
    for _ in range(300):
        data = bytearray(good)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(61, len(data))] = rng.randrange(256)
        data[17:21] = struct.pack(">I", crc32c(bytes(data[21:])))
        try:
            _consume(bytes(data), True)
        except KafkaError:
            pass
    assert read_batches(good)[1] == 0
