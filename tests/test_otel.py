"""aiokafka_lite.otel against a real broker, with the OpenTelemetry SDK's in-memory exporter and
metric reader: producer spans inject W3C trace context into the records, consumer spans link to
it, process spans continue the producer's trace, metrics count what was sent and received."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from aiokafka_lite.consumer import AIOKafkaConsumer
from aiokafka_lite.otel import OpenTelemetryHook, extract_context
from aiokafka_lite.producer import AIOKafkaProducer
from aiokafka_lite.structs import TopicPartition
from tests.test_consumer import drain
from tests.test_group import group_name

pytestmark = [pytest.mark.timeout(120)]


@pytest.fixture
def otel() -> Any:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    hook = OpenTelemetryHook(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        propagator=TraceContextTextMapPropagator(),
    )
    yield hook, exporter, reader, tracer_provider
    meter_provider.shutdown()
    tracer_provider.shutdown()


def metric_points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    out: dict[str, list[Any]] = {}
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                out.setdefault(metric.name, []).extend(metric.data.data_points)
    return out


async def test_trace_context_flows_from_producer_to_consumer(
    kafka_bootstrap: str, new_topic: Any, otel: Any
) -> None:
    hook, exporter, reader, tracer_provider = otel
    topic = await new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    app = tracer_provider.get_tracer("app")
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, client_id="otel-p", hooks=[hook])
    await producer.start()
    try:
        with app.start_as_current_span("request") as parent:
            await producer.send_and_wait(topic, b"one", key=b"k1")
            # a stale trace header is replaced, not sent twice
            stale = b"00-" + b"1" * 32 + b"-" + b"2" * 16 + b"-01"
            await producer.send_and_wait(topic, b"two", headers=[("traceparent", stale)])
    finally:
        await producer.stop()

    group = group_name()
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=group,
        client_id="otel-c",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        hooks=[hook],
    )
    await consumer.start()
    try:
        records = await drain(consumer, 2)
        assert [r.value for r in records] == [b"one", b"two"]
        with hook.process_span(records[0]):
            pass
        await consumer.commit()
    finally:
        await consumer.stop()

    spans = exporter.get_finished_spans()
    sends = [s for s in spans if s.name == f"send {topic}"]
    receives = [s for s in spans if s.name == f"receive {topic}"]
    processes = [s for s in spans if s.name == f"process {topic}"]
    commits = [s for s in spans if s.name == "commit"]
    assert len(sends) == 2 and len(receives) == 2 and len(processes) == 1 and len(commits) == 1

    for send in sends:
        assert send.kind is SpanKind.PRODUCER
        assert send.parent is not None and send.parent.span_id == parent.get_span_context().span_id
        assert send.context.trace_id == parent.get_span_context().trace_id
        attrs = send.attributes
        assert attrs["messaging.system"] == "kafka"
        assert attrs["messaging.destination.name"] == topic
        assert attrs["messaging.destination.partition.id"] == "0"
        assert attrs["messaging.kafka.destination.partition"] == 0
        assert attrs["messaging.client.id"] == attrs["messaging.client_id"] == "otel-p"
        assert attrs["messaging.operation.type"] == "send"
    assert sends[0].attributes["messaging.kafka.message.key"] == "k1"
    assert sends[0].attributes["messaging.message.body.size"] == 3

    for record, send, receive in zip(records, sends, receives):
        # the record carries the send span's context, exactly once
        traceparents = [v for k, v in record.headers if k == "traceparent"]
        assert len(traceparents) == 1
        ctx = send.context
        assert traceparents[0][:-2] == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-".encode()
        assert extract_context(record)  # the module-level helper reads it too
        # the receive span links to it
        assert receive.kind is SpanKind.CONSUMER
        assert [link.context.span_id for link in receive.links] == [ctx.span_id]
        assert [link.context.trace_id for link in receive.links] == [ctx.trace_id]
        attrs = receive.attributes
        assert attrs["messaging.kafka.offset"] == record.offset
        assert attrs["messaging.consumer.group.name"] == group
        assert attrs["messaging.client.id"] == "otel-c"
        assert attrs["messaging.destination.partition.id"] == "0"
        assert attrs["messaging.operation.type"] == "receive"

    # processing continues the producer's trace
    process = processes[0]
    assert process.parent is not None and process.parent.span_id == sends[0].context.span_id
    assert process.context.trace_id == sends[0].context.trace_id
    assert commits[0].attributes["messaging.consumer.group.name"] == group
    assert commits[0].attributes["messaging.operation.type"] == "settle"
    assert "error.type" not in commits[0].attributes

    points = metric_points(reader)
    sent = points["messaging.client.sent.messages"]
    assert sum(p.value for p in sent) == 2
    assert {p.attributes["messaging.destination.name"] for p in sent} == {topic}
    assert sum(p.value for p in points["messaging.client.consumed.messages"]) == 2
    durations = {
        p.attributes["messaging.operation.name"]: p.count
        for p in points["messaging.client.operation.duration"]
    }
    assert durations == {"send": 2, "commit": 1}
    assert [p.count for p in points["messaging.process.duration"]] == [1]
    assert tp in consumer.metrics()["records-lag"]


async def test_one_hook_serves_several_clients(
    kafka_bootstrap: str, new_topic: Any, otel: Any
) -> None:
    hook, exporter, _reader, _tp = otel
    topic = await new_topic(partitions=1)
    producers = [
        AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, client_id=f"p{i}", hooks=[hook])
        for i in range(2)
    ]
    for p in producers:
        await p.start()
    try:
        for p in producers:
            await p.send_and_wait(topic, b"x")
    finally:
        for p in producers:
            await p.stop()
    ids = [s.attributes["messaging.client.id"] for s in exporter.get_finished_spans()]
    assert ids == ["p0", "p1"]


def test_importing_the_package_does_not_import_opentelemetry() -> None:
    code = (
        "import sys, aiokafka_lite, aiokafka_lite.hooks, aiokafka_lite.producer, "
        "aiokafka_lite.consumer; "
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')]"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
