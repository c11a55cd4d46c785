"""Hooks, metrics and OpenTelemetry (docs/guides/observability.md).

OpenTelemetry needs `pip install 'aiokafka_lite[otel]'` plus the SDK and an exporter of your
choice (here the SDK's in-memory exporter, so the example can print its spans).
"""

import asyncio
import os

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka_lite.hooks import Hook
from aiokafka_lite.otel import OpenTelemetryHook


# --8<-- [start:hook]
class SlowBatches(Hook):
    """Report batches the broker took long to acknowledge; any subset of Hook's methods."""

    def __init__(self, threshold: float = 0.5) -> None:
        self.threshold = threshold
        self.acked = 0

    def on_batch_acked(self, topic, partition, records, size, base_offset, latency):  # type: ignore[no-untyped-def]
        self.acked += records
        if latency > self.threshold:
            print(f"{topic}-{partition}: {records} records acknowledged after {latency:.2f} s")


# --8<-- [end:hook]


async def main(bootstrap: str, topic: str = "metrics-demo") -> dict[str, object]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel = OpenTelemetryHook(tracer_provider=provider)
    slow = SlowBatches()

    async with AIOKafkaProducer(bootstrap_servers=bootstrap, hooks=[slow, otel]) as producer:
        for i in range(5):
            await producer.send_and_wait(topic, b"event %d" % i)
        metrics = producer.metrics()  # named after the Java client's metrics
        print("sent", metrics["record-send-total"], "latency avg", metrics["request-latency-avg"])

    async with AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", hooks=[otel]
    ) as consumer:
        record = await consumer.getone()
        with otel.process_span(record):  # continues the producer's trace (W3C headers)
            print("processing", record.value)

    spans = sorted({span.name for span in exporter.get_finished_spans()})
    print("spans:", spans)
    return {"acked": slow.acked, "sent": metrics["record-send-total"], "spans": spans}


if __name__ == "__main__":
    asyncio.run(main(os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")))
