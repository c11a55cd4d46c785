"""The transaction coordinator killed (SIGKILL) mid-transaction on the 3-node Apache Kafka 4.4
cluster (transactions V2), our producer and then the Java producer 4.4 in the same scenario:
read_committed readers see every committed record once and nothing of an aborted
transaction, the producer goes on with its next transaction, and no transaction is left
hanging (ListTransactions lists none open, DescribeTransactions shows the last commit)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import java_oracle
import pytest
from cluster_helpers import REQUEST_TIMEOUT_MS, create_topic, wait_until

from aiokafka_lite import errors as Errors
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.consumer import AIOKafkaConsumer
from aiokafka_lite.ops import ItemError
from aiokafka_lite.ops._exec import find_coordinator
from aiokafka_lite.ops.transactions import describe_transactions, list_transactions
from aiokafka_lite.producer import AIOKafkaProducer
from aiokafka_lite.structs import TopicPartition

pytestmark = pytest.mark.integration

PARTITIONS = 2
DELIVERY_TIMEOUT_MS = 30000
_OPEN = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


async def _ours(cluster: Any, bootstrap: str, topic: str, txid: str) -> tuple[set[int], str]:
    """Values of committed transactions, and what the transaction across the kill did."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=txid,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
        max_block_ms=DELIVERY_TIMEOUT_MS,
    )

    async def send(values: range) -> None:
        for i in values:
            await producer.send(topic, b"v-%d" % i, partition=i % PARTITIONS)

    committed: set[int] = set()
    budget = DELIVERY_TIMEOUT_MS / 1000 + 30
    await producer.start()
    try:
        await producer.begin_transaction()
        await send(range(1000, 1050))
        await producer.flush()
        coordinator = await find_coordinator(producer.client, txid, 1, fresh=True)
        await asyncio.to_thread(cluster.node(coordinator).kill)
        try:
            await send(range(1050, 1100))
            await asyncio.wait_for(producer.commit_transaction(), budget)
        except Errors.KafkaError as exc:
            outcome = f"aborted ({type(exc).__name__})"
            await asyncio.wait_for(producer.abort_transaction(), budget)
        else:
            outcome = "committed"
            committed.update(range(1000, 1100))
        async with producer.transaction():
            await send(range(2000, 2010))
        committed.update(range(2000, 2010))
    finally:
        await producer.stop()
    return committed, outcome


async def _java(cluster: Any, bootstrap: str, topic: str, txid: str) -> tuple[set[int], str]:
    """TxnOracle's ``coordinator-kill``: the kill lands in its pause, once its coordinator
    describes the transaction open on both partitions."""
    java = asyncio.ensure_future(
        asyncio.to_thread(
            java_oracle.txn_scenario,
            bootstrap,
            topic,
            txid,
            "coordinator-kill",
            timeout=150,
            partitions=PARTITIONS,
            pause_ms=10000,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
        )
    )
    client = KafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
    await client.start()
    try:

        async def open_on_both() -> bool:
            if java.done():
                return True  # (its error is raised below)
            desc = (await describe_transactions(client, [txid]))[txid]
            return not isinstance(desc, ItemError) and (
                desc.state == "Ongoing" and len(desc.partitions) == PARTITIONS
            )

        await wait_until("Java's transaction open on both partitions", open_on_both, 60)
        assert not java.done(), java.result()
        coordinator = await find_coordinator(client, txid, 1, fresh=True)
    finally:
        await client.close()
    await asyncio.to_thread(cluster.node(coordinator).kill)
    steps = {s["step"]: s["error"] for s in await java}
    assert steps["next"] is None, steps
    committed = set(range(2000, 2010))
    if steps["commit"] is None:
        committed.update(range(1000, 1100))
        return committed, "committed"
    assert steps["abort"] is None, steps
    return committed, f"aborted ({steps['commit']})"


async def _read_committed(bootstrap: str, topic: str) -> list[int]:
    """Every value a read_committed reader sees, up to the last stable offsets."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)
        values: list[int] = []
        deadline = time.monotonic() + 60
        while [tp for tp in tps if await consumer.position(tp) < end[tp]]:
            assert time.monotonic() < deadline, "reading the topic took over 60 s"
            for records in (await consumer.getmany(timeout_ms=500)).values():
                values.extend(int(r.value.split(b"-")[1]) for r in records if r.value)
        return values
    finally:
        await consumer.stop()


@pytest.mark.timeout(300)  # a hang guard: two node kills and restarts (readiness) are in the body
async def test_coordinator_killed_mid_transaction_exactly_once_as_java(
    apache_cluster: Any, record_property: Any
) -> None:
    reason = java_oracle.unavailable_reason()
    if reason:
        pytest.skip(reason)
    cluster = apache_cluster.process
    bootstrap = apache_cluster.bootstrap
    results: dict[str, tuple[str, str, set[int], str]] = {}
    for who in ("ours", "java"):
        topic = await create_topic(bootstrap, PARTITIONS)
        txid = f"kill-{who}-{uuid.uuid4().hex[:8]}"
        run = _ours if who == "ours" else _java
        started = time.monotonic()
        try:
            committed, outcome = await run(cluster, bootstrap, topic, txid)
        finally:
            await asyncio.to_thread(cluster.bring_back)
            await asyncio.to_thread(cluster.wait_ready)
        record_property(f"{who}_coordinator_kill_s", round(time.monotonic() - started, 1))
        print(f"[cluster] {who}: the transaction across the coordinator kill {outcome}")
        results[who] = (topic, txid, committed, outcome)

    client = KafkaClient(bootstrap_servers=bootstrap)
    await client.start()
    try:
        txids = [r[1] for r in results.values()]

        async def none_open() -> bool:
            listed = await list_transactions(client, states=_OPEN)
            return not any(t.transactional_id in txids for t in listed)

        # markers of the last commit may still be on their way: bounded, not asserted
        await wait_until("no transaction of ours or Java's left open", none_open, 60)
        described = await describe_transactions(client, txids)
    finally:
        await client.close()
    for who, (topic, txid, committed, _) in results.items():
        desc = described[txid]
        assert not isinstance(desc, ItemError), (who, desc)
        assert desc.state == "CompleteCommit" and not desc.partitions, (who, desc)
        values = await _read_committed(bootstrap, topic)
        assert len(values) == len(set(values)), f"{who}: read_committed saw a record twice"
        assert set(values) == committed, who
