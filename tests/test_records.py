"""records/: golden bytes, builder behaviour, reader behaviour, cross-checks with aiokafka/kafka-python."""

from __future__ import annotations

import struct
import time
import zlib

import pytest
from crc32c import crc32c

from aiokafka_lite.errors import (
    CorruptRecordException,
    IllegalArgumentError,
    IllegalStateError,
    KafkaError,
    UnsupportedCodecError,
)
from aiokafka_lite.records import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    HEADER_SIZE,
    LegacyBatch,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    codec_id,
    compress,
    decompress,
    iter_batches,
    read_batches,
    restamp,
)

ALL_CODECS = [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD]


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def u32(v: int) -> bytes:
    return struct.pack(">I", v)


def v2_batch(after_crc: bytes, base_offset: int = 0, leader_epoch: int = -1) -> bytes:
    """Frame the bytes after the crc field into a complete v2 batch (test-side, from the spec)."""
    body = i32(leader_epoch) + i8(2) + u32(crc32c(after_crc)) + after_crc
    return i64(base_offset) + i32(len(body)) + body


def one_batch(buf: bytes | bytearray, **kw: object) -> RecordBatch:
    batches = list(iter_batches(buf, **kw))  # type: ignore[arg-type]
    assert len(batches) == 1
    assert isinstance(batches[0], RecordBatch)
    return batches[0]


# --------------------------------------------------------------------------- golden vectors


def test_crc32c_is_castagnoli() -> None:
    # The standard CRC-32C check value.
    assert crc32c(b"123456789") == 0xE3069283


GOLDEN_ONE_RECORD = (
    bytes.fromhex("0000000000000000")  # baseOffset 0
    + bytes.fromhex("0000003a")  # batchLength 58
    + bytes.fromhex("ffffffff")  # partitionLeaderEpoch -1
    + bytes.fromhex("02")  # magic
    + b"CRC!"  # placeholder, replaced below
    + bytes.fromhex("0000")  # attributes
    + bytes.fromhex("00000000")  # lastOffsetDelta
    + bytes.fromhex("00000000000003e8")  # baseTimestamp 1000
    + bytes.fromhex("00000000000003e8")  # maxTimestamp 1000
    + bytes.fromhex("ffffffffffffffff")  # producerId -1
    + bytes.fromhex("ffff")  # producerEpoch -1
    + bytes.fromhex("ffffffff")  # baseSequence -1
    + bytes.fromhex("00000001")  # records count 1
    # record: length 8 (zigzag 16), attrs 0, tsDelta 0, offsetDelta 0,
    # keyLen 1 (zigzag 2) "k", valueLen 1 "v", headers 0
    + bytes.fromhex("10 00 00 00 02 6b 02 76 00")
)


def _with_crc(golden: bytes) -> bytes:
    return golden[:17] + u32(crc32c(golden[21:])) + golden[21:]


def test_golden_single_record_batch() -> None:
    expected = _with_crc(GOLDEN_ONE_RECORD)
    assert len(expected) == 70
    builder = RecordBatchBuilder(CODEC_NONE)
    assert builder.append(1000, b"k", b"v") == 0
    assert builder.size_in_bytes() == 70
    assert bytes(builder.build()) == expected

    batch = one_batch(expected)
    assert (batch.base_offset, batch.length, batch.magic, batch.record_count) == (0, 58, 2, 1)
    assert batch.crc == crc32c(expected[21:])
    assert batch.last_offset == 0 and batch.next_offset == 1
    assert [r.__dict__ if hasattr(r, "__dict__") else r for r in batch.record_tuples()] == [
        (0, 1000, b"k", b"v", [])
    ]


