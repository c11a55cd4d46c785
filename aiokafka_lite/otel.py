"""OpenTelemetry tracing and metrics for aiokafka_lite clients, built on :mod:`aiokafka_lite.hooks`.

Needs the ``otel`` extra (``pip install 'aiokafka_lite[otel]'``: opentelemetry-api; the SDK and
an exporter are the application's choice). Only this module imports opentelemetry::

    from aiokafka_lite.otel import OpenTelemetryHook

    otel = OpenTelemetryHook()  # the global tracer/meter providers and propagator by default
    producer = AIOKafkaProducer(bootstrap_servers="...", hooks=[otel])
    consumer = AIOKafkaConsumer("orders", group_id="billing", hooks=[otel])

    async for record in consumer:
        with otel.process_span(record):  # continues the producer's trace
            ...

What it records, following OpenTelemetry's messaging semantic conventions (``messaging.system``
= ``kafka``):

* ``send <topic>`` (kind PRODUCER) for every record sent with ``send()``/``send_and_wait()``/
  ``send_many()``, a child of the current span, around the hand-over to the producer (as
  opentelemetry-instrumentation-aiokafka's); its context is injected into the record's headers
  with the propagator (W3C ``traceparent``/``tracestate`` by default), replacing headers of the
  same names;
* ``receive <topic>`` (kind CONSUMER) for every record the application receives (``getone``,
  ``getmany``, ``async for``), a child of the current span with a link to the context
  extracted from the record's headers;
* ``process <topic>`` (kind CONSUMER) around the application's own processing of a record with
  :meth:`OpenTelemetryHook.process_span`: its parent is the extracted producer context (so a
  trace follows a record from producer to processing), the current span is linked;
* ``commit`` (kind CLIENT) for each offset commit, with ``error.type`` when it failed;
* metrics: ``messaging.client.sent.messages`` (records acknowledged, per topic and partition,
  with ``error.type`` for failed ones), ``messaging.client.consumed.messages`` (records received),
  ``messaging.client.operation.duration`` (s: batch opened to acknowledged for ``send``, per
  commit for ``commit``) and ``messaging.process.duration`` (s, :meth:`process_span`).

Attributes: ``messaging.destination.name``, ``messaging.destination.partition.id``,
``messaging.kafka.offset``, ``messaging.kafka.message.key`` (when it decodes as UTF-8),
``messaging.message.body.size``, ``messaging.client.id``, ``messaging.consumer.group.name``,
``messaging.operation.name`` / ``messaging.operation.type``, ``server.address`` /
``server.port`` (the first bootstrap address); for dashboards built on older conventions (and
on opentelemetry-instrumentation-aiokafka) also ``messaging.kafka.destination.partition`` and
``messaging.client_id``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics as otel_metrics
from opentelemetry import propagate, trace
from opentelemetry.propagators.textmap import Getter, Setter, TextMapPropagator
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

from .hooks import ClientInfo, Headers, Hook
from .structs import ConsumerRecord, OffsetAndMetadata, TopicPartition

__all__ = ["OpenTelemetryHook", "extract_context"]

_SCOPE = "aiokafka_lite"
_VERSION = "0.1.0"


class _HeaderSetter(Setter[list[tuple[str, bytes | None]]]):
    def set(self, carrier: list[tuple[str, bytes | None]], key: str, value: str) -> None:
        carrier.append((key, value.encode()))


class _HeaderGetter(Getter[Sequence[tuple[str, bytes | None]]]):
    def get(self, carrier: Sequence[tuple[str, bytes | None]], key: str) -> list[str] | None:
        key = key.lower()
        found = [
            v.decode("utf-8", "replace") for k, v in carrier if k.lower() == key and v is not None
        ]
        return found or None

    def keys(self, carrier: Sequence[tuple[str, bytes | None]]) -> list[str]:
        return [k for k, _ in carrier]


_SETTER = _HeaderSetter()
_GETTER = _HeaderGetter()


def extract_context(
    record: ConsumerRecord[Any, Any], propagator: TextMapPropagator | None = None
) -> otel_context.Context:
    """The context the producer injected into ``record``'s headers (an empty one if none)."""
    prop = propagator or propagate.get_global_textmap()
    return prop.extract(record.headers or (), context=otel_context.Context(), getter=_GETTER)


