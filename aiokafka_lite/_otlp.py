"""A small OTLP writer: client metrics as an OpenTelemetry ``MetricsData`` protobuf message.

KIP-714's PushTelemetry carries its metrics in that encoding. The client only ever writes one
shape of it: one resource, one scope, and number data points (gauges and sums) with string
attributes. This module writes those bytes directly (protobuf's wire format: varint keys,
length-delimited sub-messages, fixed64 times and doubles) instead of depending on
``opentelemetry-proto`` and ``protobuf``: see docs/guides/observability.md, "Client telemetry",
for the measurement behind that choice. ``tests/test_telemetry.py`` decodes what it writes with
``opentelemetry-proto`` (a dev dependency) and compares.

Field numbers are those of ``opentelemetry/proto/metrics/v1/metrics.proto`` and
``opentelemetry/proto/common/v1/common.proto`` (v1, stable).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["CUMULATIVE", "DELTA", "Point", "metrics_data"]

#: AggregationTemporality of a sum
DELTA = 1
CUMULATIVE = 2

_pack_fixed64 = struct.Struct("<Q").pack
_pack_double = struct.Struct("<d").pack


@dataclass(frozen=True)
class Point:
    """One metric data point: ``sum`` (monotonic, e.g. a ``*-total``) or a gauge."""

    name: str
    value: float
    is_sum: bool = False
    start_ns: int = 0


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2): strings, bytes, sub-messages."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _string(number: int, text: str) -> bytes:
    return _field(number, text.encode())


def _key_value(key: str, value: str) -> bytes:
    # KeyValue{key=1, value=2: AnyValue{string_value=1}}
    return _string(1, key) + _field(2, _string(1, value))


def _attributes(number: int, attrs: Mapping[str, str]) -> bytes:
    return b"".join(_field(number, _key_value(k, v)) for k, v in attrs.items())


def _data_point(p: Point, time_ns: int, attrs: Mapping[str, str]) -> bytes:
    # NumberDataPoint{start_time_unix_nano=2 fixed64, time_unix_nano=3 fixed64,
    # as_double=4 double, attributes=7}
    out = b""
    if p.start_ns:
        out += b"\x11" + _pack_fixed64(p.start_ns)
    out += b"\x19" + _pack_fixed64(time_ns) + b"\x21" + _pack_double(float(p.value))
    return out + _attributes(7, attrs)


def _metric(p: Point, time_ns: int, temporality: int, attrs: Mapping[str, str]) -> bytes:
    # Metric{name=1, gauge=5: Gauge{data_points=1}, sum=7: Sum{data_points=1,
    # aggregation_temporality=2, is_monotonic=3}}
    point = _field(1, _data_point(p, time_ns, attrs))
    if p.is_sum:
        body = _field(7, point + b"\x10" + _varint(temporality) + b"\x18\x01")
    else:
        body = _field(5, point)
    return _string(1, p.name) + body


def metrics_data(
    points: Iterable[Point],
    *,
    time_ns: int,
    temporality: int = CUMULATIVE,
    resource: Mapping[str, str] | None = None,
    point_attributes: Mapping[str, str] | None = None,
    scope: tuple[str, str] = ("aiokafka_lite", ""),
) -> bytes:
    """``MetricsData`` with one ResourceMetrics (``resource`` attributes), one ScopeMetrics
    (``scope``: name, version) and one metric per point, each point with
    ``point_attributes``; sums carry ``temporality``."""
    attrs = point_attributes or {}
    metrics = b"".join(_field(2, _metric(p, time_ns, temporality, attrs)) for p in points)
    name, version = scope
    scope_msg = _string(1, name) + (_string(2, version) if version else b"")
    # ResourceMetrics{resource=1: Resource{attributes=1}, scope_metrics=2:
    # ScopeMetrics{scope=1, metrics=2}}
    resource_metrics = _field(1, _attributes(1, resource or {})) + _field(
        2, _field(1, scope_msg) + metrics
    )
    return _field(1, resource_metrics)  # MetricsData{resource_metrics=1}
