"""SASL GSSAPI (Kerberos) against Apache Kafka's GSSAPI listener and a real MIT KDC.

The module fixture makes a KDC on loopback (tests/kerberos.py: realm ``AIOKAFKA.TEST``, the
broker's ``kafka/127.0.0.1`` and the client's ``alice`` with random keys exported to keytabs) and
an Apache Kafka with the opt-in GSSAPI listener (``ApacheKafka(kerberos=...)``). This process
then uses the KDC through ``KRB5_CONFIG``, a private ``KRB5CCNAME`` and ``KRB5_CLIENT_KTNAME``
(the client keytab: the library gets a ticket from it when the cache is empty), restored at
the end. Skips with the reason where the KDC tools, the ``gssapi`` package or Apache Kafka
(Java, Maven) are missing; runs only when the run covers the ``apache`` broker kind.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import aiokafka_lite
from aiokafka_lite import errors as Errors
from tests.conftest import _apache_unavailable, broker_params
from tests.kerberos import MitKdc, kdc_unavailable

#: ``connections.max.reauth.ms`` of the GSSAPI listener (KIP-368)
SESSION_MS = 5000


def _skip_reason() -> str | None:
    if "apache" not in broker_params():
        return "GSSAPI tests run with the apache broker kind only (KAFKA_BROKER)"
    reason = _apache_unavailable() or kdc_unavailable()
    if reason:
        return reason
    try:
        import gssapi  # noqa: F401
    except ImportError:
        return "the gssapi package is not installed (pip install 'aiokafka_lite[gssapi]')"
    return None


class KerberosKafka:
    """The KDC, the broker and the client's credentials."""

    def __init__(self, kdc: MitKdc, kafka: Any, client: str, client_keytab: Path) -> None:
        self.kdc = kdc
        self.kafka = kafka
        self.client = client
        self.client_keytab = client_keytab
        self.bootstrap = kafka.gssapi_bootstrap


@pytest.fixture(scope="module")
def kerberos_kafka() -> Iterator[KerberosKafka]:
    """A KDC and an Apache Kafka with a GSSAPI listener; this process's Kerberos env set."""
    reason = _skip_reason()
    if reason:
        # a skip even under AIOKAFKA_LITE_REQUIRE_APACHE: Kerberos is optional (.ci/run
        # installs it where apt can; elsewhere these tests say why they did not run)
        pytest.skip(reason)
    from aiokafka_lite.launchers.apache import ApacheKafka, KerberosListener

    kdc = MitKdc().start()
    saved = {k: os.environ.get(k) for k in (*kdc.env(), "KRB5_CLIENT_KTNAME")}
    kafka = None
    try:
        broker_keytab = kdc.dir / "kafka.keytab"
        broker = kdc.add_principal("kafka/127.0.0.1", broker_keytab)
        client_keytab = kdc.dir / "alice.keytab"
        client = kdc.add_principal("alice", client_keytab)
        os.environ.update(kdc.env())
        os.environ["KRB5_CLIENT_KTNAME"] = str(client_keytab)
        kafka = ApacheKafka(
            kerberos=KerberosListener(kdc.krb5_conf, broker_keytab, broker),
            # sessions of SESSION_MS on that listener: clients must re-authenticate
            extra_config={"listener.name.gssapi.connections.max.reauth.ms": str(SESSION_MS)},
        )
        kafka.start()
        yield KerberosKafka(kdc, kafka, client, client_keytab)
    finally:
        if kafka is not None:
            kafka.stop()
        kdc.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _gssapi_args(bootstrap: str, **kw: Any) -> dict[str, Any]:
    return {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "GSSAPI",
        "request_timeout_ms": 10000,
        **kw,
    }


async def _roundtrip(mod: Any, topic: str, **kw: Any) -> str:
    """Produce two records and read them back with ``mod``'s clients; the outcome as a string."""
    producer = mod.AIOKafkaProducer(**kw)
    try:
        await producer.start()
        await producer.send_and_wait(topic, b"kerberos 1", key=b"k")
        await producer.send_and_wait(topic, b"kerberos 2", key=b"k")
    except Exception as exc:  # the outcome under test is the exception class and message
        return f"{type(exc).__name__}: {exc}"
    finally:
        await producer.stop()
    consumer = mod.AIOKafkaConsumer(topic, auto_offset_reset="earliest", **kw)
    await consumer.start()
    try:
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(values) < 2 and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=2000)
            values += [r.value for rs in batch.values() for r in rs]
    finally:
        await consumer.stop()
    return f"ok {values}"


