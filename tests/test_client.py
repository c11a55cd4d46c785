"""KafkaClient: bootstrap, metadata, coordinator lookup, pool, backoff, least-loaded choice."""

from __future__ import annotations

import asyncio
import itertools
import struct
import time

import pytest

from aiokafka_lite import errors as Errors
from aiokafka_lite.client import KafkaClient, parse_bootstrap
from aiokafka_lite.ops.groups import find_coordinator
from aiokafka_lite.protocol import messages as m
from aiokafka_lite.structs import TopicPartition
from tests.fake_broker import FakeBroker, FakeConn, dead_port


def _fake_metadata(brokers: dict[int, int], controller: int = -1) -> object:
    """A MetadataResponse naming loopback brokers ``{node_id: port}`` (for local tests)."""
    B = m.MetadataResponse.MetadataResponseBroker
    return m.MetadataResponse(
        brokers=[B(node_id=n, host="127.0.0.1", port=p) for n, p in brokers.items()],
        controller_id=controller,
        topics=[],
    )


def test_parse_bootstrap():
    assert parse_bootstrap("a:1, b ,[::1]:3") == [("a", 1), ("b", 9092), ("::1", 3)]
    assert parse_bootstrap(["h:5"]) == [("h", 5)]
    with pytest.raises(Errors.KafkaConfigurationError):
        parse_bootstrap(" , ")
    for bad in ("h:x", "h:0", "h:70000", "[::1]:y", "[::1"):
        with pytest.raises(Errors.KafkaConfigurationError, match="bootstrap address"):
            parse_bootstrap(bad)


async def test_bootstrap_skips_dead_first_entry(kafka_bootstrap):
    client = KafkaClient(bootstrap_servers=f"127.0.0.1:{dead_port()},{kafka_bootstrap}")
    t0 = time.monotonic()
    await client.start()
    try:
        assert time.monotonic() - t0 < 5
        brokers = client.cluster.brokers()
        assert brokers
        node = next(iter(brokers)).nodeId
        # the bootstrap connection was re-keyed to the real node id, not thrown away
        assert client.is_connected(node)
        assert client.cluster.controller is not None
        assert client.cluster.cluster_id
    finally:
        await client.close()


async def test_bootstrap_all_dead():
    client = KafkaClient(
        bootstrap_servers=[f"127.0.0.1:{dead_port()}", f"127.0.0.1:{dead_port()}"],
        request_timeout_ms=2000,
    )
    with pytest.raises(Errors.KafkaConnectionError, match="Unable to bootstrap"):
        await asyncio.wait_for(client.start(), 10)
    await client.close()


async def test_metadata_64_partitions(kafka_bootstrap, new_topic):
    topic = await new_topic(64)
    async with KafkaClient(bootstrap_servers=kafka_bootstrap) as client:
        parts = await client.wait_for_topic(topic, 10000)
        assert parts == set(range(64))
        assert client.cluster.available_partitions_for_topic(topic) == set(range(64))
        assert topic in client.cluster.topics()
        broker_ids = {b.nodeId for b in client.cluster.brokers()}
        for p in range(64):
            tp = TopicPartition(topic, p)
            leader = client.cluster.leader_for_partition(tp)
            assert leader in broker_ids
            meta = client.cluster.partition_metadata(tp)
            assert meta is not None and meta.partition == p and meta.error is None
            assert tp in (client.cluster.partitions_for_broker(leader) or set())
        assert client.cluster.partitions_for_topic("no-such-topic-here") is None


async def test_wait_for_topic_unknown_times_out(kafka_bootstrap):
    async with KafkaClient(
        bootstrap_servers=kafka_bootstrap, allow_auto_topic_creation=False, retry_backoff_ms=20
    ) as client:
        t0 = time.monotonic()
        with pytest.raises(Errors.KafkaTimeoutError):
            await client.wait_for_topic("surely-not-a-topic-1b2c3d", 400)
        assert 0.35 < time.monotonic() - t0 < 2


class _Spy:
    """Counts metadata refreshes; lets a test hold one in progress."""

    def __init__(self, client: KafkaClient) -> None:
        self.calls = 0
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.release.set()
        real = client._metadata._refresh_once

        async def counting() -> bool:
            self.calls += 1
            self.started.set()
            await asyncio.wait_for(self.release.wait(), 5)
            return await real()

        client._metadata._refresh_once = counting  # type: ignore[method-assign]


