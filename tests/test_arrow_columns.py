"""records.columns: fetched v2 batches decoded straight into Arrow column buffers (the body of
getmany_arrow()). The compiled codec and the pure-Python path fill byte-identical buffers, so
identical tables, and raise the same errors on corrupt and truncated input, leaving the buffers
as they were; the table equals the one built from getmany()'s records; a partition buffer hands
out the same records and positions through take_columns() as through take(). No broker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiokafka_lite.consumer.arrow import columns_table, read_schema, records_table
from aiokafka_lite.consumer.buffer import PartitionBuffer
from aiokafka_lite.errors import KafkaError
from aiokafka_lite.records import (
    CODEC_GZIP,
    CODEC_NONE,
    CODEC_ZSTD,
    RecordBatchBuilder,
    columns,
    iter_batches,
)
from aiokafka_lite.structs import TopicPartition

pa = pytest.importorskip("pyarrow")

_blob = st.one_of(st.none(), st.binary(max_size=60))
_headers = st.lists(st.tuples(st.text(max_size=6), _blob), max_size=3)
_record = st.tuples(st.integers(0, 2**45), _blob, _blob, _headers)
TP = TopicPartition("t", 3)


def _batch(
    records: list[Any],
    codec: int = CODEC_NONE,
    log_append: bool = False,
    base: int = 0,
    control: bool = False,
) -> bytes:
    builder = RecordBatchBuilder(
        codec, batch_size=1 << 30, timestamp_type=int(log_append), is_control=control
    )
    for ts, key, value, headers in records:
        builder.append(ts, key if not control else b"\0\0\0\1", value, headers)
    buf = builder.build()
    buf[0:8] = base.to_bytes(8, "big")
    return bytes(buf)


def _add(
    cols: columns.ColumnBuffers, data: bytes, min_offset: int, limit: int, view: bool = True
) -> str:
    """Every batch of ``data`` added (CRCs unchecked), its records section as the consumer
    passes it (``view``: a memoryview of the fetched bytes when uncompressed) or as bytes; the
    return values or the KafkaError, and the buffers' bytes after, as one comparable string."""
    log = []
    try:
        for b in iter_batches(data, check_crcs=False):
            log.append(
                cols.add_batch(
                    b.records_section() if view else b.records_data(),
                    b.record_count,
                    b.base_offset,
                    b.base_timestamp,
                    b.max_timestamp if b.timestamp_type else None,
                    b.timestamp_type,
                    min_offset,
                    limit,
                )
            )
    except KafkaError as exc:
        log.append(f"{type(exc).__name__}: {exc}")
    return repr(log) + repr([bytes(x) for x in cols.bufs])


def _both(fn: Callable[[], str]) -> tuple[str, str]:
    native = fn()
    saved = columns.native
    columns.native = None
    try:
        pure = fn()
    finally:
        columns.native = saved
    return native, pure


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=st.lists(_record, max_size=9),
    records=st.lists(_record, max_size=25),
    codec=st.sampled_from([CODEC_NONE, CODEC_GZIP, CODEC_ZSTD]),
    log_append=st.booleans(),
    headers=st.booleans(),
    min_offset=st.integers(0, 30),
    limit=st.integers(0, 30),
    cut=st.one_of(st.none(), st.integers(0, 3000)),
    flips=st.lists(st.tuples(st.integers(12, 3000), st.integers(0, 255)), max_size=3),
)
def test_both_paths_fill_the_same_buffers_and_raise_the_same(
    before: list[Any],
    records: list[Any],
    codec: int,
    log_append: bool,
    headers: bool,
    min_offset: int,
    limit: int,
    cut: int | None,
    flips: list[tuple[int, int]],
) -> None:
    # appended after other rows (bitmaps not byte-aligned), the limit and position anywhere
    first = _batch(before)
    data = bytearray(_batch(records, codec, log_append, base=1000))

    def run(buf: bytes) -> str:
        cols = columns.ColumnBuffers(headers)
        _add(cols, first, 0, 1 << 40, view=False)
        return _add(cols, buf, 1000 + min_offset, limit)

    native, pure = _both(lambda: run(bytes(data)))
    assert native == pure and "Error" not in native
    for pos, byte in flips:
        if pos < len(data):
            data[pos] = byte
    if cut is not None:
        del data[cut:]
    native, pure = _both(lambda: run(bytes(data)))
    assert native == pure


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(_record, min_size=1, max_size=25), log_append=st.booleans())
def test_the_table_is_getmany_records_table(records: list[Any], log_append: bool) -> None:
    data = _batch(records, log_append=log_append, base=77)
    schema = read_schema(True)
    tables = []
    for pure in (False, True):
        saved = columns.native
        columns.native = None if pure else saved
        try:
            cols = columns.ColumnBuffers(True)
            assert PartitionBuffer(TP, data, 77).take_columns(1000, cols) == len(records)
            tables.append(columns_table({TP: cols}, schema))
        finally:
            columns.native = saved
    old = records_table({TP: PartitionBuffer(TP, data, 77).take(1000)}, True)
    assert tables[0].equals(old) and tables[1].equals(old)
    for t in tables:
        t.validate(full=True)