def test_golden_headers_null_key_transactional() -> None:
    rec0 = bytes.fromhex("28") + bytes.fromhex("00 00 00 01 0a") + b"hello"
    rec0 += bytes.fromhex("04") + bytes.fromhex("04") + b"h1" + bytes.fromhex("02") + b"x"
    rec0 += bytes.fromhex("04") + b"h2" + bytes.fromhex("01")
    rec1 = bytes.fromhex("0e 00 d8 04 02 00 00 00")  # tsDelta 300, offsetDelta 1, empty key/value
    after_crc = (
        i16(0x10)
        + i32(1)
        + i64(1000)
        + i64(1300)
        + i64(7)
        + i16(3)
        + i32(42)
        + i32(2)
        + rec0
        + rec1
    )
    expected = v2_batch(after_crc)

    builder = RecordBatchBuilder(CODEC_NONE, is_transactional=True)
    assert builder.append(1000, None, b"hello", [("h1", b"x"), ("h2", None)]) == 0
    assert builder.append(1300, b"", b"") == 1
    builder.set_producer_state(7, 3, 42)
    assert bytes(builder.build()) == expected

    batch = one_batch(expected)
    assert batch.is_transactional and not batch.is_control
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 3, 42)
    assert (batch.base_timestamp, batch.max_timestamp, batch.last_offset_delta) == (1000, 1300, 1)
    assert batch.record_tuples() == [
        (0, 1000, None, b"hello", [("h1", b"x"), ("h2", None)]),
        (1, 1300, b"", b"", []),
    ]
    recs = list(batch.records())
    assert recs[0] == Record(0, 1000, 0, None, b"hello", [("h1", b"x"), ("h2", None)], None)
    assert recs[0].serialized_key_size == -1 and recs[0].serialized_value_size == 5


def legacy_message(
    offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None
) -> bytes:
    """A legacy message built from the spec (test side)."""
    body = i8(magic) + i8(attributes)
    if magic == 1:
        body += i64(timestamp)
    for field in (key, value):
        body += i32(-1) if field is None else i32(len(field)) + field
    msg = u32(zlib.crc32(body)) + body
    return i64(offset) + i32(len(msg)) + msg


def test_golden_legacy_messages() -> None:
    v1 = legacy_message(5, 1, 0, 1234, b"k", b"val")
    assert len(v1) == 12 + 26
    v0 = legacy_message(6, 0, 0, -1, None, b"x")
    batches = list(iter_batches(v1 + v0))
    assert [type(b) for b in batches] == [LegacyBatch, LegacyBatch]
    assert [b.record_tuples() for b in batches] == [
        [(5, 1234, b"k", b"val", [])],
        [(6, -1, None, b"x", [])],
    ]
    rec = next(iter(batches[0].records()))
    assert rec.checksum == zlib.crc32(v1[16:]) and rec.timestamp_type == 0
    assert batches[1].magic == 0 and batches[1].base_offset == 6


def test_legacy_compressed_wrapper_relative_offsets() -> None:
    inner = b"".join(legacy_message(i, 1, 0, 100 + i, None, b"m%d" % i) for i in range(3))
    # wrapper offset 52 = absolute offset of the last inner message; inner offsets 0..2 relative
    wrapper = legacy_message(52, 1, CODEC_GZIP, 999, None, compress(CODEC_GZIP, inner))
    (batch,) = iter_batches(wrapper)
    assert batch.base_offset == 50 and batch.last_offset == 52 and batch.record_count == 3
    assert [(o, t, v) for o, t, _, v, _ in batch.record_tuples()] == [
        (50, 100, b"m0"),
        (51, 101, b"m1"),
        (52, 102, b"m2"),
    ]
    # LogAppendTime wrapper: inner records take the wrapper timestamp
    wrapper = legacy_message(52, 1, CODEC_GZIP | 0x08, 999, None, compress(CODEC_GZIP, inner))
    (batch,) = iter_batches(wrapper)
    assert batch.timestamp_type == 1
    assert [t for _, t, _, _, _ in batch.record_tuples()] == [999, 999, 999]


# --------------------------------------------------------------------------- builder