async def test_request_update_coalesces(kafka_bootstrap):
    async with KafkaClient(bootstrap_servers=kafka_bootstrap, retry_backoff_ms=10) as client:
        spy = _Spy(client)
        version = client.cluster.version
        futs = [client.request_update() for _ in range(100)]
        assert all(f is futs[0] for f in futs)
        assert await asyncio.wait_for(futs[0], 5) is client.cluster
        assert spy.calls == 1
        assert client.cluster.version == version + 1
        # a request made while a refresh is running gets the *next* refresh
        spy.started.clear()
        spy.release.clear()
        f1 = client.request_update()
        await asyncio.wait_for(spy.started.wait(), 5)
        f2 = client.request_update()
        assert f2 is not f1
        spy.release.set()
        await asyncio.wait_for(asyncio.gather(f1, f2), 5)
        assert spy.calls == 3
        assert await client.force_metadata_update() is True


async def test_reconnect_after_connection_drop(kafka_bootstrap):
    async with KafkaClient(bootstrap_servers=kafka_bootstrap, retry_backoff_ms=10) as client:
        node = client.least_loaded_node()
        await client.send(node, m.MetadataRequest(topics=[]))
        conn = client._conns[(node, "default")]
        conn._transport.abort()  # the socket dies under us
        for _ in range(100):
            if conn.closed:
                break
            await asyncio.sleep(0.01)
        assert (
            conn.closed
        )  # (the refresher may already have reconnected: the drop asks for metadata)
        resp = await asyncio.wait_for(client.send(node, m.MetadataRequest(topics=[])), 10)
        assert resp.brokers
        assert client.is_connected(node)
        assert client._conns[(node, "default")] is not conn


async def test_group_gets_its_own_connection(kafka_bootstrap):
    async with KafkaClient(bootstrap_servers=kafka_bootstrap) as client:
        node = client.least_loaded_node()
        await client.send(node, m.MetadataRequest(topics=[]))
        await client.send(node, m.MetadataRequest(topics=[]), group="coordinator")
        assert client.is_connected(node) and client.is_connected(node, "coordinator")
        assert client._conns[(node, "default")] is not client._conns[(node, "coordinator")]


async def test_find_coordinator(kafka_bootstrap):
    async with KafkaClient(bootstrap_servers=kafka_bootstrap) as client:
        node = await find_coordinator(client, "test-find-coordinator-group")
        assert client.cluster.broker_metadata(node) is not None
        resp = await client.send(node, m.MetadataRequest(topics=[]), group="coordinator")
        assert resp.brokers


async def test_send_to_unknown_node(kafka_bootstrap):
    async with KafkaClient(bootstrap_servers=kafka_bootstrap) as client:
        with pytest.raises(Errors.KafkaConnectionError, match="not in the cluster metadata"):
            await client.send(424242, m.MetadataRequest(topics=[]))


# ------------------------------------------------------------ local fake servers


async def _silent(conn: FakeConn, key: int, ver: int, corr: int) -> None:
    return None


async def test_concurrent_senders_share_one_connect():
    async with FakeBroker(_silent) as fb:
        client = KafkaClient(bootstrap_servers=f"127.0.0.1:{fb.port}")
        client.cluster.update_metadata(_fake_metadata({1: fb.port}))
        try:
            ok = await asyncio.wait_for(asyncio.gather(*(client.ready(1) for _ in range(20))), 5)
            assert all(ok)
            assert len(fb.conns) == 1
        finally:
            await client.close()


