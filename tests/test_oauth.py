"""SASL/OAUTHBEARER, OIDC client credentials and KIP-368 re-authentication on Apache Kafka.

The ``apache`` broker's SASL_PLAINTEXT listener enables OAUTHBEARER with Kafka's built-in
unsecured JWS validator (tokens ``{"alg":"none"}`` with ``sub`` and ``exp``; the session the
broker grants lasts until the token's ``exp``), and its ``REAUTH`` listener grants sessions of
``REAUTH_MS`` to every mechanism (``connections.max.reauth.ms``): a client that does not
re-authenticate is disconnected at its first request after that. The OIDC token endpoint is an
asyncio HTTP server on loopback run by the test itself.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import urllib.parse
import uuid
from typing import Any

import pytest

import aiokafka_lite
import aiokafka_lite.abc
from aiokafka_lite import errors as Errors
from aiokafka_lite.auth import OIDCTokenProvider
from aiokafka_lite.hooks import Hook

NEEDS_APACHE = "only the apache broker has the OAUTHBEARER and REAUTH listeners"


def _need_apache(broker: Any) -> Any:
    if broker.kind != "apache" or not hasattr(broker.process, "reauth_bootstrap"):
        pytest.skip(f"[{broker.kind}] {NEEDS_APACHE}")
    return broker.process


def _b64url(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def unsecured_jws(sub: str = "alice", lifetime: float = 3600.0) -> str:
    """An unsecured JWS (RFC 7515 ``alg: none``) as Kafka's unsecured validator accepts it.

    ``iat`` is whole seconds, as issuers write it: Kafka's validator refuses an ``iat`` above
    its own clock in milliseconds, so a fractional ``iat`` checked within the same millisecond
    it was minted is refused (``invalid_token``; seen on CI)."""
    now = time.time()
    claims = {"sub": sub, "iat": int(now), "exp": now + lifetime}
    return f"{_b64url({'alg': 'none'})}.{_b64url(claims)}."


def provider_class(mod: Any) -> type:
    """A token provider for ``mod`` (aiokafka or aiokafka_lite) handing out unsecured tokens."""
    import importlib

    base = importlib.import_module(f"{mod.__name__}.abc").AbstractTokenProvider

    class Unsecured(base):  # type: ignore[misc, valid-type]
        def __init__(self, lifetime: float = 3600.0, ext: dict[str, str] | None = None) -> None:
            self.lifetime = lifetime
            self.ext = ext or {}
            self.calls = 0

        async def token(self) -> str:
            self.calls += 1
            return unsecured_jws(lifetime=self.lifetime)

        def extensions(self) -> dict[str, str]:
            return dict(self.ext)

    return Unsecured


def _oauth(bootstrap: str, provider: Any) -> dict[str, Any]:
    return {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": provider,
    }


async def _roundtrip(mod: Any, topic: str, **kw: Any) -> str:
    """Produce one record and read it back with ``mod``'s clients; the outcome as a string."""
    producer = mod.AIOKafkaProducer(request_timeout_ms=10000, **kw)
    try:
        await producer.start()
        await producer.send_and_wait(topic, b"bearer value", key=b"k")
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
        for _ in range(5):
            batch = await consumer.getmany(timeout_ms=5000)
            values += [r.value for rs in batch.values() for r in rs]
            if values:
                break
    finally:
        await consumer.stop()
    return f"ok {values[:1]}"


# ------------------------------------------------------------------ OAUTHBEARER, differential


async def test_oauthbearer_works_like_aiokafka(broker, new_topic):
    kafka = _need_apache(broker)
    import aiokafka

    base = f"oauth-{uuid.uuid4().hex[:8]}"
    for suffix in ("lite", "ref"):  # created first: aiokafka's first send to a topic the
        await new_topic(name=f"{base}-{suffix}")  # broker auto-creates may fail (not what's tested)
    ext = {"traceId": "abc 123"}
    ours_p, theirs_p = provider_class(aiokafka_lite)(ext=ext), provider_class(aiokafka)(ext=ext)
    ours = await _roundtrip(aiokafka_lite, f"{base}-lite", **_oauth(kafka.sasl_bootstrap, ours_p))
    theirs = await _roundtrip(aiokafka, f"{base}-ref", **_oauth(kafka.sasl_bootstrap, theirs_p))
    assert ours == theirs == "ok [b'bearer value']"
    assert ours_p.calls >= 1 and theirs_p.calls >= 1