def test_append_returns_none_when_full_but_first_always_fits() -> None:
    builder = RecordBatchBuilder(CODEC_NONE, batch_size=200)
    assert builder.append(1, None, b"x" * 1000) == 0  # larger than batch_size, still accepted
    assert builder.append(1, None, b"y") is None
    assert builder.record_count == 1

    builder = RecordBatchBuilder(CODEC_NONE, batch_size=200)
    deltas = []
    while (d := builder.append(1, b"k", b"v" * 20)) is not None:
        deltas.append(d)
    assert deltas == list(range(len(deltas))) and len(deltas) > 3
    assert builder.size_in_bytes() <= 200
    assert len(builder.build()) == builder.size_in_bytes()


def test_estimate_size_is_an_upper_bound() -> None:
    for klen, vlen, headers in [
        (None, None, ()),
        (3, 100000, [("a", b"b"), ("c", None)]),
        (0, 0, ()),
    ]:
        builder = RecordBatchBuilder(CODEC_NONE)
        builder.append(
            2**40,
            None if klen is None else b"k" * klen,
            None if vlen is None else b"v" * vlen,
            headers,
        )
        assert len(builder.build()) <= RecordBatchBuilder.estimate_size_in_bytes(
            klen, vlen, headers
        )


def test_build_is_final_and_idempotent() -> None:
    builder = RecordBatchBuilder(CODEC_GZIP)
    builder.append(None, b"k", b"v")
    first = builder.build()
    assert builder.build() is first
    with pytest.raises(IllegalStateError):
        builder.append(1, b"k", b"v")
    with pytest.raises(IllegalStateError):
        builder.set_producer_state(1, 1, 1)


def test_none_timestamp_uses_wall_clock() -> None:
    before = time.time_ns() // 1_000_000
    builder = RecordBatchBuilder()
    builder.append(None, None, b"v")
    after = time.time_ns() // 1_000_000
    assert before <= builder.last_timestamp <= after
    batch = one_batch(builder.build())
    assert batch.record_tuples()[0][1] == builder.last_timestamp


def test_out_of_range_timestamp() -> None:
    builder = RecordBatchBuilder()
    with pytest.raises(IllegalArgumentError):
        builder.append(2**63, None, b"v")
    builder.append(0, None, b"v")
    with pytest.raises(IllegalArgumentError):
        builder.append(-(2**64), None, b"v")
    assert builder.record_count == 1
    assert one_batch(builder.build()).record_count == 1


def test_null_records_field() -> None:
    assert list(iter_batches(None)) == []
    assert read_batches(None) == ([], 0)
    assert read_batches(b"") == ([], 0)


def test_empty_batch_builds() -> None:
    buf = RecordBatchBuilder().build()
    assert len(buf) == HEADER_SIZE
    batch = one_batch(buf)
    assert batch.record_count == 0 and batch.record_tuples() == []


def test_restamp_rewrites_producer_fields_and_crc() -> None:
    builder = RecordBatchBuilder(CODEC_LZ4, producer_id=1, producer_epoch=0, base_sequence=0)
    for i in range(10):
        builder.append(i, None, b"value %d" % i)
    buf = builder.build()
    restamp(buf, 99, 5, 1234)
    batch = one_batch(buf)  # check_crcs=True by default
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (99, 5, 1234)
    assert [v for _, _, _, v, _ in batch.record_tuples()] == [b"value %d" % i for i in range(10)]


def test_log_append_time_and_control_batch() -> None:
    builder = RecordBatchBuilder(timestamp_type=1)
    builder.append(10, None, b"a")
    builder.append(20, None, b"b")
    batch = one_batch(builder.build())
    assert batch.timestamp_type == 1
    # the broker rewrites maxTimestamp; records then all carry it
    assert [t for _, t, _, _, _ in batch.record_tuples()] == [20, 20]

    for kind in (0, 1):
        builder = RecordBatchBuilder(is_transactional=True, is_control=True, producer_id=4)
        builder.append(5, struct.pack(">hh", 0, kind), struct.pack(">hi", 0, 17))
        batch = one_batch(builder.build())
        assert batch.is_control and batch.is_control_batch and batch.control_type == kind
    assert one_batch(RecordBatchBuilder().build()).control_type is None


