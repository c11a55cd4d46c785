"""Arrow in: :func:`send_table`, the body of the producer's ``send_arrow()``.

Each row goes through ``send()`` (the same serializers, partitioner, sticky partitions,
back-pressure and ``buffer_memory`` wait, batches and errors); the caller gets one awaitable
per batch the rows went into instead of one per row. Needs pyarrow (extra ``arrow``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka_lite import errors as Errors

from .batch import RecordHandle

__all__ = ["send_table"]

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
    send: Callable[..., Awaitable[RecordHandle]], topic: str, table: Any
) -> list[RecordHandle]:
    """Send every row of ``table`` (a ``pyarrow.Table`` or ``RecordBatch``) to ``topic``
    through ``send`` (the producer's ``send``).

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