async def test_least_loaded_node():
    async with FakeBroker(_silent) as fa, FakeBroker(_silent) as fb, FakeBroker() as fc:
        dead = dead_port()
        client = KafkaClient(bootstrap_servers=f"127.0.0.1:{fa.port}", reconnect_backoff_ms=5000)
        client.cluster.update_metadata(
            _fake_metadata({1: fa.port, 2: fb.port, 3: dead, 4: fc.port})
        )
        try:
            assert await client.ready(1) and await client.ready(2)
            assert not await client.ready(3)  # refused: node 3 is now in reconnect backoff
            assert client.in_backoff(3)
            # a connected idle node wins over unconnected ones
            assert client.least_loaded_node() in (1, 2)
            hang = [asyncio.ensure_future(client.send(1, m.MetadataRequest())) for _ in range(3)]
            hang.append(asyncio.ensure_future(client.send(2, m.MetadataRequest())))
            await asyncio.sleep(0.05)
            assert client._conns[(1, "default")].in_flight == 3
            # fewest in flight among connected nodes; never the node in backoff
            for _ in range(20):
                assert client.least_loaded_node() == 2
            client._conns[(2, "default")].close()
            client._conns[(1, "default")].close()
            await asyncio.gather(*hang, return_exceptions=True)
            # nothing connected: a connectable node, still not the one in backoff
            for _ in range(20):
                assert client.least_loaded_node() in (1, 2, 4)
            # every broker in backoff: the bootstrap address is the last resort
            for node in (1, 2, 4):
                client._backoff_until[node] = 1e18
            assert client.least_loaded_node() == -1
        finally:
            await client.close()


async def test_reconnect_backoff_grows_exponentially():
    client = KafkaClient(
        bootstrap_servers="127.0.0.1:1", reconnect_backoff_ms=40, reconnect_backoff_max_ms=200
    )
    client.cluster.update_metadata(_fake_metadata({7: dead_port()}))
    try:
        stamps = []
        for _ in range(7):
            assert not await asyncio.wait_for(client.ready(7), 5)
            stamps.append(time.monotonic())
        gaps = [b - a for a, b in itertools.pairwise(stamps)]
        # 40, 80, 160, then 200 (capped) ms, each +-20 % jitter. A busy machine only makes a
        # gap longer: each gap has a lower bound (the growth), and the cap shows in the total
        # (uncapped, 40 to 1280 ms with -20 % jitter would take at least 2.016 s)
        expected = (40, 80, 160, 200, 200, 200)
        for gap, expect in zip(gaps, expected):
            assert gap >= expect * 0.75 / 1000, gaps
        assert sum(gaps) < 1.95, gaps
        assert client.in_backoff(7)
    finally:
        await client.close()


async def test_close_fails_waiters_and_is_idempotent(kafka_bootstrap):
    client = KafkaClient(bootstrap_servers=kafka_bootstrap)
    await client.start()
    fut = client.request_update()
    await client.close()
    await client.close()
    assert fut.done()
    with pytest.raises(Errors.KafkaConnectionError):
        await client.send(client.least_loaded_node(), m.MetadataRequest(topics=[]))


async def test_find_coordinator_retries_then_succeeds():
    """COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS are retried; the v0 single-key shape is read."""
    answers = [15, 14, 0]

    async def coordinator(conn: FakeConn, key: int, ver: int, corr: int) -> None:
        assert key == 10 and ver == 0
        code = answers.pop(0)
        host = b"127.0.0.1"
        body = struct.pack(">ihi", corr, code, 9 if code == 0 else -1)
        body += struct.pack(">h", len(host)) + host + struct.pack(">i", 19092)
        conn.send_raw(struct.pack(">i", len(body)) + body)

    async with FakeBroker(coordinator, ranges=[(18, 0, 0), (10, 0, 0)]) as fb:
        client = KafkaClient(bootstrap_servers=f"127.0.0.1:{fb.port}", retry_backoff_ms=10)
        client.cluster.update_metadata(_fake_metadata({1: fb.port}))
        try:
            node = await asyncio.wait_for(find_coordinator(client, "g", timeout_ms=3000), 5)
            assert node == 9 and not answers
            # the coordinator was not in the brokers list: its address is remembered
            assert client.cluster.broker_metadata(9) == (9, "127.0.0.1", 19092, None)
        finally:
            await client.close()


