"""records/: the compiled record decoder (package aiokafka_lite_native) against the pure-Python
reference: identical records from well-formed batches of every codec, control and log-append-time
batches; identical CorruptRecordExceptions (type and message) from corrupt and truncated input;
a fixed-seed mutation corpus (AIOKAFKA_LITE_FUZZ_ITERATIONS=200000 for a longer run). No broker.

Skips where the extension is not installed or AIOKAFKA_LITE_NO_EXTENSIONS is set (.ci/run checks
that `make install` built it, and runs the records tests a second time without it)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiokafka_lite.errors import KafkaError
from aiokafka_lite.producer import user_batch
from aiokafka_lite.producer.user_batch import BatchBuilder, BatchRecordMetadata
from aiokafka_lite.records import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    RecordBatchBuilder,
    batch_builder,
    iter_batches,
    v2_records,
)
from aiokafka_lite.structs import ConsumerRecord

pytestmark = pytest.mark.skipif(
    not v2_records.NATIVE, reason="aiokafka_lite_native not installed or disabled"
)

ALL_CODECS = [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD]
_FIELDS = ConsumerRecord.__slots__[:-1]  # without __dict__

_blob = st.one_of(st.none(), st.binary(max_size=200))
_headers = st.lists(st.tuples(st.text(max_size=8), _blob), max_size=3)
_record = st.tuples(st.integers(0, 2**45), _blob, _blob, _headers)


@contextmanager
def _pure() -> Iterator[None]:
    saved = v2_records._native
    v2_records._native = None
    try:
        yield
    finally:
        v2_records._native = saved


def _outcome(fn: Callable[[], Any]) -> str:
    """repr of the result (types included: bytes, tuple, list) or of the KafkaError raised;
    any other exception fails the test."""
    try:
        return "ok " + repr(fn())
    except KafkaError as exc:
        return f"error {type(exc).__name__}: {exc}"


def _both(fn: Callable[[], Any]) -> tuple[str, str]:
    native = _outcome(fn)
    with _pure():
        pure = _outcome(fn)
    return native, pure


def _read(buf: bytes, check_crcs: bool, min_offset: int) -> list[Any]:
    out: list[Any] = []
    for batch in iter_batches(buf, check_crcs=check_crcs):
        out.append(batch.record_tuples())
        if batch.magic == 2:
            recs = batch.new_records(ConsumerRecord, "t", 3, min_offset)
            out.append([tuple(getattr(r, f) for f in _FIELDS) for r in recs])
            out.append(batch.control_type)
    return out


def _batch(records: list[Any], codec: int, control: bool, log_append: bool, base: int) -> bytes:
    builder = RecordBatchBuilder(
        codec, batch_size=1 << 30, is_control=control, timestamp_type=int(log_append)
    )
    for ts, key, value, headers in records:
        if control:
            key = b"\x00\x00\x00\x01"
        builder.append(ts, key, value, headers)
    buf = builder.build()
    buf[0:8] = base.to_bytes(8, "big")
    return bytes(buf)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(_record, max_size=30),
    codec=st.sampled_from(ALL_CODECS),
    control=st.booleans(),
    log_append=st.booleans(),
    base=st.integers(0, 2**62),
    cut=st.one_of(st.none(), st.integers(0, 4000)),
    flips=st.lists(st.tuples(st.integers(12, 4000), st.integers(0, 255)), max_size=3),
    min_offset=st.integers(0, 40),
)
def test_batches_decode_the_same_both_ways(
    records: list[Any],
    codec: int,
    control: bool,
    log_append: bool,
    base: int,
    cut: int | None,
    flips: list[tuple[int, int]],
    min_offset: int,
) -> None:
    buf = bytearray(_batch(records, codec, control, log_append, base))
    native, pure = _both(lambda: _read(bytes(buf), True, base + min_offset))
    assert native == pure
    assert native.startswith("ok ")
    # corrupt: flipped bytes (past the length field) and a cut, CRCs unchecked so the
    # damage reaches the decoders
    for pos, byte in flips:
        if pos < len(buf):
            buf[pos] = byte
    if cut is not None:
        del buf[cut:]
    native, pure = _both(lambda: _read(bytes(buf), False, base + min_offset))
    assert native == pure


def _section(records: list[Any]) -> tuple[bytes, int, int]:
    """An uncompressed records section, its record count and base timestamp."""
    buf = _batch(records, CODEC_NONE, False, False, 0)
    batch = next(iter_batches(buf))
    assert batch.magic == 2
    return batch.records_data(), batch.record_count, batch.base_timestamp


def _decode_all(data: bytes, count: int, base_ts: int, lat: int | None) -> list[Any]:
    recs = v2_records.decode_records(
        data, count, 100, base_ts, lat, cls=ConsumerRecord, topic="t", partition=1, min_offset=102
    )
    return [
        v2_records.decode_records(data, count, 100, base_ts, lat),
        [tuple(getattr(r, f) for f in _FIELDS) for r in recs],
    ]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(_record, min_size=1, max_size=10),
    count_delta=st.integers(-2, 2),
    lat=st.one_of(st.none(), st.integers(0, 2**40)),
    cut=st.one_of(st.none(), st.integers(0, 2000)),
    flips=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), max_size=4),
)
def test_records_sections_decode_the_same_both_ways(
    records: list[Any],
    count_delta: int,
    lat: int | None,
    cut: int | None,
    flips: list[tuple[int, int]],
) -> None:
    data, count, base_ts = _section(records)
    native, pure = _both(lambda: _decode_all(data, count, base_ts, lat))
    assert native == pure and native.startswith("ok ")
    buf = bytearray(data)
    for pos, byte in flips:
        if pos < len(buf):
            buf[pos] = byte
    if cut is not None:
        del buf[cut:]
    count = max(0, count + count_delta)
    native, pure = _both(lambda: _decode_all(bytes(buf), count, base_ts, lat))
    assert native == pure


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300), count=st.integers(0, 50))
def test_native_decoder_on_random_bytes_returns_records_or_defers(data: bytes, count: int) -> None:
    # the C function itself never raises on bad input: it returns None and the wrapper lets the
    # pure-Python decoder raise the canonical error
    for cls in (None, ConsumerRecord):
        out = v2_records._native.decode_records(data, count, 0, 0, None, cls, "t", 0, 0, 0)
        assert out is None or isinstance(out, list)
    native, pure = _both(lambda: _decode_all(data, count, 0, None))
    assert native == pure


def _mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        pos = rng.randrange(len(buf) + 1)
        if op == 0 and buf:  # flip a bit
            pos = min(pos, len(buf) - 1)
            buf[pos] ^= 1 << rng.randrange(8)
        elif op == 1 and buf:  # an interesting byte
            buf[min(pos, len(buf) - 1)] = rng.choice((0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF, 0xFE))
        elif op == 2:  # truncate
            del buf[pos:]
        elif op == 3:  # insert random bytes
            buf[pos:pos] = rng.randbytes(rng.randint(1, 12))
        elif op == 4:  # a long varint
            buf[pos:pos] = b"\xff" * rng.randint(1, 11) + bytes([rng.randrange(128)])
        else:  # duplicate a range
            j = min(len(buf), pos + rng.randint(1, 30))
            buf[pos:pos] = buf[pos:j]
    return bytes(buf)


def test_fixed_seed_mutation_corpus() -> None:
    rng = random.Random(20261128)
    iterations = int(os.environ.get("AIOKAFKA_LITE_FUZZ_ITERATIONS", "3000"))
    seeds = [
        _section(
            [(1_700_000_000_000 + i, b"k%d" % i, b"v" * (i * 37 % 300), []) for i in range(8)]
        ),
        _section([(5, None, b"x" * 200, [("h1", b"a"), ("h\u00e9", None)]) for _ in range(5)]),
        _section([(2**40, b"", None, [("", b"")]), (0, None, None, [])]),
    ]
    seen = {"ok": 0, "error": 0}
    for _ in range(iterations):
        data, count, base_ts = rng.choice(seeds)
        mutated = _mutate(rng, data)
        count = max(0, count + rng.choice((0, 0, 0, -1, 1)))
        lat = rng.choice((None, None, 12345))
        out = v2_records._native.decode_records(
            mutated, count, 100, base_ts, None, ConsumerRecord, "t", 0, 0, 0
        )
        assert out is None or isinstance(out, list)
        native, pure = _both(lambda: _decode_all(mutated, count, base_ts, lat))  # noqa: B023
        assert native == pure, (mutated.hex(), count)
        seen[native.split(" ", 1)[0]] += 1
    # the corpus reaches both outcomes (a fuzzer that only ever errors tests nothing)
    assert seen["ok"] > iterations // 20 and seen["error"] > iterations // 4, seen


def test_no_extensions_switch_forces_pure_python() -> None:
    code = "from aiokafka_lite.records import v2_records as v; print(v.NATIVE, v._native)"
    env = dict(os.environ, AIOKAFKA_LITE_NO_EXTENSIONS="1")
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.split() == ["False", "None"]


_bytes_like = st.one_of(
    st.none(),
    st.binary(max_size=300),
    st.binary(max_size=50).map(bytearray),
    st.binary(max_size=50).map(memoryview),
)
_append = st.tuples(
    st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(0, 20_000)),  # timestamp offsets
    _bytes_like,
    _bytes_like,
    st.one_of(st.just(()), _headers),
)


def _fill(append: Callable[..., Any], items: list[Any], codec: int, limit: int) -> str:
    """Append every item (timestamps relative to a base), then build: the return values, the
    errors and the built batch, as one comparable string."""
    builder = RecordBatchBuilder(codec, batch_size=limit)
    log = []
    for ts, key, value, headers in items:
        try:
            log.append(repr(append(builder, ts, key, value, headers)))
        except (KafkaError, TypeError) as exc:
            log.append(f"{type(exc).__name__}: {exc}")
    return "\n".join(log) + "\n" + builder.build().hex()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(_append, max_size=30),
    codec=st.sampled_from(ALL_CODECS),
    limit=st.integers(61, 3000),
    base=st.integers(0, 2**41),
)
def test_builder_encodes_the_same_bytes_both_ways(
    items: list[Any], codec: int, limit: int, base: int
) -> None:
    # small timestamps are offsets from `base` (the table paths), large ones absolute (the
    # range checks and long varints); batch limits cut the batch anywhere
    items = [(base + ts if 0 <= ts <= 20_000 else ts, *rest) for ts, *rest in items]
    native = _fill(RecordBatchBuilder.append, items, codec, limit)
    pure = _fill(batch_builder._py_append, items, codec, limit)
    assert native == pure


def test_builder_encodes_the_same_bytes_past_the_tables() -> None:
    # more records than the builder's offset-delta table, a str value, deltas past int64
    items: list[Any] = [
        (1000 + i % 9000, b"k" if i % 3 else None, b"v" * (i % 200), ()) for i in range(5000)
    ]
    items += [(1000, None, "text", ()), (2**63 - 8193, None, b"x", ()), (-(2**63), None, b"y", ())]
    items += [(2**63, None, b"z", ())]
    native = _fill(RecordBatchBuilder.append, items, CODEC_NONE, 1 << 30)
    pure = _fill(batch_builder._py_append, items, CODEC_NONE, 1 << 30)
    assert native == pure
    assert "TypeError" in native and "IllegalArgumentError" in native
    assert RecordBatchBuilder.append is batch_builder._append_native


_user_ts = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 20_000),  # offsets from the base: the encoded-in-C path
    st.floats(0, 20_000, allow_nan=False),
    st.sampled_from(["12", "x", b"1", 1.5e300]),  # None (now): the test below
)
_user_append = st.tuples(_user_ts, _bytes_like, _bytes_like, st.one_of(st.none(), _headers))


def _user_fill(native_path: bool, items: list[Any], codec: int, limit: int, close_at: int) -> str:
    """The public BatchBuilder (producer.create_batch()) filled through its compiled append or
    its Python method: every return value or error, the first timestamp, the built bytes, and
    an append after close() and after build()."""
    builder = RecordBatchBuilder(codec, batch_size=limit)
    bb = BatchBuilder(builder, limit, None, None)
    assert ("append" in vars(bb)) == (bb._native is not None)  # the compiled one, when built
    append = bb.append if native_path else partial(BatchBuilder.append, bb)
    log = []
    for i, (ts, key, value, headers) in enumerate(items):
        if i == close_at:
            bb.close()
        try:
            meta = append(timestamp=ts, key=key, value=value, headers=headers)
            log.append(repr(meta) if meta is None else repr((type(meta), tuple(meta), meta.crc)))
        except (KafkaError, TypeError, ValueError) as exc:
            log.append(f"{type(exc).__name__}: {exc}")
    log.append(f"first {bb._first_ts} count {bb.record_count()} size {bb.size()}")
    out = builder.build().hex()
    try:
        log.append(repr(append(timestamp=1, key=None, value=b"after build")))
    except KafkaError as exc:
        log.append(f"{type(exc).__name__}: {exc}")
    return "\n".join(log) + "\n" + out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(_user_append, max_size=30),
    codec=st.sampled_from(ALL_CODECS),
    limit=st.integers(61, 3000),
    base=st.integers(0, 2**41),
    close_at=st.integers(0, 40),
)
def test_user_batch_append_is_the_same_both_ways(
    items: list[Any], codec: int, limit: int, base: int, close_at: int
) -> None:
    # producer.create_batch()'s BatchBuilder.append: the compiled appender (no Python frame
    # per record) against the Python method, on the same records: same metadata, same errors
    # (bad timestamps, str values), same bytes, the same refusal once full, closed or built
    items = [
        (base + ts if isinstance(ts, int) and 0 <= ts <= 20_000 else ts, *rest)
        for ts, *rest in items
    ]
    assert _user_fill(True, items, codec, limit, close_at) == _user_fill(
        False, items, codec, limit, close_at
    )


def test_user_batch_append_stamps_now_and_keeps_a_cached_record_count() -> None:
    # timestamp=None stamps the wall clock (ms), as the Python path; >127 records in one batch
    # (the counts past the small-int cache), keyed records, and the metadata's type
    if user_batch._batch_appender is None:
        pytest.skip("the installed aiokafka_lite_native predates batch_appender: make native")
    bb = BatchBuilder(RecordBatchBuilder(CODEC_NONE, batch_size=1 << 20), 1 << 20, None, None)
    assert bb._native is not None
    before = time.time_ns() // 1_000_000
    metas = [bb.append(key=b"k%d" % i, value=b"v" * i) for i in range(300)]
    after = time.time_ns() // 1_000_000
    assert all(isinstance(m, BatchRecordMetadata) for m in metas)
    assert [m.offset for m in metas] == list(range(300))
    assert all(before <= m.timestamp <= after for m in metas)
    assert bb._first_ts == metas[0].timestamp and bb.record_count() == 300
    with pytest.raises(TypeError):
        bb.append(b"positional")
    with pytest.raises(TypeError, match="unexpected keyword argument 'partition'"):
        bb.append(value=b"x", partition=1)
    batch = next(iter_batches(bytes(bb._builder.build())))
    assert [r.key for r in batch.records()][:3] == [b"k0", b"k1", b"k2"]
    # serializers: the Python method (the compiled appender takes raw bytes only)
    ser = BatchBuilder(RecordBatchBuilder(CODEC_NONE), 16384, None, str.encode)
    assert ser._native is None and ser.append(value="text") is not None