def _fresh_ccache(kk: KerberosKafka, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = kk.kdc.dir / f"cc-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{path}")
    return path


async def test_produce_consume_over_gssapi_like_aiokafka(kerberos_kafka, monkeypatch):
    """aiokafka_lite and aiokafka both authenticate from the client keytab and round-trip."""
    import aiokafka

    kk = kerberos_kafka
    base = f"gssapi-{uuid.uuid4().hex[:8]}"
    ccache = _fresh_ccache(kk, monkeypatch)
    ours = await _roundtrip(aiokafka_lite, f"{base}-lite", **_gssapi_args(kk.bootstrap))
    assert ours == "ok [b'kerberos 1', b'kerberos 2']"
    assert ccache.exists()  # the ticket came from the KDC through the client keytab
    _fresh_ccache(kk, monkeypatch)
    theirs = await _roundtrip(aiokafka, f"{base}-ref", **_gssapi_args(kk.bootstrap))
    assert theirs == ours


async def test_credentials_from_a_kinit_cache(kerberos_kafka, monkeypatch):
    """No client keytab: the ticket-granting ticket of a ``kinit`` in KRB5CCNAME is used."""
    kk = kerberos_kafka
    ccache = _fresh_ccache(kk, monkeypatch)
    monkeypatch.delenv("KRB5_CLIENT_KTNAME")
    kk.kdc.kinit(kk.client, kk.client_keytab, ccache)
    topic = f"gssapi-kinit-{uuid.uuid4().hex[:8]}"
    out = await _roundtrip(
        aiokafka_lite, topic, **_gssapi_args(kk.bootstrap, sasl_kerberos_domain_name="127.0.0.1")
    )
    assert out == "ok [b'kerberos 1', b'kerberos 2']"


async def test_wrong_service_name_is_a_clear_error(kerberos_kafka, monkeypatch):
    """The KDC knows no ``nosuch/127.0.0.1``: no ticket, the connection fails before the
    broker sees a token, naming the service. aiokafka lets gssapi's own exception escape from
    start() (README: differences from aiokafka)."""
    import aiokafka

    from aiokafka_lite.conn import BrokerConnection

    kk = kerberos_kafka
    _fresh_ccache(kk, monkeypatch)
    host, port = kk.bootstrap.split(",")[0].rsplit(":", 1)
    conn = BrokerConnection(
        host,
        int(port),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="GSSAPI",
        sasl_kerberos_service_name="nosuch",
    )
    with pytest.raises(Errors.AuthenticationFailedError, match=r"nosuch@127\.0\.0\.1") as info:
        await conn.connect(10000)
    assert "not found in Kerberos database" in str(info.value)
    assert conn.closed

    topic = f"gssapi-bad-{uuid.uuid4().hex[:8]}"
    args = _gssapi_args(kk.bootstrap, sasl_kerberos_service_name="nosuch")
    ours = await _roundtrip(aiokafka_lite, topic, **args)
    theirs = await _roundtrip(aiokafka, topic, **args)
    assert ours.startswith("KafkaConnectionError") and "nosuch@127.0.0.1" in ours, ours
    assert "not found in Kerberos database" in ours, ours
    assert theirs.startswith("GSSError") and "not found in Kerberos database" in theirs, theirs


async def test_reauthenticates_with_a_new_kerberos_context(kerberos_kafka, monkeypatch):
    """The listener grants SESSION_MS: the connection re-authenticates (KIP-368) with a new
    GSS-API context on the same stream and keeps answering, never closed by the broker."""
    from aiokafka_lite.conn import BrokerConnection
    from aiokafka_lite.protocol import messages as m

    kk = kerberos_kafka
    _fresh_ccache(kk, monkeypatch)
    host, port = kk.bootstrap.split(",")[0].rsplit(":", 1)
    conn = BrokerConnection(
        host, int(port), security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI"
    )
    await conn.connect(10000)
    try:
        deadline = time.monotonic() + 3 * SESSION_MS / 1000
        while conn.reauthentications < 2 and time.monotonic() < deadline:
            resp = await conn.send(m.MetadataRequest(topics=[]))
            assert resp.brokers
            await asyncio.sleep(0.2)
        assert conn.reauthentications >= 2
        assert not conn.closed
        assert (await conn.send(m.MetadataRequest(topics=[]))).brokers
    finally:
        conn.close()


