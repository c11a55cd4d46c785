"""The client under injected faults (tests/faults.py's proxy in front of the real broker):
cancellation, stop() with a silent broker, and the Kafka error paths with their documented
outcome (retry, reset, rejoin, bump the epoch, or fail with the right error)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiokafka_lite import errors as Errors
from aiokafka_lite.consumer import AIOKafkaConsumer
from aiokafka_lite.ops.fetch import NO_TOPIC_ID
from aiokafka_lite.producer import AIOKafkaProducer
from aiokafka_lite.protocol import messages as m
from aiokafka_lite.structs import TopicPartition
from tests.faults import API, FaultProxy, Rule, any_error
from tests.test_consumer import drain, produce
from tests.test_group import FAST, _session_timeout, group_name, settle

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]
__all__ = ["_session_timeout"]  # autouse fixture: short session timeouts per broker

log = logging.getLogger(__name__)

TANSU_GENERATION = "Tansu keeps a lone member's generation at 0 across rejoins (measured)"


@pytest.fixture
async def proxy(broker: Any) -> AsyncIterator[FaultProxy]:
    """A fault-injecting proxy in front of the session's broker."""
    async with FaultProxy(broker.bootstrap) as p:
        yield p


def own_tasks() -> Counter[str]:
    """What runs, by coroutine name: every task but the proxy's, the test's own and the
    short-lived inner tasks of asyncio.wait_for(event.wait()) in background loops."""
    me = asyncio.current_task()
    names: Counter[str] = Counter()
    for t in asyncio.all_tasks():
        name = getattr(t.get_coro(), "__qualname__", "?")
        if t is me or t.get_name().startswith("faultproxy") or name == "Event.wait":
            continue
        names[name] += 1
    return names


