"""Transactions V2 (KIP-890) beside the Java producer on the same broker: on Apache Kafka 4.4
with ``transaction.version`` 2 every commit bumps the producer epoch (EndTxn v5), with
``transaction.version`` 1 (a safe downgrade, restored after) it does not (TV1), as Java's;
read_committed readers see every committed record either way."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import java_oracle
import pytest

from aiokafka_lite import errors as Errors
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.ops._exec import coordinator_call
from aiokafka_lite.producer import AIOKafkaProducer
from aiokafka_lite.protocol import messages as m

pytestmark = pytest.mark.integration


async def _epoch(bootstrap: str, txid: str) -> tuple[str, int]:
    """The transaction's state and producer epoch as its coordinator describes them."""
    client = KafkaClient(bootstrap_servers=bootstrap)
    await client.start()
    try:
        resp = await coordinator_call(
            client,
            txid,
            1,
            m.DescribeTransactionsRequest(transactional_ids=[txid]),
            lambda r: r.transaction_states[0].error_code,
            timeout_ms=20000,
        )
        st = resp.transaction_states[0]
        return st.transaction_state, st.producer_epoch
    finally:
        await client.close()


async def _feature(bootstrap: str) -> int:
    client = KafkaClient(bootstrap_servers=bootstrap)
    await client.start()
    try:
        return client.feature_level("transaction.version")
    finally:
        await client.close()


async def _three_commits(bootstrap: str, topic: str, txid: str) -> None:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txid) as p:
        for i in range(3):
            async with p.transaction():
                await (await p.send(topic, b"c%d" % i, partition=0))


@pytest.mark.parametrize("level", [2, 1])
async def test_commit_epochs_match_java(broker: Any, new_topic: Any, level: int) -> None:
    broker.skip_on("tansu", "noida", reason="the Java client is the reference on Apache Kafka only")
    reason = java_oracle.unavailable_reason()
    if reason:
        pytest.skip(reason)
    bootstrap = broker.bootstrap
    topic = await new_topic(partitions=1)
    await asyncio.to_thread(java_oracle.set_transaction_version, bootstrap, level)
    try:
        assert await _feature(bootstrap) == level
        ours, theirs = f"lite-{uuid.uuid4().hex[:8]}", f"java-{uuid.uuid4().hex[:8]}"
        await asyncio.wait_for(_three_commits(bootstrap, topic, ours), 60)
        await asyncio.to_thread(java_oracle.txn_scenario, bootstrap, topic, theirs, "commits")
        ours_state = await _epoch(bootstrap, ours)
        java_state = await _epoch(bootstrap, theirs)
        # TV2: InitProducerId gives epoch 0, each EndTxn v5 one more; TV1: no bump
        assert ours_state == java_state == ("CompleteCommit", 3 if level == 2 else 0)
        committed = java_oracle.consume(
            bootstrap, topic, isolation="read_committed", until_end=True
        )
        assert sorted(r["value"] for r in committed) == [b"c0", b"c0", b"c1", b"c1", b"c2", b"c2"]
    finally:
        await asyncio.to_thread(java_oracle.set_transaction_version, bootstrap, 2)


async def test_kafka_39_stays_on_tv1(apache39: Any) -> None:
    bootstrap = apache39.bootstrap
    assert await _feature(bootstrap) < 2
    txid = f"lite39-{uuid.uuid4().hex[:8]}"
    topic = f"txn39-{uuid.uuid4().hex[:8]}"
    await asyncio.wait_for(_three_commits(bootstrap, topic, txid), 60)
    assert await _epoch(bootstrap, txid) == ("CompleteCommit", 0)


async def test_zombie_is_fenced_as_java_is(broker: Any, new_topic: Any) -> None:
    """A zombie's send and commit fail with InvalidProducerEpoch (abortable, KIP-1050), as
    Java's; it is a ProducerFenced too, so aiokafka-style ``except ProducerFenced`` holds."""
    broker.skip_on("tansu", "noida", reason="the Java client is the reference on Apache Kafka only")
    reason = java_oracle.unavailable_reason()
    if reason:
        pytest.skip(reason)
    bootstrap = broker.bootstrap
    topic = await new_topic(partitions=1)
    java = await asyncio.to_thread(
        java_oracle.txn_scenario, bootstrap, topic, f"jz-{uuid.uuid4().hex[:8]}", "zombie"
    )
    steps = {s["step"]: s["error"] for s in java}
    txid = f"lz-{uuid.uuid4().hex[:8]}"
    a = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txid)
    b = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txid)
    await a.start()
    try:
        async with a.transaction():
            await (await a.send(topic, b"a-committed", partition=0))
        await b.start()  # InitProducerId: the new epoch fences a
        await b.begin_transaction()
        await a.begin_transaction()
        ours: dict[str, str | None] = {}
        try:
            await asyncio.wait_for(await a.send(topic, b"a-zombie", partition=0), 30)
            ours["zombie-send"] = None
        except Errors.KafkaError as exc:
            ours["zombie-send"] = type(exc).__name__
            assert isinstance(exc, Errors.ProducerFenced)  # aiokafka's class for it
        try:
            await a.commit_transaction()
            ours["zombie-commit"] = None
        except Errors.KafkaError as exc:
            ours["zombie-commit"] = type(exc).__name__
        await (await b.send(topic, b"b-committed", partition=0))
        await b.commit_transaction()
    finally:
        await a.stop()
        await b.stop()
    assert steps["successor-commit"] is None
    java = {
        k: v and v.removesuffix("Exception") for k, v in steps.items() if k != "successor-commit"
    }
    assert ours == java
