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
from aiokafka_lite.producer import AIOKafkaProducer
from aiokafka_lite.structs import TopicPartition
from tests.faults import API, FaultProxy, Rule
from tests.test_consumer import drain, produce
from tests.test_group import FAST, _session_timeout, group_name, settle

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]
__all__ = ["_session_timeout"]  # autouse fixture: short session timeouts per broker

log = logging.getLogger(__name__)


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
        task = asyncio.create_task(c.end_offsets([tp]))
        await cancel_soon(task)
        await wait_tasks_back_to(before)
        proxy.silent = False
        await proxy.cut_all()  # the silent connections are of no use any more
        assert await asyncio.wait_for(c.end_offsets([tp]), 20) == {tp: 3}
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
    await produce(kafka_bootstrap, topic, 2, 2)
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
    await drain(member, 4)
    await producer.send_and_wait(topic, b"warm-up", partition=0)
    proxy.silent = True
    looker.assign(list(tps))  # a position lookup that never gets an answer
    pending = [await producer.send(topic, b"lost", partition=1) for _ in range(3)]
    # bounds well under the old behaviour (commit and leave each up to request_timeout_ms;
    # a cancelled lookup running to request_timeout_ms)
    await timed_stop(producer, 4 + 4)
    await timed_stop(looker, 5)
    await timed_stop(member, 6 + 3)
    for fut in pending:
        log.warning("undelivered record: %r", fut.exception())
        assert fut.done() and isinstance(fut.exception(), Errors.KafkaError)