async def test_oauthbearer_expired_token_fails_like_aiokafka(broker):
    """The broker refuses an expired token (its JSON error challenge, then error 58)."""
    kafka = _need_apache(broker)
    import aiokafka

    base = f"oauth-bad-{uuid.uuid4().hex[:8]}"
    ours_p = provider_class(aiokafka_lite)(lifetime=-60)
    theirs_p = provider_class(aiokafka)(lifetime=-60)
    ours = await _roundtrip(aiokafka_lite, f"{base}-lite", **_oauth(kafka.sasl_bootstrap, ours_p))
    theirs = await _roundtrip(aiokafka, f"{base}-ref", **_oauth(kafka.sasl_bootstrap, theirs_p))
    assert ours == "KafkaConnectionError"
    # Both fail, differently: aiokafka 0.14 takes the broker's error challenge for success
    # (it never sends the 0x01 RFC 7628 asks for), so its start() returns and the first
    # request fails after request_timeout_ms (README: differences from aiokafka).
    assert theirs in ("KafkaConnectionError", "UnknownTopicOrPartitionError")


async def test_oauthbearer_refused_token_raises_the_brokers_message(broker):
    kafka = _need_apache(broker)
    from aiokafka_lite.conn import BrokerConnection

    host, port = kafka.sasl_bootstrap.split(",")[0].rsplit(":", 1)
    conn = BrokerConnection(
        host,
        int(port),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=provider_class(aiokafka_lite)(lifetime=-60),
    )
    with pytest.raises(Errors.SaslAuthenticationFailed, match="invalid_token"):
        await conn.connect(10000)
    assert conn.closed


async def test_oauthbearer_provider_errors_fail_the_connection_quickly(broker):
    kafka = _need_apache(broker)

    class Raising(aiokafka_lite.abc.AbstractTokenProvider):
        async def token(self) -> str:
            raise RuntimeError("identity provider down")

    class Hanging(aiokafka_lite.abc.AbstractTokenProvider):
        async def token(self) -> str:
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

    p = aiokafka_lite.AIOKafkaProducer(
        request_timeout_ms=3000, **_oauth(kafka.sasl_bootstrap, Raising())
    )
    with pytest.raises(Errors.KafkaConnectionError, match="identity provider down"):
        await asyncio.wait_for(p.start(), 10)
    await p.stop()

    p = aiokafka_lite.AIOKafkaProducer(
        request_timeout_ms=1500, **_oauth(kafka.sasl_bootstrap, Hanging())
    )
    t0 = time.monotonic()
    with pytest.raises(Errors.KafkaConnectionError, match="did not return within"):
        await asyncio.wait_for(p.start(), 10)
    assert time.monotonic() - t0 < 5  # bounded by request_timeout_ms, not a hang
    await p.stop()

    # cancelling a start() stuck on the provider cancels it at once
    p = aiokafka_lite.AIOKafkaProducer(
        request_timeout_ms=30000, **_oauth(kafka.sasl_bootstrap, Hanging())
    )
    task = asyncio.ensure_future(p.start())
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    await p.stop()


def test_oauthbearer_needs_a_provider_at_construction():
    with pytest.raises(ValueError, match="AbstractTokenProvider"):
        aiokafka_lite.AIOKafkaProducer(
            security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER"
        )
    with pytest.raises(ValueError, match="got str"):
        aiokafka_lite.AIOKafkaConsumer(
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider="a token",
        )


# ------------------------------------------------------------------------------- OIDC server


