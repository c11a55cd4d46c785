"""The admin client's transaction calls (beyond aiokafka: Java's ``Admin.listTransactions``,
``describeTransactions``, ``describeProducers``, ``abortTransaction``, ``fenceProducers``)
beside Java 4.4's Admin on the same open transactions of Apache Kafka 4.4: the same listings
under every filter (state, producer id, duration KIP-994, id pattern KIP-1152), the same
descriptions and producer states; an abort at one partition by each client ends the
producer's open transaction there; a fence by each client bumps the epoch alike, and the old
producer is fenced on its next send either way."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import java_oracle
import pytest
from cluster_helpers import wait_until

from aiokafka_lite import errors as Errors
from aiokafka_lite.admin import AbortTransactionSpec, AIOKafkaAdminClient
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.producer import AIOKafkaProducer
from aiokafka_lite.protocol import messages as m
from aiokafka_lite.structs import TopicPartition

pytestmark = pytest.mark.integration

HOUR_MS = 3_600_000


async def _open_transaction(bootstrap: str, txid: str, topic: str) -> AIOKafkaProducer:
    """A producer with a transaction open on partitions 0 and 1 of ``topic`` (acknowledged)."""
    p = AIOKafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=txid, transaction_timeout_ms=300_000
    )
    await p.start()
    await p.begin_transaction()
    for partition in (0, 1):
        await asyncio.wait_for(await p.send(topic, b"open", partition=partition), 30)
    return p


def _rows(listing: list[Any], ids: set[str]) -> list[list[Any]]:
    return sorted(
        [t.transactional_id, t.producer_id, t.state] for t in listing if t.transactional_id in ids
    )


async def _our_view(
    admin: AIOKafkaAdminClient,
    ids: list[str],
    partitions: list[TopicPartition],
    *,
    pattern: str,
    producer_id: int,
) -> dict[str, Any]:
    """Our admin client's view, shaped as TxnAdminOracle prints Java's."""
    keep = set(ids)
    described = await admin.describe_transactions(ids)
    producers = await admin.describe_producers(partitions)
    return {
        "list": _rows(await admin.list_transactions(), keep),
        "ongoing": _rows(await admin.list_transactions(states=["Ongoing"]), keep),
        "by_producer": _rows(await admin.list_transactions(producer_ids=[producer_id]), keep),
        "over_hour": _rows(await admin.list_transactions(duration_filter_ms=HOUR_MS), keep),
        "any_duration": _rows(await admin.list_transactions(duration_filter_ms=0), keep),
        "pattern": _rows(await admin.list_transactions(transactional_id_pattern=pattern), keep),
        "describe": {
            txid: {
                "state": d.state,
                "producer_id": d.producer_id,
                "producer_epoch": d.producer_epoch,
                "timeout_ms": d.timeout_ms,
                "start_time_ms": d.start_time_ms,
                "partitions": sorted(f"{tp.topic}:{tp.partition}" for tp in d.partitions),
            }
            for txid, d in sorted(described.items())
        },
        "producers": {
            f"{tp.topic}:{tp.partition}": [
                [
                    s.producer_id,
                    s.producer_epoch,
                    s.last_sequence,
                    s.last_timestamp,
                    -1 if s.coordinator_epoch is None else s.coordinator_epoch,
                    -1 if s.current_txn_start_offset is None else s.current_txn_start_offset,
                ]
                for s in states
            ]
            for tp, states in producers.items()
        },
    }


def _java_view(line: dict[str, Any]) -> dict[str, Any]:
    view = {k: v for k, v in line.items()}
    for k in ("list", "ongoing", "by_producer", "over_hour", "any_duration", "pattern"):
        view[k] = sorted(view[k])
    return view


async def _next_send_error(p: AIOKafkaProducer, topic: str) -> type[BaseException] | None:
    try:
        await asyncio.wait_for(await p.send(topic, b"after-fence", partition=0), 30)
    except Errors.KafkaError as exc:
        return type(exc)
    return None


async def test_transaction_admin_beside_java(broker: Any, new_topic: Any) -> None:
    broker.skip_on("tansu", "noida", reason="the Java Admin client is the reference on Apache only")
    reason = java_oracle.unavailable_reason()
    if reason:
        pytest.skip(reason)
    bootstrap = broker.bootstrap
    topic = await new_topic(partitions=2)
    prefix = f"txadm-{uuid.uuid4().hex[:8]}"
    # A: fenced by Java's Admin, B: fenced by ours, C: aborted at partition 1 by Java's
    # abortTransaction and at partition 0 by ours
    a, b, c = f"{prefix}-a", f"{prefix}-b", f"{prefix}-c"
    ids = [a, b, c]
    partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    java_parts = [(topic, 0), (topic, 1)]
    pattern = f"^{prefix}-[ab]$"
    producers = [await _open_transaction(bootstrap, t, topic) for t in ids]
    pa, pb, _pc = producers
    try:
        async with AIOKafkaAdminClient(bootstrap_servers=bootstrap) as admin:
            before = await admin.describe_transactions(ids)
            pid = {t: before[t].producer_id for t in ids}

            async def both_views() -> tuple[dict[str, Any], dict[str, Any]]:
                """Our admin's view, then Java's, shaped alike."""
                ours = await _our_view(admin, ids, partitions, pattern=pattern, producer_id=pid[a])
                (theirs,) = await asyncio.to_thread(
                    java_oracle.txn_admin,
                    bootstrap,
                    ids,
                    java_parts,
                    pattern=pattern,
                    producer_id=pid[a],
                )
                return ours, _java_view(theirs)

            ours, theirs = await both_views()
            assert ours == theirs
            # the open transactions as both clients see them
            assert {row[0]: row[2] for row in ours["ongoing"]} == dict.fromkeys(ids, "Ongoing")
            assert [row[0] for row in ours["by_producer"]] == [a]
            assert [row[0] for row in ours["pattern"]] == [a, b]
            assert ours["over_hour"] == [] and len(ours["any_duration"]) == 3
            assert ours["describe"][c]["partitions"] == [f"{topic}:0", f"{topic}:1"]
            c_state = {
                tp: next(s for s in states if s.producer_id == pid[c])
                for tp, states in (await admin.describe_producers(partitions)).items()
            }
            assert all(s.current_txn_start_offset is not None for s in c_state.values())

            def spec(tp: TopicPartition) -> AbortTransactionSpec:
                s = c_state[tp]
                return AbortTransactionSpec(
                    tp, s.producer_id, s.producer_epoch, s.coordinator_epoch or 0
                )

            s1 = spec(partitions[1])
            java_abort = f"{topic}:1:{s1.producer_id}:{s1.producer_epoch}:{s1.coordinator_epoch}"
            steps = await asyncio.to_thread(
                java_oracle.txn_admin, bootstrap, ids, java_parts, abort=java_abort, fence=a
            )
            assert steps[0] == {"abort": f"{topic}:1", "error": None}
            assert steps[1]["error"] is None, steps[1]
            await admin.abort_transaction(spec(partitions[0]))
            fenced = (await admin.fence_producers([b]))[b]

            # fenced alike: same producer id, the epoch moved by as much from where it was
            assert steps[1]["producer_id"] == pid[a] and fenced.producer_id == pid[b]
            assert (
                steps[1]["producer_epoch"] - before[a].producer_epoch
                == fenced.producer_epoch - before[b].producer_epoch
                > 0
            )
            # C's transaction is over in both partitions, whichever client wrote the marker
            after = await admin.describe_producers(partitions)
            for tp in partitions:
                (st,) = [s for s in after[tp] if s.producer_id == pid[c]]
                assert st.current_txn_start_offset is None, (tp, st)

            # the fences' aborts finish with their markers (PrepareAbort, then CompleteAbort):
            # both views are taken once the coordinator is done, bounded apart from the checks
            async def aborts_done() -> bool:
                described = await admin.describe_transactions(ids)
                return not any(d.state.startswith("Prepare") for d in described.values())

            await wait_until("the fences' aborts completed", aborts_done, 30)
            final_ours, final_theirs = await both_views()
            assert final_ours == final_theirs
            da, db = final_ours["describe"][a], final_ours["describe"][b]
            assert da["state"] == db["state"] != "Ongoing"
            assert da["producer_epoch"] - before[a].producer_epoch == (
                db["producer_epoch"] - before[b].producer_epoch
            )
        # the old producers are fenced on their next send, after Java's fence as after ours
        err_a = await _next_send_error(pa, topic)
        err_b = await _next_send_error(pb, topic)
        assert err_a is not None and err_a is err_b, (err_a, err_b)
        assert issubclass(err_a, Errors.ProducerFenced)
    finally:
        for p in producers:
            await asyncio.wait_for(p.stop(), 30)


async def test_transaction_admin_errors(broker: Any, new_topic: Any) -> None:
    """Our calls on any broker that has the APIs: an unknown id's description fails with
    TransactionalIdNotFound, a fence of a new id gives it epoch 0, a topic's producers list
    is empty before any write; brokers without the APIs are skipped, named."""
    bootstrap = broker.bootstrap
    client = KafkaClient(bootstrap_servers=bootstrap)
    await client.start()
    try:
        missing = [
            cls.__name__
            for cls in (
                m.ListTransactionsRequest,
                m.DescribeTransactionsRequest,
                m.DescribeProducersRequest,
            )
            if not client.supports(cls)
        ]
    finally:
        await client.close()
    if missing:
        pytest.skip(f"[{broker.kind}] the broker lacks {', '.join(missing)}")
    topic = await new_topic(partitions=1)
    txid = f"txadm-new-{uuid.uuid4().hex[:8]}"
    async with AIOKafkaAdminClient(bootstrap_servers=bootstrap) as admin:
        with pytest.raises(Errors.TransactionalIdNotFoundError):
            await admin.describe_transactions([f"txadm-none-{uuid.uuid4().hex[:8]}"])
        assert await admin.describe_producers([TopicPartition(topic, 0)]) == {
            TopicPartition(topic, 0): []
        }
        fenced = (await admin.fence_producers([txid]))[txid]
        assert fenced.producer_id >= 0 and fenced.producer_epoch == 0
        (d,) = (await admin.describe_transactions([txid])).values()
        assert (d.producer_id, d.producer_epoch, d.state) == (fenced.producer_id, 0, "Empty")
