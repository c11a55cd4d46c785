"""The consumer's batch -> ConsumerRecord path (the reader's decoding loop with a record
factory) agrees with ``record_tuples()`` and with aiokafka's reader, on good and on malformed
batches (pure, no broker)."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest

from aiokafka_lite.consumer.decode import batch_to_records
from aiokafka_lite.errors import CorruptRecordException, KafkaError
from aiokafka_lite.records.batch_builder import RecordBatchBuilder
from aiokafka_lite.records.reader import iter_batches
from aiokafka_lite.structs import ConsumerRecord


def make_batch(rnd: random.Random, codec: int = 0, ts_type: int = 0) -> bytes:
    b = RecordBatchBuilder(codec, batch_size=1 << 20, timestamp_type=ts_type)
    base = 1_700_000_000_000
    for _ in range(rnd.randint(1, 150)):
        key = None if rnd.random() < 0.3 else rnd.randbytes(rnd.choice([0, 3, 70, 200]))
        value = None if rnd.random() < 0.1 else rnd.randbytes(rnd.choice([0, 10, 100, 300, 20000]))
        headers = [
            (f"h{i}", None if rnd.random() < 0.3 else rnd.randbytes(rnd.randint(0, 9)))
            for i in range(rnd.choice([0, 0, 1, 3]))
        ]
        base += rnd.choice([0, 1, 50, 100, 20000, 3_000_000])
        b.append(base, key, value, headers)
    buf = b.build()
    struct.pack_into(">q", buf, 0, rnd.randint(0, 1 << 40))
    return bytes(buf)


def expected(batch: Any, position: int) -> list[tuple[Any, ...]]:
    out = []
    for off, ts, k, v, h in batch.record_tuples():
        if off >= position:
            out.append(
                (
                    "t",
                    3,
                    off,
                    ts,
                    batch.timestamp_type,
                    k,
                    v,
                    None,
                    -1 if k is None else len(k),
                    -1 if v is None else len(v),
                    tuple(h),
                )
            )
    return out


def as_tuples(recs: list[ConsumerRecord[Any, Any]]) -> list[tuple[Any, ...]]:
    return [
        (
            r.topic,
            r.partition,
            r.offset,
            r.timestamp,
            r.timestamp_type,
            r.key,
            r.value,
            r.checksum,
            r.serialized_key_size,
            r.serialized_value_size,
            tuple(r.headers),
        )
        for r in recs
    ]


@pytest.mark.parametrize("seed", range(30))
def test_same_records_as_the_reader(seed: int) -> None:
    rnd = random.Random(seed)
    data = make_batch(rnd, codec=rnd.choice([0, 0, 1, 2, 3, 4]), ts_type=rnd.choice([0, 0, 1]))
    (batch,) = list(iter_batches(data))
    position = batch.base_offset + rnd.choice([0, 0, 2, 10])
    got = batch_to_records(batch, "t", 3, position, ConsumerRecord)
    assert got is not None
    assert as_tuples(got) == expected(batch, position)
    assert as_tuples(got) == aiokafka_expected(data, position)


def aiokafka_expected(data: bytes, position: int) -> list[tuple[Any, ...]]:
    """An independent decoder: aiokafka's pure-Python v2 batch reader."""
    import aiokafka.record.default_records as d

    batch = d._DefaultRecordBatchPy(data)
    return [
        (
            "t",
            3,
            r.offset,
            r.timestamp,
            r.timestamp_type,
            r.key,
            r.value,
            None,
            -1 if r.key is None else len(r.key),
            -1 if r.value is None else len(r.value),
            tuple(r.headers),
        )
        for r in batch
        if r.offset >= position
    ]


@pytest.mark.parametrize("seed", range(60))
def test_same_verdict_on_mutated_batches(seed: int) -> None:
    rnd = random.Random(1000 + seed)
    data = bytearray(make_batch(rnd))
    for _ in range(rnd.randint(1, 4)):
        pos = rnd.randrange(61, len(data))
        data[pos] = rnd.randrange(256)
    (batch,) = list(iter_batches(bytes(data), check_crcs=False))
    try:
        want: list[tuple[Any, ...]] | type[KafkaError] = expected(batch, 0)
    except CorruptRecordException:
        want = CorruptRecordException
    try:
        got = batch_to_records(batch, "t", 3, 0, ConsumerRecord)
        assert got is not None
        result: list[tuple[Any, ...]] | type[KafkaError] = as_tuples(got)
    except CorruptRecordException:
        result = CorruptRecordException
    assert result == want


def test_legacy_batches_are_left_to_the_reader() -> None:
    # a v1 message: offset, size, crc, magic 1, attributes, timestamp, key -1, value "abc"
    body = struct.pack(">bbqi", 1, 0, 1234, -1) + struct.pack(">i3s", 3, b"abc")
    import zlib

    msg = struct.pack(">I", zlib.crc32(body)) + body
    data = struct.pack(">qi", 5, len(msg)) + msg
    (batch,) = list(iter_batches(data))
    assert batch_to_records(batch, "t", 0, 0, ConsumerRecord) is None


def test_records_equal_those_the_class_call_builds() -> None:
    """``new_records`` skips ConsumerRecord's ``__init__`` call: the records must be
    indistinguishable from ``ConsumerRecord(*fields)`` (type, equality, repr, fields, no
    instance dict until an attribute is attached, pickling, copying)."""
    import copy
    import dataclasses
    import pickle

    rnd = random.Random(7)
    data = make_batch(rnd, codec=0)
    (batch,) = list(iter_batches(data))
    got = batch_to_records(batch, "t", 3, 0, ConsumerRecord)
    assert got
    for rec in got:
        fields = [getattr(rec, f.name) for f in dataclasses.fields(ConsumerRecord)]
        built = ConsumerRecord(*fields)
        assert type(rec) is ConsumerRecord
        assert rec == built and built == rec
        assert repr(rec) == repr(built)
        assert dataclasses.astuple(rec) == dataclasses.astuple(built)
        assert dataclasses.asdict(rec) == dataclasses.asdict(built)
        assert not hasattr(rec, "__dict__") or not rec.__dict__
        assert pickle.loads(pickle.dumps(rec)) == built
        assert copy.copy(rec) == built and copy.deepcopy(rec) == built
    rec = got[0]
    rec.consumer = "attached"  # type: ignore[attr-defined]  # FastStream does this
    assert rec.__dict__ == {"consumer": "attached"}
    rec.value = b"changed"  # records stay mutable, as aiokafka's dataclass
    assert rec.value == b"changed"