class TokenEndpoint:
    """An OAuth 2 token endpoint on loopback: client credentials -> unsecured JWS."""

    def __init__(self, lifetime: float, client_id: str = "app", secret: str = "s3cret") -> None:
        self.lifetime = lifetime
        self.client_id, self.secret = client_id, secret
        self.issued = 0
        self.requests: list[dict[str, str]] = []
        self.authorizations: list[str] = []
        self.chunked = False
        self.silent = False
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[Any]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/realms/test/token"

    async def __aenter__(self) -> TokenEndpoint:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._handlers:  # a silent answer never ends by itself
            task.cancel()
        # Python 3.12+ waits for the connections' handlers too
        await asyncio.wait_for(self._server.wait_closed(), 10)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode()
            headers = {
                k.strip().lower(): v.strip()
                for k, v in (line.split(":", 1) for line in head.split("\r\n")[1:] if ":" in line)
            }
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            form = dict(urllib.parse.parse_qsl(body.decode()))
            self.requests.append(form)
            self.authorizations.append(headers.get("authorization", ""))
            if self.silent:
                await asyncio.sleep(3600)
            expected = base64.b64encode(f"{self.client_id}:{self.secret}".encode()).decode()
            if headers.get("authorization") != f"Basic {expected}":
                status, doc = "401 Unauthorized", {"error": "invalid_client"}
            elif form.get("grant_type") != "client_credentials":
                status, doc = "400 Bad Request", {"error": "unsupported_grant_type"}
            else:
                self.issued += 1
                status = "200 OK"
                doc = {
                    "access_token": unsecured_jws(lifetime=self.lifetime),
                    "token_type": "Bearer",
                    "expires_in": self.lifetime,
                }
            payload = json.dumps(doc).encode()
            if self.chunked:
                mid = len(payload) // 2
                framed = b"".join(
                    b"%x\r\n%s\r\n" % (len(c), c) for c in (payload[:mid], payload[mid:])
                )
                framed += b"0\r\n\r\n"
                head_out = f"HTTP/1.1 {status}\r\nTransfer-Encoding: chunked\r\n"
            else:
                framed = payload
                head_out = f"HTTP/1.1 {status}\r\nContent-Length: {len(payload)}\r\n"
            head_out += "Content-Type: application/json\r\nConnection: close\r\n\r\n"
            writer.write(head_out.encode() + framed)
            await writer.drain()
        finally:
            self._handlers.discard(task)
            writer.close()


async def test_oidc_provider_caches_and_refreshes():
    async with TokenEndpoint(lifetime=1) as idp:
        p = OIDCTokenProvider(
            idp.url, "app", "s3cret", scope="kafka", refresh_fraction=0.5, background_refresh=False
        )
        first = await p.token()
        assert await p.token() == first and idp.issued == 1  # cached
        assert idp.requests[0] == {"grant_type": "client_credentials", "scope": "kafka"}
        await asyncio.sleep(0.6)  # past half of its 1 s lifetime
        assert idp.issued == 1  # no background refresh: the next call fetches
        idp.chunked = True
        second = await p.token()
        assert second != first and idp.issued == 2
        # concurrent callers past the refresh point share one fetch
        await asyncio.sleep(0.6)
        tokens = await asyncio.gather(*(p.token() for _ in range(5)))
        assert len(set(tokens)) == 1 and idp.issued == 3


