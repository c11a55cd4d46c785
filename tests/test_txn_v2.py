"""Transactions V2 (KIP-890) beside the Java producer on the same broker: on Apache Kafka 4.4
with ``transaction.version`` 2 every commit bumps the producer epoch (EndTxn v5), with
``transaction.version`` 1 (a safe downgrade, restored after) it does not (TV1), as Java's;
read_committed readers see every committed record either way. A zombie is fenced as Java's;
consume-transform-produce is exactly once and a failed send is followed by an abort and a
commit, on TV2 and TV1, as with Java."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import java_oracle
import pytest

from aiokafka_lite import errors as Errors
from aiokafka_lite.admin import AIOKafkaAdminClient
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.consumer import AIOKafkaConsumer
from aiokafka_lite.ops._exec import coordinator_call
from aiokafka_lite.producer import AIOKafkaProducer
from aiokafka_lite.protocol import messages as m
from aiokafka_lite.structs import TopicPartition

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
    Java's; it is a ProducerFenced too, so aiokafka-style ``except ProducerFenced`` holds. Its
    abort then meets the coordinator's fence, as Java's."""
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
        try:
            await a.abort_transaction()
            ours["zombie-abort"] = None
        except Errors.KafkaError as exc:
            ours["zombie-abort"] = type(exc).__name__
        await (await b.send(topic, b"b-committed", partition=0))
        await b.commit_transaction()
    finally:
        await a.stop()
        await b.stop()
    assert steps["successor-commit"] is None
    java = {k: _name(v) for k, v in steps.items() if k != "successor-commit"}
    assert {k: _name(v) for k, v in ours.items()} == java


#: Java's exception names where ours differ (simple names without Exception/Error)
_JAVA_NAMES = {
    "RecordTooLarge": "MessageSizeTooLarge",
    "InvalidPidMapping": "InvalidProducerIdMapping",
}


def _name(cls_name: str | None) -> str | None:
    """Java's ``FooException`` (or ``KafkaException:Foo``, TxnOracle's name for a KafkaException
    wrapping Foo) and our ``Foo``/``FooError`` under one spelling."""
    if cls_name is None:
        return None
    name = cls_name.rpartition(":")[2].removesuffix("Exception").removesuffix("Error")
    return _JAVA_NAMES.get(name, name)


async def _abort_after_failed_send(bootstrap: str, topic: str, txid: str) -> dict[str, str | None]:
    """TxnOracle's ``abort-after-failed-send`` with our producer: each step's error name."""
    steps: dict[str, str | None] = {}

    async def step(name: str, coro: Any) -> None:
        try:
            await asyncio.wait_for(coro, 60)
            steps[name] = None
        except Errors.KafkaError as exc:
            steps[name] = _name(type(exc).__name__)

    async with AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txid) as p:

        async def send(value: bytes) -> None:
            await (await p.send(topic, value, partition=0))

        await p.begin_transaction()
        await send(b"before")
        await step("failed-send", send(b"x" * 4096))
        await step("commit", p.commit_transaction())
        await step("abort", p.abort_transaction())
        await p.begin_transaction()
        await send(b"after")
        await step("next-commit", p.commit_transaction())
    return steps


async def _ctp(bootstrap: str, source: str, out: str, group: str, txid: str, count: int) -> int:
    """TxnOracle's ``ctp`` with our clients: consume ``source`` read_committed, write each value
    upper-cased to ``out`` and commit the input offsets in the same transaction."""
    consumer = AIOKafkaConsumer(
        source,
        bootstrap_servers=bootstrap,
        group_id=group,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txid)
    done = 0
    await consumer.start()
    await producer.start()
    try:
        while done < count:
            batches = await consumer.getmany(timeout_ms=500)
            if not batches:
                continue
            async with producer.transaction():
                offsets: dict[TopicPartition, int] = {}
                for tp, records in batches.items():
                    for r in records:
                        assert r.value is not None
                        await producer.send(out, r.value.upper())
                        done += 1
                    offsets[tp] = records[-1].offset + 1
                await producer.send_offsets_to_transaction(offsets, group)
    finally:
        await producer.stop()
        await consumer.stop()
    return done