class OpenTelemetryHook(Hook):
    """Spans and metrics for every client it is given to (see the module docstring).

    ``tracer_provider`` / ``meter_provider`` / ``propagator``: the global ones when None.
    One instance may serve any number of producers and consumers.
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: otel_metrics.MeterProvider | None = None,
        propagator: TextMapPropagator | None = None,
    ) -> None:
        self._tracer = trace.get_tracer(_SCOPE, _VERSION, tracer_provider)
        meter = otel_metrics.get_meter(_SCOPE, _VERSION, meter_provider)
        self._propagator = propagator
        self._sent = meter.create_counter(
            "messaging.client.sent.messages",
            unit="{message}",
            description="Records the producer sent (acknowledged or failed)",
        )
        self._consumed = meter.create_counter(
            "messaging.client.consumed.messages",
            unit="{message}",
            description="Records delivered to the application",
        )
        self._duration = meter.create_histogram(
            "messaging.client.operation.duration",
            unit="s",
            description="Duration of a messaging operation (send: batch opened to acknowledged)",
        )
        self._process = meter.create_histogram(
            "messaging.process.duration",
            unit="s",
            description="Duration of processing one record (process_span)",
        )

    @property
    def propagator(self) -> TextMapPropagator:
        """The propagator in use (the global one unless one was given)."""
        return self._propagator or propagate.get_global_textmap()

    def bind(self, info: ClientInfo) -> _BoundHook:
        """The per-client hook the client registers (carries its client id and group)."""
        return _BoundHook(self, info)

    @contextmanager
    def process_span(self, record: ConsumerRecord[Any, Any]) -> Iterator[Span]:
        """``with hook.process_span(record):`` a ``process <topic>`` span around the
        application's processing of ``record``, continuing the producer's trace (parent: the
        context in the record's headers; the current span is linked). An exception escaping
        the block is recorded on the span and re-raised."""
        parent = extract_context(record, self.propagator)
        current = trace.get_current_span().get_span_context()
        links = [Link(current)] if current.is_valid else []
        attrs: dict[str, Any] = {
            "messaging.system": "kafka",
            "messaging.operation.name": "process",
            "messaging.operation.type": "process",
            "messaging.destination.name": record.topic,
            "messaging.destination.partition.id": str(record.partition),
            "messaging.kafka.offset": record.offset,
        }
        started = time.perf_counter()
        error: str | None = None
        with self._tracer.start_as_current_span(
            f"process {record.topic}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=attrs,
            links=links,
        ) as span:
            try:
                yield span
            except BaseException as exc:  # re-raised: the span and metric only name the error
                error = type(exc).__qualname__
                raise
            finally:
                metric_attrs = {
                    "messaging.system": "kafka",
                    "messaging.operation.name": "process",
                    "messaging.destination.name": record.topic,
                }
                if error is not None:
                    metric_attrs["error.type"] = error
                self._process.record(time.perf_counter() - started, metric_attrs)


class _BoundHook:
    """:class:`OpenTelemetryHook` for one client: the hook methods the client calls."""

    def __init__(self, parent: OpenTelemetryHook, info: ClientInfo) -> None:
        self._parent = parent
        self._tracer = parent._tracer
        base: dict[str, Any] = {
            "messaging.system": "kafka",
            "messaging.client.id": info.client_id,
            "messaging.client_id": info.client_id,
        }
        first = info.bootstrap_servers.split(",")[0].strip()
        host, _, port = first.rpartition(":")
        if host and port.isdigit():
            base["server.address"] = host.strip("[]")
            base["server.port"] = int(port)
        elif first:
            base["server.address"] = first
        if info.group_id is not None:
            base["messaging.consumer.group.name"] = info.group_id
        self._base = base
        self._metric_base = {"messaging.system": "kafka"}
        if info.group_id is not None:
            self._metric_base["messaging.consumer.group.name"] = info.group_id

    # -- producer -------------------------------------------------------------------------
    def on_send(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
    ) -> Headers:
        attrs = dict(self._base)
        attrs["messaging.operation.name"] = "send"
        attrs["messaging.operation.type"] = "send"
        attrs["messaging.destination.name"] = topic
        attrs["messaging.destination.partition.id"] = str(partition)
        attrs["messaging.kafka.destination.partition"] = partition
        if value is not None:
            attrs["messaging.message.body.size"] = len(value)
        if key is not None:
            try:
                attrs["messaging.kafka.message.key"] = key.decode()
            except (UnicodeDecodeError, AttributeError):
                pass
        span = self._tracer.start_span(f"send {topic}", kind=SpanKind.PRODUCER, attributes=attrs)
        try:
            propagator = self._parent.propagator
            fields = {f.lower() for f in propagator.fields}
            out: list[tuple[str, bytes | None]] = [h for h in headers if h[0].lower() not in fields]
            propagator.inject(out, context=trace.set_span_in_context(span), setter=_SETTER)
        finally:
            span.end()
        return out

    def on_batch_acked(
        self, topic: str, partition: int, records: int, size: int, base_offset: int, latency: float
    ) -> None:
        attrs = dict(self._metric_base)
        attrs["messaging.operation.name"] = "send"
        attrs["messaging.destination.name"] = topic
        attrs["messaging.destination.partition.id"] = str(partition)
        self._parent._sent.add(records, attrs)
        self._parent._duration.record(latency, attrs)

    def on_batch_failed(
        self, topic: str, partition: int, records: int, size: int, error: BaseException
    ) -> None:
        attrs = dict(self._metric_base)
        attrs["messaging.operation.name"] = "send"
        attrs["messaging.destination.name"] = topic
        attrs["messaging.destination.partition.id"] = str(partition)
        attrs["error.type"] = type(error).__qualname__
        self._parent._sent.add(records, attrs)

    # -- consumer -------------------------------------------------------------------------
    def on_consume(self, record: ConsumerRecord[Any, Any]) -> None:
        producer_ctx = trace.get_current_span(
            extract_context(record, self._parent.propagator)
        ).get_span_context()
        links = [Link(producer_ctx)] if producer_ctx.is_valid else []
        attrs = dict(self._base)
        attrs["messaging.operation.name"] = "receive"
        attrs["messaging.operation.type"] = "receive"
        attrs["messaging.destination.name"] = record.topic
        attrs["messaging.destination.partition.id"] = str(record.partition)
        attrs["messaging.kafka.destination.partition"] = record.partition
        attrs["messaging.kafka.offset"] = record.offset
        if record.serialized_value_size >= 0:
            attrs["messaging.message.body.size"] = record.serialized_value_size
        key = record.key
        if isinstance(key, bytes):
            try:
                attrs["messaging.kafka.message.key"] = key.decode()
            except UnicodeDecodeError:
                pass
        elif isinstance(key, str):
            attrs["messaging.kafka.message.key"] = key
        span = self._tracer.start_span(
            f"receive {record.topic}", kind=SpanKind.CONSUMER, attributes=attrs, links=links
        )
        span.end()
        metric_attrs = dict(self._metric_base)
        metric_attrs["messaging.operation.name"] = "receive"
        metric_attrs["messaging.destination.name"] = record.topic
        metric_attrs["messaging.destination.partition.id"] = str(record.partition)
        self._parent._consumed.add(1, metric_attrs)

    def on_acknowledge(
        self,
        group_id: str,
        results: Mapping[TopicPartition, BaseException | None],
        offsets: Mapping[TopicPartition, Sequence[int]],
    ) -> None:
        # a share consumer's acknowledgements answered: one "settle" span per partition
        for tp, error in results.items():
            attrs = dict(self._base)
            attrs["messaging.operation.name"] = "ack"
            attrs["messaging.operation.type"] = "settle"
            attrs["messaging.consumer.group.name"] = group_id
            attrs["messaging.destination.name"] = tp.topic
            attrs["messaging.destination.partition.id"] = str(tp.partition)
            attrs["messaging.batch.message_count"] = len(offsets.get(tp, ()))
            span = self._tracer.start_span(
                f"ack {tp.topic}", kind=SpanKind.CLIENT, attributes=attrs
            )
            if error is not None:
                span.set_attribute("error.type", type(error).__qualname__)
                span.set_status(Status(StatusCode.ERROR, str(error)))
            span.end()

    def on_commit(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        latency: float,
        error: BaseException | None,
    ) -> None:
        attrs = dict(self._base)
        attrs["messaging.operation.name"] = "commit"
        attrs["messaging.operation.type"] = "settle"
        attrs["messaging.consumer.group.name"] = group_id
        topics = {tp.topic for tp in offsets}
        if len(topics) == 1:
            attrs["messaging.destination.name"] = next(iter(topics))
        now = time.time_ns()
        span = self._tracer.start_span(
            "commit",
            kind=SpanKind.CLIENT,
            attributes=attrs,
            start_time=now - int(latency * 1e9),
        )
        if error is not None:
            span.set_attribute("error.type", type(error).__qualname__)
            span.set_status(Status(StatusCode.ERROR, str(error)))
        span.end(end_time=now)
        metric_attrs = dict(self._metric_base)
        metric_attrs["messaging.operation.name"] = "commit"
        if error is not None:
            metric_attrs["error.type"] = type(error).__qualname__
        self._parent._duration.record(latency, metric_attrs)