async def _until(cond: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        await asyncio.sleep(0.02)


async def test_oidc_provider_refreshes_in_the_background():
    """The successor is fetched at the refresh point without anyone asking, so a token() call
    after it returns the new token with no round trip; a failed background refresh keeps the
    valid token and is retried; close() stops the task."""
    async with TokenEndpoint(lifetime=6) as idp:
        p = OIDCTokenProvider(idp.url, "app", "s3cret", refresh_fraction=0.5)
        first = await p.token()
        assert idp.issued == 1
        await _until(lambda: idp.issued == 2, "the background refresh at 3 s")
        second = await p.token()
        assert second != first and idp.issued == 2 and p.fetches == 2  # cached: no fetch
        # the identity provider refuses for a while (the refreshes at 3 s and 4 s of the
        # second token's 6 s): the valid token is kept, then replaced
        idp.secret = "rotated"
        await _until(lambda: len(idp.requests) >= 4, "retried background refreshes")
        assert await p.token() == second and idp.issued == 2
        idp.secret = "s3cret"
        await _until(lambda: idp.issued == 3, "the refresh once the endpoint accepts again")
        third = await p.token()
        assert third not in (first, second) and p.fetches == 3
        await p.close()
        assert p._refresher is None
        asked = len(idp.requests)
        await p.token()  # cached and valid: no fetch, and the task starts again
        assert len(idp.requests) == asked
        await p.close()


async def test_oidc_provider_errors_are_clear_and_bounded():
    async with TokenEndpoint(lifetime=60) as idp:
        bad = OIDCTokenProvider(idp.url, "app", "wrong")
        with pytest.raises(Errors.AuthenticationFailedError, match="401: invalid_client"):
            await bad.token()
        idp.silent = True
        slow = OIDCTokenProvider(idp.url, "app", "s3cret", timeout=0.5)
        t0 = time.monotonic()
        with pytest.raises(Errors.KafkaTimeoutError, match=r"did not answer within 0\.5 s"):
            await slow.token()
        assert time.monotonic() - t0 < 3
        url = idp.url
    with pytest.raises(Errors.KafkaConnectionError, match="cannot reach"):
        await OIDCTokenProvider(url, "app", "s3cret").token()  # nothing listens there now
    with pytest.raises(Errors.KafkaConfigurationError):
        OIDCTokenProvider("ftp://example.com/token", "app", "s3cret")


class Counter(Hook):
    """Counts connects, disconnects and SaslHandshake requests (one per (re-)authentication),
    and records failed requests and the slowest Produce."""

    def __init__(self) -> None:
        self.connects = 0
        self.disconnects: list[BaseException | None] = []
        self.handshakes = 0
        self.failed: list[tuple[str, BaseException]] = []
        self.slowest_produce = 0.0

    def on_connect(self, node_id: int | None, host: str, port: int, purpose: str) -> None:
        self.connects += 1

    def on_disconnect(
        self, node_id: int | None, host: str, port: int, purpose: str, reason: BaseException | None
    ) -> None:
        self.disconnects.append(reason)

    def on_request_sent(self, node_id: int | None, api_key: int, api_name: str, size: int) -> None:
        if api_name == "SaslHandshake":
            self.handshakes += 1

    def on_response(
        self,
        node_id: int | None,
        api_key: int,
        api_name: str,
        latency: float,
        error: BaseException | None,
    ) -> None:
        if error is not None:
            self.failed.append((api_name, error))
        if api_name == "Produce":
            self.slowest_produce = max(self.slowest_produce, latency)

    @property
    def reauths(self) -> int:
        return self.handshakes - self.connects


async def test_oidc_provider_with_short_lived_tokens_reauthenticates(broker, new_topic):
    """Tokens of 8 s: the broker's sessions end with them, so the producer re-authenticates
    with refreshed tokens (no disconnect, every send acknowledged)."""
    kafka = _need_apache(broker)
    topic = await new_topic()
    hooks = Counter()
    async with TokenEndpoint(lifetime=8) as idp:
        provider = OIDCTokenProvider(idp.url, "app", "s3cret", scope="kafka")
        producer = aiokafka_lite.AIOKafkaProducer(
            request_timeout_ms=10000, hooks=[hooks], **_oauth(kafka.sasl_bootstrap, provider)
        )
        await producer.start()
        try:
            deadline = time.monotonic() + 19
            sent = 0
            while time.monotonic() < deadline:
                await producer.send_and_wait(topic, str(sent).encode())
                sent += 1
                await asyncio.sleep(0.05)
            assert hooks.disconnects == []
        finally:
            await producer.stop()
    assert hooks.reauths >= 2, vars(hooks)
    assert idp.issued >= 3  # the first token and at least two refreshes


# ------------------------------------------------------------------ re-authentication soak

SOAK_S = 16.0  # four sessions of REAUTH_MS per connection: every one re-authenticates 3-4 times


@pytest.mark.parametrize("mechanism", ["OAUTHBEARER", "SCRAM-SHA-256", "PLAIN"])
async def test_reauthentication_soak(broker, new_topic, mechanism):
    """An idempotent producer and a group consumer on the REAUTH listener (sessions of
    REAUTH_MS) for SOAK_S: many re-authentications, no disconnect, no error, every record
    exactly once and in order."""
    kafka = _need_apache(broker)
    from aiokafka_lite.launchers.apache import REAUTH_MS, SASL_USERS

    topic = await new_topic(partitions=1)
    if mechanism == "OAUTHBEARER":
        auth: dict[str, Any] = {"sasl_oauth_token_provider": provider_class(aiokafka_lite)()}
    else:
        user, password = next(iter(SASL_USERS.items()))
        auth = {"sasl_plain_username": user, "sasl_plain_password": password}
    common = {
        "bootstrap_servers": kafka.reauth_bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "request_timeout_ms": 15000,
        **auth,
    }
    p_hooks, c_hooks = Counter(), Counter()
    producer = aiokafka_lite.AIOKafkaProducer(
        enable_idempotence=True, linger_ms=2, hooks=[p_hooks], **common
    )
    consumer = aiokafka_lite.AIOKafkaConsumer(
        topic,
        group_id=f"soak-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        hooks=[c_hooks],
        **common,
    )
    await producer.start()
    await consumer.start()
    received: list[int] = []
    sent = 0
    stop = asyncio.Event()

    async def produce() -> None:
        nonlocal sent
        deadline = time.monotonic() + SOAK_S
        while time.monotonic() < deadline:
            futs = [await producer.send(topic, str(sent + i).encode(), key=b"k") for i in range(5)]
            sent += 5
            await asyncio.gather(*futs)  # any error surfaces here
            await asyncio.sleep(0.01)
        stop.set()

    async def consume() -> None:
        while not (stop.is_set() and len(received) >= sent):
            batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                received.extend(int(r.value) for r in records)

    t0 = time.monotonic()
    try:
        prod = asyncio.ensure_future(produce())
        await asyncio.wait_for(asyncio.gather(prod, consume()), SOAK_S + 30)
        elapsed = time.monotonic() - t0
        disconnects = p_hooks.disconnects + c_hooks.disconnects
        failed = p_hooks.failed + c_hooks.failed
    finally:
        await consumer.stop()
        await producer.stop()
    reauths = p_hooks.reauths + c_hooks.reauths
    print(
        f"\nSOAK {mechanism}: {elapsed:.1f} s, sessions of {REAUTH_MS} ms, "
        f"{reauths} re-authentications (producer {p_hooks.reauths}, consumer {c_hooks.reauths}), "
        f"{sent} records, {p_hooks.connects + c_hooks.connects} connects, "
        f"{len(disconnects)} disconnects and {len(failed)} failed requests during the run, "
        f"slowest Produce {p_hooks.slowest_produce * 1000:.0f} ms"
    )
    assert disconnects == []
    assert failed == []  # not even a request retried behind the application's back
    assert received == list(range(sent))
    # every connection lived through several sessions: the producer's and the consumer's
    # connections each re-authenticated about every REAUTH_MS - 1 s
    assert p_hooks.reauths >= SOAK_S / (REAUTH_MS / 1000) - 2
    assert c_hooks.reauths >= SOAK_S / (REAUTH_MS / 1000) - 2


async def test_reauthentication_keeps_pipelined_requests_in_order(broker, new_topic):
    """One connection to the REAUTH listener, Produce requests pipelined without pause (send()
    from several tasks and send_nowait callbacks) across re-authentications, each with its own
    record: each answer belongs to its own request (the record at the answer's offset is that
    request's), those written at once (send_nowait) are handled in the order issued (their
    offsets grow), and the connection never closes."""
    kafka = _need_apache(broker)
    from aiokafka_lite import AIOKafkaConsumer
    from aiokafka_lite.conn import BrokerConnection
    from aiokafka_lite.launchers.apache import REAUTH_MS, SASL_USERS
    from aiokafka_lite.protocol import messages as m
    from aiokafka_lite.records import CODEC_NONE, RecordBatchBuilder

    topic = await new_topic(partitions=1)
    host, port = kafka.reauth_bootstrap.split(",")[0].rsplit(":", 1)
    user, password = next(iter(SASL_USERS.items()))
    conn = BrokerConnection(
        host,
        int(port),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username=user,
        sasl_plain_password=password,
        max_in_flight=8,
    )
    await conn.connect(10000)
    issued = 0
    offsets: dict[int, int] = {}  # request number -> the offset its answer gave
    by_callback: set[int] = set()
    errors: list[BaseException] = []
    slowest = 0.0
    loop = asyncio.get_running_loop()
    run_for = 2.5 * REAUTH_MS / 1000

    def produce(n: int) -> Any:
        builder = RecordBatchBuilder(CODEC_NONE, batch_size=1 << 16)
        # a current timestamp: a record dated 1970 is past the broker's 7-day retention, and
        # its next retention check deletes it (the read-back then starts past it)
        builder.append(int(time.time() * 1000), None, b"request %d" % n, [])
        part = m.ProduceRequest.TopicProduceData.PartitionProduceData
        return m.ProduceRequest(
            transactional_id=None,
            acks=1,
            timeout_ms=10000,
            topic_data=[
                m.ProduceRequest.TopicProduceData(
                    name=topic, partition_data=[part(index=0, records=builder.build())]
                )
            ],
        )

    def answered(n: int, resp: Any, exc: BaseException | None) -> None:
        if exc is not None:
            errors.append(exc)
            return
        (p,) = [p for t in resp.responses for p in t.partition_responses]
        if p.error_code:
            errors.append(AssertionError(f"request {n}: error {p.error_code}"))
        offsets[n] = int(p.base_offset)

    async def worker() -> None:
        nonlocal issued, slowest
        end = loop.time() + run_for
        while loop.time() < end:
            n = issued
            issued += 1
            if n % 2 and conn.send_nowait(produce(n), lambda r, e, n=n: answered(n, r, e)):
                by_callback.add(n)
                await asyncio.sleep(0)
                continue
            t0 = loop.time()
            try:
                resp = await conn.send(produce(n))
            except Exception as exc:  # recorded: the assertion below names it
                answered(n, None, exc)
            else:
                answered(n, resp, None)
            slowest = max(slowest, loop.time() - t0)

    try:
        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(4))), run_for + 30)
        # the last send_nowait() requests may still be out: wait for their callbacks
        settle = loop.time() + 30
        while len(offsets) + len(errors) < issued and loop.time() < settle:
            await asyncio.sleep(0.01)
        assert errors == [] and not conn.closed
        assert conn.reauthentications >= 2
    finally:
        conn.close()
    assert sorted(offsets) == list(range(issued))  # everything issued came back once
    assert len(set(offsets.values())) == issued
    # one connection's requests are handled in the order written: send_nowait() writes at once
    # (a send() may wait for an in-flight slot), so the callbacks' offsets grow with n
    in_order = [offsets[n] for n in sorted(by_callback)]
    assert in_order == sorted(in_order)
    # and each answer is its own request's: the record at its offset is that request's
    c = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    await c.start()
    try:
        stored: dict[int, bytes] = {}
        # readiness, not what is asserted: bounded by progress (60 s with no new record)
        stalled_at = loop.time() + 60
        while len(stored) < issued:
            assert loop.time() < stalled_at, (
                f"read {len(stored)} of {issued}, then nothing for 60 s"
            )
            before = len(stored)
            for recs in (await c.getmany(timeout_ms=500)).values():
                stored.update((r.offset, r.value) for r in recs)
            if len(stored) > before:
                stalled_at = loop.time() + 60
    finally:
        await c.stop()
    wrong = {
        n: stored.get(off) for n, off in offsets.items() if stored.get(off) != b"request %d" % n
    }
    assert not wrong, f"answers matched to other requests: {dict(list(wrong.items())[:5])}"
    print(
        f"\n{issued} requests ({len(by_callback)} by callback), {conn.reauthentications} "
        f"re-authentications, slowest {slowest * 1000:.0f} ms"
    )