def test_codec_names() -> None:
    assert [codec_id(n) for n in (None, "gzip", "snappy", "lz4", "zstd", "none", 3)] == [
        0,
        1,
        2,
        3,
        4,
        0,
        3,
    ]
    with pytest.raises(UnsupportedCodecError):
        codec_id("brotli")
    with pytest.raises(UnsupportedCodecError):
        RecordBatchBuilder(7)


# --------------------------------------------------------------------------- compression


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_compression_round_trip_and_bound(codec: int) -> None:
    data = b"0123456789" * 10000 + bytes(range(256))
    packed = compress(codec, data)
    assert decompress(codec, packed) == data
    assert decompress(codec, memoryview(bytearray(packed))) == data
    if codec != CODEC_NONE:
        with pytest.raises(CorruptRecordException, match="limit"):
            decompress(codec, packed, max_size=50000)
        with pytest.raises(CorruptRecordException):
            decompress(codec, b"\x00garbage" * 5)


@pytest.mark.parametrize("codec", [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD])
def test_decompression_bomb_is_bounded(codec: int) -> None:
    bomb = compress(codec, bytes(48 * 1024 * 1024))
    start = time.process_time()  # CPU spent, not wall time: a loaded machine must not fail it
    with pytest.raises(CorruptRecordException):
        decompress(codec, bomb, max_size=1 << 20)
    assert time.process_time() - start < 2.0


def test_xerial_snappy() -> None:
    import cramjam

    data = bytes(range(256)) * 300  # 76800 bytes, three xerial blocks of <= 32 KiB
    blocks = [
        bytes(cramjam.snappy.compress_raw(data[i : i + 32768])) for i in range(0, len(data), 32768)
    ]
    framed = b"\x82SNAPPY\x00" + i32(1) + i32(1) + b"".join(i32(len(b)) + b for b in blocks)
    assert decompress(CODEC_SNAPPY, framed) == data
    with pytest.raises(CorruptRecordException):
        decompress(CODEC_SNAPPY, framed, max_size=40000)
    with pytest.raises(CorruptRecordException):
        decompress(CODEC_SNAPPY, framed[:-5])
    with pytest.raises(CorruptRecordException):
        decompress(CODEC_SNAPPY, framed[:20] + i32(10**9) + framed[24:])
    # aiokafka's own xerial encoder
    from aiokafka.codec import snappy_encode

    assert decompress(CODEC_SNAPPY, snappy_encode(data, xerial_compatible=True)) == data


def test_unknown_codec_id() -> None:
    with pytest.raises(UnsupportedCodecError):
        compress(6, b"x")
    with pytest.raises(UnsupportedCodecError):
        decompress(5, b"x")


# --------------------------------------------------------------------------- reader


def _sample_batch(codec: int = CODEC_NONE, n: int = 5, base_ts: int = 1000) -> bytearray:
    builder = RecordBatchBuilder(codec)
    for i in range(n):
        builder.append(base_ts + i, b"key%d" % i, b"value%d" % i)
    return builder.build()


def test_partial_trailing_batch_is_ignored() -> None:
    a, b = bytes(_sample_batch()), bytes(_sample_batch(CODEC_GZIP))
    for cut in range(len(b)):
        data = a + b[:cut]
        batches, trailing = read_batches(data)
        assert len(batches) == 1 and trailing == cut
    assert read_batches(b[:30]) == ([], 30)
    batches, trailing = read_batches(a + b)
    assert len(batches) == 2 and trailing == 0