async def wait_tasks_back_to(before: Counter[str], timeout: float = 5.0) -> None:
    """Wait until no more tasks run than in ``before`` (no leak)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while own_tasks() - before:
        if loop.time() > deadline:
            raise AssertionError(f"leaked tasks: {own_tasks() - before}")
        await asyncio.sleep(0.02)


async def cancel_soon(task: asyncio.Task[Any], hit: Rule | None = None) -> None:
    """Cancel ``task`` once it is blocked (the fault hit, or it had time to block), and check
    it finishes cancelled well before any request timeout."""
    if hit is not None:
        await asyncio.wait_for(hit.done.wait(), 10)
    else:
        await asyncio.sleep(0.3)  # not a proof of anything: just let it reach its wait
    assert not task.done()
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=5)
    assert task in done, "cancellation did not propagate"
    assert task.cancelled()


async def test_proxy_carries_everything(proxy: FaultProxy, new_topic: Any) -> None:
    topic = await new_topic(partitions=2)
    async with AIOKafkaProducer(bootstrap_servers=proxy.bootstrap) as p:
        for i in range(10):
            await p.send(topic, b"%d" % i, partition=i % 2)
        await p.flush()
        assert {b.port for b in p.client.cluster.brokers()} == {proxy.port}
    c = AIOKafkaConsumer(topic, bootstrap_servers=proxy.bootstrap, auto_offset_reset="earliest")
    await c.start()
    try:
        assert len(await drain(c, 10)) == 10
    finally:
        await c.stop()
    assert (API.FETCH, proxy.delivered[-1][1]) in proxy.delivered


async def test_topic_ids_on_the_wire(proxy: FaultProxy, broker: Any, new_topic: Any) -> None:
    """What goes through the proxy: on Apache Kafka 4.4, Produce v13 and a group's OffsetCommit
    and OffsetFetch v10 (topics by id, KIP-516); by name on brokers without those versions or
    without topic ids (Tansu, noida). The records and the commit are the same either way."""
    topic = await new_topic(partitions=1)
    async with AIOKafkaProducer(bootstrap_servers=proxy.bootstrap) as p:
        for i in range(5):
            await p.send_and_wait(topic, b"%d" % i)
    group = f"g-{topic}"
    c = AIOKafkaConsumer(
        topic, bootstrap_servers=proxy.bootstrap, group_id=group, auto_offset_reset="earliest"
    )
    await c.start()
    try:
        assert [r.value for r in await drain(c, 5)] == [b"%d" % i for i in range(5)]
        await c.commit()
        assert await c.committed(TopicPartition(topic, 0)) == 5
    finally:
        await c.stop()
    used = {key: {v for k, v in proxy.delivered if k == key} for key in (0, 8, 9)}
    if broker.kind == "apache":
        assert (max(used[0]), max(used[8]), max(used[9])) == (13, 10, 10), used
    else:
        assert max(used[0]) <= 12 and max(used[8]) <= 9 and max(used[9]) <= 9, used


# -- cancellation --------------------------------------------------------------------------
async def test_cancelled_offsets_lookup_returns_and_client_stays_usable(
    proxy: FaultProxy, kafka_bootstrap: str, new_topic: Any
) -> None:
    topic = await new_topic(partitions=1)
    await produce(kafka_bootstrap, topic, 3)
    tp = TopicPartition(topic, 0)
    c = AIOKafkaConsumer(bootstrap_servers=proxy.bootstrap, request_timeout_ms=30000)
    await c.start()
    try:
        before = own_tasks()
        proxy.silent = True
        task = asyncio.create_task(c.beginning_offsets([tp]))
        await cancel_soon(task)
        await wait_tasks_back_to(before)
        proxy.silent = False
        await proxy.cut_all()  # the silent connections are of no use any more
        assert await asyncio.wait_for(c.beginning_offsets([tp]), 20) == {tp: 0}
    finally:
        proxy.silent = False
        await c.stop()


async def test_cancelled_getmany_commit_send_leave_clients_usable(
    proxy: FaultProxy, kafka_bootstrap: str, new_topic: Any
) -> None:
    """getmany(), commit(), send() blocked on a full buffer and send_and_wait() cancelled
    from outside: no state is corrupted, memory accounting returns to zero, no task leaks,
    and every record acknowledged is there exactly once."""
    topic = await new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    producer = AIOKafkaProducer(
        bootstrap_servers=proxy.bootstrap,
        buffer_memory=64 * 1024,
        max_block_ms=30000,
        request_timeout_ms=30000,
        linger_ms=0,
    )
    consumer = AIOKafkaConsumer(
        bootstrap_servers=proxy.bootstrap,
        group_id=group_name(),
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=30000,
    )
    await producer.start()
    await consumer.start()
    try:
        consumer.assign([tp])
        await producer.send_and_wait(topic, b"first", partition=0)
        assert [r.value for r in await drain(consumer, 1)] == [b"first"]
        before = own_tasks()
        proxy.silent = True
        # getmany waiting for records
        await cancel_soon(asyncio.create_task(consumer.getmany(timeout_ms=20000)))
        # commit waiting for the coordinator
        await cancel_soon(asyncio.create_task(consumer.commit()))
        # send_and_wait waiting for the acknowledgement
        await cancel_soon(asyncio.create_task(producer.send_and_wait(topic, b"x", partition=0)))
        # send() blocked on a full buffer
        handles = []

        async def fill() -> None:
            while True:
                handles.append(await producer.send(topic, b"v" * 1000, partition=0))

        await cancel_soon(asyncio.create_task(fill()))
        assert producer._acc.pool.used > 0
        proxy.silent = False
        await proxy.cut_all()
        # everything that was accepted is delivered; the buffer is free again
        await asyncio.wait_for(producer.flush(), 30)
        assert all(h.done() and h.exception() is None for h in handles)
        assert producer._acc.pool.used == 0
        md = await asyncio.wait_for(producer.send_and_wait(topic, b"last", partition=0), 20)
        await consumer.commit({tp: 1})
        assert await consumer.committed(tp) == 1
        got = await drain(consumer, md.offset)  # from offset 1 to the last one
        values = [r.value for r in got]
        assert values[-1] == b"last"
        assert len(values) == len({r.offset for r in got}) == md.offset  # no duplicate
        assert values.count(b"x") <= 1  # the cancelled send_and_wait: at most once
        await wait_tasks_back_to(before)
    finally:
        proxy.silent = False
        await producer.stop()
        await consumer.stop()


# -- stop() with a silent broker -----------------------------------------------------------
async def timed_stop(client: Any, budget: float) -> float:
    """stop() must finish within ``budget`` seconds (a bound, far from the old behaviour;
    asyncio.wait_for alone would not do: it returns late when the cancellation is eaten)."""
    t0 = time.monotonic()
    await asyncio.wait_for(client.stop(), budget * 3)
    took = time.monotonic() - t0
    log.warning("%s.stop() with a silent broker took %.2f s", type(client).__name__, took)
    assert took < budget
    return took


async def test_stop_is_bounded_with_a_silent_broker(
    proxy: FaultProxy, kafka_bootstrap: str, new_topic: Any
) -> None:
    """stop() of a group consumer (commit + leave within ONE request_timeout_ms), of a consumer
    with a position lookup in flight, and of a producer with undelivered records (within
    delivery_timeout_ms; their futures fail), every broker silent."""
    topic = await new_topic(partitions=2)
    tps = {TopicPartition(topic, p) for p in range(2)}
    member = AIOKafkaConsumer(
        topic,
        bootstrap_servers=proxy.bootstrap,
        group_id=group_name(),
        request_timeout_ms=6000,
        auto_commit_interval_ms=60000,  # the final commit has work to do
        **FAST,
    )
    looker = AIOKafkaConsumer(bootstrap_servers=proxy.bootstrap, request_timeout_ms=30000)
    producer = AIOKafkaProducer(
        bootstrap_servers=proxy.bootstrap,
        request_timeout_ms=2000,
        delivery_timeout_ms=4000,
        linger_ms=0,
    )
    for client in (member, looker, producer):
        await client.start()
    await settle([member], tps)
    # written after the join: settle() polls too, and would have taken them (and drain() then
    # waited out its 20 s for records that were already read)
    await produce(kafka_bootstrap, topic, 2, 2)
    assert len(await drain(member, 4)) == 4  # read, not committed: the stop() commit has work
    await producer.send_and_wait(topic, b"warm-up", partition=0)
    proxy.silent = True
    looker.assign(list(tps))  # a position lookup that never gets an answer
    pending = [await producer.send(topic, b"lost", partition=1) for _ in range(3)]
    # bounds well under the old behaviour (commit and leave each up to request_timeout_ms;
    # a cancelled lookup running to request_timeout_ms)
    # the three stops at once (each with its own bound): they share nothing but the proxy
    await asyncio.gather(
        timed_stop(producer, 4 + 4), timed_stop(looker, 5), timed_stop(member, 6 + 3)
    )
    for fut in pending:
        log.warning("undelivered record: %r", fut.exception())
        assert fut.done() and isinstance(fut.exception(), Errors.KafkaError)


async def test_producer_stop_timeout_fails_the_undelivered_with_producer_closed(
    proxy: FaultProxy, new_topic: Any
) -> None:
    """stop(timeout=1) with a silent broker returns within a bound far below
    delivery_timeout_ms / request_timeout_ms; every record not acknowledged (in flight,
    queued behind it, still open, or a send() blocked on memory) fails with ProducerClosed;
    the records acknowledged before stay acknowledged; the buffer memory is all free."""
    topic = await new_topic(partitions=2)
    producer = AIOKafkaProducer(
        bootstrap_servers=proxy.bootstrap,
        linger_ms=0,
        request_timeout_ms=60000,
        delivery_timeout_ms=120000,
        max_batch_size=1024,
        buffer_memory=8 * 1024,
        max_block_ms=60000,
    )
    await producer.start()
    try:
        acked = [await producer.send(topic, b"ok-%d" % i, partition=i % 2) for i in range(6)]
        await asyncio.wait_for(producer.flush(), 30)
        proxy.silent = True
        pending: list[Any] = []

        async def fill() -> None:  # until send() blocks on the full buffer
            while True:
                pending.append(await producer.send(topic, b"x" * 100, partition=len(pending) % 2))

        blocked = asyncio.create_task(fill())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while not producer._acc.pool.has_waiters:  # readiness, bounded apart from the assertion
            assert loop.time() < deadline, "send() never blocked on the full buffer"
            await asyncio.sleep(0.01)
        t0 = time.monotonic()
        await asyncio.wait_for(producer.stop(timeout=1), 30)
        took = time.monotonic() - t0
    finally:
        await producer.stop(timeout=0)
        proxy.silent = False
    assert took < 8, f"stop(timeout=1) took {took:.1f} s"
    assert len(pending) > 10
    for fut in acked:
        assert fut.done() and fut.exception() is None
    for fut in pending:
        assert fut.done() and isinstance(fut.exception(), Errors.ProducerClosed), fut
    with pytest.raises(Errors.ProducerClosed):
        await asyncio.wait_for(blocked, 5)
    assert producer._acc.pool.used == 0
    with pytest.raises(Errors.IllegalArgumentError):
        await producer.stop(timeout=-1)


async def test_outage_back_pressure_counts_bytes_then_everything_arrives_once_in_order(
    proxy: FaultProxy, kafka_bootstrap: str, new_topic: Any
) -> None:
    """The only broker is a black hole; a producer keeps sending small records, a few ms
    apart, each lingering out before the next. send() does not block until the bytes
    buffered approach buffer_memory (the lingered-out batches keep filling instead of each
    reserving a whole batch: before, it blocked after buffer_memory / max_batch_size
    batches of a few records). After recovery every accepted record is delivered exactly
    once, in send order per partition, and the buffer memory is free again."""
    topic = await new_topic(partitions=2)
    batch_size = 4096
    budget = 32 * batch_size
    value_size = 100
    producer = AIOKafkaProducer(
        bootstrap_servers=proxy.bootstrap,
        linger_ms=2,
        max_batch_size=batch_size,
        buffer_memory=budget,
        max_block_ms=300,
        # requests into the silence time out quickly: the batches are queued for a retry
        # while the leader's connection is down (not in flight), as in a whole-cluster outage
        request_timeout_ms=300,
    )
    await producer.start()
    accepted: list[bytes] = []
    handles: list[Any] = []
    try:
        await producer.send_and_wait(topic, b"warm-up".ljust(value_size, b"."), partition=0)
        await producer.send_and_wait(topic, b"warm-up".ljust(value_size, b"."), partition=1)
        proxy.silent = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        blocked = False
        while not blocked:
            assert loop.time() < deadline, "send() never blocked"
            assert len(accepted) * value_size <= budget, "more bytes buffered than buffer_memory"
            value = b"%08d" % len(accepted)
            try:
                handles.append(await producer.send(topic, value.ljust(value_size, b".")))
            except Errors.KafkaTimeoutError:
                blocked = True
            else:
                accepted.append(value)
                await asyncio.sleep(0.003)  # longer than linger_ms: each batch lingers out
            assert producer._acc.pool.used <= budget
        buffered = len(accepted) * value_size
        log.warning("send() blocked after %d records (%d bytes)", len(accepted), buffered)
        # the record bytes alone (not counting per-record overhead) fill most of the budget
        assert buffered >= budget // 2, f"blocked with only {buffered} of {budget} bytes buffered"
        proxy.silent = False
        await proxy.cut_all()  # the requests written into the silence are lost: retried
        await asyncio.wait_for(producer.flush(), 60)
        assert all(h.exception() is None for h in handles)
        assert producer._acc.pool.used == 0
    finally:
        proxy.silent = False
        await producer.stop(timeout=0)
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        got = await consume_exactly(consumer, len(accepted) + 2, timeout=60)
    finally:
        await consumer.stop()
    values = [r.value[:8] for r in got if not r.value.startswith(b"warm-up")]
    assert sorted(values) == accepted  # each exactly once
    for p in (0, 1):  # in send order within each partition
        mine = [r.value[:8] for r in sorted(got, key=lambda r: r.offset) if r.partition == p]
        mine = [v for v in mine if v != b"warm-up."]
        assert mine == sorted(mine)


async def test_records_of_a_batch_never_sealed_expire_at_delivery_timeout(
    proxy: FaultProxy, new_topic: Any
) -> None:
    """During an outage a ready batch that cannot go out keeps filling instead of being
    sealed; its records still fail with KafkaTimeoutError once delivery_timeout_ms has
    passed (while the producer runs, not only at stop()), and the memory is free again."""
    topic = await new_topic(partitions=1)
    producer = AIOKafkaProducer(
        bootstrap_servers=proxy.bootstrap,
        linger_ms=0,
        request_timeout_ms=500,
        delivery_timeout_ms=3000,
    )
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"warm-up", partition=0)
        proxy.silent = True
        handles = []
        for i in range(20):
            handles.append(await producer.send(topic, b"%d" % i, partition=0))
            await asyncio.sleep(0.05)
        t0 = time.monotonic()
        await asyncio.wait_for(asyncio.wait(handles), 20)
        log.warning("the last records failed %.2f s after the last send", time.monotonic() - t0)
        for h in handles:
            assert isinstance(h.exception(), Errors.KafkaTimeoutError), h
        assert producer._acc.pool.used == 0
    finally:
        await producer.stop(timeout=0)
        proxy.silent = False


# -- fetch errors ----------------------------------------------------------------------------
async def consume_exactly(c: AIOKafkaConsumer, want: int, timeout: float = 30) -> list[Any]:
    """Every record of a drain, checked for duplicates by (partition, offset)."""
    got = await drain(c, want, timeout)
    keys = [(r.partition, r.offset) for r in got]
    assert len(keys) == len(set(keys)), "a record was delivered twice"
    return got


@pytest.mark.parametrize(
    "code",
    [Errors.NotLeaderForPartitionError.errno, Errors.FencedLeaderEpochError.errno],
    ids=["NOT_LEADER_OR_FOLLOWER", "FENCED_LEADER_EPOCH"],
)
async def test_fetch_leader_errors_refresh_and_retry(
    proxy: FaultProxy, kafka_bootstrap: str, new_topic: Any, code: int
) -> None:
    """Java: refresh metadata, retry the partition; nothing lost, nothing twice."""
    topic = await new_topic(partitions=2)
    await produce(kafka_bootstrap, topic, 20, 2)
    fault = proxy.add(Rule(API.FETCH, "error", error_code=code, topic=topic, partition=1, times=3))
    metadata = proxy.add(Rule(API.METADATA, "observe", times=-1))
    c = AIOKafkaConsumer(
        topic, bootstrap_servers=proxy.bootstrap, auto_offset_reset="earliest", retry_backoff_ms=50
    )
    await c.start()
    try:
        got = await consume_exactly(c, 40)
        assert sorted((r.partition, r.offset) for r in got) == [
            (p, o) for p in range(2) for o in range(20)
        ]
        assert fault.hits == 3
        assert metadata.hits >= 2  # the error made the consumer refresh its metadata
    finally:
        await c.stop()


def _current_leader(topic: str, partition: int, leader: int, epoch: int, proxy: FaultProxy) -> Any:
    """A Rule edit: the KIP-951 CurrentLeader (and the proxy's endpoint for that node) on
    ``topic``-``partition`` of a Fetch or Produce answer."""

    def edit(resp: Any) -> None:
        for t in getattr(resp, "responses", ()):
            parts = getattr(t, "partitions", None) or getattr(t, "partition_responses", ())
            for p in parts:
                index = getattr(p, "partition_index", getattr(p, "index", None))
                if index == partition and p.error_code:
                    p.current_leader.leader_id, p.current_leader.leader_epoch = leader, epoch
        endpoint = type(resp).NodeEndpoint if hasattr(type(resp), "NodeEndpoint") else None
        if endpoint is not None:
            resp.node_endpoints = [
                endpoint(node_id=leader, host=proxy.host, port=proxy.port, rack=None)
            ]

    return edit


@pytest.mark.parametrize("api", ["fetch", "produce"])
async def test_not_leader_with_current_leader_needs_no_metadata(
    proxy: FaultProxy, broker: Any, kafka_bootstrap: str, new_topic: Any, api: str
) -> None:
    """KIP-951: a NOT_LEADER_OR_FOLLOWER answer naming the current leader (Fetch v12+,
    Produce v10+) moves the partition to it at once: no Metadata request, no back-off (a long
    one here: a refresh or a wait would show). Before, each such answer asked for Metadata."""
    topic = await new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    await produce(kafka_bootstrap, topic, 10)
    c = AIOKafkaConsumer(bootstrap_servers=proxy.bootstrap, auto_offset_reset="earliest")
    p = AIOKafkaProducer(bootstrap_servers=proxy.bootstrap, retry_backoff_ms=5000)
    await c.start()
    await p.start()
    try:
        await p.send_and_wait(topic, b"warm", partition=0)
        c.assign([tp])
        got = await asyncio.wait_for(consume_exactly(c, 11), 10)  # metadata known, fetching
        cluster = p.client.cluster
        meta = cluster.partition_metadata(tp)
        assert meta is not None
        # "node 2", at the proxy's address too (so in front of the same broker): a node the
        # client has not met, named with its endpoint, as a real new leader would be
        edit = _current_leader(topic, 0, meta.leader + 1, meta.leader_epoch + 1, proxy)
        key = API.FETCH if api == "fetch" else API.PRODUCE
        code = Errors.NotLeaderForPartitionError.errno
        if not p.client.supports(
            m.FetchRequest if api == "fetch" else m.ProduceRequest, 16 if api == "fetch" else 10
        ):
            pytest.skip(f"{broker.kind}: no {api} version with CurrentLeader and NodeEndpoints")
        if api == "fetch" and cluster.topic_id(topic) in (None, NO_TOPIC_ID):
            # (noida: zero ids, so Fetch stays at v12, which names no endpoint for a new node)
            pytest.skip(f"{broker.kind}: no topic ids, Fetch v12 carries no NodeEndpoints")
        metadata = proxy.add(Rule(API.METADATA, "observe", times=-1))
        fault = proxy.add(Rule(key, "error", error_code=code, topic=topic, partition=0, edit=edit))
        if api == "fetch":
            await p.send_and_wait(topic, b"after", partition=0)
            got += await asyncio.wait_for(consume_exactly(c, 1), 10)
            assert [r.offset for r in got] == list(range(12))
            await asyncio.wait_for(fault.done.wait(), 5)
        else:
            start = time.monotonic()
            md = await asyncio.wait_for(p.send_and_wait(topic, b"after", partition=0), 10)
            assert md.offset >= 11  # (the answer rewritten was a write: not idempotent)
            assert time.monotonic() - start < 2, "the retry waited out retry_backoff_ms"
        assert fault.hits == 1
        assert metadata.hits == 0, f"{api}: a Metadata request was sent"
        assert cluster.leader_for_partition(tp) == meta.leader + 1 or api == "fetch"
        assert c._client.cluster.leader_for_partition(tp) == meta.leader + 1 or api == "produce"
    finally:
        await c.stop()
        await p.stop()


async def test_fetch_offset_out_of_range(
    proxy: FaultProxy, kafka_bootstrap: str, new_topic: Any
) -> None:
    """Java: with auto_offset_reset the position is reset (earliest: from the log start
    again); with "none" OffsetOutOfRangeError reaches the caller and the position stays."""
    topic = await new_topic(partitions=1)
    await produce(kafka_bootstrap, topic, 10)
    tp = TopicPartition(topic, 0)
    for reset in ("earliest", "none"):
        c = AIOKafkaConsumer(bootstrap_servers=proxy.bootstrap, auto_offset_reset=reset)
        await c.start()
        try:
            c.assign([tp])
            c.seek(tp, 4)
            fault = proxy.add(Rule(API.FETCH, "error", error_code=1, topic=topic, partition=0))
            if reset == "earliest":
                got = await consume_exactly(c, 10)
                assert [r.offset for r in got] == list(range(10))
            else:
                with pytest.raises(Errors.OffsetOutOfRangeError):
                    await drain(c, 1)
                assert await c.position(tp) == 4
                got = await consume_exactly(c, 6)  # the next fetch from 4 is answered
                assert [r.offset for r in got] == list(range(4, 10))
            assert fault.hits == 1
        finally:
            await c.stop()


async def test_corrupt_fetch_data_is_raised_and_skips_nothing(
    proxy: FaultProxy, kafka_bootstrap: str, new_topic: Any
) -> None:
    """A batch failing its CRC: CorruptRecordException reaches the caller, the position stays
    at the batch, the refetched (intact) data is delivered; nothing lost or twice."""
    topic = await new_topic(partitions=1)
    await produce(kafka_bootstrap, topic, 10)
    tp = TopicPartition(topic, 0)
    c = AIOKafkaConsumer(bootstrap_servers=proxy.bootstrap, auto_offset_reset="earliest")
    await c.start()
    try:
        c.assign([tp])
        await c.seek_to_beginning(tp)
        fault = proxy.add(Rule(API.FETCH, "corrupt", topic=topic, when=has_records))
        errors = 0
        got: list[Any] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while len(got) < 10 and loop.time() < deadline:
            try:
                for recs in (await c.getmany(timeout_ms=200)).values():
                    got.extend(recs)
            except Errors.CorruptRecordException:
                errors += 1
                assert await c.position(tp) == 0
        assert fault.hits == 1 and errors == 1
        assert [r.offset for r in got] == list(range(10))
    finally:
        await c.stop()


def has_records(resp: Any) -> bool:
    """``when`` predicate: a Fetch response carrying record data."""
    return any(getattr(p, "records", None) for t in resp.responses for p in t.partitions)


# -- group errors ----------------------------------------------------------------------------
async def joined_member(proxy: FaultProxy, topic: str, **kw: Any) -> AIOKafkaConsumer:
    c = AIOKafkaConsumer(
        topic,
        bootstrap_servers=proxy.bootstrap,
        group_id=group_name(),
        enable_auto_commit=False,
        **dict(FAST, **kw),
    )
    await c.start()
    await settle([c], {TopicPartition(topic, 0)})
    return c


@pytest.mark.parametrize(
    "code",
    [Errors.GroupCoordinatorNotAvailableError.errno, Errors.NotCoordinatorForGroupError.errno],
    ids=["COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"],
)
async def test_commit_retries_coordinator_errors(
    proxy: FaultProxy, new_topic: Any, code: int
) -> None:
    """Java: rediscover the coordinator and retry; the commit succeeds."""
    topic = await new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    c = await joined_member(proxy, topic)
    try:
        fault = proxy.add(Rule(API.OFFSET_COMMIT, "error", error_code=code, times=2))
        find = proxy.add(Rule(API.FIND_COORDINATOR, "observe", times=-1))
        await c.commit({tp: 7})
        assert fault.hits == 2
        assert find.hits >= 1  # looked the coordinator up again
        assert await c.committed(tp) == 7
    finally:
        await c.stop()


async def test_commit_during_rebalance_fails_then_member_rejoins(
    proxy: FaultProxy, broker: Any, new_topic: Any
) -> None:
    """REBALANCE_IN_PROGRESS on a commit: CommitFailedError (the partitions may move), the
    member rejoins (new generation) and later commits succeed."""
    broker.skip_on("tansu", reason=TANSU_GENERATION)
    topic = await new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    c = await joined_member(proxy, topic)
    try:
        generation = c.group_generation
        proxy.add(Rule(API.OFFSET_COMMIT, "error", error_code=27))
        with pytest.raises(Errors.CommitFailedError):
            await c.commit({tp: 3})
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while (c.group_generation <= generation or not c.assignment()) and loop.time() < deadline:
            await c.getmany(timeout_ms=100)
        assert c.group_generation > generation and c.assignment() == {tp}
        await c.commit({tp: 3})
        assert await c.committed(tp) == 3
    finally:
        await c.stop()


@pytest.mark.parametrize("api", [API.SYNC_GROUP, API.HEARTBEAT], ids=["SyncGroup", "Heartbeat"])
async def test_rebalance_in_progress_makes_the_member_rejoin(
    proxy: FaultProxy, broker: Any, new_topic: Any, api: int
) -> None:
    """REBALANCE_IN_PROGRESS on SyncGroup or Heartbeat: the member rejoins (JoinGroup again)
    and ends up assigned, in a newer generation."""
    broker.skip_on("tansu", reason=TANSU_GENERATION)
    topic = await new_topic(partitions=1)
    other = await new_topic(partitions=1, name=f"{topic}-b")
    want = {TopicPartition(topic, 0), TopicPartition(other, 0)}
    c = await joined_member(proxy, topic)
    try:
        generation = c.group_generation
        joins = proxy.add(Rule(API.JOIN_GROUP, "observe", times=-1))
        fault = proxy.add(Rule(api, "error", error_code=27))
        if api == API.SYNC_GROUP:
            c.subscribe([topic, other])  # a rebalance of our own, to reach a SyncGroup
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while loop.time() < deadline and not (
            fault.hits and c.group_generation > generation + (api == API.SYNC_GROUP)
        ):
            await c.getmany(timeout_ms=100)
        assert fault.hits == 1
        # SyncGroup: the join of the new subscription, then the rejoin after the refusal
        assert joins.hits >= (2 if api == API.SYNC_GROUP else 1)
        assert c.group_generation > generation + (api == API.SYNC_GROUP)
        await settle([c], want if api == API.SYNC_GROUP else {TopicPartition(topic, 0)})
    finally:
        await c.stop()


# -- idempotent producer ---------------------------------------------------------------------
async def read_values(
    bootstrap: str, topic: str, isolation_level: str = "read_uncommitted", timeout: float = 30.0
) -> list[bytes]:
    """Every value in partition 0 of ``topic`` up to its end offset (the last stable offset under
    ``read_committed``), duplicates included: reading up to the end proves that nothing else is
    there, where waiting for one record more than expected would only prove it for a while."""
    c = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", isolation_level=isolation_level
    )
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        end = (await c.end_offsets([tp]))[tp]
        got: list[bytes] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while await c.position(tp) < end:
            if loop.time() > deadline:
                raise AssertionError(f"{tp}: read {got!r}, position below the end offset {end}")
            batch = await c.getmany(tp, timeout_ms=500)
            got.extend(r.value for r in batch.get(tp, ()))
        return got
    finally:
        await c.stop()


async def test_idempotent_producer_out_of_order_sequence_after_a_lost_request(
    proxy: FaultProxy, kafka_bootstrap: str, new_topic: Any
) -> None:
    """A Produce request vanishes on the way; the broker answers the next ones (later
    sequences) OUT_OF_ORDER_SEQUENCE_NUMBER. Java: retry in sequence order; every
    acknowledged record is in the log exactly once, in send order."""
    topic = await new_topic(partitions=1)
    producer = AIOKafkaProducer(
        bootstrap_servers=proxy.bootstrap,
        enable_idempotence=True,
        request_timeout_ms=3000,
        retry_backoff_ms=50,
        linger_ms=0,
        max_batch_size=200,
    )
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"warm-up", partition=0)
        lost = proxy.add(Rule(API.PRODUCE, "drop", direction="request"))
        ooo = proxy.add(Rule(API.PRODUCE, "observe", times=-1, when=any_error(45)))
        handles = [await producer.send(topic, b"%03d" % i, partition=0) for i in range(60)]
        mds = await asyncio.wait_for(asyncio.gather(*handles), 60)
        assert lost.hits == 1
        assert ooo.hits >= 1  # the broker itself refused the later sequences
        assert [md.offset for md in mds] == sorted(md.offset for md in mds)
    finally:
        await producer.stop()
    values = await read_values(kafka_bootstrap, topic)
    assert values == [b"warm-up"] + [b"%03d" % i for i in range(60)]


async def test_transactional_producer_retries_later_sequences_behind_a_lost_request(
    proxy: FaultProxy, broker: Any, kafka_bootstrap: str, new_topic: Any
) -> None:
    """The same lost Produce request inside a transaction: the later batches the broker
    refuses with OUT_OF_ORDER_SEQUENCE_NUMBER are not the partition's next sequence, so (as the
    Java client) they are retried behind the lost one instead of making the transaction
    abortable; the transaction commits with every record once, in order."""
    broker.skip_on("tansu", reason="Tansu does not filter aborted records (read_committed check)")
    topic = await new_topic(partitions=1)
    producer = AIOKafkaProducer(
        bootstrap_servers=proxy.bootstrap,
        transactional_id=f"lost-{topic}",
        request_timeout_ms=3000,
        retry_backoff_ms=50,
        linger_ms=0,
        max_batch_size=200,
    )
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(topic, b"warm-up", partition=0)
            lost = proxy.add(Rule(API.PRODUCE, "drop", direction="request"))
            ooo = proxy.add(Rule(API.PRODUCE, "observe", times=-1, when=any_error(45)))
            handles = [await producer.send(topic, b"%03d" % i, partition=0) for i in range(60)]
            mds = await asyncio.wait_for(asyncio.gather(*handles), 60)
        assert lost.hits == 1
        assert ooo.hits >= 1  # the broker itself refused the later sequences
        assert [md.offset for md in mds] == sorted(md.offset for md in mds)
    finally:
        await producer.stop()
    values = await read_values(kafka_bootstrap, topic, isolation_level="read_committed")
    assert values == [b"warm-up"] + [b"%03d" % i for i in range(60)]


@pytest.mark.parametrize("transactional", [True, False], ids=["transactional", "idempotent"])
@pytest.mark.parametrize(
    "code",
    [Errors.NotLeaderForPartitionError.errno, Errors.UnknownTopicOrPartitionError.errno],
    ids=["NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION"],
)
async def test_first_batch_refused_the_next_does_not_pass_it(
    proxy: FaultProxy,
    broker: Any,
    kafka_bootstrap: str,
    new_topic: Any,
    code: int,
    transactional: bool,
) -> None:
    """A new producer's first batch of a partition is refused with a retriable error (nothing
    written; a new topic's leader not ready yet). A broker with no state for the producer id
    accepts ANY first sequence, so a second batch pipelined behind the first would be written
    before it, and the first one's retry refused OUT_OF_ORDER_SEQUENCE_NUMBER (aiokafka's
    test_producer_transactional_flush_2_batches_before_commit failed so under load). Until a
    batch of the producer id was acknowledged on a partition, one batch at a time goes there:
    both are written, in order, and the transaction commits."""
    if transactional:
        broker.skip_on("tansu", reason="Tansu does not filter aborted records (read_committed)")
    topic = await new_topic(partitions=1)
    producer = AIOKafkaProducer(
        bootstrap_servers=proxy.bootstrap,
        transactional_id=f"refused-{topic}" if transactional else None,
        enable_idempotence=True,
        retry_backoff_ms=50,
    )
    await producer.start()
    try:
        refused = proxy.add(Rule(API.PRODUCE, "reject", error_code=code, direction="request"))
        # the next request waits at the proxy until the refusal of the first is on its way
        held = proxy.add(Rule(API.PRODUCE, "delay", seconds=0.3, direction="request"))
        if transactional:
            await producer.begin_transaction()
        futs = []
        for value in (b"1", b"2"):
            batch = producer.create_batch()
            batch.append(timestamp=None, key=None, value=value)
            batch.close()
            futs.append(await producer.send_batch(batch, topic, partition=0))
        if transactional:
            await asyncio.wait_for(producer.commit_transaction(), 30)
        mds = await asyncio.wait_for(asyncio.gather(*futs), 30)
        assert refused.hits == 1 and held.hits == 1
        assert mds[0].offset < mds[1].offset
    finally:
        await producer.stop()
    level = "read_committed" if transactional else "read_uncommitted"
    values = await read_values(kafka_bootstrap, topic, isolation_level=level)
    assert values == [b"1", b"2"]


async def test_transactional_start_retries_an_init_producer_id_that_timed_out(
    proxy: FaultProxy, broker: Any, kafka_bootstrap: str, new_topic: Any
) -> None:
    """The coordinator's answer to InitProducerId comes after request_timeout_ms: as a
    disconnect, the request is sent again (the Java TransactionManager's behaviour) within
    max_block_ms, so start() succeeds and the producer's transactions commit."""
    broker.skip_on("tansu", reason="Tansu does not filter aborted records (read_committed check)")
    topic = await new_topic(partitions=1)
    late = proxy.add(Rule(API.INIT_PRODUCER_ID, "delay", seconds=2.5))
    producer = AIOKafkaProducer(
        bootstrap_servers=proxy.bootstrap,
        transactional_id=f"late-init-{topic}",
        request_timeout_ms=1000,
        retry_backoff_ms=50,
        max_block_ms=30000,
    )
    try:
        await asyncio.wait_for(producer.start(), 40)
        assert late.hits == 1
        async with producer.transaction():
            await producer.send_and_wait(topic, b"after a late InitProducerId", partition=0)
    finally:
        await producer.stop()
    values = await read_values(kafka_bootstrap, topic, isolation_level="read_committed")
    assert values == [b"after a late InitProducerId"]


@pytest.mark.parametrize(
    "code",
    [Errors.UnknownProducerId.errno, Errors.OutOfOrderSequenceNumber.errno],
    ids=["UNKNOWN_PRODUCER_ID", "OUT_OF_ORDER_SEQUENCE_NUMBER"],
)
async def test_idempotent_producer_sequence_error_bumps_the_epoch(
    proxy: FaultProxy, kafka_bootstrap: str, new_topic: Any, code: int
) -> None:
    """The broker refuses the oldest in-flight batch with a sequence error (and writes
    nothing): KIP-360, the producer bumps its epoch (locally, as the Java client does for an
    idempotent producer; a broker refusing the bump hands out a new producer id), re-stamps
    and resends; every record is written exactly once, in order."""
    topic = await new_topic(partitions=1)
    producer = AIOKafkaProducer(
        bootstrap_servers=proxy.bootstrap, enable_idempotence=True, retry_backoff_ms=50
    )
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"warm-up", partition=0)
        txn = producer._txn
        assert txn is not None
        before = (txn.producer_id, txn.producer_epoch)
        proxy.add(Rule(API.PRODUCE, "reject", error_code=code, direction="request"))
        handles = [await producer.send(topic, b"%d" % i, partition=0) for i in range(20)]
        await asyncio.wait_for(asyncio.gather(*handles), 30)
        pid, epoch = before
        # a higher epoch of the same id, or (a broker that refuses the bump) a new id
        assert (txn.producer_id == pid and txn.producer_epoch > epoch) or txn.producer_id != pid
    finally:
        await producer.stop()
    values = await read_values(kafka_bootstrap, topic)
    assert values == [b"warm-up"] + [b"%d" % i for i in range(20)]


