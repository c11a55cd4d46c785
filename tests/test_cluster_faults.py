"""Fault tests on a 3-node Apache Kafka cluster: brokers killed, stopped and paused under load.

Every topic here has replication factor 3 and ``min.insync.replicas=2``, so one node may go away
without losing an acknowledged (``acks="all"``) record. Each test kills, stops or pauses a
partition leader (or the transaction coordinator) while clients work, brings the node back in a
``finally`` (the next test finds three running nodes) and asserts what a user observes: every
acknowledged record is read back exactly once and in order, failed sends fail with a
``KafkaError`` within the delivery timeout, consumers and producers move to the new leader or
coordinator without hanging. Times to recover are printed (``pytest -s``) and recorded as
junit properties, never asserted.

Node operations block (a controlled shutdown takes seconds), so they run in a thread.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from cluster_helpers import (
    REQUEST_TIMEOUT_MS,
    create_topic,
    leader_of,
    new_group,
    wait_until,
)

from aiokafka_lite import errors as Errors
from aiokafka_lite.consumer import AIOKafkaConsumer
from aiokafka_lite.ops.groups import find_coordinator
from aiokafka_lite.producer import AIOKafkaProducer
from aiokafka_lite.structs import TopicPartition

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(150)]

DELIVERY_TIMEOUT_MS = 30000


# ---- helpers -------------------------------------------------------------------------------


async def _read_all(
    bootstrap: str,
    topic: str,
    partitions: int,
    *,
    isolation_level: str = "read_uncommitted",
    timeout: float = 60,
) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of ``topic`` (up to its end offsets, read now): partition -> [(offset, value)]."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation_level,
        enable_auto_commit=False,
        request_timeout_ms=10000,
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + timeout
        for tp in tps:
            while await consumer.position(tp) < ends[tp]:
                assert time.monotonic() < deadline, f"reading {tp} back timed out"
                batch = await consumer.getmany(tp, timeout_ms=1000)
                for rec in batch.get(tp, []):
                    out[tp.partition].append((rec.offset, rec.value))
        return out
    finally:
        await consumer.stop()


def _seq(value: bytes) -> int:
    return int(value.split(b"-")[1])


def _report(record_property: Callable[[str, object], None], name: str, seconds: float) -> None:
    print(f"\n[cluster] {name}: {seconds:.2f} s")
    record_property(name, f"{seconds:.3f}")


# ---- 0. no fault: an idempotent producer's first requests to each leader -------------------


async def test_idempotent_order_on_fresh_connections(apache_cluster: Any) -> None:
    """Regression: requests that waited for the same connect to a leader could be written in
    any order; the broker accepted a later sequence first and the log came out reordered."""
    bootstrap = apache_cluster.bootstrap
    partitions = 3
    topic = await create_topic(bootstrap, partitions)
    for _round in range(2):  # each producer connects afresh to the three leaders
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=5
        )
        await producer.start()
        try:
            handles = []
            for i in range(1500):
                value = b"v-%d" % (_round * 10000 + i)
                handles.append(await producer.send(topic, value, partition=i % partitions))
                if i % 50 == 0:
                    await asyncio.sleep(0.005)
            await asyncio.wait_for(asyncio.gather(*handles), 30)
        finally:
            await producer.stop()
        got = await _read_all(bootstrap, topic, partitions)
        for part in range(partitions):
            seqs = [_seq(v) for _, v in got[part]]
            assert seqs == sorted(seqs), f"round {_round}, partition {part}: log out of order"


# ---- 1. kill -9 the leader under an idempotent flood ---------------------------------------


async def test_kill_leader_during_idempotent_flood(
    apache_cluster: Any, record_property: Callable[[str, object], None]
) -> None:
    cluster = apache_cluster.process
    bootstrap = apache_cluster.bootstrap
    partitions = 3
    topic = await create_topic(bootstrap, partitions)
    victim = await leader_of(bootstrap, topic, 0)
    delivery_timeout_ms = 6000
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        acks="all",
        linger_ms=5,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        # shorter than the failover (the controller fences a dead broker after ~9 s): records
        # queued for the dead leader expire, leaving sequence gaps the producer must get past
        delivery_timeout_ms=delivery_timeout_ms,
        max_block_ms=DELIVERY_TIMEOUT_MS,
    )
    await producer.start()
    acked: dict[int, dict[int, int]] = {p: {} for p in range(partitions)}  # seq -> offset
    failed: list[BaseException] = []
    killed_at: float | None = None
    recovered_at: list[float] = []
    futures: list[asyncio.Future[Any]] = []

    def on_done(seq: int, part: int, sent_at: float, fut: asyncio.Future[Any]) -> None:
        exc = fut.exception()
        if exc is not None:
            failed.append(exc)
            return
        md = fut.result()
        acked[part][seq] = md.offset
        if killed_at is not None and sent_at >= killed_at and part == 0:
            recovered_at.append(time.monotonic())

    # a consumer tails partition 0 through the kill: its fetcher must follow the new leader
    tail = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=REQUEST_TIMEOUT_MS * 2,
    )
    await tail.start()
    tp0 = TopicPartition(topic, 0)
    tail.assign([tp0])
    tailed: list[tuple[int, bytes]] = []

    async def follow() -> None:
        while True:
            batch = await tail.getmany(tp0, timeout_ms=500)
            tailed.extend((r.offset, r.value) for r in batch.get(tp0, []))

    follower = asyncio.create_task(follow())

    def tailed_to(end: int) -> bool:
        if follower.done():
            follower.result()  # raises what stopped it
            raise AssertionError("the tailing consumer stopped")
        return bool(tailed) and tailed[-1][0] >= end - 1

    try:
        seq = 0

        async def flood(until: Callable[[], bool]) -> None:
            nonlocal seq
            while not until():
                part = seq % partitions
                handle = await producer.send(topic, f"v-{seq}".encode(), partition=part)
                fut = asyncio.ensure_future(handle)
                fut.add_done_callback(functools.partial(on_done, seq, part, time.monotonic()))
                futures.append(fut)
                seq += 1
                if seq % 50 == 0:
                    await asyncio.sleep(0.005)  # a flood, but let responses in

        await asyncio.wait_for(flood(lambda: len(acked[0]) >= 300), 60)
        killed_at = time.monotonic()
        await asyncio.to_thread(cluster.node(victim).kill)
        # keep flooding until partition 0 accepts records sent after the kill again
        await asyncio.wait_for(flood(lambda: bool(recovered_at) or seq > 200000), 90)
        assert recovered_at, "partition 0 never accepted a record after its leader died"
        _report(record_property, "kill_leader_time_to_recover_s", recovered_at[0] - killed_at)
        # every send settles (acknowledged or failed) within the delivery timeout: no hang
        await asyncio.wait_for(
            asyncio.gather(*futures, return_exceptions=True), delivery_timeout_ms / 1000 + 15
        )
        end = (await tail.end_offsets([tp0]))[tp0]
        await wait_until("the tail consumer to read partition 0", lambda: tailed_to(end), 60)
    finally:
        follower.cancel()
        await asyncio.wait([follower], timeout=10)
        await tail.stop()
        await producer.stop()
        await asyncio.to_thread(cluster.bring_back)  # _whole_cluster waits

    for exc in failed:
        assert isinstance(exc, Errors.KafkaError), repr(exc)
    got = await _read_all(bootstrap, topic, partitions)
    for part in range(partitions):
        seqs = [_seq(v) for _, v in got[part]]
        dups = sorted(s for s, n in collections.Counter(seqs).items() if n > 1)
        assert not dups, (
            f"partition {part}: duplicates {[(o, v) for o, v in got[part] if _seq(v) in dups[:3]]}"
        )
        if seqs != sorted(seqs):
            bad = next(i for i in range(1, len(seqs)) if seqs[i] < seqs[i - 1])
            near = got[part][max(0, bad - 3) : bad + 3]
            raise AssertionError(f"partition {part}: out of order at index {bad}: {near}")
        by_seq = {_seq(v): off for off, v in got[part]}
        for s, off in acked[part].items():
            assert by_seq.get(s) == off, f"partition {part}: acked seq {s} @ {off} not read back"
    assert tailed == got[0][: len(tailed)], "the tailing consumer saw another log"
    print(
        f"[cluster] kill flood: {sum(len(a) for a in acked.values())} acked, {len(failed)} failed"
    )


# ---- 2. controlled shutdown of the leader: producer and consumer group follow --------------


async def test_controlled_shutdown_of_leader_producer_and_group_move(
    apache_cluster: Any, record_property: Callable[[str, object], None]
) -> None:
    cluster = apache_cluster.process
    bootstrap = apache_cluster.bootstrap
    partitions = 2
    # the stopped node leads partition 0 and coordinates the group
    group, victim = await new_group(bootstrap)
    topic = await create_topic(bootstrap, partitions, leader=victim)
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
    )
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=REQUEST_TIMEOUT_MS * 2,
        session_timeout_ms=10000,
        heartbeat_interval_ms=1000,
    )
    await producer.start()
    await consumer.start()
    acked: set[int] = set()
    seen: list[int] = []
    stopped_at: float | None = None
    first_after: list[float] = []
    stop_flag = asyncio.Event()

    async def produce() -> None:
        seq = 0
        while not stop_flag.is_set():
            sent_at = time.monotonic()
            try:
                await producer.send_and_wait(topic, f"v-{seq}".encode(), partition=seq % 2)
            except Errors.KafkaError:
                pass  # not acknowledged: may or may not be in the log
            else:
                acked.add(seq)
                if stopped_at is not None and sent_at >= stopped_at and seq % 2 == 0:
                    first_after.append(time.monotonic())  # partition 0: its leader stopped
            seq += 1
            await asyncio.sleep(0.01)

    async def consume() -> None:
        while not stop_flag.is_set():
            batches = await consumer.getmany(timeout_ms=500)
            for records in batches.values():
                seen.extend(_seq(r.value) for r in records)
            if batches:
                await consumer.commit()

    tasks = [asyncio.create_task(produce()), asyncio.create_task(consume())]
    try:
        await wait_until("records consumed before the shutdown", lambda: len(seen) >= 50, 60)
        stopped_at = time.monotonic()
        await asyncio.to_thread(cluster.node(victim).stop)
        mark = len(acked)
        await wait_until("acked sends after the shutdown", lambda: len(acked) >= mark + 50, 60)
        await wait_until("an acked send to partition 0", lambda: bool(first_after), 60)
        _report(
            record_property, "controlled_shutdown_time_to_recover_s", first_after[0] - stopped_at
        )
        await wait_until("the group to read every acked record", lambda: acked <= set(seen), 60)
        await asyncio.to_thread(cluster.node(victim).start)
        await asyncio.to_thread(cluster.wait_ready)
        mark = len(acked)
        await wait_until("acked sends after the restart", lambda: len(acked) >= mark + 20, 60)
        await wait_until("the group to read them", lambda: acked <= set(seen), 60)
    finally:
        stop_flag.set()
        done, pending = await asyncio.wait(tasks, timeout=30)
        for t in pending:
            t.cancel()
        await consumer.stop()
        await producer.stop()
        await asyncio.to_thread(cluster.bring_back)  # _whole_cluster waits
    assert not pending, "producer or consumer hung"
    for t in done:
        t.result()  # neither loop raised


# ---- 3. the leader paused (SIGSTOP) longer than request_timeout_ms --------------------------


async def test_paused_leader_no_hang_no_loss_group_resumes_from_commits(
    apache_cluster: Any, record_property: Callable[[str, object], None]
) -> None:
    cluster = apache_cluster.process
    bootstrap = apache_cluster.bootstrap
    # the paused node leads the partition and coordinates the group
    group, victim = await new_group(bootstrap)
    topic = await create_topic(bootstrap, 1, leader=victim)
    tp = TopicPartition(topic, 0)
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
    )
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=REQUEST_TIMEOUT_MS * 2,
        session_timeout_ms=10000,
        heartbeat_interval_ms=1000,
    )
    await producer.start()
    await consumer.start()
    acked: dict[int, int] = {}  # seq -> offset
    processed: list[int] = []  # offsets, in processing order
    committed = 0
    redelivered_below_commit: list[tuple[int, int]] = []
    stop_flag = asyncio.Event()
    paused_at: float | None = None
    first_after: list[float] = []

    async def produce() -> None:
        seq = 0
        while not stop_flag.is_set():
            sent_at = time.monotonic()
            try:
                md = await producer.send_and_wait(topic, f"v-{seq}".encode(), partition=0)
            except Errors.KafkaError:
                pass
            else:
                acked[seq] = md.offset
                if paused_at is not None and sent_at >= paused_at and not first_after:
                    first_after.append(time.monotonic())
            seq += 1
            await asyncio.sleep(0.01)

    async def consume() -> None:
        nonlocal committed
        done_offsets: set[int] = set()
        while not stop_flag.is_set():
            batches = await consumer.getmany(timeout_ms=500)
            records = batches.get(tp, [])
            for r in records:
                if r.offset in done_offsets and r.offset < committed:
                    redelivered_below_commit.append((r.offset, committed))
                done_offsets.add(r.offset)
                processed.append(r.offset)
            if records:
                try:
                    await consumer.commit()
                except Errors.KafkaError:
                    continue  # e.g. coordinator away or a rebalance: records come again
                committed = max(committed, records[-1].offset + 1)

    tasks = [asyncio.create_task(produce()), asyncio.create_task(consume())]
    try:
        await wait_until("records consumed before the pause", lambda: len(processed) >= 30, 60)
        paused_at = time.monotonic()
        cluster.node(victim).pause()
        # longer than request_timeout_ms: requests to the paused node time out
        await asyncio.sleep(REQUEST_TIMEOUT_MS / 1000 * 2)
        cluster.node(victim).resume()
        resumed_mark = len(acked)
        await wait_until("acked sends after resume", lambda: len(acked) >= resumed_mark + 30, 60)
        _report(record_property, "pause_time_to_first_send_s", first_after[0] - paused_at)
        await wait_until(
            "the group to process every acked record",
            lambda: set(acked.values()) <= set(processed),
            60,
        )
    finally:
        stop_flag.set()
        done, pending = await asyncio.wait(tasks, timeout=30)
        for t in pending:
            t.cancel()
        await producer.stop()
        await consumer.stop()
        await asyncio.to_thread(cluster.bring_back)  # _whole_cluster waits
    assert not pending, "producer or consumer hung"
    for t in done:
        t.result()
    # no gap: every offset up to the last processed one was processed
    assert set(processed) == set(range(max(processed) + 1))
    # duplicates only for records not yet committed
    assert not redelivered_below_commit
    # every acknowledged record is in the log at its acknowledged offset, once
    got = await _read_all(bootstrap, topic, 1)
    seqs = [_seq(v) for _, v in got[0]]
    assert len(seqs) == len(set(seqs))
    by_seq = {_seq(v): off for off, v in got[0]}
    for s, off in acked.items():
        assert by_seq.get(s) == off


# ---- 4. the transaction coordinator dies mid-transaction -----------------------------------


async def test_transaction_coordinator_killed_mid_transaction(
    apache_cluster: Any, record_property: Callable[[str, object], None]
) -> None:
    cluster = apache_cluster.process
    bootstrap = apache_cluster.bootstrap
    partitions = 2
    topic = await create_topic(bootstrap, partitions)
    txn_id = f"txn-{uuid.uuid4().hex[:8]}"
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=txn_id,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
        max_block_ms=DELIVERY_TIMEOUT_MS,
    )
    await producer.start()
    committed_values: set[int] = set()
    aborted_values: set[int] = set()
    outcome = ""
    try:
        # a first transaction makes sure the coordinator knows the transactional id
        async with producer.transaction():
            for i in range(10):
                await producer.send(topic, f"v-{i}".encode(), partition=i % partitions)
        committed_values.update(range(10))
        coordinator = await find_coordinator(producer.client, txn_id, 1, fresh=True)

        await producer.begin_transaction()
        txn_values = set(range(1000, 1100))
        for i in sorted(txn_values)[:50]:
            await producer.send(topic, f"v-{i}".encode(), partition=i % partitions)
        killed_at = time.monotonic()
        await asyncio.to_thread(cluster.node(coordinator).kill)
        try:
            for i in sorted(txn_values)[50:]:
                await producer.send(topic, f"v-{i}".encode(), partition=i % partitions)
            await asyncio.wait_for(producer.commit_transaction(), DELIVERY_TIMEOUT_MS / 1000 + 30)
        except Errors.KafkaError as exc:
            outcome = f"aborted ({type(exc).__name__})"
            await asyncio.wait_for(producer.abort_transaction(), DELIVERY_TIMEOUT_MS / 1000 + 30)
            aborted_values |= txn_values
        else:
            outcome = "committed"
            committed_values |= txn_values
        _report(record_property, "txn_coordinator_failover_s", time.monotonic() - killed_at)
        print(f"[cluster] transaction across the coordinator kill: {outcome}")

        # the producer keeps working on the new coordinator
        async with producer.transaction():
            for i in range(2000, 2010):
                await producer.send(topic, f"v-{i}".encode(), partition=i % partitions)
        committed_values.update(range(2000, 2010))
    finally:
        await producer.stop()
        await asyncio.to_thread(cluster.bring_back)  # _whole_cluster waits

    got = await _read_all(bootstrap, topic, partitions, isolation_level="read_committed")
    values = [_seq(v) for recs in got.values() for _, v in recs]
    assert len(values) == len(set(values)), "read_committed saw a record twice"
    assert set(values) == committed_values
    assert not set(values) & aborted_values


async def test_transaction_coordinator_killed_during_commit(
    apache_cluster: Any, record_property: Callable[[str, object], None]
) -> None:
    """The coordinator dies while EndTxn(commit) is on its way: the commit completes on the new
    coordinator (or fails as a whole); read_committed readers see all of it or nothing."""
    cluster = apache_cluster.process
    bootstrap = apache_cluster.bootstrap
    partitions = 2
    topic = await create_topic(bootstrap, partitions)
    txn_id = f"txn-{uuid.uuid4().hex[:8]}"
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=txn_id,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
        max_block_ms=DELIVERY_TIMEOUT_MS,
    )
    await producer.start()
    committed_values: set[int] = set()
    aborted_values: set[int] = set()
    try:
        coordinator = await find_coordinator(producer.client, txn_id, 1, fresh=True)
        await producer.begin_transaction()
        txn_values = set(range(100))
        for i in sorted(txn_values):
            await producer.send(topic, f"v-{i}".encode(), partition=i % partitions)
        await producer.flush()
        commit = asyncio.create_task(producer.commit_transaction())
        killed_at = time.monotonic()
        await asyncio.to_thread(cluster.node(coordinator).kill)
        try:
            await asyncio.wait_for(commit, DELIVERY_TIMEOUT_MS / 1000 + 30)
        except Errors.KafkaError as exc:
            print(f"[cluster] commit across the coordinator kill failed: {exc!r}")
            await asyncio.wait_for(producer.abort_transaction(), DELIVERY_TIMEOUT_MS / 1000 + 30)
            aborted_values |= txn_values
        else:
            committed_values |= txn_values
        _report(record_property, "txn_commit_coordinator_failover_s", time.monotonic() - killed_at)
        async with producer.transaction():
            for i in range(2000, 2010):
                await producer.send(topic, f"v-{i}".encode(), partition=i % partitions)
        committed_values.update(range(2000, 2010))
    finally:
        await producer.stop()
        await asyncio.to_thread(cluster.bring_back)  # _whole_cluster waits
    got = await _read_all(bootstrap, topic, partitions, isolation_level="read_committed")
    values = [_seq(v) for recs in got.values() for _, v in recs]
    assert len(values) == len(set(values))
    assert set(values) == committed_values


# ---- 6. the whole cluster paused: back-pressure by bytes buffered ------------------------------


class _ProduceFailures:
    """Counts Produce requests that got no answer (a hook)."""

    def __init__(self) -> None:
        self.failed = 0

    def on_response(
        self,
        node_id: int | None,
        api_key: int,
        api_name: str,
        latency: float,
        error: BaseException | None,
    ) -> None:
        if api_name == "Produce" and error is not None:
            self.failed += 1


async def test_whole_cluster_paused_send_blocks_on_bytes_then_delivers_once_in_order(
    apache_cluster: Any,
) -> None:
    """Every node paused: an idempotent producer keeps sending small records a few ms apart
    (each batch lingers out before the next record). send() does not block until the record
    bytes buffered approach buffer_memory: a lingered-out batch that cannot be sent keeps
    filling instead of being sealed with a few records, each such batch holding a whole
    max_batch_size of the budget (the bug: 2,048 records with 32 MiB). After the nodes
    resume, every accepted record is in the log exactly once, in send order per partition."""
    cluster = apache_cluster.process
    bootstrap = apache_cluster.bootstrap
    partitions = 2
    topic = await create_topic(bootstrap, partitions)
    batch_size = 4096
    # a few batches stay partly filled: up to max_in_flight requests written before the
    # outage was noticed, and one open batch per partition
    budget = 32 * batch_size
    value_size = 100
    # readiness: a fresh cluster answers InitProducerId with COORDINATOR_LOAD_IN_PROGRESS for
    # a while, and the producer under test retries it only for its (short) max_block_ms
    ready = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await ready.start()
    await ready.stop()
    failures = _ProduceFailures()
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        linger_ms=2,
        max_batch_size=batch_size,
        buffer_memory=budget,
        max_block_ms=1000,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        delivery_timeout_ms=120000,
        hooks=[failures],
    )
    await producer.start()
    accepted: list[int] = []
    handles: list[Any] = []
    try:
        for p in range(partitions):  # metadata and connections ready before the outage
            await producer.send_and_wait(topic, b"warm-up".ljust(value_size, b"."), partition=p)
        for n in cluster.nodes:
            n.pause()
        try:
            # readiness: a Produce request into the outage has timed out (its batch is queued
            # for a retry, nothing is in flight); bounded apart from what is asserted
            handles.append(await producer.send(topic, b"v-0".ljust(value_size, b".")))
            accepted.append(0)
            await wait_until("a Produce request timed out", lambda: failures.failed > 0, 30)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60
            while True:
                assert loop.time() < deadline, "send() never blocked"
                assert len(accepted) * value_size <= budget, "more buffered than buffer_memory"
                assert producer._acc.pool.used <= budget
                seq = len(accepted)
                try:
                    value = (b"v-%d" % seq).ljust(value_size, b".")
                    handles.append(await producer.send(topic, value))
                except Errors.KafkaTimeoutError:
                    break
                accepted.append(seq)
                await asyncio.sleep(0.005)  # longer than linger_ms: each batch lingers out
            buffered = len(accepted) * value_size
            print(f"\n[cluster] send() blocked after {len(accepted)} records ({buffered} bytes)")
            assert buffered >= budget // 2, f"blocked with {buffered} of {budget} bytes buffered"
        finally:
            await asyncio.to_thread(cluster.bring_back)  # _whole_cluster waits
        await asyncio.wait_for(producer.flush(), 120)
        assert all(h.exception() is None for h in handles)
        assert producer._acc.pool.used == 0
    finally:
        await producer.stop(timeout=10)
    got = await _read_all(bootstrap, topic, partitions)
    seqs_all: list[int] = []
    for part in range(partitions):
        seqs = [_seq(v.rstrip(b".")) for _, v in got[part] if not v.startswith(b"warm-up")]
        assert seqs == sorted(seqs), f"partition {part}: out of send order"
        seqs_all.extend(seqs)
    assert sorted(seqs_all) == accepted  # every accepted record exactly once