def test_several_batches_and_magics_in_one_buffer() -> None:
    buf = bytearray()
    buf += legacy_message(0, 0, 0, -1, b"a", b"0")
    buf += legacy_message(1, 1, 0, 7, b"b", b"1")
    builder = RecordBatchBuilder()
    builder.append(8, b"c", b"2")
    v2 = bytearray(builder.build())
    v2[0:8] = i64(2)  # the broker assigns the base offset (outside the CRC)
    buf += v2
    offsets = [(o, k) for batch in iter_batches(buf) for o, _, k, _, _ in batch.record_tuples()]
    assert offsets == [(0, b"a"), (1, b"b"), (2, b"c")]
    # a memoryview slice in the middle of a bigger buffer works too
    big = b"xx" + bytes(buf) + b"yy"
    view = memoryview(big)[2:-2]
    assert [b.record_count for b in iter_batches(view)] == [1, 1, 1]


def _resign(buf: bytearray) -> bytearray:
    buf[17:21] = u32(crc32c(bytes(buf[21:])))
    return buf


def test_crc_mismatch() -> None:
    buf = _sample_batch()
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptRecordException, match="CRC"):
        list(iter_batches(buf))
    # without CRC checks the damage is found (or not) by the record decoder only
    (batch,) = iter_batches(buf, check_crcs=False)
    assert isinstance(batch, RecordBatch)
    legacy = bytearray(legacy_message(0, 1, 0, 1, b"k", b"v"))
    legacy[-1] ^= 1
    with pytest.raises(CorruptRecordException, match="CRC"):
        list(iter_batches(legacy))


@pytest.mark.parametrize(
    ("mutate", "exc"),
    [
        (lambda b: b.__setitem__(slice(16, 17), b"\x05"), CorruptRecordException),  # magic 5
        (lambda b: b.__setitem__(slice(8, 12), i32(-5)), CorruptRecordException),  # negative length
        (
            lambda b: b.__setitem__(slice(8, 12), i32(20)),
            CorruptRecordException,
        ),  # shorter than header
        (lambda b: b.__setitem__(slice(21, 23), i16(6)), UnsupportedCodecError),  # codec 6
        (
            lambda b: b.__setitem__(slice(57, 61), i32(10**6)),
            CorruptRecordException,
        ),  # record count
        (lambda b: b.__setitem__(slice(57, 61), i32(-1)), CorruptRecordException),
        (lambda b: b.__setitem__(slice(57, 61), i32(4)), CorruptRecordException),  # trailing bytes
        (lambda b: b.__setitem__(slice(61, 62), b"\x7f"), CorruptRecordException),  # record length
        (lambda b: b.__setitem__(slice(65, 66), b"\x7e"), CorruptRecordException),  # key length 63
        (lambda b: b.__setitem__(slice(65, 66), b"\x05"), CorruptRecordException),  # key length -3
        (
            lambda b: b.__setitem__(slice(21, 23), i16(CODEC_GZIP)),
            CorruptRecordException,
        ),  # not gzip
    ],
)
@pytest.mark.parametrize("mode", ["tuples", "make"])
def test_malformed_batches(mutate: object, exc: type[KafkaError], mode: str) -> None:
    buf = _sample_batch()
    mutate(buf)  # type: ignore[operator]
    _resign(buf)
    with pytest.raises(exc):
        for batch in iter_batches(buf):
            _decode(batch, mode)


def _decode(batch: object, mode: str) -> list[object]:
    """Decode a batch with ``record_tuples()`` or with ``make_records()`` (a tuple factory)."""
    if mode == "tuples":
        return batch.record_tuples()  # type: ignore[attr-defined, no-any-return]
    return batch.make_records(lambda *a: a, "t", 0)  # type: ignore[attr-defined, no-any-return]


@pytest.mark.parametrize("mode", ["tuples", "make"])
def test_truncated_record_inside_complete_batch(mode: str) -> None:
    buf = _sample_batch()
    cut = bytearray(buf[:-3])
    cut[8:12] = i32(len(cut) - 12)
    with pytest.raises(CorruptRecordException, match=r"truncated|length"):
        for batch in iter_batches(_resign(cut)):
            _decode(batch, mode)