@pytest.mark.parametrize("case", ["no keytab", "stale keytab"])
async def test_unusable_client_keytab_is_a_clear_error(kerberos_kafka, monkeypatch, tmp_path, case):
    """No credentials: the client keytab does not exist (no principal in it), or holds a key
    the KDC has since replaced (``ktadd`` again elsewhere). aiokafka_lite fails at start() with
    the GSS-API reason; aiokafka lets gssapi's own exception escape from start()."""
    import aiokafka

    kk = kerberos_kafka
    _fresh_ccache(kk, monkeypatch)
    keytab = tmp_path / "client.keytab"
    if case == "stale keytab":
        name = f"bob{uuid.uuid4().hex[:6]}"
        kk.kdc.add_principal(name, keytab)
        kk.kdc.add_principal_keys(name, tmp_path / "newer.keytab")  # new key, keytab stale
    monkeypatch.setenv("KRB5_CLIENT_KTNAME", str(keytab))
    topic = f"gssapi-nokey-{uuid.uuid4().hex[:8]}"
    args = _gssapi_args(kk.bootstrap)
    ours = await _roundtrip(aiokafka_lite, topic, **args)
    theirs = await _roundtrip(aiokafka, topic, **args)
    assert ours.startswith("KafkaConnectionError") and "GSSAPI authentication" in ours, ours
    reason = "No Kerberos credentials" if case == "no keytab" else "Decrypt integrity check"
    assert reason in ours, ours
    assert theirs.startswith("MissingCredentialsError") and reason in theirs, theirs


@pytest.mark.parametrize("cls", ["AIOKafkaProducer", "AIOKafkaConsumer", "AIOKafkaAdminClient"])
def test_without_the_gssapi_package_construction_names_the_extra(monkeypatch, cls):
    """No broker needed: a client configured for GSSAPI without ``gssapi`` installed is refused
    when made (aiokafka: an AssertionError "gssapi library required")."""
    monkeypatch.setitem(sys.modules, "gssapi", None)
    make = getattr(aiokafka_lite, cls)
    with pytest.raises(Errors.MissingExtraError, match=r"aiokafka_lite\[gssapi\]"):
        make(**_gssapi_args("127.0.0.1:9"))


async def test_without_the_gssapi_package_connect_names_the_extra(kerberos_kafka, monkeypatch):
    from aiokafka_lite.conn import BrokerConnection

    monkeypatch.setitem(sys.modules, "gssapi", None)  # import gssapi raises ImportError
    # a connection made without the client's construction-time check fails at connect
    host, port = kerberos_kafka.bootstrap.split(",")[0].rsplit(":", 1)
    conn = BrokerConnection(
        host, int(port), security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI"
    )
    with pytest.raises(Errors.MissingExtraError, match=r"aiokafka_lite\[gssapi\]"):
        await conn.connect(10000)
    assert conn.closed


async def test_an_unanswering_kdc_fails_within_the_connect_timeout(
    kerberos_kafka, monkeypatch, tmp_path
):
    """A KDC that accepts and never answers: the connection fails with KafkaTimeoutError at
    its deadline, the event loop stays free meanwhile (Kerberos runs in a worker thread)."""
    from aiokafka_lite.conn import BrokerConnection
    from aiokafka_lite.launchers.embedded import free_port

    kk = kerberos_kafka
    # the KDC's connections are kept open and unanswered (Python 3.13 closes a stream writer
    # that is garbage-collected: libkrb5 then saw a refused KDC, not a silent one)
    held: list[asyncio.StreamWriter] = []
    silent = await asyncio.start_server(
        lambda r, w: held.append(w), "127.0.0.1", free_port("127.0.0.1")
    )
    silent_port = silent.sockets[0].getsockname()[1]
    conf = tmp_path / "krb5.conf"
    conf.write_text(
        kk.kdc.krb5_conf.read_text().replace(f"127.0.0.1:{kk.kdc.port}", f"127.0.0.1:{silent_port}")
    )
    monkeypatch.setenv("KRB5_CONFIG", str(conf))
    _fresh_ccache(kk, monkeypatch)
    host, port = kk.bootstrap.split(",")[0].rsplit(":", 1)
    conn = BrokerConnection(
        host, int(port), security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI"
    )
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    ticker = asyncio.create_task(tick())
    start = time.monotonic()
    try:
        with pytest.raises(Errors.KafkaTimeoutError, match="KDC"):
            await conn.connect(1500)
    finally:
        ticker.cancel()
        silent.close()
        for w in held:
            w.close()
    elapsed = time.monotonic() - start
    assert 1.0 < elapsed < 5.0, elapsed
    assert ticks >= 10  # the loop ran other work while Kerberos waited
    assert conn.closed
