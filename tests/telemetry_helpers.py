"""The KIP-714 test rig shared by tests/test_telemetry.py and tests/test_telemetry_share_admin.py:
an Apache Kafka 4.4 broker of the module's own with ``tests/java``'s ``TelemetryRecorder``
metrics plugin (``metric.reporters``), which writes every push it receives to a file, and a
``client-metrics`` subscription (IncrementalAlterConfigs, resource type CLIENT_METRICS) asking
the clients whose id starts with ``tm-`` for every ``org.apache.kafka.`` metric every 500 ms.
:class:`_Recorder` decodes the pushes with ``opentelemetry-proto`` (a dev dependency: an
independent decoder for our hand-written encoder).
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.conn import BrokerConnection
from aiokafka_lite.protocol import messages as m
from tests import java_oracle
from tests.conftest import _need_apache

_CLIENT_METRICS = 16  # ConfigResource type CLIENT_METRICS
INTERVAL_MS = 500
#: the client id of java_oracle's flood-producer (KipScripts.java)
JAVA_PRODUCER = "kafka-oracle-flood"


class _Recorder:
    def __init__(self, kafka: Any, path: Path) -> None:
        self.kafka = kafka
        self.bootstrap = kafka.bootstrap
        self.path = path

    def pushes(self, client_id: str) -> list[dict[str, Any]]:
        """The pushes the broker received from ``client_id``, decoded."""
        from opentelemetry.proto.metrics.v1 import metrics_pb2

        out = []
        text = self.path.read_text() if self.path.exists() else ""
        for line in text.splitlines():
            cid, instance, terminating, ctype, _interval, data = line.split("\t")
            if cid != client_id:
                continue
            md = metrics_pb2.MetricsData.FromString(base64.b64decode(data))
            metrics = {
                mt.name: mt.WhichOneof("data")
                for rm in md.resource_metrics
                for sm in rm.scope_metrics
                for mt in sm.metrics
            }
            out.append(
                {
                    "instance": instance,
                    "terminating": terminating == "true",
                    "content_type": ctype,
                    "metrics": metrics,
                    "data": md,
                    "at": time.monotonic(),
                }
            )
        return out


@pytest.fixture(scope="module", name="recorder")
def recorder_fixture(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Recorder]:
    broker.skip_on("tansu", "noida", reason="the metrics plugin is Apache Kafka's")
    _need_apache()
    pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")
    if java_oracle.unavailable_reason() is not None:
        pytest.skip(java_oracle.unavailable_reason())
    build = java_oracle.build()
    from aiokafka_lite.launchers.apache import QUICK_JVM_OPTIONS, ApacheKafka

    path = tmp_path_factory.mktemp("telemetry") / "pushes.tsv"
    # the oracle's jar rather than its classes directory: a classpath of jars only gets a
    # class-data-sharing archive (the fixtures' short-lived broker settings, conftest.py)
    jar = build / java_oracle.JAR
    kafka = ApacheKafka(
        extra_classpath=[str(jar if jar.exists() else build / "classes")],
        extra_config={
            "metric.reporters": "TelemetryRecorder",
            "telemetry.recorder.file": str(path),
        },
        jvm_options=QUICK_JVM_OPTIONS,
        class_data_sharing=True,
    )
    kafka.start()
    try:
        asyncio.run(_subscribe(kafka.bootstrap))
        yield _Recorder(kafka, path)
    finally:
        kafka.stop()


async def _subscribe(bootstrap: str) -> None:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    conn = BrokerConnection(host, int(port))
    await conn.connect(timeout_ms=10000)
    try:
        cfg = m.IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig
        configs = [
            cfg(name="metrics", config_operation=0, value="org.apache.kafka."),
            cfg(name="interval.ms", config_operation=0, value=str(INTERVAL_MS)),
            cfg(name="match", config_operation=0, value=f"client_id=(tm-.*|{JAVA_PRODUCER})"),
        ]
        res = m.IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=_CLIENT_METRICS, resource_name="tm-all", configs=configs
        )
        resp = await conn.send(m.IncrementalAlterConfigsRequest(resources=[res]))
        assert resp.responses[0].error_code == 0, resp
    finally:
        conn.close()
        await conn.wait_closed()


async def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout} s")
        await asyncio.sleep(0.1)


def _names(pushes: list[dict[str, Any]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in pushes:
        out.update(p["metrics"])
    return out