async def test_refused_reauthentication_closes_with_the_brokers_error(broker):
    """A token refused at re-authentication closes the connection with that error (the
    client then reconnects, and a refused token surfaces as on any connect)."""
    kafka = _need_apache(broker)
    from aiokafka_lite.conn import BrokerConnection
    from aiokafka_lite.launchers.apache import REAUTH_MS
    from aiokafka_lite.protocol import messages as m

    class GoodThenExpired(aiokafka_lite.abc.AbstractTokenProvider):
        calls = 0

        async def token(self) -> str:
            self.calls += 1
            return unsecured_jws(lifetime=3600 if self.calls == 1 else -60)

    host, port = kafka.reauth_bootstrap.split(",")[0].rsplit(":", 1)
    provider = GoodThenExpired()
    conn = BrokerConnection(
        host,
        int(port),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=provider,
    )
    await conn.connect(10000)
    await conn.send(m.MetadataRequest(topics=[]))
    deadline = time.monotonic() + REAUTH_MS / 1000 + 10
    while not conn.closed and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert conn.closed and provider.calls == 2
    assert isinstance(conn.close_reason, Errors.SaslAuthenticationFailed)
    assert "invalid_token" in str(conn.close_reason)
    with pytest.raises(Errors.KafkaConnectionError):
        await conn.send(m.MetadataRequest(topics=[]))


