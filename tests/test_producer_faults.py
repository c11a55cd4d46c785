"""Producer under faults: a stalled broker (backpressure, bounded memory, stop()) and a
connection cut in the middle of a request (retry).

A dedicated Tansu broker advertises the port of a TCP proxy run by the test, so every byte the
producer exchanges with the broker (metadata and produce) crosses the proxy, which can stall the
stream or cut the connection on demand.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator

import pytest

from aiokafka_lite import errors as Errors
from aiokafka_lite.launchers.embedded import broker_binary, free_port, probe_api_versions
from aiokafka_lite.producer import AIOKafkaProducer

pytestmark = pytest.mark.integration


class Proxy:
    """Forward 127.0.0.1:port to the broker; ``stalled`` stops forwarding, ``cut_next`` drops
    the next client->broker chunk and closes both sides."""

    def __init__(self, port: int, target_port: int) -> None:
        self.port = port
        self.target_port = target_port
        self.stalled = False
        self.cut_next = False
        self.cuts = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()

    async def _handle(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        try:
            breader, bwriter = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            cwriter.close()
            return
        self._writers.update((cwriter, bwriter))

        async def pump(
            src: asyncio.StreamReader, dst: asyncio.StreamWriter, upstream: bool
        ) -> None:
            try:
                while True:
                    while self.stalled:
                        await asyncio.sleep(0.01)
                    data = await src.read(65536)
                    if not data:
                        break
                    while self.stalled:
                        await asyncio.sleep(0.01)
                    if upstream and self.cut_next:
                        self.cut_next = False
                        self.cuts += 1
                        break
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                cwriter.close()
                bwriter.close()

        await asyncio.gather(pump(creader, bwriter, True), pump(breader, cwriter, False))


@pytest.fixture(scope="module")
def proxied_tansu() -> Iterator[tuple[int, int]]:
    """(broker port, proxy port): a Tansu broker advertising the proxy's port."""
    try:
        binary = broker_binary("tansu")
    except Exception as exc:  # pragma: no cover - broker extra not installed
        pytest.skip(f"tansu binary unavailable: {exc}")
    port, proxy_port = free_port(), free_port()
    proc = subprocess.Popen(
        [
            binary,
            "broker",
            "--listener-url",
            f"tcp://127.0.0.1:{port}",
            "--advertised-listener-url",
            f"tcp://127.0.0.1:{proxy_port}",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                probe_api_versions("127.0.0.1", port)
                break
            except Exception:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.skip("could not start a dedicated tansu broker")
                time.sleep(0.05)
        yield port, proxy_port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
async def proxy(proxied_tansu: tuple[int, int]) -> Proxy:
    p = Proxy(proxied_tansu[1], proxied_tansu[0])
    await p.start()
    yield p
    await p.close()


def _topic(name: str) -> str:
    return f"{name}-{time.time_ns()}"


async def test_backpressure_blocks_then_times_out(proxy: Proxy) -> None:
    topic = _topic("bp")
    producer = AIOKafkaProducer(
        bootstrap_servers=f"127.0.0.1:{proxy.port}",
        buffer_memory=1024 * 1024,
        max_block_ms=1000,
        request_timeout_ms=30000,
        linger_ms=0,
    )
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"warm-up", partition=0)
        proxy.stalled = True
        handles = []
        value = b"v" * 1000
        t_block = None
        with pytest.raises(Errors.KafkaTimeoutError):
            for _ in range(100_000):  # ~100 MB if memory were not bounded
                t_block = time.monotonic()
                handles.append(await producer.send(topic, value, partition=0))
        blocked = time.monotonic() - t_block  # type: ignore[operator]
        assert 0.8 <= blocked < 5, blocked
        pool = producer._acc.pool
        assert pool.used <= pool.total == 1024 * 1024
        assert 500 < len(handles) < 1100  # what 1 MiB holds, not more
        assert sum(b.reserved for b in producer._acc.incomplete) == pool.used
        # the broker comes back: everything accepted before the timeout is delivered
        proxy.stalled = False
        mds = await asyncio.wait_for(asyncio.gather(*handles), 30)
        assert [md.offset for md in mds] == list(range(1, len(handles) + 1))
    finally:
        proxy.stalled = False
        await producer.stop()


async def test_retry_after_connection_cut_mid_request(proxy: Proxy) -> None:
    topic = _topic("cut")
    async with AIOKafkaProducer(
        bootstrap_servers=f"127.0.0.1:{proxy.port}", retry_backoff_ms=50, linger_ms=5
    ) as producer:
        await producer.send_and_wait(topic, b"first", partition=0)
        proxy.cut_next = True  # the next request (a produce) is dropped and the socket closed
        handles = [await producer.send(topic, b"%d" % i, partition=0) for i in range(300)]
        mds = await asyncio.wait_for(asyncio.gather(*handles), 30)
        assert proxy.cuts == 1
        assert [md.offset for md in mds] == list(range(1, 301))

    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{proxy.port}", enable_auto_commit=False
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(got) < 301 and time.monotonic() < deadline:
            for recs in (await consumer.getmany(timeout_ms=200)).values():
                got.extend(r.value for r in recs)
        assert got == [b"first"] + [b"%d" % i for i in range(300)]  # no loss, no duplicate
    finally:
        await consumer.stop()


async def test_stop_fails_undeliverable_records(proxy: Proxy) -> None:
    topic = _topic("stop")
    producer = AIOKafkaProducer(
        bootstrap_servers=f"127.0.0.1:{proxy.port}",
        request_timeout_ms=1000,
        delivery_timeout_ms=1500,
        retry_backoff_ms=100,
    )
    await producer.start()
    await producer.send_and_wait(topic, b"warm-up", partition=0)
    proxy.stalled = True
    try:
        handles = [await producer.send(topic, b"x" * 100, partition=0) for _ in range(500)]
        with pytest.raises(Errors.KafkaTimeoutError):
            await producer.flush(timeout=0.3)
        t0 = time.monotonic()
        await asyncio.wait_for(producer.stop(), 20)
        assert time.monotonic() - t0 < 15
        assert all(h.done() for h in handles)
        errors = [h.exception() for h in handles]
        assert all(isinstance(e, Errors.KafkaError) for e in errors), set(map(type, errors))
    finally:
        proxy.stalled = False
