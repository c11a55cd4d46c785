"""Micro benchmark: record batch build and decode, aiokafka_lite vs aiokafka (Cython).

Run: /work/venv/bin/python benchmarks/bench_records.py [--quick]

Workload: 10-byte keys, 100-byte values, no headers unless stated, 16 KiB
batches (the producer default): builders are filled until ``append`` reports
"full", then built; the reader decodes a buffer of such batches.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from aiokafka_lite.records import CODEC_LZ4, CODEC_NONE, RecordBatchBuilder, iter_batches

KEY = b"k" * 10
VALUE = b"v" * 100
TS = 1_700_000_000_000
HEADERS = [("trace-id", b"0123456789abcdef")]


def best_rate(fn: Callable[[], int], repeat: int) -> float:
    """Items per CPU second (process time: robust on a shared machine), best of ``repeat`` runs."""
    best = 0.0
    for _ in range(repeat):
        start = time.process_time()
        n = fn()
        best = max(best, n / max(time.process_time() - start, 1e-9))
    return best


def ours_build(
    n: int, codec: int = CODEC_NONE, headers: list[tuple[str, bytes]] | None = None
) -> Callable[[], int]:
    hdrs = headers or ()

    def run() -> int:
        builder = RecordBatchBuilder(codec, batch_size=16384)
        append = builder.append
        for i in range(n):
            if append(TS + i, KEY, VALUE, hdrs) is None:
                builder.build()
                builder = RecordBatchBuilder(codec, batch_size=16384)
                append = builder.append
                append(TS + i, KEY, VALUE, hdrs)
        builder.build()
        return n

    return run


def aiokafka_build(
    n: int,
    codec: int = CODEC_NONE,
    headers: list[tuple[str, bytes]] | None = None,
    py: bool = False,
) -> Callable[[], int]:
    import aiokafka.record.default_records as d

    DefaultRecordBatchBuilder = (
        d._DefaultRecordBatchBuilderPy if py else d.DefaultRecordBatchBuilder
    )

    hdrs = headers or []

    def run() -> int:
        builder = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 16384)
        off = 0
        for i in range(n):
            if builder.append(off, TS + i, KEY, VALUE, hdrs) is None:
                builder.build()
                builder = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 16384)
                off = 0
                builder.append(off, TS + i, KEY, VALUE, hdrs)
            off += 1
        builder.build()
        return n

    return run


def make_buffer(n: int, codec: int, headers: list[tuple[str, bytes]] | None = None) -> bytes:
    out = bytearray()
    builder = RecordBatchBuilder(codec, batch_size=16384)
    for i in range(n):
        if builder.append(TS + i, KEY, VALUE, headers or ()) is None:
            out += builder.build()
            builder = RecordBatchBuilder(codec, batch_size=16384)
            builder.append(TS + i, KEY, VALUE, headers or ())
    out += builder.build()
    return bytes(out)


def ours_read_tuples(buf: bytes) -> Callable[[], int]:
    def run() -> int:
        n = 0
        for batch in iter_batches(buf):
            n += len(batch.record_tuples())
        return n

    return run


def ours_read_records(buf: bytes) -> Callable[[], int]:
    def run() -> int:
        n = 0
        for batch in iter_batches(buf):
            for _ in batch.records():
                n += 1
        return n

    return run


def ours_read_consumer(buf: bytes) -> Callable[[], int]:
    """The consumer's path: each v2 batch straight into ConsumerRecords (``new_records``)."""
    from aiokafka_lite.structs import ConsumerRecord

    def run() -> int:
        n = 0
        for batch in iter_batches(buf):
            n += len(batch.new_records(ConsumerRecord, "topic", 0))  # type: ignore[union-attr]
        return n

    return run


def aiokafka_read(buf: bytes, py: bool = False) -> Callable[[], int]:
    """aiokafka's reader: Cython MemoryRecords, or its pure-Python batch class."""
    import struct

    import aiokafka.record.default_records as d
    from aiokafka.record.memory_records import MemoryRecords

    def run_c() -> int:
        n = 0
        records = MemoryRecords(buf)
        while records.has_next():
            batch = records.next_batch()
            batch.validate_crc()
            for _ in batch:
                n += 1
        return n

    def run_py() -> int:
        n = 0
        pos = 0
        view = memoryview(buf)
        while pos < len(buf):
            size = 12 + struct.unpack_from(">i", buf, pos + 8)[0]
            batch = d._DefaultRecordBatchPy(view[pos : pos + size])
            batch.validate_crc()
            for _ in batch:
                n += 1
            pos += size
        return n

    return run_py if py else run_c


def main() -> None:
    quick = "--quick" in sys.argv
    n = 50_000 if quick else 200_000
    repeat = 3 if quick else 5
    rows: list[tuple[str, float, float, float]] = []
    for label, codec, headers in [
        ("build, no compression", CODEC_NONE, None),
        ("build, 1 header", CODEC_NONE, HEADERS),
        ("build, lz4", CODEC_LZ4, None),
    ]:
        ours = best_rate(ours_build(n, codec, headers), repeat)
        theirs = best_rate(aiokafka_build(n, codec, headers), repeat)
        theirs_py = best_rate(aiokafka_build(n, codec, headers, py=True), repeat)
        rows.append((label, ours, theirs, theirs_py))
    for label, codec, headers in [
        ("read, no compression", CODEC_NONE, None),
        ("read, 1 header", CODEC_NONE, HEADERS),
        ("read, lz4", CODEC_LZ4, None),
    ]:
        buf = make_buffer(n, codec, headers)
        theirs = best_rate(aiokafka_read(buf), repeat)
        theirs_py = best_rate(aiokafka_read(buf, py=True), repeat)
        for kind, fn in (
            ("tuples", ours_read_tuples),
            ("Record objects", ours_read_records),
            ("ConsumerRecord", ours_read_consumer),
        ):
            rows.append((f"{label} ({kind})", best_rate(fn(buf), repeat), theirs, theirs_py))
    print(
        f"{'workload':38} {'aiokafka_lite/s':>15} {'aiokafka(C)/s':>14} {'ratio':>6}"
        f" {'aiokafka(py)/s':>15} {'ratio':>6}"
    )
    for label, ours, theirs, theirs_py in rows:
        print(
            f"{label:38} {ours:15,.0f} {theirs:14,.0f} {ours / theirs:6.2f}"
            f" {theirs_py:15,.0f} {ours / theirs_py:6.2f}"
        )


if __name__ == "__main__":
    main()