def test_take_columns_hands_out_what_take_hands_out() -> None:
    # several batches, a control batch and a position inside the first batch; the same records
    # and positions for every limit, before and after a take() that leaves records decoded
    parts = [
        _batch([(i, b"k%d" % i, b"v", [("h", None)] if i % 2 else []) for i in range(7)], base=10),
        _batch([(0, None, None, [])], base=17, control=True),
        _batch([(i, None, b"x%d" % i, []) for i in range(5)], CODEC_GZIP, base=18),
    ]
    data = b"".join(parts)
    for n in (1, 3, 5, 100):
        plain = PartitionBuffer(TP, data, 12)
        arrow = PartitionBuffer(TP, data, 12)
        arrow.take(2)  # decoded objects left over, handed out first by take_columns
        plain.take(2)
        while not plain.exhausted:
            recs = plain.take(n)
            cols = columns.ColumnBuffers(True)
            assert arrow.take_columns(n, cols) == len(recs)
            assert arrow.position == plain.position and arrow.exhausted == plain.exhausted
            if recs:
                want = records_table({TP: recs}, True)
                assert columns_table({TP: cols}, read_schema(True)).equals(want)


def test_a_corrupt_batch_raises_after_the_records_before_it() -> None:
    good = _batch([(1, b"a", b"b", [])] * 3, base=0)
    bad = bytearray(_batch([(1, b"a", b"b", [])] * 3, base=3))
    bad[-3] = 0x7F  # a value length past the record
    buf = PartitionBuffer(TP, good + bytes(bad), 0, check_crcs=False)
    cols = columns.ColumnBuffers()
    assert buf.take_columns(10, cols) == 3 and buf.position == 3
    with pytest.raises(KafkaError) as first:
        buf.take_columns(10, columns.ColumnBuffers())
    assert buf.position == 3
    with columns_pure():
        buf = PartitionBuffer(TP, good + bytes(bad), 3, check_crcs=False)
        with pytest.raises(KafkaError) as second:
            buf.take_columns(10, columns.ColumnBuffers())
    assert str(first.value) == str(second.value)


class columns_pure:  # noqa: N801 - a context manager read as a phrase
    def __enter__(self) -> None:
        self.saved = columns.native
        columns.native = None

    def __exit__(self, *exc: object) -> None:
        columns.native = self.saved


