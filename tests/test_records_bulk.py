"""The builder's fast paths write exactly the bytes the v2 record format prescribes.

``RecordBatchBuilder.append`` has a table-driven fast path (null key, no headers, small
timestamp delta) and ``append_values`` a bulk loop. Both are checked against an independent
reference encoder written here from the format description, on random mixes of values
(None, empty, large, bytearray), timestamps and batch sizes; batches must fill to the same
record count, and a rejected value must leave the batch untouched.
"""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest
from crc32c import crc32c

from aiokafka_lite.records.batch_builder import RecordBatchBuilder


def _uvarint(u: int) -> bytes:
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def _varint(v: int) -> bytes:
    return _uvarint((v << 1) ^ (v >> 63))


def _record(ts_delta: int, off: int, value: Any) -> bytes:
    body = b"\x00" + _varint(ts_delta) + _varint(off) + _varint(-1)
    body += _varint(-1) if value is None else _varint(len(value)) + bytes(value)
    body += _varint(0)
    return _varint(len(body)) + body


def _reference(records: list[tuple[int, Any]], batch_size: int) -> list[bytes]:
    """Split ``(timestamp, value)`` records into batches of at most ``batch_size`` bytes."""
    batches: list[bytes] = []
    i = 0
    while i < len(records):
        base = records[i][0]
        body = b""
        n = 0
        max_ts = base
        while i < len(records):
            ts, value = records[i]
            rec = _record(ts - base, n, value)
            if n and 61 + len(body) + len(rec) > batch_size:
                break
            body += rec
            max_ts = max(max_ts, ts)
            n += 1
            i += 1
        tail = struct.pack(">hiqqqhii", 0, n - 1, base, max_ts, -1, -1, -1, n) + body
        head = struct.pack(">qiib", 0, 49 + len(body), -1, 2)
        batches.append(head + struct.pack(">I", crc32c(tail)) + tail)
    return batches


def _values(rng: random.Random, n: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(n):
        r = rng.random()
        if r < 0.05:
            out.append(None)
        elif r < 0.08:
            out.append(rng.randbytes(rng.randrange(8000, 9000)))
        elif r < 0.1:
            out.append(bytearray(rng.randbytes(rng.randrange(0, 70))))
        else:
            out.append(rng.randbytes(rng.randrange(0, 200)))
    return out


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("batch_size", [300, 16384, 1 << 20])
def test_append_fast_path_matches_reference(seed: int, batch_size: int) -> None:
    rng = random.Random(seed)
    values = _values(rng, 300 if batch_size > 16384 else 150)
    base = 1_700_000_000_000 + seed
    stamps = sorted(base + rng.choice((0, 0, 0, 1, 3, 7, 8, 9, 200, 9000)) for _ in values)
    records = list(zip(stamps, values))
    out: list[bytes] = []
    b = RecordBatchBuilder(0, batch_size=batch_size)
    for ts, v in records:
        if b.append(ts, None, v) is None:
            out.append(bytes(b.build()))
            b = RecordBatchBuilder(0, batch_size=batch_size)
            assert b.append(ts, None, v) == 0
    out.append(bytes(b.build()))
    assert out == _reference(records, batch_size)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("batch_size", [300, 16384, 1 << 20])
def test_append_values_matches_reference(seed: int, batch_size: int) -> None:
    rng = random.Random(100 + seed)
    values = _values(rng, 300 if batch_size > 16384 else 150)
    ts = 1_700_000_000_000 + seed
    out: list[bytes] = []
    b = RecordBatchBuilder(0, batch_size=batch_size)
    i = 0
    while i < len(values):
        step = rng.choice((1, 7, 1000))  # chunks of several sizes, like send_many calls
        chunk = values[i : i + step]
        j = 0
        while j < len(chunk):
            k = b.append_values(ts, chunk, j)
            assert j <= k <= len(chunk)
            if k < len(chunk):
                out.append(bytes(b.build()))
                b = RecordBatchBuilder(0, batch_size=batch_size)
            j = k
        i += len(chunk)
    out.append(bytes(b.build()))
    assert out == _reference([(ts, v) for v in values], batch_size)


def test_append_values_continues_with_later_timestamps() -> None:
    b = RecordBatchBuilder(0)
    assert b.append_values(5000, [b"a", None, b"c"]) == 3
    assert b.append_values(5003, [b"d", b"e"]) == 2
    assert b.append_values(5100, [b"f"], 0) == 1
    assert b.append(4990, None, b"g") == 6  # older timestamp: negative delta
    assert b.record_count == 7 and b.last_timestamp == 4990
    records = [(5000, b"a"), (5000, None), (5000, b"c"), (5003, b"d"), (5003, b"e")]
    records += [(5100, b"f"), (4990, b"g")]
    assert bytes(b.build()) == _reference(records, 16384)[0]


def test_rejected_value_leaves_batch_unchanged() -> None:
    b = RecordBatchBuilder(0)
    assert b.append(1000, None, b"x") == 0
    before = bytes(b._buf)
    for bad in ("text", 5):
        with pytest.raises(TypeError):
            b.append(1000, None, bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            b.append(1001, b"k", bad, [("h", b"v")])  # type: ignore[arg-type]
    assert bytes(b._buf) == before and b.record_count == 1
    assert b.append(1000, None, b"y") == 1


@pytest.mark.parametrize("bad", ["text", 5])
def test_append_values_stops_at_a_rejected_value(bad: Any) -> None:
    """Values before the bad one may be in; the batch stays well-formed either way."""
    values = [b"a", b"b", bad, b"c"]
    b = RecordBatchBuilder(0)
    with pytest.raises(TypeError):
        b.append_values(1000, values)
    n = b.record_count
    assert n <= 2
    assert bytes(b.build()) == _reference([(1000, v) for v in values[:n]], 16384)[0] if n else True
