"""KIP-714 client telemetry of the share consumer and the admin client against Apache Kafka
4.4, beside Java 4.4's ``KafkaShareConsumer`` and ``Admin`` on the same broker and
subscription (the rig of tests/telemetry_helpers.py: a metrics plugin recording every push).

Java's share consumer pushes by default, its ``Admin`` only with ``enable.metrics.push=true``:
ours do the same (``enable_metrics_push`` True / False by default), push at the subscription's
interval and make a terminating push at ``stop()`` / ``close()``; the metric names and their
OTLP types are compared with Java's.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from aiokafka_lite import AIOKafkaProducer
from aiokafka_lite.admin import AIOKafkaAdminClient, NewTopic
from aiokafka_lite.share import AIOKafkaShareConsumer
from tests import java_oracle
from tests.share_helpers import configure_group
from tests.telemetry_helpers import (  # noqa: F401 (recorder_fixture: the module's recorder)
    _names,
    _Recorder,
    _wait,
    recorder_fixture,
)

pytestmark = pytest.mark.slow

JAVA_SHARE, JAVA_ADMIN, JAVA_ADMIN_OFF = "tm-java-share", "tm-java-admin", "tm-java-admin-off"


def _compare(recorder: _Recorder, ours_id: str, java_id: str, prefix: str) -> tuple[Any, ...]:
    ours, java = _names(recorder.pushes(ours_id)), _names(recorder.pushes(java_id))
    both = sorted(set(ours) & set(java))
    assert ours and all(n.startswith(prefix) for n in ours if "app.info" not in n), ours
    mismatched = [n for n in both if ours[n] != java[n]]
    assert not mismatched, f"{ours_id}: sum/gauge differ from Java's: {mismatched}"
    return ours, java, both


def _check_lifecycle(recorder: _Recorder, client_id: str, live: int) -> None:
    """``live`` pushes before the stop, none terminating; then a terminating one; one id."""
    pushes = recorder.pushes(client_id)
    assert not any(p["terminating"] for p in pushes[:live]), client_id
    assert pushes[-1]["terminating"], f"{client_id}: no terminating push at stop()"
    assert len({p["instance"] for p in pushes}) == 1, client_id


async def test_share_consumer_and_admin_push_beside_java(recorder: _Recorder) -> None:
    bootstrap = recorder.bootstrap
    topic = f"tm-{uuid.uuid4().hex[:8]}"
    async with AIOKafkaAdminClient(bootstrap_servers=bootstrap) as setup:
        await setup.create_topics([NewTopic(topic, 1, 1)])
    # the Java clients start first (JVM start-up overlaps our part): a share consumer, an
    # Admin with enable.metrics.push=true and one with its default (off)
    java = [
        java_oracle.TelemetryClient(bootstrap, "share", JAVA_SHARE, topic=topic, group=f"j{topic}"),
        java_oracle.TelemetryClient(bootstrap, "admin", JAVA_ADMIN, push=True),
        java_oracle.TelemetryClient(bootstrap, "admin", JAVA_ADMIN_OFF),
    ]
    for client in java:
        client.start()
    try:
        # earliest: records produced between the assignment and the share partition's
        # initialisation would otherwise be skipped (the default is latest)
        await configure_group(bootstrap, f"s{topic}", share_auto_offset_reset="earliest")
        share = AIOKafkaShareConsumer(
            topic, bootstrap_servers=bootstrap, group_id=f"s{topic}", client_id="tm-py-share"
        )
        admin = AIOKafkaAdminClient(
            bootstrap_servers=bootstrap, client_id="tm-py-admin", enable_metrics_push=True
        )
        admin_off = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="tm-py-admin-off")
        await share.start()
        await admin.start()
        await admin_off.start()
        try:
            got, produced = 0, False
            async with AIOKafkaProducer(bootstrap_servers=bootstrap) as producer:
                loop = asyncio.get_running_loop()
                deadline = loop.time() + 60
                while got < 10:  # readiness: records produced once the assignment came
                    assert loop.time() < deadline, f"the share consumer read {got} of 10"
                    if not produced and share.assignment():
                        for i in range(10):
                            await producer.send_and_wait(topic, b"v%d" % i)
                        produced = True
                    batch = await share.getmany(timeout_ms=500)
                    got += sum(len(v) for v in batch.values())
            await share.commit()  # the 10 acknowledged (accepted), answered
            await admin.describe_cluster()
            await admin_off.describe_cluster()
            await _wait(
                lambda: (
                    len(recorder.pushes("tm-py-share")) >= 3
                    and len(recorder.pushes("tm-py-admin")) >= 3
                ),
                20,
                "three pushes from our share consumer and admin client",
            )
            live = {c: len(recorder.pushes(c)) for c in ("tm-py-share", "tm-py-admin")}
            share_metrics = share.metrics()
        finally:
            await share.stop()
            await admin.close()
            await admin_off.close()
        try:
            await _wait(
                lambda: (
                    len(recorder.pushes(JAVA_SHARE)) >= 2 and len(recorder.pushes(JAVA_ADMIN)) >= 2
                ),
                90,
                "two pushes from Java's share consumer and Admin",
            )
        except AssertionError as e:
            seen = [len(recorder.pushes(c)) for c in (JAVA_SHARE, JAVA_ADMIN)]
            raise AssertionError(f"{e} (share {seen[0]}, admin {seen[1]})") from None
    finally:
        for client in java:
            client.stop(check=False)
    for cid, n in live.items():
        _check_lifecycle(recorder, cid, n)
    # the Admin's default is off, in Java and here (the subscription matches both ids)
    assert recorder.pushes(JAVA_ADMIN_OFF) == [] and recorder.pushes("tm-py-admin-off") == []
    # what our share consumer counted is what it did: 10 records acquired and acknowledged
    assert share_metrics["records-consumed-total"] == 10, share_metrics
    assert share_metrics["acknowledgements-send-total"] == 10, share_metrics
    assert share_metrics["acknowledgements-error-total"] == 0, share_metrics
    assert share_metrics["fetch-total"] >= 1 and share_metrics["heartbeat-total"] >= 1

    report = []
    for ours_id, java_id, prefix in (
        ("tm-py-share", JAVA_SHARE, "org.apache.kafka.consumer."),
        ("tm-py-admin", JAVA_ADMIN, "org.apache.kafka.admin.client."),
    ):
        ours, theirs, both = _compare(recorder, ours_id, java_id, prefix)
        report.append(
            f"{ours_id}: ours {len(ours)}, Java {len(theirs)}, both {len(both)}\n"
            f"  both: {both}\n  ours only: {sorted(set(ours) - set(theirs))}\n"
            f"  Java only: {sorted(set(theirs) - set(ours))}"
        )
        # the share consumer's fetch manager, acknowledgement and heartbeat names are Java's
        need = 20 if ours_id == "tm-py-share" else 6
        assert len(both) >= need, f"{ours_id}: few names in common with Java's: {both}"
    print("\n" + "\n".join(report))


def test_share_and_admin_names_follow_java_groups() -> None:
    """Broker-free: the share consumer's fetch-manager and coordinator counters go under Java's
    ``consumer-share-*`` groups, the rest under ``consumer``; the admin client's under
    ``admin-client``; ``*-total`` are sums, the others gauges; non-numbers are left out."""
    from aiokafka_lite._metrics import ClientMetrics
    from aiokafka_lite.ops.telemetry import admin_metric_names, share_metric_names

    metrics = ClientMetrics()
    share = share_metric_names(metrics.share_snapshot(3, 300))
    assert share["org.apache.kafka.consumer.share.fetch.manager.records.consumed.total"] == (
        3.0,
        True,
    )
    assert share["org.apache.kafka.consumer.share.fetch.manager.fetch.size.avg"] == (0.0, False)
    assert "org.apache.kafka.consumer.share.coordinator.heartbeat.total" in share
    assert "org.apache.kafka.consumer.connection.count" in share
    assert not any("requests.by.api" in n for n in share)
    admin = admin_metric_names(metrics.common_snapshot())
    assert set(admin) == {
        f"org.apache.kafka.admin.client.{n}"
        for n in (
            "connection.count",
            "connection.creation.total",
            "connection.close.total",
            "request.total",
            "request.rate",
            "request.latency.avg",
            "request.latency.max",
            "request.error.total",
            "outgoing.byte.total",
            "outgoing.byte.rate",
        )
    }