_row = st.tuples(
    st.one_of(st.integers(0, 20_000), st.integers(-(2**63), 2**63 - 1)),  # timestamp offsets
    _blob,
    _blob,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(_row, min_size=1, max_size=40),
    limit=st.integers(61, 2000),
    base=st.integers(0, 2**41),
    sliced=st.integers(0, 3),
    reorder=st.booleans(),
)
def test_append_columns_writes_what_append_writes(
    rows: list[Any], limit: int, base: int, sliced: int, reorder: bool
) -> None:
    # the producer's columnar path: runs from the Arrow buffers, the rows it hands back (the
    # first of a batch, timestamps the checks must see) through append(); the same batch
    # bytes and the same rows taken as appending every row with append()
    if not columns.native:
        pytest.skip("aiokafka_lite_native not installed or disabled")
    rows = [(base + ts if 0 <= ts <= 20_000 else ts, k, v) for ts, k, v in rows]
    table = pa.table(
        {
            "key": pa.array([None] * sliced + [k for _, k, _ in rows], pa.binary()),
            "value": pa.array([None] * sliced + [v for _, _, v in rows], pa.binary()),
            "ts": pa.array([0] * sliced + [t for t, _, _ in rows], pa.int64()),
        }
    ).slice(sliced)
    order = list(range(len(rows)))
    if reorder:
        order = order[1::2] + order[0::2]
    keys, values, ts = (table.column(c).combine_chunks() for c in ("key", "value", "ts"))
    kb = (*keys.buffers(), keys.offset)
    vb = (*values.buffers(), values.offset)
    tsbuf = ts.buffers()[1][ts.offset * 8 :]
    idx = pa.array(order, pa.int64()).buffers()[1]

    def by_append() -> tuple[int, str]:
        b = RecordBatchBuilder(CODEC_NONE, batch_size=limit)
        taken = 0
        for r in order:
            t, k, v = rows[r]
            try:
                if b.append(t, k, v) is None:
                    break
            except KafkaError as exc:
                return taken, f"{type(exc).__name__}: {exc}"
            taken += 1
        return taken, b.build().hex()

    def by_columns() -> tuple[int, str]:
        b = RecordBatchBuilder(CODEC_NONE, batch_size=limit)
        i = 0
        while i < len(order):
            j, state = b.append_columns(idx, i, len(order), tsbuf, 0, kb, vb)
            i = j
            if state == 1 or i == len(order):
                break
            if state == 2:
                t, k, v = rows[order[i]]
                try:
                    if b.append(t, k, v) is None:
                        break
                except KafkaError as exc:
                    return i, f"{type(exc).__name__}: {exc}"
                i += 1
        return i, b.build().hex()

    assert by_columns() == by_append()


@settings(max_examples=40, deadline=None)
@given(
    keys=st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=60),
    parts=st.integers(1, 50),
    sliced=st.integers(0, 5),
)
def test_key_hashes_are_the_partitioners(keys: list[Any], parts: int, sliced: int) -> None:
    # send_arrow()'s keyed partitions: the C murmur2 over a (sliced) key column is the
    # partitioner's positive murmur2 modulo the partition count, -1 for a null key
    if not columns.native:
        pytest.skip("aiokafka_lite_native not installed or disabled")
    from aiokafka_lite.producer.partitioner import positive_murmur2

    arr = pa.array([b"x"] * sliced + keys, pa.binary()).slice(sliced)
    out = columns.native.key_hashes((*arr.buffers(), arr.offset), len(keys), parts)
    got = list(pa.Array.from_buffers(pa.int32(), len(keys), [None, pa.py_buffer(out)]).to_pylist())
    assert got == [-1 if k is None else positive_murmur2(k) % parts for k in keys]


def test_many_batches_into_one_buffer_set_and_an_exported_buffer() -> None:
    # one getmany_arrow() call's buffers over hundreds of batches: the compiled path writes
    # past the bytearrays' logical sizes and reallocates only when an allocation doubles; the
    # bytes must still be the pure path's. A buffer held by a memoryview (never the case in
    # getmany_arrow(), whose buffers are new for each call): the compiled path leaves the batch
    # to the pure one, so both raise BufferError with the same buffers after.
    data = b"".join(
        _batch(
            [(7 * i + j, None if (i + j) % 5 == 0 else b"k%d" % j, b"v" * ((i * j) % 700), [])
             for j in range(i % 9 + 1)],
            base=10 * i,
        )
        for i in range(300)
    )  # fmt: skip
    native, pure = _both(lambda: _add(columns.ColumnBuffers(True), data, 0, 1 << 40))
    assert native == pure and "Error" not in native

    def exported() -> str:
        cols = columns.ColumnBuffers(False)
        _add(cols, data[: len(data) // 3], 0, 1 << 40)
        with memoryview(cols.bufs[5]):
            try:
                _add(cols, data, 0, 1 << 40)
            except BufferError as exc:
                return f"BufferError: {exc} " + repr([bytes(x) for x in cols.bufs])
        return "no error"

    native, pure = _both(exported)
    assert native == pure and native.startswith("BufferError")
