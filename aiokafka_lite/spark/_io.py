"""Executor-side I/O: read one offset range into Arrow batches, write Arrow batches to Kafka.

Both are coroutines / async generators meant to run on a private event loop
(:mod:`aiokafka_lite.sync`); every client is created inside them and closed before they end,
so nothing loop-bound survives a Spark task.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]

from aiokafka_lite import errors as Errors
from aiokafka_lite.consumer import AIOKafkaConsumer
from aiokafka_lite.consumer.arrow import read_schema
from aiokafka_lite.producer import AIOKafkaProducer
from aiokafka_lite.spark._offsets import OffsetRange, client_kwargs, report_data_loss
from aiokafka_lite.spark._options import KafkaOptions
from aiokafka_lite.structs import TopicPartition

__all__ = [
    "HEADERS_TYPE",
    "READ_SCHEMA_DDL",
    "arrow_read_schema",
    "read_range",
    "write_batches",
]

_HEADER_STRUCT = pa.struct([("key", pa.string()), ("value", pa.binary())])
HEADERS_TYPE = pa.list_(_HEADER_STRUCT)

#: Spark's built-in Kafka source schema (``headers`` only with includeHeaders=true).
READ_SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
_HEADERS_DDL = ", headers array<struct<key string, value binary>>"

#: Rows per Arrow batch handed to Spark.
ROWS_PER_BATCH = 8192
#: Records asked of the consumer per getmany().
_POLL_RECORDS = 8192
#: Produce handles kept before the oldest are awaited (bounds memory on big writes).
_MAX_PENDING = 65536


def read_schema_ddl(include_headers: bool) -> str:
    """The DDL schema string of a read, with or without the headers column."""
    return READ_SCHEMA_DDL + (_HEADERS_DDL if include_headers else "")


def arrow_read_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema of the batches :func:`read_range` yields: the consumer's
    ``getmany_arrow()`` schema (one definition of Spark's Kafka columns)."""
    return read_schema(include_headers)


async def read_range(options: KafkaOptions, rng: OffsetRange) -> AsyncIterator[pa.RecordBatch]:
    """Yield the records of ``rng`` (offsets ``[start, end)``) as Arrow record batches.

    Offsets missing inside the range (compaction, transaction markers) are skipped. Raises
    ``IllegalStateError`` when records of the range were deleted before they were read, or the
    partition now ends before them, and ``failOnDataLoss`` is on (else logs a warning and reads
    on from the log start, or stops), and
    ``KafkaTimeoutError`` when no progress is made for ``kafkaConsumer.pollTimeoutMs``.
    """
    if rng.size <= 0:
        return
    tp = TopicPartition(rng.topic, rng.partition)
    consumer = AIOKafkaConsumer(
        **client_kwargs(
            AIOKafkaConsumer,
            options,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="none",
        )
    )
    await consumer.start()
    try:
        consumer.assign([tp])
        consumer.seek(tp, rng.start)
        parts: list[pa.RecordBatch] = []  # taken, not yet handed to Spark
        rows = 0
        position = rng.start
        stall_deadline = time.monotonic() + options.poll_timeout_ms / 1000
        while position < rng.end:
            try:
                table = await consumer.getmany_arrow(
                    tp,
                    timeout_ms=min(1000, options.poll_timeout_ms),
                    max_records=_POLL_RECORDS,
                    include_headers=options.include_headers,
                )
            except Errors.OffsetOutOfRangeError:
                position = await _after_data_loss(consumer, tp, position, rng.end, options)
                continue
            if table.num_rows:
                offsets = table.column("offset")
                last = offsets[-1].as_py()
                if last >= rng.end:  # offsets ascend: keep those below the range's end
                    table = table.slice(0, _below(offsets, rng.end))
                    position = rng.end
                else:
                    position = last + 1
                parts.extend(table.to_batches())
                rows += table.num_rows
                stall_deadline = time.monotonic() + options.poll_timeout_ms / 1000
                if rows >= ROWS_PER_BATCH:
                    yield _one_batch(parts)
                    parts, rows = [], 0
                continue
            moved = await consumer.position(tp)  # a batch of only skipped offsets moves it
            if moved > position:
                position = moved
                stall_deadline = time.monotonic() + options.poll_timeout_ms / 1000
            elif time.monotonic() > stall_deadline:
                raise Errors.KafkaTimeoutError(
                    f"{tp}: no records at offset {position} (range ends at {rng.end}) within "
                    f"kafkaConsumer.pollTimeoutMs={options.poll_timeout_ms}"
                )
        if rows:
            yield _one_batch(parts)
    finally:
        await consumer.stop()