async def test_find_coordinator_gives_up_with_last_error():
    async def unavailable(conn: FakeConn, key: int, ver: int, corr: int) -> None:
        body = struct.pack(">ihi", corr, 15, -1) + struct.pack(">h", 0) + struct.pack(">i", -1)
        conn.send_raw(struct.pack(">i", len(body)) + body)

    async with FakeBroker(unavailable, ranges=[(18, 0, 0), (10, 0, 0)]) as fb:
        client = KafkaClient(bootstrap_servers=f"127.0.0.1:{fb.port}", retry_backoff_ms=20)
        client.cluster.update_metadata(_fake_metadata({1: fb.port}))
        try:
            t0 = time.monotonic()
            with pytest.raises(Errors.CoordinatorNotAvailableError):
                await find_coordinator(client, "g", timeout_ms=300)
            assert time.monotonic() - t0 < 1.0
        finally:
            await client.close()


def test_cluster_metadata_snapshot():
    from aiokafka_lite.cluster import ClusterMetadata

    R = m.MetadataResponse
    resp = R(
        brokers=[R.MetadataResponseBroker(node_id=1, host="h", port=1, rack="r1")],
        controller_id=1,
        cluster_id="c",
        topics=[
            R.MetadataResponseTopic(
                name="t",
                partitions=[
                    R.MetadataResponsePartition(partition_index=0, leader_id=1, leader_epoch=3),
                    R.MetadataResponsePartition(partition_index=1, leader_id=-1, error_code=5),
                ],
            ),
            R.MetadataResponseTopic(name="__consumer_offsets", is_internal=True, partitions=[
                R.MetadataResponsePartition(partition_index=0, leader_id=1)]),
            R.MetadataResponseTopic(name="secret", error_code=29),
            R.MetadataResponseTopic(name="new", error_code=5),
        ],
    )  # fmt: skip
    cluster = ClusterMetadata()
    seen: list[int] = []
    cluster.add_listener(lambda c: seen.append(c.version))
    cluster.update_metadata(resp)
    assert seen == [1]
    assert cluster.partitions_for_topic("t") == {0, 1}
    assert cluster.available_partitions_for_topic("t") == {0}
    assert cluster.leader_for_partition(TopicPartition("t", 1)) == -1
    meta1 = cluster.partition_metadata(TopicPartition("t", 1))
    assert meta1 is not None and isinstance(meta1.error, Errors.LeaderNotAvailableError)
    meta0 = cluster.partition_metadata(TopicPartition("t", 0))
    assert meta0 is not None and meta0.leader_epoch == 3 and meta0.error is None
    assert cluster.topics() == {"t"}
    assert cluster.topics(exclude_internal_topics=False) == {"t", "__consumer_offsets"}
    assert cluster.unauthorized_topics == {"secret"}
    assert cluster.topic_error("new") == 5 and cluster.topic_error("t") == 0
    assert cluster.controller is not None and cluster.controller.rack == "r1"
    assert cluster.partitions_for_broker(1) == {
        TopicPartition("t", 0),
        TopicPartition("__consumer_offsets", 0),
    }
    cluster.update_metadata(R(brokers=[], topics=[]))
    assert cluster.partitions_for_topic("t") is None and cluster.controller is None


