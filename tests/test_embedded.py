"""The embedded brokers start, answer ApiVersions, restart and stop cleanly (no fixture: own processes)."""

from __future__ import annotations

import os
import socket
import time

import pytest

from aiokafka_lite.launchers.embedded import (
    BROKER_KINDS,
    EmbeddedBroker,
    EmbeddedBrokerError,
    probe_api_versions,
)

# These tests launch their own processes; honour KAFKA_BROKER=tansu|noida if it restricts the run.
_only = {k.strip() for k in os.environ.get("KAFKA_BROKER", "").split(",") if k.strip()}
KINDS = [k for k in BROKER_KINDS if not _only or k in _only] or list(BROKER_KINDS)


def _refused(host: str, port: int) -> bool:
    try:
        probe_api_versions(host, port, timeout=0.5)
    except OSError:
        return True
    return False


@pytest.mark.parametrize("kind", KINDS)
def test_start_probe_stop(kind: str) -> None:
    broker = EmbeddedBroker(kind)
    with broker:
        assert broker.running
        assert broker.bootstrap == f"127.0.0.1:{broker.port}"
        assert probe_api_versions(broker.host, broker.port) == 0
        workdir = broker.log_path.parent if broker.log_path else None
        assert workdir is not None and workdir.exists()
    assert not broker.running
    assert not workdir.exists()  # temporary files removed
    deadline = time.monotonic() + 5
    while not _refused(broker.host, broker.port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _refused(broker.host, broker.port)


@pytest.mark.parametrize("kind", KINDS)
def test_restart_keeps_port(kind: str) -> None:
    with EmbeddedBroker(kind) as broker:
        port, pid = broker.port, broker.pid
        broker.restart()
        assert broker.port == port and broker.pid != pid
        assert probe_api_versions(broker.host, broker.port) == 0


@pytest.mark.parametrize("kind", KINDS)
def test_port_in_use_is_a_clear_error(kind: str) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        broker = EmbeddedBroker(kind, port=port, startup_timeout=5)
        try:
            with pytest.raises(EmbeddedBrokerError, match=kind):
                broker.start()
            assert not broker.running
        finally:
            broker.stop()


def test_unknown_kind() -> None:
    with pytest.raises(EmbeddedBrokerError):
        EmbeddedBroker("zookeeper")


async def test_fixture_broker_and_new_topic(broker, kafka_bootstrap, new_topic) -> None:
    """The session fixture answers ApiVersions and new_topic creates the partitions asked for."""
    assert broker.kind in ("apache", "tansu", "noida", "kafka", "external")
    assert kafka_bootstrap == broker.bootstrap
    host, _, port = kafka_bootstrap.rpartition(":")
    assert probe_api_versions(host, int(port)) == 0
    name = await new_topic(3)
    other = await new_topic(1)
    assert name != other

    from kafka.admin import KafkaAdminClient  # independent check with another client

    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap, request_timeout_ms=10000)
    try:
        topics = {t.get("name", t.get("topic")): t for t in admin.describe_topics([name, other])}
    finally:
        admin.close()
    assert len(topics[name]["partitions"]) == 3
    assert len(topics[other]["partitions"]) == 1