# --------------------------------------------------------- OIDC with signatures (JWKS)


class _RsaKey:
    """An RSA key made by the openssl command; RS256 (RSASSA-PKCS1-v1_5, SHA-256) signing in
    pure Python, so the test needs no cryptography package."""

    _SHA256_INFO = bytes.fromhex("3031300d060960864801650304020105000420")

    def __init__(self, workdir: Any) -> None:
        import re
        import subprocess

        pem = workdir / "idp.key"
        subprocess.run(
            ["openssl", "genrsa", "-out", str(pem), "2048"], check=True, capture_output=True
        )
        text = subprocess.run(
            ["openssl", "rsa", "-in", str(pem), "-noout", "-text"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout

        def field(name: str) -> int:
            m = re.search(rf"^{name}:\s*\n((?:\s+[0-9a-f:]+\n)+)", text, re.M)
            assert m, name
            return int(re.sub(r"[\s:]", "", m.group(1)), 16)

        self.n, self.d = field("modulus"), field("privateExponent")
        self.e = int(re.search(r"publicExponent: (\d+)", text).group(1))  # type: ignore[union-attr]
        self.size = (self.n.bit_length() + 7) // 8

    def jwk(self, kid: str) -> dict[str, str]:
        def b64(i: int) -> str:
            raw = i.to_bytes((i.bit_length() + 7) // 8, "big")
            return base64.urlsafe_b64encode(raw).decode().rstrip("=")

        return {
            "kty": "RSA",
            "use": "sig",
            "alg": "RS256",
            "kid": kid,
            "n": b64(self.n),
            "e": b64(self.e),
        }

    def jwt(self, kid: str, claims: dict[str, Any]) -> str:
        import hashlib

        signing_input = f"{_b64url({'alg': 'RS256', 'typ': 'JWT', 'kid': kid})}.{_b64url(claims)}"
        digest = self._SHA256_INFO + hashlib.sha256(signing_input.encode()).digest()
        em = b"\x00\x01" + b"\xff" * (self.size - len(digest) - 3) + b"\x00" + digest
        sig = pow(int.from_bytes(em, "big"), self.d, self.n).to_bytes(self.size, "big")
        return f"{signing_input}.{base64.urlsafe_b64encode(sig).decode().rstrip('=')}"


async def test_oidc_signed_tokens_checked_by_the_broker_against_jwks(broker, tmp_path, monkeypatch):
    """The issue's "OIDC for real": an identity provider run by the test (a token endpoint
    handing out RS256-signed JWTs and its JWKS), an Apache Kafka whose OAUTHBEARER listener
    verifies signatures through sasl.oauthbearer.jwks.endpoint.url, and OIDCTokenProvider
    fetching tokens: produce works; a token signed by another key is refused."""
    _need_apache(broker)
    import http.server
    import threading

    from aiokafka_lite.launchers.apache import QUICK_JVM_OPTIONS, ApacheKafka

    key, stranger = _RsaKey(tmp_path), _RsaKey(tmp_path)
    issued: list[str] = []
    sign_with = [key]

    class Idp(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, doc: dict[str, Any]) -> None:
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._send(200, {"keys": [key.jwk("k1")]})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            now = int(time.time())
            claims = {
                "iss": base,
                "aud": "kafka-cluster",
                "sub": "orders-service",
                "iat": now,
                "exp": now + 600,
                "scope": "kafka",
            }
            token = sign_with[0].jwt("k1", claims)
            issued.append(token)
            self._send(200, {"access_token": token, "token_type": "Bearer", "expires_in": 600})

    idp = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Idp)
    threading.Thread(target=idp.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{idp.server_address[1]}"
    # Kafka 4 only fetches URLs a JVM system property allows; the java launcher reads this
    monkeypatch.setenv(
        "JDK_JAVA_OPTIONS", f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={base}/jwks"
    )
    kafka = ApacheKafka(
        extra_config={
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
            ),
            "sasl.oauthbearer.jwks.endpoint.url": f"{base}/jwks",
            # Kafka 4.4 requires the audience (and checks the issuer when given)
            "sasl.oauthbearer.expected.audience": "kafka-cluster",
            "sasl.oauthbearer.expected.issuer": base,
        },
        # as the fixtures' brokers (conftest.py): C1 only, the class-data-sharing archive
        jvm_options=QUICK_JVM_OPTIONS,
        class_data_sharing=True,
    )
    try:
        await asyncio.get_running_loop().run_in_executor(None, kafka.start)
        monkeypatch.delenv("JDK_JAVA_OPTIONS")
        provider = OIDCTokenProvider(f"{base}/token", "orders-service", "secret", scope="kafka")
        producer = aiokafka_lite.AIOKafkaProducer(
            request_timeout_ms=15000, **_oauth(kafka.sasl_bootstrap, provider)
        )
        await producer.start()
        try:
            md = await producer.send_and_wait("jwks-topic", b"signed")
            assert md.offset == 0
        finally:
            await producer.stop()
        assert len(issued) == 1

        sign_with[0] = stranger  # same kid, another key: the signature does not verify
        bad = aiokafka_lite.AIOKafkaProducer(
            request_timeout_ms=15000,
            **_oauth(kafka.sasl_bootstrap, OIDCTokenProvider(f"{base}/token", "x", "y")),
        )
        with pytest.raises(Errors.KafkaConnectionError, match="invalid_token"):
            await bad.start()
        await bad.stop()
    finally:
        await asyncio.get_running_loop().run_in_executor(None, kafka.stop)
        idp.shutdown()


# ------------------------------------------------------------ the Java client on the same listener

JAVA_OAUTH = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "OAUTHBEARER",
    # the Java client's own unsecured tokens (its default login callback handler)
    "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
    'required unsecuredLoginStringClaim_sub="alice";',
}


async def test_java_client_and_ours_on_the_reauth_listener(broker, new_topic):
    """Apache Kafka's Java client (4.4) and ours on the REAUTH listener with OAUTHBEARER at
    once: the Java consumer reads what our producer writes over several sessions of REAUTH_MS
    (ours re-authenticates on the same connection, no disconnect), every record once and in
    order; then ours reads what the Java producer wrote there, records and headers equal."""
    kafka = _need_apache(broker)
    from tests import java_oracle

    reason = java_oracle.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    await asyncio.to_thread(java_oracle.build)
    topic = await new_topic(partitions=1)
    n = 120
    hooks = Counter()
    producer = aiokafka_lite.AIOKafkaProducer(
        enable_idempotence=True,
        request_timeout_ms=15000,
        hooks=[hooks],
        **_oauth(kafka.reauth_bootstrap, provider_class(aiokafka_lite)()),
    )
    await producer.start()
    java = asyncio.ensure_future(  # the Java consumer runs (and re-authenticates) throughout
        asyncio.to_thread(
            java_oracle.consume,
            kafka.reauth_bootstrap,
            topic,
            max_records=n,
            timeout_ms=60_000,
            client_properties=JAVA_OAUTH,
        )
    )
    try:
        for i in range(n):  # about 12 s: three sessions of 4 s
            await producer.send_and_wait(topic, b"lite-%d" % i, key=b"k")
            await asyncio.sleep(0.1)
        read = await asyncio.wait_for(java, 90)
        disconnects = list(hooks.disconnects)  # stop() closes the connections: not counted
    finally:
        await producer.stop()
        if not java.done():
            java.cancel()
    assert [r["value"] for r in read] == [b"lite-%d" % i for i in range(n)]
    assert disconnects == [] and hooks.failed == []
    assert hooks.reauths >= 2, vars(hooks)

    java_topic = await new_topic(partitions=1)
    records = [
        {"key": b"k", "value": b"java-%d" % i, "headers": [("h", b"%d" % i)]} for i in range(20)
    ]
    await asyncio.to_thread(
        java_oracle.produce, kafka.reauth_bootstrap, java_topic, records,
        client_properties=JAVA_OAUTH,
    )  # fmt: skip
    consumer = aiokafka_lite.AIOKafkaConsumer(
        java_topic,
        auto_offset_reset="earliest",
        request_timeout_ms=15000,
        **_oauth(kafka.reauth_bootstrap, provider_class(aiokafka_lite)()),
    )
    await consumer.start()
    try:
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < len(records) and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=1000)
            got += [r for rs in batch.values() for r in rs]
    finally:
        await consumer.stop()
    assert [(r.key, r.value, list(r.headers)) for r in got] == [
        (r["key"], r["value"], r["headers"]) for r in records
    ]


@pytest.mark.parametrize("urlencode", [False, True])
async def test_oidc_basic_header_urlencodes_only_when_asked(urlencode: bool) -> None:
    """As Java's ``sasl.oauthbearer.header.urlencode`` (default false): the client id and secret
    go into the Basic header as given, URL-encoded only with ``header_urlencode=True``."""
    client_id, secret = "my app", "s3c:r/e+t"
    sent_id, sent_secret = client_id, secret
    if urlencode:
        sent_id, sent_secret = (
            urllib.parse.quote(client_id, safe=""),
            urllib.parse.quote(secret, safe=""),
        )
    async with TokenEndpoint(60, client_id=sent_id, secret=sent_secret) as idp:
        p = OIDCTokenProvider(idp.url, client_id, secret, header_urlencode=urlencode)
        try:
            await p.token()  # the endpoint accepts only the expected credentials
        finally:
            await p.close()
        cred = base64.b64decode(idp.authorizations[0].removeprefix("Basic ")).decode()
        assert cred == f"{sent_id}:{sent_secret}"
        assert (cred == "my app:s3c:r/e+t") is not urlencode
