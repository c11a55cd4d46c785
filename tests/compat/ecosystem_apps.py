"""Libraries built on aiokafka, run on aiokafka_lite (``lite``) or on aiokafka itself (``real``).

``python ecosystem_apps.py lite|real SCENARIO`` with ``COMPAT_BOOTSTRAP`` set prints one
``ECOSYSTEM-RESULT:`` JSON line: what a user of the library observes, normalised so that the two
runs can be compared (topic names, ids and timings removed). ``lite`` calls
``aiokafka_lite.install_as_aiokafka()`` before the library is imported.
"""

# no ``from __future__ import annotations``: kstreams reads the stream function's annotations
import asyncio
import json
import os
import sys
import uuid
from typing import Any

RESULT_PREFIX = "ECOSYSTEM-RESULT:"
BOOTSTRAP = os.environ.get("COMPAT_BOOTSTRAP", "127.0.0.1:9092")


async def _new_topic(partitions: int = 1) -> str:  # noqa: D103
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    name = f"eco-{uuid.uuid4().hex[:10]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=BOOTSTRAP)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
        for _ in range(100):  # until the new topic is listed with leaders
            described = await admin.describe_topics([name])
            parts = described[0].get("partitions") or []
            if len(parts) == partitions and all(p["leader"] >= 0 for p in parts):
                break
            await asyncio.sleep(0.1)
    finally:
        await admin.close()
    return name


# -------------------------------------------------------------------- OpenTelemetry


async def otel() -> dict[str, Any]:
    """AIOKafkaInstrumentor: producer spans, consumer spans for getone and getmany, and the
    trace context carried in record headers from producer to consumer."""
    from opentelemetry.instrumentation.aiokafka import AIOKafkaInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    AIOKafkaInstrumentor().instrument(tracer_provider=provider)
    import aiokafka

    topic = await _new_topic()
    tracer = provider.get_tracer("test")
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=BOOTSTRAP, client_id="eco-producer")
    await producer.start()
    try:
        with tracer.start_as_current_span("publish-parent"):
            for i in range(3):
                await producer.send_and_wait(topic, b"v%d" % i, key=b"k%d" % i)
    finally:
        await producer.stop()
    consumer = aiokafka.AIOKafkaConsumer(
        topic,
        bootstrap_servers=BOOTSTRAP,
        group_id=f"g-{topic}",
        client_id="eco-consumer",
        auto_offset_reset="earliest",
    )
    await consumer.start()
    values: list[bytes] = []
    try:
        first = await asyncio.wait_for(consumer.getone(), 30)
        values.append(first.value)
        for _ in range(30):
            batch = await consumer.getmany(timeout_ms=1000)
            values += [r.value for rs in batch.values() for r in rs]
            if len(values) >= 3:
                break
    finally:
        await consumer.stop()
    AIOKafkaInstrumentor().uninstrument()

    spans = exporter.get_finished_spans()
    parent = next(s for s in spans if s.name == "publish-parent")

    def norm(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(topic, "TOPIC").replace(BOOTSTRAP, "BOOTSTRAP")
        if isinstance(value, (list, tuple)):
            return [norm(v) for v in value]
        return value

    summary = []
    for s in spans:
        if s.name == "publish-parent":
            continue
        attrs = {k: norm(v) for k, v in sorted((s.attributes or {}).items())}
        attrs.pop("messaging.kafka.message.offset", None)  # differs with commit layout only
        summary.append(
            {
                "name": norm(s.name),
                "kind": str(s.kind),
                "attributes": attrs,
                # producer spans are children of the parent; consumer spans continue its trace
                "in_parent_trace": s.context.trace_id == parent.context.trace_id,
            }
        )
    summary.sort(key=lambda d: (d["kind"], d["name"], json.dumps(d["attributes"], default=str)))
    return {"values": sorted(v.decode() for v in values), "spans": summary}


# -------------------------------------------------------------------------- kstreams


async def kstreams_stream() -> dict[str, Any]:
    """A kstreams stream consumes, produces with send_many(partition=None) and commits."""
    from kstreams import BatchEvent, ConsumerRecord, create_engine
    from kstreams.backends import Kafka

    source, sink = await _new_topic(), await _new_topic(3)
    engine = create_engine(title="eco", backend=Kafka(bootstrap_servers=[BOOTSTRAP]))
    seen: list[str] = []
    done = asyncio.Event()

    @engine.stream(source, group_id=f"g-{source}", auto_offset_reset="earliest")
    async def forward(cr: ConsumerRecord) -> None:
        seen.append(cr.value.decode())
        if len(seen) == 4:
            events = [BatchEvent(value=f"out-{v}".encode(), key=v) for v in seen]
            await engine.send_many(sink, batch_events=events, partition=None)
            done.set()

    await engine.start()
    try:
        # kstreams' send_many(partition=None) reads the producer's cached metadata for the
        # topic (None before the producer has used it, with aiokafka too): use it once first
        await engine.send(sink, value=b"warm-up", key="w")
        for i in range(4):
            await engine.send(source, value=f"in-{i}".encode(), key=f"k{i}")
        await asyncio.wait_for(done.wait(), 60)
    finally:
        await engine.stop()

    import aiokafka

    consumer = aiokafka.AIOKafkaConsumer(
        sink, bootstrap_servers=BOOTSTRAP, auto_offset_reset="earliest"
    )
    await consumer.start()
    out: list[str] = []
    try:
        for _ in range(30):
            batch = await consumer.getmany(timeout_ms=1000)
            out += [r.value.decode() for rs in batch.values() for r in rs]
            if len(out) >= 5:
                break
        tp = aiokafka.TopicPartition(source, 0)
    finally:
        await consumer.stop()
    group = aiokafka.AIOKafkaConsumer(
        bootstrap_servers=BOOTSTRAP, group_id=f"g-{source}", enable_auto_commit=False
    )
    await group.start()
    try:
        committed = await group.committed(tp)
    finally:
        await group.stop()
    return {"seen": sorted(seen), "out": sorted(out), "committed": committed}


# ---------------------------------------------------------------------------- taskiq


async def taskiq_kick() -> dict[str, Any]:
    """A taskiq task kicked right after the worker's broker starts runs exactly once."""
    from taskiq.receiver import Receiver
    from taskiq_aio_kafka import AioKafkaBroker

    topic = await _new_topic()
    broker = AioKafkaBroker(bootstrap_servers=BOOTSTRAP, kafka_topic=topic)
    # taskiq-aio-kafka's default partitioner is kafka-python's, whose instances are no longer
    # callable in kafka-python 3 (it breaks aiokafka too): pass aiokafka's own
    from aiokafka.partitioner import DefaultPartitioner

    broker.configure_producer(partitioner=DefaultPartitioner())
    runs: list[int] = []

    @broker.task
    async def work(n: int) -> int:
        runs.append(n)
        return n * 2

    broker.is_worker_process = True
    await broker.startup()
    receiver = Receiver(broker, run_startup=False)
    listener = asyncio.create_task(receiver.listen(asyncio.Event()))
    try:
        await work.kiq(21)
        for _ in range(300):  # until the worker ran it (each step bounded)
            if runs:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)  # a second delivery would show up here
    finally:
        listener.cancel()
        try:
            await listener
        except (asyncio.CancelledError, Exception):
            pass
        await broker.shutdown()
    return {"runs": runs}