async def _hang_forever(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read()  # accept, never answer (not even ApiVersions)


@pytest.mark.parametrize("connect_first", [True, False])
async def test_cancellation_is_never_swallowed(connect_first):
    """Cancelling a sender stuck in connect ends it, even if the connect task dies first
    (as when the event loop cancels every task at shutdown)."""
    server = await asyncio.start_server(_hang_forever, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = KafkaClient(bootstrap_servers=f"127.0.0.1:{port}")
    client.cluster.update_metadata(_fake_metadata({1: port}))

    async def retry_forever() -> None:
        while True:
            try:
                await client.send(1, m.MetadataRequest(topics=[]))
            except Errors.KafkaConnectionError:
                await asyncio.sleep(0)

    try:
        sender = asyncio.ensure_future(retry_forever())
        await asyncio.sleep(0.05)
        connect = client._connecting[(1, "default")]
        for t in (connect, sender) if connect_first else (sender, connect):
            t.cancel()
        done, _ = await asyncio.wait([sender], timeout=2)
        assert sender in done and sender.cancelled()
    finally:
        await client.close()
        server.close()


async def test_close_wakes_senders_waiting_for_connect():
    server = await asyncio.start_server(_hang_forever, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = KafkaClient(bootstrap_servers=f"127.0.0.1:{port}")
    client.cluster.update_metadata(_fake_metadata({1: port}))
    try:
        sender = asyncio.ensure_future(client.send(1, m.MetadataRequest(topics=[])))
        await asyncio.sleep(0.05)
        await client.close()
        done, _ = await asyncio.wait([sender], timeout=2)
        assert sender in done
        assert isinstance(sender.exception(), Errors.KafkaConnectionError)
    finally:
        server.close()


async def test_cancelling_one_connect_waiter_cancels_only_it():
    """The same on every Python (3.10 has no Task.cancelling()): a cancelled waiter ends
    cancelled, the other waiter of the same connect keeps waiting, and close() turns that wait
    into a connection error; a waiter cancelled in the same turn as close() ends cancelled."""
    server = await asyncio.start_server(_hang_forever, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = KafkaClient(bootstrap_servers=f"127.0.0.1:{port}")
    client.cluster.update_metadata(_fake_metadata({1: port}))
    try:
        a, b, c = (
            asyncio.ensure_future(client.send(1, m.MetadataRequest(topics=[]))) for _ in "abc"
        )
        await asyncio.sleep(0.05)  # all three wait for the one connect
        a.cancel()
        await asyncio.wait([a], timeout=2)
        assert a.cancelled()
        assert not b.done() and not c.done()
        c.cancel()
        await client.close()
        await asyncio.wait([b, c], timeout=2)
        assert c.cancelled()
        assert isinstance(b.exception(), Errors.KafkaConnectionError)
    finally:
        await client.close()
        server.close()


async def test_topics_tracked_before_start_are_in_the_bootstrap_refresh(kafka_bootstrap, new_topic):
    topic = await new_topic(3)
    client = KafkaClient(bootstrap_servers=kafka_bootstrap)
    fut = client.add_topics([topic])
    try:
        await client.start()
        assert fut.done() and fut.result() is client.cluster
        assert client.cluster.partitions_for_topic(topic) == {0, 1, 2}
        assert client.topics == {topic}
        assert client.set_topics([topic]).done()  # nothing added: no refresh needed
    finally:
        await client.close()


async def test_a_new_topic_is_asked_about_at_once(kafka_bootstrap, new_topic):
    """Refreshes are retry_backoff_ms apart, except the first after the tracked topics grew, as
    aiokafka's (add_topic forces an update at once): a producer's first send to a topic created
    after its start is not held back by the refresh made just before (FastStream creates a
    subscriber's topic at start and publishes to it right after; test_concurrent_consume then
    saw its first publish take retry_backoff_ms)."""
    async with KafkaClient(bootstrap_servers=kafka_bootstrap, retry_backoff_ms=5000) as client:
        topic = await new_topic(2)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await asyncio.wait_for(client.add_topics([topic]), 10)
        assert loop.time() - t0 < 2.5  # not the 5 s backoff since the bootstrap refresh
        assert client.cluster.partitions_for_topic(topic) == {0, 1}
        # a refresh that adds no topic still waits for the backoff
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(client.request_update()), 1)


# Tansu works too, but its SIGTERM waits ~5 s for open client connections: noida keeps it fast.
@pytest.mark.parametrize("kind", ["noida"])
async def test_survives_broker_restart(kind):
    """The broker process restarts on the same port: calls fail with KafkaConnectionError,
    then the client reconnects by itself (own broker: the session's must not restart under
    other tests)."""
    from aiokafka_lite.launchers.embedded import EmbeddedBroker

    with EmbeddedBroker(kind) as broker:
        async with KafkaClient(
            bootstrap_servers=broker.bootstrap, retry_backoff_ms=20, reconnect_backoff_ms=20
        ) as client:
            node = client.least_loaded_node()
            await client.send(node, m.MetadataRequest(topics=[]))
            await asyncio.to_thread(broker.restart)
            deadline = time.monotonic() + 10
            while True:
                try:
                    resp = await client.send(node, m.MetadataRequest(topics=[]), timeout_ms=2000)
                    break
                except Errors.KafkaConnectionError:
                    assert time.monotonic() < deadline, "no reconnect within 10 s"
                    await asyncio.sleep(0.02)
            assert resp.brokers
            assert await client.force_metadata_update()
