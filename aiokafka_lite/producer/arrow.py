"""Arrow in: :func:`send_table`, the body of the producer's ``send_arrow()``.

With the compiled codec (``aiokafka_lite_native``), binary key/value columns, no headers, no
serializers, no ``on_send`` hooks and the default partitioner, whole runs of rows are encoded
from the columns' Arrow buffers into the open batch of their partition
(``RecordBatchBuilder.append_columns``): no Python object per row. Rows are partitioned as
``send()`` partitions them: an explicit ``partition``, else murmur2 of the key (hashed once
per distinct key), else the sticky partition (KIP-480); each partition's rows keep their
order. The first row of each batch goes through ``send()`` itself, which opens the batch
(sizes checked, ``buffer_memory`` awaited: the same back-pressure). Any other table (or a
table whose unkeyed rows without a partition sit beside keyed ones) goes row by row through
``send()``. Either way the caller gets one awaitable per batch the rows went into. Needs
pyarrow (extra ``arrow``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiokafka_lite import errors as Errors
from aiokafka_lite.records._native import native

from .batch import RecordHandle
from .partitioner import DefaultPartitioner

if TYPE_CHECKING:
    from .append import RecordAppender

#: the producer's send()
Send = Callable[..., Awaitable[RecordHandle]]

__all__ = ["send_table", "send_table_rows"]

_COLUMNS = frozenset({"key", "value", "partition", "timestamp", "headers"})


def _column(table: Any, name: str, n: int) -> list[Any]:
    if name not in table.column_names:
        return [None] * n
    column = table.column(name)
    if name == "timestamp":
        import pyarrow as pa  # type: ignore[import-untyped]

        if pa.types.is_timestamp(column.type):  # to epoch milliseconds
            column = column.cast(pa.timestamp("ms", tz=column.type.tz)).cast(pa.int64())
    rows: list[Any] = column.to_pylist()
    if name == "headers":
        rows = [None if hs is None else [(h["key"], h["value"]) for h in hs] for hs in rows]
    return rows


async def send_table(
    send: Send, topic: str, table: Any, appender: RecordAppender | None = None
) -> list[RecordHandle]:
    """Send every row of ``table`` (a ``pyarrow.Table`` or ``RecordBatch``) to ``topic``
    through ``send`` (the producer's ``send``); ``appender`` (the producer's) enables the
    columnar path.

    Columns: ``value`` and optionally ``key`` (binary or None), ``partition`` (int),
    ``timestamp`` (epoch ms integers or an Arrow timestamp) and ``headers``
    (list<struct<key string, value binary>>); others raise ``IllegalArgumentError``.
    Returns, for each batch the rows went into, in order of first use, the handle of the
    last row in it: awaiting it gives that row's :class:`RecordMetadata` once the whole batch
    is acknowledged, or raises the batch's error."""
    names = getattr(table, "column_names", None)
    if names is None:
        raise Errors.IllegalArgumentError("send_arrow() takes a pyarrow Table or RecordBatch")
    unknown = set(names) - _COLUMNS
    if unknown or "value" not in names:
        raise Errors.IllegalArgumentError(
            f"send_arrow() columns: value, optionally key, partition, timestamp, headers "
            f"(got {list(names)})"
        )
    if native is not None and appender is not None and _columnar(appender, table):
        return await _send_columns(send, appender, topic, table)
    return await send_table_rows(send, topic, table)


async def send_table_rows(send: Send, topic: str, table: Any) -> list[RecordHandle]:
    """:func:`send_table` row by row through ``send()`` (any table it accepts)."""
    n = table.num_rows
    keys = _column(table, "key", n)
    values = _column(table, "value", n)
    partitions = _column(table, "partition", n)
    timestamps = _column(table, "timestamp", n)
    headers = _column(table, "headers", n)
    last: dict[int, RecordHandle] = {}
    for i in range(n):
        handle = await send(topic, values[i], keys[i], partitions[i], timestamps[i], headers[i])
        last[id(handle[0])] = handle
    return list(last.values())


def _columnar(producer: RecordAppender, table: Any) -> bool:
    """True when the table's rows can be encoded from its buffers (see the module doc)."""
    import pyarrow as pa

    names = table.column_names
    if "headers" in names or table.num_rows == 0:
        return False
    for name in ("key", "value"):
        if name in names and table.schema.field(name).type not in (pa.binary(), pa.null()):
            return False
    if "partition" in names and not pa.types.is_integer(table.schema.field("partition").type):
        return False
    return (
        not producer._h_send
        and producer._key_serializer is None
        and producer._value_serializer is None
        and isinstance(producer._partitioner, DefaultPartitioner)
        and producer._batch_size <= producer._max_request_size
    )


def _binary(table: Any, name: str) -> tuple[Any, Any]:
    """(the column as one array, its buffers for append_columns) or (None, None)."""
    import pyarrow as pa

    if name not in table.column_names:
        return None, None
    arr = table.column(name).combine_chunks()
    if arr.type == pa.null() or arr.null_count == len(arr):
        return None, None
    valid, offsets, data = arr.buffers()
    return arr, (valid, offsets, data if data is not None else b"", arr.offset)