# --------------------------------------------------------------------------- ddtrace


async def ddtrace_spans() -> dict[str, Any]:
    """ddtrace.patch(aiokafka=True): a span per send (ended at the acknowledgement) and per
    getone/getmany, trace context carried in the record headers (DD_KAFKA_PROPAGATION_ENABLED),
    every span captured by a trace filter instead of being sent to an agent."""
    for key, value in {
        "DD_TRACE_AGENT_URL": "http://127.0.0.1:9",  # nothing listens: nothing is sent anyway
        "DD_INSTRUMENTATION_TELEMETRY_ENABLED": "false",
        "DD_REMOTE_CONFIGURATION_ENABLED": "false",
        "DD_TRACE_STARTUP_LOGS": "false",
        "DD_KAFKA_PROPAGATION_ENABLED": "true",
    }.items():
        os.environ[key] = value
    import ddtrace
    from ddtrace.trace import TraceFilter, tracer

    captured: list[Any] = []

    class Capture(TraceFilter):  # type: ignore[misc]
        def process_trace(self, trace: list[Any]) -> None:
            captured.extend(trace)
            return None  # dropped: never handed to the agent writer

    tracer.configure(trace_processors=[Capture()])
    ddtrace.patch(aiokafka=True, raise_errors=True)
    import aiokafka

    assert aiokafka._datadog_patch  # patched (the integration imported cleanly)
    topic = await _new_topic()
    group = f"g-{topic}"
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=BOOTSTRAP)
    await producer.start()
    try:
        for i in range(2):
            await producer.send_and_wait(topic, b"v%d" % i, key=b"k%d" % i)
    finally:
        await producer.stop()
    consumer = aiokafka.AIOKafkaConsumer(
        topic, bootstrap_servers=BOOTSTRAP, group_id=group, auto_offset_reset="earliest"
    )
    await consumer.start()
    values: list[str] = []
    try:
        first = await asyncio.wait_for(consumer.getone(), 30)
        values.append(first.value.decode())
        for _ in range(30):
            batch = await consumer.getmany(timeout_ms=1000)
            values += [r.value.decode() for rs in batch.values() for r in rs]
            if len(values) >= 2:
                break
        await consumer.commit()
    finally:
        await consumer.stop()
    tracer.flush()

    def norm(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(group, "GROUP").replace(topic, "TOPIC").replace(BOOTSTRAP, "BS")
        return value

    produced = {s.span_id: s for s in captured if s.name == "kafka.produce"}
    spans = []
    for s in captured:
        tags = {
            norm(k): norm(v)
            for k, v in sorted(s.get_tags().items())
            if not k.startswith("_dd") and k not in ("runtime-id", "kafka.cluster_id")
        }
        spans.append(
            {
                "name": s.name,
                "service": s.service,
                "resource": norm(s.resource),
                "span_type": s.span_type,
                "error": s.error,
                "tags": tags,
                "has_cluster_id": bool(s.get_tag("kafka.cluster_id")),
                # a consumer span continues the trace of the record's producer span
                "child_of_produce": s.parent_id in produced
                and produced[s.parent_id].trace_id == s.trace_id,
            }
        )
    spans.sort(key=lambda d: (d["name"], json.dumps(d["tags"], sort_keys=True)))
    return {"values": sorted(values), "spans": spans}


SCENARIOS = {
    "otel": otel,
    "kstreams": kstreams_stream,
    "taskiq": taskiq_kick,
    "ddtrace": ddtrace_spans,
}


def main() -> None:
    mode, scenario = sys.argv[1], sys.argv[2]
    if mode == "lite":
        import aiokafka_lite

        aiokafka_lite.install_as_aiokafka()
    result = asyncio.run(SCENARIOS[scenario]())
    import aiokafka

    result["aiokafka_is_lite"] = aiokafka.__name__ != "aiokafka" or hasattr(
        aiokafka, "install_as_aiokafka"
    )
    print(RESULT_PREFIX + json.dumps(result, default=str), flush=True)


if __name__ == "__main__":
    main()
