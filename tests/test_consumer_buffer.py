"""Pure tests of the consumer's per-partition buffer (no broker): offset filtering, control
batches, aborted transactions, last stable offset, bulk hand-out."""

from __future__ import annotations

import struct

import pytest

from aiokafka_lite.consumer.buffer import PartitionBuffer
from aiokafka_lite.errors import CorruptRecordException
from aiokafka_lite.records.batch_builder import RecordBatchBuilder
from aiokafka_lite.records.columns import ColumnBuffers
from aiokafka_lite.structs import TopicPartition

TP = TopicPartition("t", 0)


def batch(
    base: int, n: int, *, pid: int = -1, txn: bool = False, control: int | None = None
) -> bytes:
    b = RecordBatchBuilder(
        is_transactional=txn or control is not None,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        is_control=control is not None,
    )
    if control is not None:
        b.append(1000, struct.pack(">hh", 0, control), b"\x00\x00\x00\x00\x00\x00")
    else:
        for i in range(n):
            b.append(
                1000 + i, None if i % 2 else b"k%d" % (base + i), b"v%d" % (base + i), [("h", b"x")]
            )
    buf = b.build()
    struct.pack_into(">q", buf, 0, base)
    return bytes(buf)


def offsets(recs: list) -> list[int]:
    return [r.offset for r in recs]


def test_take_in_chunks_and_position() -> None:
    data = batch(0, 5) + batch(5, 5)
    buf = PartitionBuffer(TP, data, 0)
    first = buf.take(3)
    assert offsets(first) == [0, 1, 2] and buf.position == 3 and not buf.exhausted
    r = first[0]
    assert (r.topic, r.partition, r.key, r.value, r.headers) == (
        "t",
        0,
        b"k0",
        b"v0",
        (("h", b"x"),),
    )
    assert (
        r.serialized_key_size == 2 and first[1].key is None and first[1].serialized_key_size == -1
    )
    assert r.timestamp == 1000 and r.timestamp_type == 0
    assert offsets(buf.take(4)) == [3, 4, 5, 6]
    assert offsets(buf.take(100)) == [7, 8, 9]
    assert buf.exhausted and buf.position == 10


def test_records_before_fetch_offset_are_dropped() -> None:
    buf = PartitionBuffer(TP, batch(0, 5) + batch(5, 5), 7)
    assert offsets(buf.take(100)) == [7, 8, 9]


def test_partial_trailing_batch_is_ignored() -> None:
    full = batch(0, 3)
    buf = PartitionBuffer(TP, full + batch(3, 3)[:-5], 0)
    assert offsets(buf.take(100)) == [0, 1, 2] and buf.position == 3


def test_control_batches_skipped_and_position_moves_past_them() -> None:
    data = batch(0, 2, pid=7, txn=True) + batch(2, 1, pid=7, control=1)
    buf = PartitionBuffer(TP, data, 0)
    assert offsets(buf.take(100)) == [0, 1]
    assert buf.exhausted and buf.position == 3
    only_control = PartitionBuffer(TP, batch(2, 1, pid=7, control=1), 2)
    assert only_control.take(10) == [] and only_control.position == 3


def test_read_committed_filters_aborted_and_stops_at_lso() -> None:
    data = (
        batch(0, 2, pid=1, txn=True)  # aborted
        + batch(2, 2, pid=2, txn=True)  # committed
        + batch(4, 1, pid=1, control=0)  # abort marker for pid 1
        + batch(5, 1, pid=2, control=1)  # commit marker for pid 2
        + batch(6, 2, pid=1, txn=True)  # pid 1 again, new transaction, committed
        + batch(8, 2)  # past the LSO
    )
    buf = PartitionBuffer(TP, data, 0, aborted=[(1, 0)], last_stable_offset=8)
    assert offsets(buf.take(100)) == [2, 3, 6, 7]
    # read_uncommitted sees everything but the markers
    plain = PartitionBuffer(TP, data, 0)
    assert offsets(plain.take(100)) == [0, 1, 2, 3, 6, 7, 8, 9]
    # getmany_arrow()'s take_columns: the same records, the same final position
    for aborted, lso, want in (([(1, 0)], 8, [2, 3, 6, 7]), (None, None, [0, 1, 2, 3, 6, 7, 8, 9])):
        cols = ColumnBuffers(True)
        buf = PartitionBuffer(TP, data, 0, aborted=aborted, last_stable_offset=lso)
        assert buf.take_columns(100, cols) == len(want)
        assert list(struct.unpack(f"<{len(want)}q", cols.bufs[6])) == want
        ref = PartitionBuffer(TP, data, 0, aborted=aborted, last_stable_offset=lso)
        ref.take(100)
        assert buf.position == ref.position


def test_deserializers_applied() -> None:
    buf = PartitionBuffer(
        TP,
        batch(0, 2),
        0,
        key_deserializer=lambda k: k and k.decode(),
        value_deserializer=lambda v: v.decode(),
    )
    recs = buf.take(10)
    assert [(r.key, r.value) for r in recs] == [("k0", "v0"), (None, "v1")]
    assert recs[0].serialized_value_size == 2


def test_crc_checked() -> None:
    data = bytearray(batch(0, 3))
    data[data.rfind(b"v2")] ^= 0x01
    with pytest.raises(CorruptRecordException):
        PartitionBuffer(TP, bytes(data), 0).take(10)
    assert len(PartitionBuffer(TP, bytes(data), 0, check_crcs=False).take(10)) == 3


def test_read_committed_when_broker_already_dropped_the_aborted_data() -> None:
    # noida-db removes aborted batches itself but still lists the transaction: the abort
    # marker must clear it before the producer's next (committed) transaction
    data = (
        batch(0, 1, pid=9, txn=True)
        + batch(1, 1, pid=9, control=1)
        + batch(3, 1, pid=9, control=0)
        + batch(4, 1, pid=9, txn=True)
        + batch(5, 1, pid=9, control=1)
    )
    buf = PartitionBuffer(TP, data, 0, aborted=[(9, 2)], last_stable_offset=6)
    assert offsets(buf.take(100)) == [0, 4] and buf.position == 6