async def _fill_source(bootstrap: str, topic: str) -> list[bytes]:
    """30 committed records in 3 transactions and, between them, 5 in an aborted one: what a
    read_committed reader must see (the committed values, in order)."""
    committed: list[bytes] = []
    txid = f"src-{uuid.uuid4().hex[:8]}"
    async with AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txid) as p:
        for t in range(3):
            async with p.transaction():
                for i in range(10):
                    value = b"v%d-%d" % (t, i)
                    await p.send(topic, value, partition=0)
                    committed.append(value)
            if t == 1:
                await p.begin_transaction()
                for i in range(5):
                    await (await p.send(topic, b"aborted-%d" % i, partition=0))
                await p.abort_transaction()
    return committed


async def _committed_offset(bootstrap: str, group: str, tp: TopicPartition) -> int | None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
        om = offsets.get(tp)
        return None if om is None else om.offset
    finally:
        await admin.close()


@pytest.mark.parametrize("level", [2, 1])
async def test_ctp_and_abort_after_failed_send_match_java(
    broker: Any, new_topic: Any, level: int
) -> None:
    """On TV2 and TV1, beside Java: consume-transform-produce is exactly once for
    read_committed readers (each committed input once in the output, aborted input never, the
    group's offset at the input's end), and after a send the broker refused the commit fails,
    the abort works and the next transaction commits."""
    broker.skip_on("tansu", "noida", reason="the Java client is the reference on Apache Kafka only")
    reason = java_oracle.unavailable_reason()
    if reason:
        pytest.skip(reason)
    bootstrap = broker.bootstrap
    small = await new_topic(partitions=1, configs={"max.message.bytes": "1024"})
    source = await new_topic(partitions=1)
    out_java, out_ours = await new_topic(partitions=3), await new_topic(partitions=3)
    await asyncio.to_thread(java_oracle.set_transaction_version, bootstrap, level)
    try:
        assert await _feature(bootstrap) == level
        # abort after a failed send
        java_steps = await asyncio.to_thread(
            java_oracle.txn_scenario,
            bootstrap,
            small,
            f"jf-{uuid.uuid4().hex[:8]}",
            "abort-after-failed-send",
        )
        java = {s["step"]: _name(s["error"]) for s in java_steps}
        ours = await _abort_after_failed_send(bootstrap, small, f"lf-{uuid.uuid4().hex[:8]}")
        assert ours == java
        assert ours["failed-send"] is not None and ours["commit"] is not None
        assert ours["abort"] is None and ours["next-commit"] is None
        small_read = java_oracle.consume(
            bootstrap, small, isolation="read_committed", until_end=True
        )
        assert sorted(r["value"] for r in small_read) == [b"after", b"after"]
        # consume-transform-produce
        expected = await _fill_source(bootstrap, source)
        gj, gl = f"gj-{uuid.uuid4().hex[:8]}", f"gl-{uuid.uuid4().hex[:8]}"
        lines = await asyncio.to_thread(
            java_oracle.txn_scenario,
            bootstrap,
            out_java,
            f"jc-{uuid.uuid4().hex[:8]}",
            "ctp",
            input=source,
            group=gj,
            count=len(expected),
        )
        assert lines[-1]["processed"] == len(expected)
        done = await asyncio.wait_for(
            _ctp(bootstrap, source, out_ours, gl, f"lc-{uuid.uuid4().hex[:8]}", len(expected)), 90
        )
        assert done == len(expected)
        want = sorted(v.upper() for v in expected)
        for out, group in ((out_java, gj), (out_ours, gl)):
            read = java_oracle.consume(
                bootstrap, out, isolation="read_committed", until_end=True, timeout_ms=30_000
            )
            assert sorted(r["value"] for r in read) == want, out
            tp = TopicPartition(source, 0)
            # after the last record (3 x 10 committed, 5 aborted, 3 markers before it)
            assert await _committed_offset(bootstrap, group, tp) == 38, group
    finally:
        await asyncio.to_thread(java_oracle.set_transaction_version, bootstrap, 2)
