"""KIP-951 leader discovery on the 3-node Apache Kafka cluster, beside the Java client 4.4.

A partition's leader goes away (controlled shutdown, kill -9) under an idempotent flood from
our producer and Java's (``KipScripts.java flood-producer``), both writing to partition 0 while
a consumer of ours tails it. Produce (v10+) and Fetch (v12+, endpoints v16+) answers of
NOT_LEADER_OR_FOLLOWER name the new leader (``CurrentLeader``, ``NodeEndpoints``); ours switches
to it at once. Measured, for both clients: the time from the election (the new leader seen by
an admin client polling every 50 ms) to the first record acknowledged after it, and the longest
gap between acknowledgements. Printed and recorded as junit properties, never asserted (a busy
2-core machine). Asserted: after a controlled shutdown our producer and consumer reached the new
leader without a Metadata request (counted by an ``on_request_sent`` hook; the consumer's count
is printed), and every record
our producer had acknowledged is in the log once, in order. A killed leader cannot answer: the
clients learn of the election through Metadata, the number of requests is printed.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest
from cluster_helpers import REQUEST_TIMEOUT_MS, create_topic, describe, wait_until

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka_lite.hooks import Hook
from tests import java_oracle

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(180)]

METADATA, PRODUCE, FETCH = 3, 0, 1


class _Requests(Hook):
    """Every request sent: (wall time, node, api key)."""

    def __init__(self) -> None:
        self.sent: list[tuple[float, int | None, int]] = []

    def on_request_sent(self, node_id: int | None, api_key: int, api_name: str, size: int) -> None:
        self.sent.append((time.time(), node_id, api_key))


def _first_after(times: list[float], t: float) -> float | None:
    return next((x for x in sorted(times) if x >= t), None)


def _gap(times: list[float], start: float) -> float:
    """The longest time without an acknowledgement from ``start`` on (seconds)."""
    ts = sorted(x for x in times if x >= start - 1)
    return max((b - a for a, b in itertools.pairwise(ts)), default=0.0)


@pytest.mark.parametrize("fault", ["shutdown", "kill"])
async def test_leader_discovery_beside_java(
    apache_cluster: Any, fault: str, record_property: Callable[[str, object], None]
) -> None:
    if reason := java_oracle.unavailable_reason():
        pytest.skip(reason)
    cluster = apache_cluster.process
    bootstrap = apache_cluster.bootstrap
    topic = await create_topic(bootstrap, 1, leader=2)
    victim = 2
    prod_requests, cons_requests = _Requests(), _Requests()
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        acks="all",
        linger_ms=0,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        delivery_timeout_ms=60000,
        hooks=[prod_requests],
    )
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        request_timeout_ms=REQUEST_TIMEOUT_MS * 2,
        fetch_max_wait_ms=100,
        hooks=[cons_requests],
    )
    await producer.start()
    await consumer.start()
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    ours: list[tuple[float, int, int]] = []  # ack wall time, seq, offset
    failed: list[BaseException] = []
    tailed: list[int] = []
    stop = asyncio.Event()

    async def flood() -> None:
        seq = 0
        while not stop.is_set():
            fut = await producer.send(topic, b"%d" % seq, partition=0)

            def done(f: asyncio.Future[Any], seq: int = seq) -> None:
                if f.exception() is not None:
                    failed.append(f.exception())  # type: ignore[arg-type]
                else:
                    ours.append((time.time(), seq, f.result().offset))

            asyncio.ensure_future(fut).add_done_callback(done)
            seq += 1
            await asyncio.sleep(0.001)  # about Java's pace (1 record/ms)

    async def tail() -> None:
        while True:
            batch = await consumer.getmany(tp, timeout_ms=500)
            tailed.extend(r.offset for r in batch.get(tp, []))

    java = java_oracle.KipScript("flood-producer", bootstrap, topic, run_ms=150_000).start()
    tasks = [asyncio.create_task(flood()), asyncio.create_task(tail())]
    elected_at = 0.0
    try:
        java.wait_for(lambda j: sum(e["event"] == "acked" for e in j.events) >= 500, 60, "acks")
        await wait_until("our acks", lambda: len(ours) >= 500, 60)
        fault_at = time.time()
        op = cluster.node(victim).stop if fault == "shutdown" else cluster.node(victim).kill
        stopping = asyncio.ensure_future(asyncio.to_thread(op))
        survivors = ",".join(n.bootstrap for n in cluster.nodes if n.node_id != victim)
        deadline = time.monotonic() + 60
        while True:  # the election, as an admin client sees it
            parts = await describe(survivors, topic)
            if parts and parts[0]["leader"] not in (victim, -1):
                elected_at = time.time()
                break
            assert time.monotonic() < deadline, "no new leader within 60 s"
            await asyncio.sleep(0.05)
        new_leader = parts[0]["leader"]
        await stopping
        await wait_until("our acks after the election", lambda: ours[-1][0] > elected_at + 2, 60)
        java.wait_for(
            lambda j: any(e.get("t", 0) / 1000 > elected_at + 2 for e in j.events[-5:]),
            60,
            "Java's acks after the election",
        )
        end = (await consumer.end_offsets([tp]))[tp]
        await wait_until(
            "the tail to reach the end", lambda: bool(tailed) and tailed[-1] >= end - 1, 60
        )
    finally:
        stop.set()
        for t in tasks:
            t.cancel()
        await asyncio.wait(tasks, timeout=10)
        java.stop(check=False)
        await producer.flush()
        await consumer.stop()
        await producer.stop()
        await asyncio.to_thread(cluster.bring_back)  # _whole_cluster waits

    java_acks = [e["t"] / 1000 for e in java.events if e["event"] == "acked"]
    our_acks = [t for t, _, _ in ours]
    ours_next = _first_after(our_acks, elected_at)
    java_next = _first_after(java_acks, elected_at)
    assert ours_next is not None and java_next is not None
    first_new_produce = _first_after(
        [t for t, node, key in prod_requests.sent if key == PRODUCE and node == new_leader],
        fault_at,
    )
    first_new_fetch = _first_after(
        [t for t, node, key in cons_requests.sent if key == FETCH and node == new_leader],
        fault_at,
    )
    assert first_new_produce is not None and first_new_fetch is not None
    md_prod = [
        t
        for t, _, key in prod_requests.sent
        if key == METADATA and fault_at <= t <= first_new_produce
    ]
    md_cons = [
        t
        for t, _, key in cons_requests.sent
        if key == METADATA and fault_at <= t <= first_new_fetch
    ]
    report = {
        f"kip951_{fault}_ours_election_to_ack_s": ours_next - elected_at,
        f"kip951_{fault}_java_election_to_ack_s": java_next - elected_at,
        f"kip951_{fault}_ours_ack_gap_s": _gap(our_acks, fault_at),
        f"kip951_{fault}_java_ack_gap_s": _gap(java_acks, fault_at),
    }
    for name, seconds in report.items():
        print(f"\n[kip951] {name}: {seconds:.3f} s")
        record_property(name, f"{seconds:.3f}")
    print(
        f"[kip951] {fault}: Metadata requests before reaching the new leader: producer "
        f"{len(md_prod)}, consumer {len(md_cons)}; failed sends ours {len(failed)}, Java "
        f"{sum(e['event'] == 'error' for e in java.events)}"
    )
    if fault == "shutdown":  # the old leader answered with the new one: no Metadata needed
        # (the consumer's long poll is often cut by the node closing its sockets, not answered
        # NOT_LEADER_OR_FOLLOWER: a lost connection asks for Metadata, in Java too)
        assert not md_prod, f"the producer asked for Metadata {len(md_prod)} times"
    # idempotence: what we acknowledged is in the log once, at its offset, in send order
    acked = sorted(ours, key=lambda x: x[2])
    assert [s for _, s, _ in acked] == sorted(s for _, s, _ in acked), "acked out of order"
    assert len({o for _, _, o in acked}) == len(acked), "two acks for one offset"