async def test_cancelled_start_leaves_clients_usable(
    proxy: FaultProxy, kafka_bootstrap: str, new_topic: Any
) -> None:
    """start() of a producer and of a consumer cancelled while the broker is silent: a later
    start() works, and nothing keeps running after stop()."""
    topic = await new_topic(partitions=1)
    before = own_tasks()
    producer = AIOKafkaProducer(bootstrap_servers=proxy.bootstrap, request_timeout_ms=30000)
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=proxy.bootstrap,
        auto_offset_reset="earliest",
        request_timeout_ms=30000,
    )
    try:
        proxy.silent = True
        await cancel_soon(asyncio.create_task(producer.start()))
        await cancel_soon(asyncio.create_task(consumer.start()))
        proxy.silent = False
        await proxy.cut_all()
        await asyncio.wait_for(producer.start(), 20)
        await asyncio.wait_for(consumer.start(), 20)
        await asyncio.wait_for(producer.send_and_wait(topic, b"after", partition=0), 20)
        assert [r.value for r in await drain(consumer, 1)] == [b"after"]
    finally:
        proxy.silent = False
        await producer.stop()
        await consumer.stop()
    await wait_tasks_back_to(before)


# -- group membership churn ------------------------------------------------------------------
async def test_a_member_start_costs_one_join(proxy: FaultProxy, new_topic: Any) -> None:
    """Starting a member (static: twice, the second replacing the first) sends one successful
    JoinGroup per start: learning the topic's metadata after SyncGroup is no reason to rejoin
    (on Apache Kafka that re-join while Stable started a new generation every time)."""
    topic = await new_topic(partitions=2)
    tps = {TopicPartition(topic, p) for p in range(2)}
    group = group_name()
    for instance in (None, "instance-1", "instance-1"):
        joins = proxy.add(
            Rule(API.JOIN_GROUP, "observe", times=-1, when=lambda r: not r.error_code)
        )
        c = AIOKafkaConsumer(
            topic,
            bootstrap_servers=proxy.bootstrap,
            group_id=group if instance else group_name(),
            group_instance_id=instance,
            **FAST,
        )
        await c.start()
        try:
            await settle([c], tps)
            # a few heartbeats after the sync: the spurious rejoin came before the first one
            beats = proxy.add(Rule(API.HEARTBEAT, "observe", times=3))
            deadline = asyncio.get_running_loop().time() + 20
            while not beats.done.is_set():
                assert asyncio.get_running_loop().time() < deadline, "no heartbeats"
                await c.getmany(timeout_ms=100)
            assert joins.hits == 1
        finally:
            await c.stop()
            joins.times = 0  # retire the rule