async def _send_columns(
    send: Send, producer: RecordAppender, topic: str, table: Any
) -> list[RecordHandle]:
    import pyarrow as pa

    n = table.num_rows
    keys, kbufs = _binary(table, "key")
    values, vbufs = _binary(table, "value")
    ts_const = 0
    tsbuf = None
    if "timestamp" in table.column_names:
        col = table.column("timestamp")
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("ms", tz=col.type.tz))
        col = col.cast(pa.int64())
        if col.null_count:
            col = col.fill_null(time.time_ns() // 1000000)
        tsarr = col.combine_chunks()
        tsbuf = tsarr.buffers()[1][tsarr.offset * 8 :]
    else:
        ts_const = time.time_ns() // 1000000
    # the partition of each row: explicit, else murmur2 of the key, else sticky (null)
    parts_col = None
    if "partition" in table.column_names or keys is not None:
        # pyarrow.compute only here: its first import costs ~1 s of CPU (not for a
        # table of values alone)
        import pyarrow.compute as pc  # type: ignore[import-untyped]
    if "partition" in table.column_names:
        parts_col = table.column("partition").combine_chunks().cast(pa.int32())
    if keys is not None and (parts_col is None or parts_col.null_count):
        meta = producer._topic_cache.get(topic)
        if meta is None:
            meta = await producer._topics.get(topic)
        every = meta[0]
        index = pa.Array.from_buffers(
            pa.int32(), n, [None, pa.py_buffer(native.key_hashes(kbufs, n, len(every)))]
        )  # toPositive(murmur2(key)) % len(every) per row, -1 (never used) for a null key
        if list(every) != list(range(len(every))):
            index = pa.array(every, pa.int32()).take(pc.max_element_wise(index, 0))
        keyed = pc.if_else(keys.is_valid(), index, pa.scalar(None, pa.int32()))
        parts_col = keyed if parts_col is None else pc.coalesce(parts_col, keyed)
    out: dict[int, RecordHandle] = {}
    row = _Row(keys, values, tsbuf, ts_const)
    if parts_col is None or parts_col.null_count == n:  # every row sticky: one run
        await _fill(send, producer, topic, None, None, 0, n, row, kbufs, vbufs, out)
        return list(out.values())
    if parts_col.null_count:  # unkeyed rows beside keyed ones: send() row by row
        return await send_table_rows(send, topic, table)
    order = pc.sort_indices(parts_col)  # stable: each partition's rows keep their order
    rows = order.cast(pa.int64()).buffers()[1]
    counts = pc.value_counts(parts_col).to_pylist()
    start = 0
    for c in sorted(counts, key=lambda c: c["values"]):
        end = start + c["counts"]
        await _fill(send, producer, topic, c["values"], rows, start, end, row, kbufs, vbufs, out)
        start = end
    return list(out.values())


class _Row:
    """One row's send() arguments, for the first record of a batch."""

    __slots__ = ("keys", "values", "tsbuf", "ts_const")

    def __init__(self, keys: Any, values: Any, tsbuf: Any, ts_const: int) -> None:
        self.keys = keys
        self.values = values
        self.tsbuf = tsbuf
        self.ts_const = ts_const

    def get(self, r: int) -> tuple[Any, Any, int]:
        key = self.keys[r].as_py() if self.keys is not None else None
        value = self.values[r].as_py() if self.values is not None else None
        if self.tsbuf is None:
            return key, value, self.ts_const
        return key, value, int.from_bytes(self.tsbuf[r * 8 : r * 8 + 8], "little", signed=True)


async def _fill(
    send: Send,
    producer: RecordAppender,
    topic: str,
    partition: int | None,
    rows: Any,
    start: int,
    end: int,
    row: _Row,
    kbufs: Any,
    vbufs: Any,
    out: dict[int, RecordHandle],
) -> None:
    """Rows ``start`` .. ``end - 1`` (of ``rows``, row numbers, or the table's own order) into
    ``partition`` (None: the sticky one): each batch's first row through send(), the rest
    from the buffers, a full batch sealed as send_many() seals it."""
    acc = producer._acc
    i = start
    while i < end:
        r = i if rows is None else int.from_bytes(rows[i * 8 : i * 8 + 8], "little")
        key, value, ts = row.get(r)
        handle = await send(topic, value, key, partition, ts)
        batch = handle[0]
        out[id(batch)] = handle
        i += 1
        builder = batch.builder
        if i == end or batch.sealed or builder is None:
            continue
        j, state = builder.append_columns(rows, i, end, row.tsbuf, row.ts_const, kbufs, vbufs)
        if j > i:
            out[id(batch)] = RecordHandle((batch, builder.record_count - 1, builder.last_timestamp))
            i = j
        if state == 1:  # full: sealed, the next row opens the next batch
            await acc.full(batch)
