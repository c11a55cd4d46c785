"""``MemoryRecords`` (``aiokafka.record.MemoryRecords`` under ``install_as_aiokafka()``): a
records field's batches one at a time, as aiokafka's reader gives them (differential: the
same bytes through aiokafka's own class)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite.records import CODEC_GZIP, CODEC_NONE, RecordBatchBuilder
from aiokafka_lite.records.memory import MemoryRecords

aiokafka_record = pytest.importorskip("aiokafka.record")

_records = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=20)),
        st.one_of(st.none(), st.binary(max_size=50)),
        st.lists(
            st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=2
        ),
    ),
    min_size=1,
    max_size=5,
)


def _field(batches: list[list[tuple]], codecs: list[int]) -> bytes:
    """A records field of one v2 batch per entry, base offsets following each other."""
    out = bytearray()
    offset = 0
    for records, codec in zip(batches, codecs, strict=True):
        builder = RecordBatchBuilder(codec, batch_size=1 << 20)
        for i, (key, value, headers) in enumerate(records):
            assert builder.append(1_700_000_000_000 + i, key, value, headers) is not None
        data = builder.build()
        struct.pack_into(">q", data, 0, offset)  # base offset, as the broker assigns it
        offset += len(records)
        out += data
    return bytes(out)


def _read(cls: type, data: bytes) -> list[tuple]:
    records = cls(data)
    got = [("size", records.size_in_bytes())]
    while records.has_next():
        batch = records.next_batch()
        got += [
            (r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in batch
        ]
    got.append(("end", records.next_batch()))
    return got


@settings(max_examples=50, deadline=None)
@given(
    batches=st.lists(_records, min_size=1, max_size=3), gzip=st.booleans(), cut=st.integers(0, 30)
)
def test_memory_records_read_as_aiokafka_reads_them(batches, gzip, cut) -> None:
    data = _field(batches, [CODEC_GZIP if gzip else CODEC_NONE] * len(batches))
    data = data[: len(data) - cut] if cut else data  # a partial trailing batch is left out
    assert _read(MemoryRecords, data) == _read(aiokafka_record.MemoryRecords, data)


def test_memory_records_batches_and_end() -> None:
    data = _field([[(b"k", b"v", [])], [(None, b"w", [("h", b"1")]), (None, None, [])]], [0, 0])
    records = MemoryRecords(data)
    assert records.size_in_bytes() == len(data)
    first = records.next_batch()
    assert [(r.offset, r.key, r.value) for r in first] == [(0, b"k", b"v")]
    assert records.has_next()
    second = records.next_batch()
    assert [(r.offset, r.value, r.headers) for r in second] == [
        (1, b"w", [("h", b"1")]),
        (2, None, []),
    ]
    assert not records.has_next() and records.next_batch() is None
