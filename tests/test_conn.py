"""BrokerConnection: real-broker handshake and pipelining; failure injection with fake servers."""

from __future__ import annotations

import asyncio
import itertools
import struct
import time
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite import errors as Errors
from aiokafka_lite._sasl import ScramClient
from aiokafka_lite.conn import BrokerConnection
from aiokafka_lite.protocol import messages as m
from aiokafka_lite.protocol.session import Session
from tests.fake_broker import FakeBroker, FakeConn


def _hostport(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


async def _connect(host: str, port: int, **kw: object) -> BrokerConnection:
    conn = BrokerConnection(host, port, **kw)  # type: ignore[arg-type]
    await conn.connect()
    return conn


def _api_versions_request() -> object:
    return m.ApiVersionsRequest(client_software_name="test", client_software_version="1")


# ------------------------------------------------------------------ real broker


async def test_api_versions_negotiated(kafka_bootstrap):
    conn = await _connect(*_hostport(kafka_bootstrap))
    try:
        assert conn.connected
        for key in (0, 1, 3, 18):
            assert key in conn.api_versions
        _bmin, bmax = conn.api_versions[3]
        v = conn.version_for(m.MetadataRequest)
        assert v == min(bmax, m.MetadataRequest.MAX_VERSION)
        resp = await conn.send(m.MetadataRequest(topics=[]))
        assert resp.brokers and resp.brokers[0].port > 0
        # ApiVersions itself through the normal path (newest common version; v3+ brokers reject
        # an empty client software name with INVALID_REQUEST)
        av = await conn.send(_api_versions_request())
        assert av.error_code == 0 and av.api_keys
    finally:
        conn.close()
        await conn.wait_closed()
    with pytest.raises(Errors.KafkaConnectionError):
        await conn.send(m.MetadataRequest(topics=[]))


async def test_pipelining_1000_requests_one_connection(kafka_bootstrap):
    """1,000 concurrent requests on one socket: each answer reaches its own caller."""
    conn = await _connect(*_hostport(kafka_bootstrap), max_in_flight=1000)
    try:
        if conn.version_for(m.FindCoordinatorRequest) < 4:
            pytest.skip("broker lacks FindCoordinator v4 (no key echo to check correlation)")
        keys = [f"pipeline-group-{i}" for i in range(1000)]

        async def one(key: str) -> str:
            resp = await conn.send(m.FindCoordinatorRequest(coordinator_keys=[key], key=key))
            return str(resp.coordinators[0].key)

        t0 = time.perf_counter()
        got = await asyncio.wait_for(asyncio.gather(*(one(k) for k in keys)), 30)
        elapsed = time.perf_counter() - t0
        assert got == keys
        assert conn.in_flight == 0
        print(f"1000 pipelined FindCoordinator: {elapsed * 1000:.0f} ms")
    finally:
        conn.close()


async def test_in_flight_limit_queues_in_order(kafka_bootstrap):
    """Beyond max_in_flight, sends wait for a slot and still go out (and complete) in order."""
    conn = await _connect(*_hostport(kafka_bootstrap), max_in_flight=3)
    try:
        order: list[int] = []

        async def one(i: int) -> None:
            await conn.send(m.MetadataRequest(topics=[]))
            order.append(i)

        tasks = [asyncio.ensure_future(one(i)) for i in range(50)]
        await asyncio.sleep(0)
        assert conn.in_flight == 50  # 3 sent + 47 waiting for a slot
        await asyncio.wait_for(asyncio.gather(*tasks), 20)
        assert order == list(range(50))
        assert conn.in_flight == 0
    finally:
        conn.close()


async def test_cancelled_caller_keeps_stream_in_sync(kafka_bootstrap):
    conn = await _connect(*_hostport(kafka_bootstrap))
    try:
        t = asyncio.ensure_future(conn.send(m.MetadataRequest(topics=[])))
        await asyncio.sleep(0)
        t.cancel()
        resp = await asyncio.wait_for(conn.send(_api_versions_request()), 10)
        assert resp.api_keys  # the cancelled request's answer was skipped, not misdelivered
        assert conn.connected
    finally:
        conn.close()


async def test_unsupported_version_error(kafka_bootstrap):
    conn = await _connect(*_hostport(kafka_bootstrap))
    try:

        class Fake:
            API_KEY = 3
            MIN_VERSION = 90
            MAX_VERSION = 99

        with pytest.raises(Errors.UnsupportedVersionError, match="v90-v99"):
            conn.version_for(Fake)
        Fake.API_KEY = 9999
        with pytest.raises(Errors.UnsupportedVersionError, match="does not support"):
            conn.version_for(Fake)
    finally:
        conn.close()


async def test_connect_refused():
    from tests.fake_broker import dead_port

    with pytest.raises(Errors.KafkaConnectionError):  # at once: no retry loop inside connect
        await asyncio.wait_for(_connect("127.0.0.1", dead_port()), 10)


# ------------------------------------------------------------- failure injection


async def test_api_versions_fallback_to_v0():
    """The broker answers a too-new ApiVersions with error 35; the client retries at v0."""
    async with FakeBroker() as fb:
        conn = await _connect("127.0.0.1", fb.port)
        try:
            seen = [(k, v) for k, v, _ in fb.conns[0].requests]
            assert seen == [(18, m.ApiVersionsRequest.MAX_VERSION), (18, 0)]
            assert conn.api_versions[3] == (0, 12)
        finally:
            conn.close()


async def test_silent_server_times_out_then_fails_fast():
    async def silent(conn: FakeConn, key: int, ver: int, corr: int) -> None:
        return None  # read, never answer

    async with FakeBroker(silent) as fb:
        conn = await _connect("127.0.0.1", fb.port, request_timeout_ms=5000)
        other = asyncio.ensure_future(conn.send(m.MetadataRequest(topics=[]), timeout_ms=5000))
        await asyncio.sleep(0)
        with pytest.raises(Errors.KafkaTimeoutError):  # its own 300 ms, not the conn's 5 s
            await asyncio.wait_for(conn.send(m.MetadataRequest(topics=[]), timeout_ms=300), 4)
        # the stream is no longer trustworthy: the connection closed, others failed at once
        assert conn.closed
        with pytest.raises(Errors.KafkaConnectionError):
            await asyncio.wait_for(other, 0.1)
        with pytest.raises(Errors.KafkaConnectionError):  # fails fast, no 5 s wait
            await asyncio.wait_for(conn.send(m.MetadataRequest(topics=[])), 4)


async def test_handshake_timeout():
    """A server that accepts but never answers even ApiVersions: connect() gives up in time."""

    async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client hangs up

    server = await asyncio.start_server(hang, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        conn = BrokerConnection("127.0.0.1", port)
        with pytest.raises(Errors.KafkaTimeoutError):  # asyncio.TimeoutError if it hung
            await asyncio.wait_for(conn.connect(timeout_ms=300), 10)
        assert conn.closed
    finally:
        server.close()


async def test_close_mid_frame_fails_all_pending_at_once():
    async def half_then_close(conn: FakeConn, key: int, ver: int, corr: int) -> None:
        if len(conn.requests) == 4:  # ApiVersions x2 + 2 requests: now 3 are pending
            conn.send_raw(struct.pack(">ii", 100, corr) + b"\x00" * 10)
            await conn.writer.drain()
            conn.close()

    async with FakeBroker(half_then_close) as fb:
        conn = await _connect("127.0.0.1", fb.port, request_timeout_ms=10000)
        futs = [asyncio.ensure_future(conn.send(m.MetadataRequest(topics=[]))) for _ in range(3)]
        _done, pending = await asyncio.wait(futs, timeout=5)
        assert not pending  # at once, not at the 10 s deadline
        for f in futs:
            assert isinstance(f.exception(), Errors.KafkaConnectionError)
        assert conn.closed and conn.in_flight == 0


@pytest.mark.parametrize("size", [2**31 - 1, 5000, -7, 2])
async def test_bad_frame_size_rejected_without_allocation(size):
    async def bad_size(conn: FakeConn, key: int, ver: int, corr: int) -> None:
        conn.send_raw(struct.pack(">i", size))  # only the size: the payload never comes

    async with FakeBroker(bad_size) as fb:
        conn = await _connect("127.0.0.1", fb.port, max_response_size=4096)
        tracemalloc.start()
        try:
            first = asyncio.ensure_future(conn.send(m.MetadataRequest(topics=[])))
            await asyncio.sleep(0)
            second = asyncio.ensure_future(conn.send(m.MetadataRequest(topics=[])))
            await asyncio.wait([first, second], timeout=2)
            _cur, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 1 << 20
        # the bad frame answers the oldest request; everything else fails as a lost connection
        assert isinstance(first.exception(), Errors.KafkaProtocolError)
        assert "frame size" in str(first.exception())
        assert type(second.exception()) is Errors.KafkaConnectionError
        assert conn.closed


async def test_unknown_correlation_id():
    async def wrong_corr(conn: FakeConn, key: int, ver: int, corr: int) -> None:
        conn.send_raw(struct.pack(">ii", 4, corr + 1000))

    async with FakeBroker(wrong_corr) as fb:
        conn = await _connect("127.0.0.1", fb.port)
        with pytest.raises(Errors.CorrelationIdError):
            await asyncio.wait_for(conn.send(m.MetadataRequest(topics=[])), 2)
        assert conn.closed


async def test_garbage_body_is_protocol_error():
    async def garbage(conn: FakeConn, key: int, ver: int, corr: int) -> None:
        body = struct.pack(">i", corr) + b"\xff\xfe\x01"
        conn.send_raw(struct.pack(">i", len(body)) + body)

    async with FakeBroker(garbage) as fb:
        conn = await _connect("127.0.0.1", fb.port)
        for _ in range(2):  # framing was intact: the connection stays usable
            with pytest.raises(Errors.KafkaProtocolError):
                await asyncio.wait_for(conn.send(m.MetadataRequest(topics=[])), 2)
        assert conn.connected


async def test_acks0_style_send_registers_nothing():
    async def silent(conn: FakeConn, key: int, ver: int, corr: int) -> None:
        return None

    async with FakeBroker(silent) as fb:
        conn = await _connect("127.0.0.1", fb.port)
        assert await conn.send(m.MetadataRequest(topics=[]), expect_response=False) is None
        assert conn.in_flight == 0
        for _ in range(50):
            if len(fb.conns[0].requests) == 3:
                break
            await asyncio.sleep(0.01)
        assert fb.conns[0].requests[-1][0] == 3
        conn.close()


async def test_idle_connection_closes():
    async with FakeBroker() as fb:
        closed: list[object] = []
        conn = BrokerConnection(
            "127.0.0.1",
            fb.port,
            connections_max_idle_ms=100,
            on_close=lambda c, why: closed.append(why),
        )
        await conn.connect()
        assert conn.connected
        await asyncio.sleep(0.3)
        assert conn.closed and closed == [None]


# ------------------------------------------------------------------------- SASL


def test_scram_sha256_rfc7677_vector():
    c = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert c.first_message() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = c.final_message(
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    c.verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(Errors.KafkaError):
        c.verify_server_final(b"v=AAAA")


async def test_sasl_plain_handshake(broker):
    broker.skip_on(
        "tansu", reason="Tansu answers every SaslHandshake with UNSUPPORTED_SASL_MECHANISM"
    )
    # Apache Kafka needs its SASL listener and a configured user; noida accepts any PLAIN
    # credentials on its one listener
    host, port = _hostport(broker.sasl_bootstrap or broker.bootstrap)
    user, password = next(iter(broker.sasl_users.items()), ("alice", "secret"))
    conn = BrokerConnection(
        host,
        port,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username=user,
        sasl_plain_password=password,
    )
    await conn.connect()
    try:
        resp = await conn.send(m.MetadataRequest(topics=[]))
        assert resp.brokers
    finally:
        conn.close()


async def test_sasl_rejected_handshake_is_an_error(broker):
    """Tansu rejects every mechanism; Apache Kafka rejects SASL on a PLAINTEXT listener
    (ILLEGAL_SASL_STATE): either way connect() fails with that error and closes."""
    broker.skip_on("noida", "external", "kafka", reason="noida accepts SASL PLAIN anywhere")
    expected = {
        "tansu": Errors.UnsupportedSaslMechanismError,
        "apache": Errors.IllegalSaslStateError,
    }[broker.kind]
    host, port = _hostport(broker.bootstrap)
    conn = BrokerConnection(host, port, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN")
    with pytest.raises(expected):
        await conn.connect(timeout_ms=5000)
    assert conn.closed


# -------------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not available to make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


async def test_tls_through_terminating_proxy(kafka_bootstrap, tls_files):
    """SSL: a TLS-terminating proxy in front of the real broker (the brokers lack TLS setup)."""
    import ssl

    cert, key = tls_files
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    bhost, bport = _hostport(kafka_bootstrap)

    async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while data := await r.read(65536):
                w.write(data)
                await w.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            w.close()

    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        br, bw = await asyncio.open_connection(bhost, bport)
        await asyncio.gather(pipe(r, bw), pipe(br, w))

    proxy = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_ctx)
    port = proxy.sockets[0].getsockname()[1]
    try:
        ctx = ssl.create_default_context(cafile=str(cert))
        conn = BrokerConnection("127.0.0.1", port, security_protocol="SSL", ssl_context=ctx)
        await conn.connect(timeout_ms=10000)
        try:
            resp = await conn.send(m.MetadataRequest(topics=[]))
            assert resp.brokers
        finally:
            conn.close()
        # an untrusted certificate is a connection error, not a hang
        bad = BrokerConnection("127.0.0.1", port, security_protocol="SSL")
        with pytest.raises(Errors.KafkaConnectionError):
            await bad.connect(timeout_ms=5000)
    finally:
        proxy.close()


async def test_blocked_writes_respect_the_deadline():
    """A peer that stops reading: the socket buffer fills, drain waits, the deadline still holds."""

    async def stop_reading(conn: FakeConn, key: int, ver: int, corr: int) -> None:
        await asyncio.sleep(3600)  # the fake's read loop is stuck here: nothing more is read

    async with FakeBroker(stop_reading) as fb:
        conn = await _connect("127.0.0.1", fb.port, max_in_flight=100)
        topic = m.MetadataRequest.MetadataRequestTopic
        big = m.MetadataRequest(topics=[topic(name=f"{i:0>200}") for i in range(5000)])  # ~1 MB
        results = await asyncio.wait_for(
            asyncio.gather(
                *(conn.send(big, timeout_ms=500) for _ in range(40)), return_exceptions=True
            ),
            5,  # the 500 ms deadlines hold although drain() never returns
        )
        assert all(
            isinstance(r, (Errors.KafkaTimeoutError, Errors.KafkaConnectionError)) for r in results
        )
        assert any(isinstance(r, Errors.KafkaTimeoutError) for r in results)
        assert conn.closed


async def test_fragmented_responses_are_reassembled():
    """Answers dribbled one byte at a time (and several per segment) still match their calls."""

    async def dribble(conn: FakeConn, key: int, ver: int, corr: int) -> None:
        # FindCoordinator v0: error_code, node_id (= corr, to check the pairing), host, port
        body = (
            struct.pack(">ihi", corr, 0, corr) + struct.pack(">h", 1) + b"h" + struct.pack(">i", 1)
        )
        frame = struct.pack(">i", len(body)) + body
        for i in range(len(frame)):
            conn.send_raw(frame[i : i + 1])
            await conn.writer.drain()
            if i % 5 == 0:
                await asyncio.sleep(0)

    async with FakeBroker(dribble, ranges=[(18, 0, 0), (10, 0, 0)]) as fb:
        conn = await _connect("127.0.0.1", fb.port, max_in_flight=50)
        try:
            reqs = [m.FindCoordinatorRequest(key=f"k{i}") for i in range(50)]
            resps = await asyncio.wait_for(asyncio.gather(*(conn.send(r) for r in reqs)), 10)
            corrs = [c for k, _v, c in fb.conns[0].requests if k == 10]
            assert [r.node_id for r in resps] == corrs
        finally:
            conn.close()


async def test_random_garbage_never_hangs():
    """Whatever bytes come back, every pending call ends promptly with a KafkaError."""
    import random

    rng = random.Random(1234)
    blobs: list[bytes] = []
    for _ in range(40):
        kind = rng.randrange(3)
        if kind == 0:  # pure noise
            blobs.append(rng.randbytes(rng.randrange(1, 64)))
        elif kind == 1:  # a plausible frame with a noisy body (correlation id patched in later)
            blobs.append(b"FRAME" + rng.randbytes(rng.randrange(0, 40)))
        else:  # a truncated frame
            blobs.append(
                struct.pack(">i", rng.randrange(8, 500)) + rng.randbytes(rng.randrange(0, 8))
            )
    current: list[bytes] = []

    async def garbage(conn: FakeConn, key: int, ver: int, corr: int) -> None:
        blob = current[0]
        if blob.startswith(b"FRAME"):
            body = struct.pack(">i", corr) + blob[5:]
            blob = struct.pack(">i", len(body)) + body
        conn.send_raw(blob)
        await conn.writer.drain()
        conn.close()

    async with FakeBroker(garbage) as fb:
        for blob in blobs:
            current[:] = [blob]
            conn = await _connect("127.0.0.1", fb.port, request_timeout_ms=5000)
            futs = [
                asyncio.ensure_future(conn.send(m.MetadataRequest(topics=[]))) for _ in range(3)
            ]
            _done, pending = await asyncio.wait(futs, timeout=2)
            assert not pending, blob
            for f in futs:
                assert isinstance(f.exception(), Errors.KafkaError), (blob, f.exception())
            conn.close()


def _read_into(session: Session, stream: bytes, reads: list[int]) -> list[Any]:
    """What a BufferedProtocol transport does: each read fills at most the buffer the session
    offers (and at most the next of ``reads`` bytes), then reports the count."""
    got: list[Any] = []
    pos = 0
    i = 0
    while pos < len(stream):
        buf = session.get_buffer()
        n = min(len(buf), len(stream) - pos, reads[i % len(reads)] if reads else len(stream))
        buf[:n] = stream[pos : pos + n]
        pos += n
        i += 1
        got += list(session.received(n))
    return got


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(st.binary(max_size=300), min_size=1, max_size=8),
    cuts=st.lists(st.integers(0, 3000), max_size=12),
)
def test_session_reads_frames_however_the_stream_is_cut(
    bodies: list[bytes], cuts: list[int]
) -> None:
    # response frames split at any byte (inside a size prefix, a correlation id, between
    # frames) come out whole, in order, each payload once; an incomplete tail is kept
    session = Session("c", 1 << 20, "peer")
    stream = b""
    for corr, body in enumerate(bodies):
        session.pending[corr] = f"entry {corr}"
        stream += struct.pack(">ii", 4 + len(body), corr) + body
    points = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    got = []
    for a, b in itertools.pairwise(points):
        got += _read_into(session, stream[a:b], [])
        assert session.buffered == b - sum(4 + len(x[2]) for x in got)
    assert got == [
        (corr, f"entry {corr}", struct.pack(">i", corr) + body) for corr, body in enumerate(bodies)
    ]
    # a frame that arrived whole is a slice of the read (bytes); one cut across reads was read
    # into a buffer of its own (bytearray)
    assert all(isinstance(p, (bytes, bytearray)) for _, _, p in got) and session.buffered == 0
    assert not session.pending


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(st.binary(max_size=300), min_size=1, max_size=8),
    big=st.integers(0, 300_000),
    reads=st.lists(st.integers(1, 200_000), max_size=12),
)
def test_session_buffered_reads_frames_however_the_reads_fall(
    bodies: list[bytes], big: int, reads: list[int]
) -> None:
    # the transport's buffered path (get_buffer/received): frames read in pieces of any size,
    # a frame larger than the receive buffer read into a buffer of its own, come out whole,
    # in order, each once
    session = Session("c", 1 << 20, "peer")
    bodies = [*bodies[:1], bytes(range(256)) * (big // 256), *bodies[1:]]
    stream = b""
    for corr, body in enumerate(bodies):
        session.pending[corr] = f"entry {corr}"
        stream += struct.pack(">ii", 4 + len(body), corr) + body
    got = _read_into(session, stream, [r for r in reads if r])
    assert [(c, e, bytes(p)) for c, e, p in got] == [
        (corr, f"entry {corr}", struct.pack(">i", corr) + body) for corr, body in enumerate(bodies)
    ]
    assert session.buffered == 0 and not session.pending


def test_session_buffered_refuses_a_bad_size_before_allocating() -> None:
    for split in (2, 5, 9):
        session = Session("c", 100, "peer")
        session.pending[1] = "entry"
        stream = struct.pack(">ii", 4 + 1_000_000_000, 1) + bytes(200)
        with pytest.raises(Errors.KafkaProtocolError, match=r"outside 4\.\.100"):
            _read_into(session, stream, [split, 1 << 20])
        session = Session("c", 1000, "peer")
        session.pending[1] = "entry"
        stream = struct.pack(">ii", 4 + 200, 7) + bytes(200)
        with pytest.raises(Errors.CorrelationIdError, match="correlation id 7"):
            _read_into(session, stream, [split, 1 << 20])
    # a frame cut off by the connection's end is reported with what arrived
    session = Session("c", 1 << 20, "peer")
    session.pending[0] = "entry"
    assert _read_into(session, struct.pack(">ii", 4 + 500_000, 0) + bytes(1000), []) == []
    assert session.buffered == 4 + 4 + 1000
    session.reset()
    assert session.buffered == 0