def _records_batch(records: bytes, count: int) -> bytearray:
    """A v2 batch (base offset 100, base timestamp 1000) around raw record bytes."""
    after_crc = (
        i16(0) + i32(count - 1) + i64(1000) + i64(1000) + i64(-1) + i16(-1) + i32(-1) + i32(count)
    )
    return bytearray(v2_batch(after_crc + records, base_offset=100))


@pytest.mark.parametrize("mode", ["tuples", "make"])
@pytest.mark.parametrize(
    "record",
    [
        # length 8: attrs, tsDelta, offDelta, key null, value null, 1 header: key "a", no value
        b"\x10\x00\x00\x00\x01\x01\x02\x02\x61",
        b"\x10\x00\x00\x00\x01\x01\x02\x7f\x61",  # header key length -64
        b"\x10\x00\x00\x00\x01\x01\x02\x02\xff",  # header key not UTF-8 (and no value)
        b"\x0e\x00\x00\x00\x01\x01\x00",  # record length 7 but 6 bytes of fields
        b"\x0c\x00\x00\x00\x01\x01\x00\x00",  # a good record, then a trailing byte
        b"\x0e\x00\x00\x00\x01\x01\x03",  # header count -2
        b"\x14\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # 11-byte varint
    ],
)
def test_malformed_records(record: bytes, mode: str) -> None:
    batch = one_batch(_records_batch(record, 1))
    with pytest.raises(CorruptRecordException):
        _decode(batch, mode)


def test_largest_offset_delta_decodes_in_both_modes() -> None:
    # a 10-byte offset delta of 2**69 - 1: still an ordinary record (no Kafka check on offsets)
    record = b"\x1e\x00\x00\xfe" + b"\xff" * 8 + b"\x7f" + b"\x01\x01\x00"
    batch = one_batch(_records_batch(record, 1))
    off = 100 + (1 << 69) - 1
    assert batch.record_tuples() == [(off, 1000, None, None, [])]
    want = [("t", 0, off, 1000, 0, None, None, None, -1, -1, ())]
    assert batch.make_records(lambda *a: a, "t", 0) == want
    assert batch.make_records(lambda *a: a, "t", 0, min_offset=off + 1) == []


def test_make_records_builds_consumer_records_in_one_pass() -> None:
    builder = RecordBatchBuilder(batch_size=1 << 20)
    base_ts = 1_700_000_000_000
    # timestamp and offset deltas of one, two and three varint bytes (the fast paths' edges)
    stamps = [base_ts + d for d in (0, 63, 64, 8191, 8192, 3_000_000)]
    stamps += [base_ts + i for i in range(200)]
    for n, ts in enumerate(stamps):
        key = None if n % 3 == 0 else b"k%d" % n
        value = None if n % 5 == 0 else b"v" * (n * 7)
        headers = [("h", b"x"), ("n", None)] if n % 4 == 0 else []
        builder.append(ts, key, value, headers)
    buf = builder.build()
    buf[0:8] = i64(5000)
    batch = one_batch(_resign(buf))
    calls: list[tuple[object, ...]] = []

    def make(*args: object) -> int:
        calls.append(args)
        return len(calls)

    got = batch.make_records(make, "topic", 7, min_offset=5004)
    tuples = batch.record_tuples()
    assert got == list(range(1, len(stamps) - 4 + 1))  # one call per record, results in order
    assert len(tuples) == len(stamps)
    assert [o for o, *_ in tuples] == list(range(5000, 5000 + len(stamps)))
    assert [t for _, t, *_ in tuples] == stamps
    for args, (off, ts, key, value, headers) in zip(calls, tuples[4:]):
        assert args == (
            "topic",
            7,
            off,
            ts,
            0,
            key,
            value,
            None,
            -1 if key is None else len(key),
            -1 if value is None else len(value),
            tuple(headers),
        )
        assert type(args[10]) is tuple and type(headers) is list
    # record_tuples(): a fresh header list per record, never shared
    assert tuples[1][4] == [] and tuples[1][4] is not tuples[2][4]
    # LogAppendTime: every record carries the batch max timestamp, type 1
    builder = RecordBatchBuilder(timestamp_type=1)
    builder.append(10, None, b"a")
    builder.append(20, b"kk", None)
    batch = one_batch(builder.build())
    assert batch.make_records(lambda *a: a, "t", 0) == [
        ("t", 0, 0, 20, 1, None, b"a", None, -1, 1, ()),
        ("t", 0, 1, 20, 1, b"kk", None, None, 2, -1, ()),
    ]