def _below(offsets: pa.ChunkedArray, end: int) -> int:
    """How many of the ascending ``offsets`` are below ``end`` (a binary search: no
    pyarrow.compute, whose first import costs a Spark worker ~1 s of CPU)."""
    lo, hi = 0, len(offsets)
    while lo < hi:
        mid = (lo + hi) // 2
        if offsets[mid].as_py() < end:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _one_batch(parts: list[pa.RecordBatch]) -> pa.RecordBatch:
    """The taken record batches as one (a copy only when there are several)."""
    if len(parts) == 1:
        return parts[0]
    return pa.Table.from_batches(parts).combine_chunks().to_batches()[0]


async def _after_data_loss(
    consumer: AIOKafkaConsumer, tp: TopicPartition, position: int, end: int, options: KafkaOptions
) -> int:
    earliest = (await consumer.beginning_offsets([tp]))[tp]
    name = f"{tp.topic}-{tp.partition}"
    if earliest <= position:  # out of range above the log end: the partition was truncated
        report_data_loss(
            options,
            f"{name}: offsets [{position}, {end}) are past the end of the partition (log start "
            f"{earliest}): the topic was deleted and re-created, or records were lost on the broker",
        )
        return end
    skip_to = min(earliest, end)
    report_data_loss(
        options,
        f"{name}: offsets [{position}, {skip_to}) were deleted before they were read "
        f"(log start is now {earliest})",
    )
    consumer.seek(tp, skip_to)
    return skip_to


def _as_bytes(col: pa.Array | pa.ChunkedArray, name: str) -> list[bytes | None]:
    typ = col.type
    values: list[Any] = col.to_pylist()
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ) or pa.types.is_null(typ):
        return values
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return [None if v is None else v.encode() for v in values]
    raise Errors.IllegalArgumentError(f"column {name!r} must be string or binary, not {typ}")


def _headers(col: pa.Array) -> list[list[tuple[str, bytes | None]] | None]:
    out: list[list[tuple[str, bytes | None]] | None] = []
    for row in col.to_pylist():
        if row is None:
            out.append(None)
            continue
        hs = []
        for h in row:
            v = h["value"]
            hs.append((h["key"], v.encode() if isinstance(v, str) else v))
        out.append(hs)
    return out


async def _settle(handles: Iterable[Any], timeout_s: float) -> None:
    """Wait for produce handles; raise the first delivery failure."""
    deadline = time.monotonic() + timeout_s
    for h in handles:
        if not h.done():
            await asyncio.wait([h], timeout=max(0.0, deadline - time.monotonic()))
            if not h.done():
                raise Errors.KafkaTimeoutError(f"records not acknowledged within {timeout_s:g} s")
        if (exc := h.exception()) is not None:
            raise exc


def write_timeout_s(options: KafkaOptions) -> float:
    """How long a write may wait for acknowledgements: the producer's delivery timeout + slack."""
    return float(options.client.get("delivery_timeout_ms", 120_000)) / 1000 + 30