async def test_position_rides_out_a_rebalance_and_stop_fails_its_wait(
    proxy: FaultProxy, new_topic: Any
) -> None:
    """A position() still looking its offset up when a rebalance takes the partition away
    waits for the next assignment and answers from it, as aiokafka's (its
    test_consumer_position); a wait for an assignment fails with ConsumerStoppedError when
    the consumer stops."""
    topic = await new_topic(partitions=1)
    other = await new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    c = await joined_member(proxy, topic)
    try:
        # every committed-offset lookup answers after 1.5 s
        proxy.add(Rule(API.OFFSET_FETCH, "delay", seconds=1.5, times=-1))
        assigned = c._subscription.wait_for_assignment()
        c.subscribe([topic, other])
        await asyncio.wait_for(assigned, 30)
        assert tp in c.assignment()
        looking = asyncio.ensure_future(c.position(tp))  # its OffsetFetch waits at the proxy
        # the next JoinGroup answers after 3 s: when the lookup's answer comes, the rebalance
        # below has revoked the partition and not yet assigned it again
        join = proxy.add(Rule(API.JOIN_GROUP, "delay", seconds=3.0))
        await asyncio.sleep(0)
        c.subscribe([topic])
        assert await asyncio.wait_for(looking, 30) == 0
        assert join.hits == 1
        waiting = c._subscription.wait_for_assignment()
    finally:
        await c.stop()
    with pytest.raises(Errors.ConsumerStoppedError):
        await asyncio.wait_for(waiting, 5)