def test_huge_advertised_length_does_not_allocate() -> None:
    header = bytearray(_sample_batch()[:61])
    header[8:12] = i32(2**31 - 1)
    assert read_batches(header) == ([], 61)  # just an (impossible) partial batch
    # a record claiming a 2 GiB value inside a complete batch
    builder = RecordBatchBuilder()
    builder.append(1, None, b"v")
    buf = builder.build()
    buf[61:] = b"\x0c\x00\x00\x00\x01\xfe\xff\xff\xff\x0f\x00"  # valueLen 2**31-1
    buf[8:12] = i32(len(buf) - 12)
    with pytest.raises(CorruptRecordException):
        one_batch(_resign(buf)).record_tuples()
    with pytest.raises(CorruptRecordException):
        one_batch(_resign(buf)).make_records(lambda *a: a, "t", 0)


def test_compressed_bomb_batch_is_rejected() -> None:
    builder = RecordBatchBuilder(CODEC_ZSTD, batch_size=1 << 30)
    builder.append(1, None, bytes(8 << 20))
    buf = builder.build()
    assert len(buf) < 2000
    with pytest.raises(CorruptRecordException, match="limit"):
        one_batch(buf, max_decompressed_size=1 << 20).record_tuples()
    assert len(one_batch(buf).record_tuples()[0][3] or b"") == 8 << 20


def test_old_kafka_lz4_header_in_magic_0() -> None:
    from aiokafka_lite.records.legacy import _xxh32_short

    assert [_xxh32_short(x) for x in (b"", b"a", b"abc")] == [0x02CC5D05, 0x550D7456, 0x32D153FF]
    inner = b"".join(legacy_message(i, 0, 0, -1, None, b"old %d" % i) for i in range(3))
    frame = bytearray(compress(CODEC_LZ4, inner))
    assert frame[6] == (_xxh32_short(bytes(frame[4:6])) >> 8) & 0xFF  # standard header checksum
    frame[6] = (
        _xxh32_short(bytes(frame[0:6])) >> 8
    ) & 0xFF  # Kafka 0.8/0.9: magic bytes hashed too
    with pytest.raises(CorruptRecordException):
        decompress(CODEC_LZ4, bytes(frame))
    (batch,) = iter_batches(legacy_message(2, 0, CODEC_LZ4, -1, None, bytes(frame)))
    assert [v for _, _, _, v, _ in batch.record_tuples()] == [b"old 0", b"old 1", b"old 2"]


def test_count_records_from_batch_headers() -> None:
    from aiokafka_lite.records.reader import count_records

    def batch(base: int, n: int, codec: int = CODEC_NONE, control: bool = False) -> bytes:
        builder = RecordBatchBuilder(codec)
        for i in range(n):
            builder.append(1000 + i, None, b"v%d" % i)
        data = bytearray(builder.build())
        struct.pack_into(">q", data, 0, base)  # base offset
        if control:  # attributes bit 5: a control batch (transaction marker)
            struct.pack_into(">h", data, 21, struct.unpack_from(">h", data, 21)[0] | 0x20)
        return bytes(data)

    data = batch(0, 5) + batch(5, 3, CODEC_GZIP) + batch(8, 1, control=True) + batch(9, 2)
    assert count_records(data) == 10  # the control batch is not counted
    assert count_records(data, position=3) == 7  # from the middle of the first batch
    assert count_records(data, position=9) == 2
    assert count_records(data + data[:20]) == 10  # a partial trailing batch is ignored
    assert count_records(None) == count_records(b"") == 0
