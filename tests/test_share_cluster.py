"""The share consumer on the 3-node Apache Kafka cluster: the leader of its partition (the
share-partition leader, which acquires records and takes acknowledgements) shuts down (or is
killed) and comes back while a producer keeps writing. The consumer follows the leadership by itself: every
acknowledged record is delivered and accepted, failed acknowledgements are reported to the
caller (never dropped), and nothing is left behind for the next member. Times to recover are
printed and recorded, never asserted."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from cluster_helpers import REQUEST_TIMEOUT_MS, create_topic, leader_of, new_group, wait_until
from share_helpers import configure_group, need_share_groups

from aiokafka_lite import AIOKafkaProducer, AIOKafkaShareConsumer
from aiokafka_lite import errors as Errors

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(180)]


async def _moved(bootstrap: str, topic: str, old: int) -> bool:
    try:
        return await leader_of(bootstrap, topic, 0) not in (old, -1)
    except Errors.KafkaError:
        return False  # the admin client's own request met the dead node: ask again


@pytest.mark.parametrize("how", ["stop", "kill"])
async def test_share_consumer_follows_its_partition_leader(
    apache_cluster: Any, record_property: Callable[[str, object], None], how: str
) -> None:
    await need_share_groups(apache_cluster)
    cluster = apache_cluster.process
    bootstrap = apache_cluster.bootstrap
    # the stopped node leads the partition and does not coordinate the group: the leader move
    # alone is what is tested (a coordinator move is the group tests' subject)
    group, coordinator = await new_group(bootstrap)
    victim = next(n for n in (1, 2, 3) if n != coordinator)
    topic = await create_topic(bootstrap, 1, leader=victim)
    await configure_group(bootstrap, group, share_auto_offset_reset="earliest")
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    ack_errors: list[dict[Any, Any]] = []  # reported, as they must be; those records come back
    consumer = AIOKafkaShareConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        acknowledgement_callback=lambda results, offsets: ack_errors.extend(
            {tp: e} for tp, e in results.items() if e is not None
        ),
        max_poll_records=20,
        request_timeout_ms=REQUEST_TIMEOUT_MS * 2,
    )
    await producer.start()
    await consumer.start()
    acked: set[bytes] = set()
    seen: Counter[bytes] = Counter()
    stopped_at: float | None = None
    first_after: list[float] = []
    after_stop: set[bytes] = set()
    stop_flag = asyncio.Event()

    async def produce() -> None:
        seq = 0
        while not stop_flag.is_set():
            value = b"v-%d" % seq
            sent_at = time.monotonic()
            try:
                await producer.send_and_wait(topic, value)
            except Errors.KafkaError:
                pass  # not acknowledged: may or may not be in the log
            else:
                acked.add(value)
                if stopped_at is not None and sent_at >= stopped_at:
                    after_stop.add(value)
            seq += 1
            await asyncio.sleep(0.01)

    async def consume() -> None:
        while not stop_flag.is_set():
            batch = await consumer.getmany(timeout_ms=500)  # failures: to the callback
            for records in batch.values():
                for r in records:
                    seen[r.value] += 1
                    if r.value in after_stop and not first_after:
                        first_after.append(time.monotonic())

    tasks = [asyncio.create_task(produce()), asyncio.create_task(consume())]
    try:
        await wait_until("records accepted before the shutdown", lambda: len(seen) >= 50, 60)
        stopped_at = time.monotonic()
        # a controlled shutdown hands leadership over; kill -9 leaves acquired records
        # unacknowledged on a dead leader
        await asyncio.to_thread(getattr(cluster.node(victim), how))
        await wait_until("a new leader", lambda: _moved(bootstrap, topic, victim), 60)
        mark = len(acked)
        await wait_until("acked sends after the shutdown", lambda: len(acked) >= mark + 50, 60)
        await wait_until("a record sent after the shutdown, read", lambda: bool(first_after), 60)
        record_property(
            f"share_leader_{how}_to_first_record_s", f"{first_after[0] - stopped_at:.3f}"
        )
        print(f"\n[cluster] share leader {how}: first record {first_after[0] - stopped_at:.2f} s")
        await wait_until("every acked record read", lambda: acked <= set(seen), 60)
        await asyncio.to_thread(cluster.node(victim).start)
        await asyncio.to_thread(cluster.wait_ready)
        mark = len(acked)
        await wait_until("acked sends after the restart", lambda: len(acked) >= mark + 30, 60)
        await wait_until("those read too", lambda: acked <= set(seen), 60)
    finally:
        stop_flag.set()
        done, pending = await asyncio.wait(tasks, timeout=30)
        for t in pending:
            t.cancel()
        await producer.stop()
    try:
        assert not pending, "producer or share consumer hung"
        for t in done:
            t.result()  # neither loop raised

        async def committed() -> bool:
            await consumer.getmany(timeout_ms=200)  # acknowledges what it handed out
            results = await consumer.commit()
            return all(e is None for e in results.values())

        await wait_until("a commit without errors", committed, 60)
    finally:
        await consumer.stop()
        await asyncio.to_thread(cluster.bring_back)  # _whole_cluster waits
    redelivered = sum(1 for c in seen.values() if c > 1)
    print(
        f"[cluster] share leader {how}: {len(acked)} acked, {len(seen)} read, {redelivered} read "
        f"again, {len(ack_errors)} acknowledgement errors reported"
    )
    # nothing is left behind: a new member of the group gets only what is produced afterwards
    sentinel = b"sentinel-%s" % uuid.uuid4().hex.encode()
    async with AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all") as p:
        await p.send_and_wait(topic, sentinel)
    late_seen: list[bytes] = []
    async with AIOKafkaShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group) as late:

        async def got_sentinel() -> bool:
            for recs in (await late.getmany(timeout_ms=500)).values():
                late_seen.extend(r.value for r in recs)
            return sentinel in late_seen

        await wait_until("the sentinel", got_sentinel, 60)
        assert all(e is None for e in (await late.commit()).values())
    assert late_seen == [sentinel]
