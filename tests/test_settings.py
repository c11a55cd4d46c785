"""Every connection setting a facade takes reaches the client it makes (broker-free): the
producer, the consumer, the admin client and the share consumer build their clients from one
:class:`aiokafka_lite._settings.ClientSettings` taken from their own arguments."""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer, AIOKafkaShareConsumer
from aiokafka_lite.admin import AIOKafkaAdminClient

SETTINGS: dict[str, Any] = {
    "bootstrap_servers": "h1:9192,h2:9193",
    "client_id": "settings-test",
    "request_timeout_ms": 12345,
    "retry_backoff_ms": 234,
    "metadata_max_age_ms": 34567,
    "connections_max_idle_ms": 45678,
    "security_protocol": "SASL_PLAINTEXT",
    "sasl_mechanism": "PLAIN",
    "sasl_plain_username": "user-x",
    "sasl_plain_password": "pass-y",
    "sasl_kerberos_service_name": "svc-z",
    "sasl_kerberos_domain_name": "dom.example",
}


def _client(facade: str) -> tuple[Any, bool]:
    """The facade's client and whether the facade lets it create topics."""
    if facade == "producer":
        return AIOKafkaProducer(**SETTINGS).client, True
    if facade == "consumer":
        c = AIOKafkaConsumer("t", allow_auto_create_topics=False, **SETTINGS)
        return c._client, False
    if facade == "admin":
        return AIOKafkaAdminClient(**SETTINGS)._client, False
    return AIOKafkaShareConsumer("t", group_id="g", **SETTINGS)._client, False


@pytest.mark.parametrize("facade", ["producer", "consumer", "admin", "share"])
def test_every_connection_setting_reaches_the_client(facade: str) -> None:
    client, auto_create = _client(facade)
    assert [tuple(b)[:2] for b in client._bootstrap] == [("h1", 9192), ("h2", 9193)]
    assert client.client_id == "settings-test"
    assert client.request_timeout_ms == 12345
    assert client.retry_backoff_ms == 234
    assert client.metadata_max_age_ms == 34567
    conn = client._conn_args
    assert conn["connections_max_idle_ms"] == 45678
    for name in (
        "security_protocol",
        "sasl_mechanism",
        "sasl_plain_username",
        "sasl_plain_password",
        "sasl_kerberos_service_name",
        "sasl_kerberos_domain_name",
    ):
        assert conn[name] == SETTINGS[name], name
    assert client._metadata.allow_auto_topic_creation is auto_create
