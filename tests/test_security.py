"""SASL and TLS against Apache Kafka's real listeners, with aiokafka as the oracle.

The ``apache`` broker has a SASL_PLAINTEXT listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and an
SSL listener whose certificate a throw-away CA signed (``broker.ssl_cafile``). Each scenario runs
with aiokafka_lite and with aiokafka on the same listener: a working setup produces and consumes,
a wrong one fails in the same way (same exception class name) and quickly.
"""

from __future__ import annotations

import ssl
import uuid
from typing import Any

import pytest

import aiokafka_lite
from aiokafka_lite.helpers import create_ssl_context

NO_LISTENERS = (
    "only the apache broker has SASL and TLS listeners (the embedded ones: see test_conn)"
)


def _need_listeners(broker: Any) -> None:
    if broker.sasl_bootstrap is None or broker.ssl_bootstrap is None:
        pytest.skip(f"[{broker.kind}] {NO_LISTENERS}")


def _sasl(broker: Any, mechanism: str, password: str | None = None) -> dict[str, Any]:
    user, secret = next(iter(broker.sasl_users.items()))
    return {
        "bootstrap_servers": broker.sasl_bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": secret if password is None else password,
    }


async def _roundtrip(mod: Any, topic: str, **kw: Any) -> str:
    """Produce one record and read it back with ``mod``'s clients; the outcome as a string."""
    producer = mod.AIOKafkaProducer(request_timeout_ms=10000, **kw)
    try:
        await producer.start()
        md = await producer.send_and_wait(topic, b"secret value", key=b"k")
    except Exception as exc:  # the outcome under test is the exception class
        return type(exc).__name__
    finally:
        await producer.stop()
    consumer = mod.AIOKafkaConsumer(
        topic, auto_offset_reset="earliest", request_timeout_ms=10000, **kw
    )
    await consumer.start()
    try:
        values: list[bytes] = []
        for _ in range(5):  # until the one record arrives (each wait bounded)
            batch = await consumer.getmany(timeout_ms=5000)
            values += [r.value for rs in batch.values() for r in rs]
            if values:
                break
    finally:
        await consumer.stop()
    assert md.topic == topic
    return f"ok {values[:1]}"


async def _both(topic_base: str, **kw: Any) -> tuple[str, str]:
    import aiokafka

    ours = await _roundtrip(aiokafka_lite, f"{topic_base}-lite", **kw)
    theirs = await _roundtrip(aiokafka, f"{topic_base}-ref", **kw)
    return ours, theirs


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_sasl_mechanism_works(broker, mechanism):
    _need_listeners(broker)
    ours, theirs = await _both(f"sasl-{uuid.uuid4().hex[:8]}", **_sasl(broker, mechanism))
    assert ours == theirs == "ok [b'secret value']"


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_sasl_wrong_password_fails_like_aiokafka(broker, mechanism):
    _need_listeners(broker)
    kw = _sasl(broker, mechanism, password="wrong")
    ours, theirs = await _both(f"sasl-bad-{uuid.uuid4().hex[:8]}", **kw)
    assert ours == theirs == "KafkaConnectionError"


async def test_sasl_wrong_password_names_the_cause(broker):
    """The bootstrap error says why: the broker's SaslAuthenticationFailed (error 58)."""
    _need_listeners(broker)
    producer = aiokafka_lite.AIOKafkaProducer(
        request_timeout_ms=10000, **_sasl(broker, "SCRAM-SHA-256", password="wrong")
    )
    with pytest.raises(aiokafka_lite.errors.KafkaConnectionError, match="SaslAuthenticationFailed"):
        await producer.start()
    await producer.stop()


async def test_sasl_on_a_plaintext_listener_fails_like_aiokafka(broker):
    """Apache Kafka rejects a SaslHandshake on a PLAINTEXT listener (ILLEGAL_SASL_STATE)."""
    _need_listeners(broker)
    kw = {**_sasl(broker, "PLAIN"), "bootstrap_servers": broker.bootstrap}
    ours, theirs = await _both(f"sasl-plain-listener-{uuid.uuid4().hex[:8]}", **kw)
    assert ours == theirs == "KafkaConnectionError"


async def test_tls_with_the_ca_works(broker):
    _need_listeners(broker)
    ctx = create_ssl_context(cafile=broker.ssl_cafile)
    kw = {"bootstrap_servers": broker.ssl_bootstrap, "security_protocol": "SSL", "ssl_context": ctx}
    ours, theirs = await _both(f"tls-{uuid.uuid4().hex[:8]}", **kw)
    assert ours == theirs == "ok [b'secret value']"


async def test_tls_untrusted_certificate_fails_like_aiokafka(broker):
    _need_listeners(broker)
    kw = {
        "bootstrap_servers": broker.ssl_bootstrap,
        "security_protocol": "SSL",
        "ssl_context": ssl.create_default_context(),  # the system CAs do not know the test CA
    }
    ours, theirs = await _both(f"tls-bad-{uuid.uuid4().hex[:8]}", **kw)
    assert ours == theirs == "KafkaConnectionError"
