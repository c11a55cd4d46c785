"""KIP-714 client telemetry against Apache Kafka 4.4, beside the Java client.

Apache Kafka takes PushTelemetry only with a metrics plugin: the module starts its own broker
with ``tests/java``'s ``TelemetryRecorder`` on the classpath (``metric.reporters``), which writes
every push it receives to a file; the tests decode the OTLP bytes with ``opentelemetry-proto``
(a dev dependency: an independent decoder for our hand-written encoder). A ``client-metrics``
subscription (IncrementalAlterConfigs, resource type CLIENT_METRICS) asks the clients whose id
starts with ``tm-`` for every ``org.apache.kafka.`` metric every 500 ms.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer
from tests import java_oracle
from tests.telemetry_helpers import (  # noqa: F401 (recorder_fixture: the module's recorder)
    JAVA_PRODUCER,
    _names,
    _Recorder,
    _wait,
    recorder_fixture,
)

pytestmark = pytest.mark.slow


async def test_pushes_beside_java(recorder: _Recorder) -> None:
    """Our producer and consumer push the subscribed metrics at the subscription's interval
    and a last, terminating push at stop(), as the Java 4.4 clients do on the same broker;
    the metric names (and sum/gauge types) compared with Java's."""
    topic = f"tm-{uuid.uuid4().hex[:8]}"
    bootstrap = recorder.bootstrap
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="tm-py-producer")
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        client_id="tm-py-consumer",
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
    )
    await producer.start()
    await consumer.start()
    try:
        for i in range(20):
            await producer.send_and_wait(topic, f"v{i}".encode())
        await consumer.getmany(timeout_ms=2000)
        # readiness: three periodic pushes each (the first comes 0.5-1.5 intervals in); the
        # bound is for a loaded machine (the recorder broker records them), not the interval
        await _wait(
            lambda: (
                len(recorder.pushes("tm-py-producer")) >= 3
                and len(recorder.pushes("tm-py-consumer")) >= 3
            ),
            60,
            "three pushes from each client",
        )
        live = {c: recorder.pushes(c) for c in ("tm-py-producer", "tm-py-consumer")}
    finally:
        await consumer.stop()
        await producer.stop()
    for cid, before in live.items():
        assert not any(p["terminating"] for p in before), cid
        after = recorder.pushes(cid)
        assert after[-1]["terminating"], f"{cid}: no terminating push at stop()"
        assert len({p["instance"] for p in after}) == 1, cid  # one client instance id
    # the Java clients, same subscription, same broker: a producer and a group consumer, each
    # kept running until the broker has their pushes (readiness: JVM starts and a group join
    # crawl on a busy machine, so their lifetime is not a fixed few seconds), then closed
    props = recorder.path.parent / "java-consumer.properties"
    props.write_text("client.id=tm-java-consumer\n")
    flood = java_oracle.KipScript("flood-producer", bootstrap, topic, run_ms=120_000, interval_ms=5)
    member = java_oracle.GroupMember(bootstrap, topic, f"gj-{topic}", run_ms=120_000)
    member.args += ["--client-properties", str(props)]
    flood.start()
    member.start()
    try:
        try:
            await _wait(
                lambda: (
                    len(recorder.pushes(JAVA_PRODUCER)) >= 2
                    and len(recorder.pushes("tm-java-consumer")) >= 2
                ),
                90,
                "two pushes from each Java client",
            )
        except AssertionError as e:
            seen = [len(recorder.pushes(c)) for c in (JAVA_PRODUCER, "tm-java-consumer")]
            raise AssertionError(f"{e} (producer {seen[0]}, consumer {seen[1]})") from None
    finally:
        flood.stop(check=False)
        member.stop(check=False)
    report = []
    for role in ("producer", "consumer"):
        ours = _names(recorder.pushes(f"tm-py-{role}"))
        java_id = JAVA_PRODUCER if role == "producer" else "tm-java-consumer"
        java = _names(recorder.pushes(java_id))
        both = sorted(set(ours) & set(java))
        report.append(
            f"{role}: ours {len(ours)}, Java {len(java)}, both {len(both)}\n"
            f"  both: {both}\n  ours only: {sorted(set(ours) - set(java))}\n"
            f"  Java only: {sorted(set(java) - set(ours))}"
        )
        assert all(n.startswith("org.apache.kafka.") for n in ours), role
        mismatched = [n for n in both if ours[n] != java[n]]
        assert not mismatched, f"{role}: sum/gauge differ from Java's: {mismatched}"
        assert len(both) >= 8, f"{role}: few names in common with Java's: {both}"
    print("\n" + "\n".join(report))


async def test_interval_followed(recorder: _Recorder) -> None:
    """Periodic pushes come about one subscription interval apart (500 ms)."""
    producer = AIOKafkaProducer(bootstrap_servers=recorder.bootstrap, client_id="tm-py-interval")
    await producer.start()
    try:
        await _wait(lambda: len(recorder.pushes("tm-py-interval")) >= 1, 20, "a first push")
        first = time.monotonic()
        await _wait(lambda: len(recorder.pushes("tm-py-interval")) >= 5, 20, "five pushes")
        elapsed = time.monotonic() - first
    finally:
        await producer.stop()
    # four intervals: 2 s; the bound leaves room for a busy machine, not for a missed interval
    assert 1.5 <= elapsed <= 4.0, elapsed


async def test_disabled_sends_nothing(recorder: _Recorder) -> None:
    """enable_metrics_push=False: no telemetry request at all, even with a subscription."""
    sent: list[str] = []

    class Requests:
        def on_request_sent(self, node_id: Any, api_key: int, api_name: str, size: int) -> None:
            sent.append(api_name)

    producer = AIOKafkaProducer(
        bootstrap_servers=recorder.bootstrap,
        client_id="tm-py-off",
        enable_metrics_push=False,
        hooks=[Requests()],
    )
    await producer.start()
    try:
        await producer.send_and_wait("tm-off", b"x")
        # a client pushing would have asked for its subscription at start
        on = AIOKafkaProducer(bootstrap_servers=recorder.bootstrap, client_id="tm-py-on")
        await on.start()
        await _wait(lambda: len(recorder.pushes("tm-py-on")) >= 1, 20, "the enabled one's push")
        await on.stop()
    finally:
        await producer.stop()
    assert not {"GetTelemetrySubscriptions", "PushTelemetry"} & set(sent), sent
    assert recorder.pushes("tm-py-off") == []


async def test_silent_without_subscription(broker: Any) -> None:
    """On the session's broker (no metrics plugin, no subscription; Tansu and noida have no
    telemetry API): at most one GetTelemetrySubscriptions per client, no push, nothing raised."""
    sent: list[str] = []

    class Requests:
        def on_request_sent(self, node_id: Any, api_key: int, api_name: str, size: int) -> None:
            sent.append(api_name)

    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, hooks=[Requests()])
    await producer.start()
    try:
        for _ in range(5):
            await producer.send_and_wait(f"tm-none-{broker.kind}", b"x")
    finally:
        await producer.stop()
    assert sent.count("GetTelemetrySubscriptions") <= 1, sent
    assert "PushTelemetry" not in sent, sent
