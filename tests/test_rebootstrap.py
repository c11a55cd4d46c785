"""KIP-899 / KIP-1102 rebootstrap, beside the Java client 4.4.

Clients are bootstrapped at a fault proxy (``boot``) whose Metadata answers name "cluster A":
a second proxy (``a``) in front of the broker, node 1. Cluster A goes away (``a`` closes) and
``boot`` then names "cluster B": a third proxy (``b``), node ids + 100, other port, in front of
the same broker (so the log goes on and the comparison is about finding the brokers only).
With ``metadata_recovery_strategy="rebootstrap"`` (the default, as Java 4.0's) the client
goes back to the bootstrap address when its known brokers are all unreachable and carries on
against B; with ``"none"`` it keeps trying node 1 and its records time out, as Java's do.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka_lite import errors as Errors
from tests import java_oracle
from tests.faults import API, FaultProxy, Rule

pytestmark = pytest.mark.slow


def _java_acks_after(java: Any, t: float) -> list[float]:
    return [e["t"] / 1000 for e in java.events if e["event"] == "acked" and e["t"] / 1000 >= t]


async def _wait(what: str, cond: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
        await asyncio.sleep(0.05)


def _gap(times: list[float], start: float) -> float:
    """The longest time without an acknowledgement from ``start`` on (seconds)."""
    ts = sorted(x for x in times if x >= start - 1)
    return max((b - a for a, b in itertools.pairwise(ts)), default=0.0)


@pytest.mark.parametrize("case", ["rebootstrap", "none", "hung"])
async def test_cluster_replaced_behind_the_bootstrap_address(
    broker: Any, new_topic: Any, case: str
) -> None:
    """``hung``: cluster A keeps its connections open and answers nothing (the proxy goes
    silent): no node is unreachable, so only KIP-1102's timer (3 s here) sends the clients
    back to the bootstrap address."""
    broker.skip_on("tansu", "noida", reason="beside the Java client on Apache Kafka")
    if reason := java_oracle.unavailable_reason():
        pytest.skip(reason)
    topic = await new_topic(1)
    tp = TopicPartition(topic, 0)
    upstream = broker.bootstrap.split(",")[0]
    strategy = "none" if case == "none" else "rebootstrap"
    trigger_ms = 3000 if case == "hung" else 300_000
    delivery_ms = 6000 if case == "none" else 60000
    async with FaultProxy(upstream) as a, FaultProxy(upstream) as b, FaultProxy(upstream) as boot:
        boot.advertise = (a.host, a.port)
        b.node_offset = 100
        producer = AIOKafkaProducer(
            bootstrap_servers=boot.bootstrap,
            enable_idempotence=True,
            request_timeout_ms=3000,
            delivery_timeout_ms=delivery_ms,
            metadata_recovery_strategy=strategy,
            metadata_recovery_rebootstrap_trigger_ms=trigger_ms,
        )
        consumer = AIOKafkaConsumer(
            bootstrap_servers=boot.bootstrap,
            auto_offset_reset="earliest",
            request_timeout_ms=3000,
            metadata_recovery_strategy=strategy,
            metadata_recovery_rebootstrap_trigger_ms=trigger_ms,
        )
        await producer.start()
        await consumer.start()
        consumer.assign([tp])
        java = java_oracle.KipScript(
            "flood-producer",
            boot.bootstrap,
            topic,
            run_ms=120_000,
            recovery=strategy,
            trigger_ms=trigger_ms,
            delivery_timeout_ms=delivery_ms,
            interval_ms=5,  # as ours: the proxies are Python, on a shared machine
        ).start()
        acks: list[float] = []
        failures: list[tuple[float, BaseException]] = []
        read: list[int] = []
        stop = asyncio.Event()

        async def flood() -> None:
            seq = 0
            while not stop.is_set():
                fut = await producer.send(topic, b"%d" % seq, partition=0)

                def done(f: asyncio.Future[Any]) -> None:
                    exc = f.exception()
                    if exc is None:
                        acks.append(time.time())
                    else:
                        failures.append((time.time(), exc))

                asyncio.ensure_future(fut).add_done_callback(done)
                seq += 1
                await asyncio.sleep(0.005)

        async def tail() -> None:
            while True:
                batch = await consumer.getmany(tp, timeout_ms=500)
                read.extend(r.offset for r in batch.get(tp, []))

        tasks = [asyncio.create_task(flood()), asyncio.create_task(tail())]
        try:
            await _wait("our acks", lambda: len(acks) >= 100, 60)
            # (in a thread: the proxies Java talks to run in this event loop)
            await asyncio.to_thread(
                java.wait_for,
                lambda j: sum(e["event"] == "acked" for e in j.events) >= 100,
                60,
                "Java's acks",
            )
            ports = {b.port for b in producer.client.cluster.brokers()}
            assert ports == {a.port}, "the clients work with cluster A"
            gone_at = time.time()
            boot.advertise, boot.node_offset = (b.host, b.port), 100
            if case == "hung":
                a.silent = True  # cluster A answers nothing
            else:
                await a.__aexit__(None, None, None)  # cluster A is gone
            if strategy == "rebootstrap":

                def on_b() -> bool:  # an ack after gone_at alone may be A's, in flight then
                    brokers = producer.client.cluster.brokers()
                    return {(int(n.nodeId), n.port) for n in brokers} == {(101, b.port)}

                await _wait(
                    "our acks from B", lambda: on_b() and bool(acks) and acks[-1] > gone_at, 60
                )
                await asyncio.to_thread(
                    java.wait_for, lambda j: bool(_java_acks_after(j, gone_at)), 60, "Java on B"
                )
                ours_s = next(t for t in acks if t > gone_at) - gone_at
                java_s = _java_acks_after(java, gone_at)[0] - gone_at
                java_acks = [e["t"] / 1000 for e in java.events if e["event"] == "acked"]
                print(
                    f"\n[rebootstrap] {case}: A gone -> next ack: ours {ours_s:.2f} s, Java 4.4 "
                    f"{java_s:.2f} s; longest ack gap: ours {_gap(acks, gone_at):.2f} s, "
                    f"Java 4.4 {_gap(java_acks, gone_at):.2f} s"
                )
                nodes = {(int(n.nodeId), n.port) for n in producer.client.cluster.brokers()}
                assert nodes == {(101, b.port)}, nodes
                end = (await consumer.end_offsets([tp]))[tp]
                await _wait("the consumer on B", lambda: bool(read) and read[-1] >= end - 1, 30)
            else:  # "none": the records sent after A went away time out, Java's as ours
                await _wait(
                    "our records failing", lambda: any(t > gone_at for t, _ in failures), 60
                )
                await asyncio.to_thread(
                    java.wait_for,
                    lambda j: any(e["event"] == "error" for e in j.events),
                    60,
                    "Java's failures",
                )
                assert not [t for t in acks if t > gone_at + 1], "ours reached cluster B"
                assert not _java_acks_after(java, gone_at + 1), "Java reached cluster B"
                exc = next(e for t, e in failures if t > gone_at)
                assert isinstance(exc, Errors.KafkaTimeoutError), repr(exc)
                assert {int(n.nodeId) for n in producer.client.cluster.brokers()} == {1}
        finally:
            stop.set()
            for t in tasks:
                t.cancel()
            await asyncio.wait(tasks, timeout=10)
            await asyncio.to_thread(java.stop, check=False)
            await consumer.stop()
            await producer.stop(timeout=5)


async def test_rebootstrap_required_from_the_broker(broker: Any, new_topic: Any) -> None:
    """A Metadata answer with REBOOTSTRAP_REQUIRED (KIP-1102, Metadata v13) makes the client
    forget its brokers and ask the bootstrap address at once; it carries on from there."""
    broker.skip_on("tansu", "noida", reason="Metadata v13: Apache Kafka 4")
    topic = await new_topic(1)
    upstream = broker.bootstrap.split(",")[0]
    async with FaultProxy(upstream) as a, FaultProxy(upstream) as boot:
        boot.advertise = (a.host, a.port)
        async with AIOKafkaProducer(bootstrap_servers=boot.bootstrap) as producer:
            await producer.send_and_wait(topic, b"before")
            asked = boot.add(Rule(API.METADATA, "observe", times=-1))
            a.add(Rule(API.METADATA, "error", error_code=Errors.RebootstrapRequiredError.errno))
            await asyncio.wait_for(producer.client.request_update(), 10)
            assert asked.hits >= 1, "the bootstrap address was not asked"
            md = await asyncio.wait_for(producer.send_and_wait(topic, b"after"), 10)
            assert md.offset == 1