async def write_batches(options: KafkaOptions, batches: Iterable[pa.RecordBatch]) -> int:
    """Produce every row of ``batches``; returns how many were acknowledged.

    Columns: ``value`` (required), ``key``, ``topic`` (unless the ``topic`` option is set, which
    wins, as in Spark), ``partition``, ``headers``; string or binary. At-least-once: a failed
    task may have written some rows before it failed.
    """
    producer = AIOKafkaProducer(
        **client_kwargs(AIOKafkaProducer, options, **_producer_defaults(options))
    )
    timeout = write_timeout_s(options)
    await producer.start()
    count = 0
    pending: deque[Any] = deque()
    try:
        for batch in batches:
            names = batch.schema.names
            n = batch.num_rows
            if "value" not in names:
                raise Errors.IllegalArgumentError("a Kafka write needs a 'value' column")
            if options.topic is None and "topic" not in names:
                raise Errors.IllegalArgumentError("set the 'topic' option or give a 'topic' column")
            if "headers" in names:  # Spark's header values may be strings: row by row
                await _write_rows(producer, options, batch, pending, timeout)
            else:
                for topic, table in _by_topic(options, batch):
                    pending.extend(await producer.send_arrow(topic, table))
                    if len(pending) > _MAX_PENDING:
                        await _settle((pending.popleft() for _ in range(len(pending))), timeout)
            count += n
            await asyncio.sleep(0)  # let the sender task drain between Arrow batches
        await asyncio.wait_for(producer.flush(), timeout)
        await _settle(pending, timeout)
    finally:
        pending.clear()
        await asyncio.wait_for(producer.stop(), timeout)
    return count


def _binary_column(batch: pa.RecordBatch, name: str) -> pa.Array:
    col = batch.column(name)
    typ = col.type
    if pa.types.is_binary(typ) or pa.types.is_null(typ):
        return col.cast(pa.binary())
    if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_large_binary(typ):
        return col.cast(pa.binary())  # the UTF-8 bytes, as Spark's sink writes a string
    raise Errors.IllegalArgumentError(f"column {name!r} must be string or binary, not {typ}")


def _by_topic(options: KafkaOptions, batch: pa.RecordBatch) -> Iterable[tuple[str, pa.Table]]:
    """The batch's rows as send_arrow() tables (value, key, partition), per target topic: the
    ``topic`` option for every row when set (it wins, as in Spark), else the topic column."""
    names = batch.schema.names
    columns = {"value": _binary_column(batch, "value")}
    if "key" in names:
        columns["key"] = _binary_column(batch, "key")
    if "partition" in names:
        columns["partition"] = batch.column("partition").cast(pa.int32())
    table = pa.table(columns)
    if options.topic is not None:
        yield options.topic, table
        return
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    topics = batch.column("topic")
    if topics.null_count:
        raise Errors.IllegalArgumentError("null topic in the 'topic' column")
    distinct = pc.unique(topics).to_pylist()
    if len(distinct) == 1:
        yield str(distinct[0]), table
        return
    for topic in distinct:  # each topic's rows in their order
        yield str(topic), table.filter(pc.equal(topics, topic))


async def _write_rows(
    producer: AIOKafkaProducer,
    options: KafkaOptions,
    batch: pa.RecordBatch,
    pending: deque[Any],
    timeout: float,
) -> None:
    """A batch with headers, row by row through send()."""
    names = batch.schema.names
    n = batch.num_rows
    values = _as_bytes(batch.column("value"), "value")
    keys = _as_bytes(batch.column("key"), "key") if "key" in names else [None] * n
    if options.topic is not None:
        topics: list[Any] = [options.topic] * n
    else:
        topics = batch.column("topic").to_pylist()
    parts = batch.column("partition").to_pylist() if "partition" in names else [None] * n
    headers = _headers(batch.column("headers"))
    send = producer.send
    for i in range(n):
        topic = topics[i]
        if topic is None:
            raise Errors.IllegalArgumentError("null topic in the 'topic' column")
        pending.append(
            await send(topic, values[i], key=keys[i], partition=parts[i], headers=headers[i])
        )
        if len(pending) > _MAX_PENDING:
            await _settle((pending.popleft() for _ in range(_MAX_PENDING // 2)), timeout)


def _producer_defaults(options: KafkaOptions) -> dict[str, Any]:
    """Throughput-friendly defaults a ``kafka.*`` option can override."""
    defaults: dict[str, Any] = {"linger_ms": 5, "max_batch_size": 256 * 1024}
    return {k: v for k, v in defaults.items() if k not in options.client}
