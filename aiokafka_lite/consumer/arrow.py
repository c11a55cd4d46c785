"""Records as Arrow: :func:`records_table`, the body of the consumer's ``getmany_arrow()``.

The table has Spark's Kafka source schema (:func:`read_schema`): ``key``, ``value`` (binary),
``topic`` (string), ``partition`` (int32), ``offset`` (int64), ``timestamp`` (timestamp[us,
UTC]), ``timestampType`` (int32) and, on request, ``headers`` (list<struct<key string, value
binary>>, null for a record without headers, as Spark's source). Needs pyarrow (extra
``arrow``), imported on first use.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite.records.columns import ColumnBuffers
from aiokafka_lite.structs import ConsumerRecord, TopicPartition

__all__ = ["columns_table", "read_schema", "records_table"]


def _pyarrow() -> Any:
    try:
        import pyarrow  # type: ignore[import-untyped]
    except ImportError:
        raise Errors.KafkaConfigurationError(
            "getmany_arrow() needs pyarrow: pip install 'aiokafka_lite[arrow]'"
        ) from None
    return pyarrow


_SCHEMAS: dict[bool, Any] = {}


def read_schema(include_headers: bool = False) -> Any:
    """Spark's Kafka source schema (``headers`` last, only when asked for)."""
    schema = _SCHEMAS.get(include_headers)
    if schema is None:
        schema = _SCHEMAS[include_headers] = _make_schema(include_headers)
    return schema


def _make_schema(include_headers: bool) -> Any:
    pa = _pyarrow()
    fields = [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
    ]
    if include_headers:
        header = pa.struct([("key", pa.string()), ("value", pa.binary())])
        fields.append(("headers", pa.list_(header)))
    return pa.schema(fields)


def records_table(
    recs: Mapping[TopicPartition, Sequence[ConsumerRecord[Any, Any]]], include_headers: bool
) -> Any:
    """One table of every record of ``recs``, partition after partition, each in offset order.

    Keys and values must be bytes or None (no deserializers): anything else raises
    ``KafkaConfigurationError``."""
    pa = _pyarrow()
    schema = read_schema(include_headers)
    batches = []
    for tp, records in recs.items():
        n = len(records)
        if not n:
            continue
        try:
            keys = pa.array([r.key for r in records], pa.binary())
            values = pa.array([r.value for r in records], pa.binary())
        except (pa.ArrowTypeError, pa.ArrowInvalid, TypeError) as exc:
            raise Errors.KafkaConfigurationError(
                f"getmany_arrow() takes raw bytes: keys and values must not be deserialized ({exc})"
            ) from None
        columns = [
            keys,
            values,
            pa.array([tp.topic] * n, pa.string()),
            pa.array([tp.partition] * n, pa.int32()),
            pa.array([r.offset for r in records], pa.int64()),
            pa.array([r.timestamp * 1000 for r in records], pa.int64()).cast(schema[5].type),
            pa.array([r.timestamp_type for r in records], pa.int32()),
        ]
        if include_headers:
            columns.append(
                pa.array([list(r.headers) if r.headers else None for r in records], schema[7].type)
            )
        batches.append(pa.RecordBatch.from_arrays(columns, schema=schema))
    return pa.Table.from_batches(batches, schema=schema)


def columns_table(cols: Mapping[TopicPartition, ColumnBuffers], schema: Any) -> Any:
    """One table of the column buffers of each partition (``schema``: :func:`read_schema`'s,
    with headers when the buffers kept them): Arrow arrays over the buffers' bytes, one record
    batch per partition, no copy and no Python object per record."""
    pa = _pyarrow()
    batches = []
    for tp, c in cols.items():
        n = len(c)
        if not n:
            continue
        b = [pa.py_buffer(x) for x in c.bufs]
        columns = [
            pa.Array.from_buffers(pa.binary(), n, b[0:3]),
            pa.Array.from_buffers(pa.binary(), n, b[3:6]),
            _repeated_string(pa, tp.topic, n),
            pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(_I32.pack(tp.partition) * n)]),
            pa.Array.from_buffers(pa.int64(), n, [None, b[6]]),
            pa.Array.from_buffers(schema.field("timestamp").type, n, [None, b[7]]),
            pa.Array.from_buffers(pa.int32(), n, [None, b[8]]),
        ]
        if c.headers:
            h = c.header_count
            entry = pa.StructArray.from_arrays(
                [
                    pa.Array.from_buffers(pa.string(), h, [None, b[11], b[12]]),
                    pa.Array.from_buffers(pa.binary(), h, b[13:16]),
                ],
                fields=list(schema.field("headers").type.value_type),
            )
            columns.append(
                pa.Array.from_buffers(schema.field("headers").type, n, b[9:11], children=[entry])
            )
        batches.append(pa.RecordBatch.from_arrays(columns, schema=schema))
    return pa.Table.from_batches(batches, schema=schema)


_I32 = struct.Struct("<i")
#: byte length -> int32 offsets 0, L, 2L, ... (grown on demand): a repeated string column
#: (the topic) from two buffers (pyarrow.repeat's first call imports 0.35 s of CPU)
_STEPS: dict[int, bytes] = {}


def _repeated_string(pa: Any, text: str, n: int) -> Any:
    data = text.encode()
    size = len(data)
    steps = _STEPS.get(size)
    if steps is None or len(steps) < 4 * (n + 1):
        m = max(n + 1, 2 * len(steps) // 4 if steps else 1024)
        if size * m > 0x7FFFFFFF:
            return pa.array([text] * n, pa.string())
        steps = _STEPS[size] = struct.pack(f"<{m}i", *range(0, size * m, size))
    offsets = pa.py_buffer(steps)[: 4 * (n + 1)]
    return pa.Array.from_buffers(pa.string(), n, [None, offsets, pa.py_buffer(data * n)])
