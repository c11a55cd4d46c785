"""AIOKafkaShareConsumer against Apache Kafka 4.4's share groups (KIP-932).

* three members on one partition share the work: every member gets records and every record
  is accepted exactly once overall;
* explicit mode: a released record comes back with ``delivery_count`` 2, a rejected one never
  comes back; unacknowledged records at the next poll raise IllegalStateError;
* ``commit()`` returns each partition's outcome; ``stop()`` releases what it held, so another
  member gets it long before the acquisition lock would have expired;
* a member killed (-9) while holding records: they come back (the broker releases them when
  its connection closes); a hung member's come back after the acquisition lock timeout;
* a cancelled ``getmany`` leaves the consumer usable and loses nothing.

Brokers without share groups (Tansu, noida-db) skip the scenarios; there ``start()`` raises
UnsupportedVersionError, which one test checks.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections import Counter

import pytest
from share_helpers import (
    EXPIRY_LOCK_MS,
    MIN_LOCK_MS,
    configure_group,
    need_share_groups,
    produce_values,
    share_groups_supported,
    wait_until,
)

from aiokafka_lite import AcknowledgeType, AIOKafkaShareConsumer, TopicPartition
from aiokafka_lite import errors as Errors

pytestmark = pytest.mark.integration


def _group() -> str:
    return f"share-{uuid.uuid4().hex[:10]}"


async def _poll_until(consumer, predicate, timeout: float, on_record=None):
    """Poll (1 s at a time) until ``predicate(all records so far)``; the records."""
    got = []
    deadline = time.monotonic() + timeout
    while not predicate(got):
        assert time.monotonic() < deadline, f"only {len(got)} records within {timeout} s"
        batch = await consumer.getmany(timeout_ms=1000)
        for recs in batch.values():
            for r in recs:
                got.append(r)
                if on_record is not None:
                    on_record(r)
    return got


async def test_no_share_groups_raise_on_start(broker):
    if await share_groups_supported(broker.bootstrap):
        pytest.skip(f"[{broker.kind}] has share groups")
    consumer = AIOKafkaShareConsumer("t", bootstrap_servers=broker.bootstrap, group_id="g")
    with pytest.raises(Errors.UnsupportedVersionError, match="share groups"):
        await consumer.start()
    await consumer.stop()


async def test_bad_arguments_raise_at_once():
    with pytest.raises(Errors.KafkaConfigurationError, match="group_id"):
        AIOKafkaShareConsumer("t")
    with pytest.raises(Errors.KafkaConfigurationError, match="acknowledgement_mode"):
        AIOKafkaShareConsumer("t", group_id="g", acknowledgement_mode="auto")
    with pytest.raises(Errors.KafkaConfigurationError, match="max_poll_records"):
        AIOKafkaShareConsumer("t", group_id="g", max_poll_records=0)


async def test_three_members_share_one_partition(broker, new_topic):
    await need_share_groups(broker)
    topic = await new_topic(partitions=1)
    group = _group()
    await configure_group(broker.bootstrap, group, share_auto_offset_reset="earliest")
    n = 150
    members = [
        AIOKafkaShareConsumer(
            topic, bootstrap_servers=broker.bootstrap, group_id=group, max_poll_records=5
        )
        for _ in range(3)
    ]
    seen: list[Counter[bytes]] = [Counter() for _ in members]
    for m in members:
        await m.start()
    try:
        # every member is in the group (and assigned the partition) before records exist, so
        # the first one cannot take everything before the others joined
        await wait_until(lambda: all(m.assignment() for m in members), 30, "assignment")
        done = asyncio.Event()

        async def work(i: int) -> None:
            while not done.is_set():
                batch = await members[i].getmany(timeout_ms=200)
                for recs in batch.values():
                    for r in recs:
                        assert r.delivery_count == 1
                        seen[i][r.value] += 1
                await asyncio.sleep(0.02)  # "processing": the others get a turn
                if sum(len(c) for c in seen) >= n:
                    done.set()

        workers = [asyncio.ensure_future(work(i)) for i in range(3)]
        await produce_values(broker.bootstrap, topic, (b"%d" % i for i in range(n)))
        await asyncio.wait_for(done.wait(), 60)
        await asyncio.gather(*workers)
        for m in members:  # implicit mode: what the last poll handed out is accepted now
            results = await m.commit()
            assert all(exc is None for exc in results.values()), results
    finally:
        for m in members:
            await m.stop()
    total = sum(seen, Counter())
    assert set(total) == {b"%d" % i for i in range(n)}
    assert max(total.values()) == 1, [v for v, c in total.items() if c > 1]
    assert all(seen), [len(c) for c in seen]  # every member got work
    # nothing was left available: a new member's first record is one produced now
    await produce_values(broker.bootstrap, topic, [b"sentinel"])
    async with AIOKafkaShareConsumer(
        topic, bootstrap_servers=broker.bootstrap, group_id=group
    ) as late:
        got = await _poll_until(late, lambda g: any(r.value == b"sentinel" for r in g), 30)
    assert [r.value for r in got] == [b"sentinel"]


async def test_release_redelivers_and_reject_never(broker, new_topic):
    await need_share_groups(broker)
    topic = await new_topic(partitions=1)
    group = _group()
    await configure_group(broker.bootstrap, group, share_auto_offset_reset="earliest")
    await produce_values(broker.bootstrap, topic, [b"a", b"b", b"c", b"d"])
    async with AIOKafkaShareConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        acknowledgement_mode="explicit",
    ) as consumer:
        kinds = {
            b"a": AcknowledgeType.ACCEPT,
            b"b": AcknowledgeType.RELEASE,
            b"c": AcknowledgeType.REJECT,
            b"d": AcknowledgeType.ACCEPT,
        }
        first = await _poll_until(
            consumer,
            lambda g: len(g) >= 4,
            30,
            on_record=lambda r: consumer.acknowledge(r, kinds[r.value]),
        )
        assert [(r.value, r.delivery_count) for r in first] == [
            (b"a", 1),
            (b"b", 1),
            (b"c", 1),
            (b"d", 1),
        ]
        results = await consumer.commit()
        assert results == {TopicPartition(topic, 0): None}
        await produce_values(broker.bootstrap, topic, [b"e"])
        again = await _poll_until(
            consumer,
            lambda g: any(r.value == b"e" for r in g),
            30,
            on_record=consumer.acknowledge,
        )
        # b comes back (delivered twice), c (rejected) and a, d (accepted) never do
        assert [(r.value, r.delivery_count) for r in again] == [(b"b", 2), (b"e", 1)]
        assert await consumer.commit() == {TopicPartition(topic, 0): None}


async def test_explicit_mode_rules(broker, new_topic):
    await need_share_groups(broker)
    topic = await new_topic(partitions=1)
    group = _group()
    await configure_group(broker.bootstrap, group, share_auto_offset_reset="earliest")
    await produce_values(broker.bootstrap, topic, [b"x", b"y"])
    async with AIOKafkaShareConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        acknowledgement_mode="explicit",
        max_poll_records=1,
        strict_max_poll_records=True,
    ) as consumer:
        got = await _poll_until(consumer, lambda g: len(g) >= 1, 30)
        assert len(got) == 1  # strict: one record acquired per fetch, one per poll
        with pytest.raises(Errors.IllegalStateError, match="not acknowledged"):
            await consumer.getmany(timeout_ms=100)
        consumer.acknowledge(got[0], AcknowledgeType.ACCEPT)
        with pytest.raises(Errors.IllegalStateError, match="latest poll"):
            consumer.acknowledge(got[0], AcknowledgeType.REJECT)  # already acknowledged
        rest = await _poll_until(consumer, lambda g: len(g) >= 1, 30, consumer.acknowledge)
        assert [r.value for r in got + rest] == [b"x", b"y"]
        assert await consumer.commit() == {TopicPartition(topic, 0): None}

    async with AIOKafkaShareConsumer(
        topic, bootstrap_servers=broker.bootstrap, group_id=group
    ) as implicit:
        with pytest.raises(Errors.IllegalStateError, match="explicit"):
            implicit.acknowledge(got[0])


async def test_stop_releases_to_another_member(broker, new_topic):
    await need_share_groups(broker)
    topic = await new_topic(partitions=1)
    group = _group()
    lock_ms = 60000  # the broker's maximum: the handover must not be the lock expiring
    await configure_group(
        broker.bootstrap,
        group,
        share_auto_offset_reset="earliest",
        share_record_lock_duration_ms=str(lock_ms),
    )
    holder = AIOKafkaShareConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        acknowledgement_mode="explicit",
    )
    other = AIOKafkaShareConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group)
    await holder.start()
    await other.start()
    try:
        await wait_until(lambda: bool(holder.assignment() and other.assignment()), 30, "assignment")
        await produce_values(broker.bootstrap, topic, [b"p", b"q", b"r"])
        held = await _poll_until(holder, lambda g: len(g) >= 3, 30)
        holder.acknowledge(held[0], AcknowledgeType.ACCEPT)
        stopped = time.monotonic()
        await holder.stop()  # q and r: acquired, not acknowledged -> released
        got = await _poll_until(other, lambda g: len(g) >= 2, 30)
        elapsed = time.monotonic() - stopped
    finally:
        await holder.stop()
        await other.stop()
    assert [(r.value, r.delivery_count) for r in got] == [(b"q", 2), (b"r", 2)]
    assert elapsed < lock_ms / 1000 / 2, elapsed


async def test_cancelled_getmany_loses_nothing(broker, new_topic):
    await need_share_groups(broker)
    topic = await new_topic(partitions=1)
    group = _group()
    await configure_group(broker.bootstrap, group, share_auto_offset_reset="earliest")
    async with AIOKafkaShareConsumer(
        topic, bootstrap_servers=broker.bootstrap, group_id=group
    ) as consumer:
        await wait_until(lambda: bool(consumer.assignment()), 30, "assignment")
        for _ in range(3):  # cancelled while long-polling an empty partition
            task = asyncio.ensure_future(consumer.getmany(timeout_ms=10000))
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        await produce_values(broker.bootstrap, topic, [b"1", b"2", b"3"])
        got = await _poll_until(consumer, lambda g: len(g) >= 3, 30)
        assert [(r.value, r.delivery_count) for r in got] == [(b"1", 1), (b"2", 1), (b"3", 1)]
        assert await consumer.commit() == {TopicPartition(topic, 0): None}


_HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from aiokafka_lite import AIOKafkaShareConsumer

    async def main(bootstrap, topic, group):
        c = AIOKafkaShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                  acknowledgement_mode="explicit")
        await c.start()
        got = 0
        while got < 3:
            got += sum(len(v) for v in (await c.getmany(timeout_ms=1000)).values())
        print("holding", got, flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main(*sys.argv[1:]))
    """
)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=["kill9", "hung"])
async def test_lost_member_records_come_back(broker, new_topic, sig):
    """A member holding acquired records dies (-9: its connections close, the broker releases
    its records at once) or hangs (SIGSTOP: connections open, nothing more from it: its records
    come back when their acquisition lock expires). Either way another member gets them with
    delivery_count 2."""
    await need_share_groups(broker)
    topic = await new_topic(partitions=1)
    group = _group()
    await configure_group(
        broker.bootstrap,
        group,
        share_auto_offset_reset="earliest",
        share_record_lock_duration_ms=str(EXPIRY_LOCK_MS),
    )
    await produce_values(broker.bootstrap, topic, [b"k1", b"k2", b"k3"])
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, broker.bootstrap, topic, group],
        stdout=subprocess.PIPE,
        env=os.environ.copy(),
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)
        assert line.strip() == b"holding 3", line
        proc.send_signal(sig)
        lost = time.monotonic()
        async with AIOKafkaShareConsumer(
            topic, bootstrap_servers=broker.bootstrap, group_id=group
        ) as survivor:
            got = await _poll_until(survivor, lambda g: len(g) >= 3, EXPIRY_LOCK_MS / 1000 + 40)
            elapsed = time.monotonic() - lost
            assert await survivor.commit() == {TopicPartition(topic, 0): None}
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert [(r.value, r.delivery_count) for r in got] == [(b"k1", 2), (b"k2", 2), (b"k3", 2)]
    if sig == signal.SIGSTOP:  # only the lock's expiry gave them back
        assert elapsed >= EXPIRY_LOCK_MS / 1000 - 1, elapsed


async def test_two_partitions_async_for_with_deserializer(broker, new_topic):
    await need_share_groups(broker)
    topic = await new_topic(partitions=2)
    group = _group()
    await configure_group(broker.bootstrap, group, share_auto_offset_reset="earliest")
    for p in (0, 1):
        await produce_values(
            broker.bootstrap, topic, [b"%d-%d" % (p, i) for i in range(5)], partition=p
        )
    seen = []
    async with AIOKafkaShareConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        value_deserializer=bytes.decode,
    ) as consumer:

        async def read() -> None:
            async for r in consumer:
                seen.append((r.partition, r.offset, r.value, r.delivery_count))
                if len(seen) == 10:
                    return

        await asyncio.wait_for(read(), 60)
        results = await consumer.commit()
    assert sorted(seen) == [(p, i, f"{p}-{i}", 1) for p in (0, 1) for i in range(5)]
    assert set(results) <= {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    assert all(exc is None for exc in results.values())


async def test_delivery_count_limit_archives_a_failing_record(broker, new_topic):
    await need_share_groups(broker)
    topic = await new_topic(partitions=1)
    group = _group()
    await configure_group(
        broker.bootstrap,
        group,
        share_auto_offset_reset="earliest",
        share_delivery_count_limit="2",
    )
    await produce_values(broker.bootstrap, topic, [b"poison"])
    async with AIOKafkaShareConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        acknowledgement_mode="explicit",
    ) as consumer:
        counts = []
        for _ in range(2):  # released twice: the second release reaches the limit
            (rec,) = await _poll_until(consumer, lambda g: len(g) >= 1, 30)
            counts.append(rec.delivery_count)
            consumer.acknowledge(rec, AcknowledgeType.RELEASE)
            assert await consumer.commit() == {TopicPartition(topic, 0): None}
        assert counts == [1, 2]
        await produce_values(broker.bootstrap, topic, [b"next"])
        got = await _poll_until(
            consumer, lambda g: any(r.value == b"next" for r in g), 30, consumer.acknowledge
        )
        assert [r.value for r in got] == [b"next"]  # poison was archived, not delivered again


async def test_renew_keeps_a_slow_record(broker, new_topic):
    """A record renewed (RENEW) at every poll for longer than the lock duration: each renewal
    hands it back to a later poll with the same delivery_count (as Java 4.4), it never goes to
    another delivery, and the final ACCEPT succeeds (a lock left to expire fails instead:
    test_failed_acknowledgement_sent_with_a_fetch_is_raised)."""
    await need_share_groups(broker)
    topic = await new_topic(partitions=1)
    group = _group()
    await configure_group(
        broker.bootstrap,
        group,
        share_auto_offset_reset="earliest",
        share_record_lock_duration_ms=str(MIN_LOCK_MS),
    )
    await produce_values(broker.bootstrap, topic, [b"slow"])
    tp = TopicPartition(topic, 0)
    async with AIOKafkaShareConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        acknowledgement_mode="explicit",
    ) as consumer:
        (rec,) = await _poll_until(consumer, lambda g: len(g) >= 1, 30)
        assert consumer.acquisition_lock_timeout_ms == MIN_LOCK_MS
        held_since = time.monotonic()
        renewals = 0
        while time.monotonic() - held_since < MIN_LOCK_MS / 1000 + 3:
            consumer.acknowledge(rec, AcknowledgeType.RENEW)
            renewals += 1
            await asyncio.sleep(MIN_LOCK_MS / 1000 / 4)
            (rec,) = await _poll_until(consumer, lambda g: len(g) >= 1, 30)
            assert (rec.value, rec.delivery_count) == (b"slow", 1)
        consumer.acknowledge(rec, AcknowledgeType.ACCEPT)
        assert await consumer.commit() == {tp: None}
    assert renewals >= 4


async def test_failed_acknowledgement_is_logged_not_raised(broker, new_topic, caplog):
    """An ACCEPT for a record whose lock expired rides on the next fetch; the broker refuses
    it (INVALID_RECORD_STATE): with no acknowledgement_callback the failure is logged as a
    warning naming the partition and offset, never raised (an ``async for`` loop goes on, as a
    Java poll does), and the record comes back (delivery_count 2)."""
    await need_share_groups(broker)
    topic = await new_topic(partitions=1)
    group = _group()
    await configure_group(
        broker.bootstrap,
        group,
        share_auto_offset_reset="earliest",
        share_record_lock_duration_ms=str(EXPIRY_LOCK_MS),
    )
    await produce_values(broker.bootstrap, topic, [b"late"])
    tp = TopicPartition(topic, 0)
    async with AIOKafkaShareConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        acknowledgement_mode="explicit",
    ) as consumer:
        (rec,) = await _poll_until(consumer, lambda g: len(g) >= 1, 30)
        await asyncio.sleep(EXPIRY_LOCK_MS / 1000 + 2)  # the point: the lock expires meanwhile
        consumer.acknowledge(rec, AcknowledgeType.ACCEPT)
        with caplog.at_level(logging.WARNING, logger="aiokafka_lite.share.consumer"):
            again = await asyncio.wait_for(consumer.__anext__(), 30)
        assert (again.offset, again.delivery_count) == (rec.offset, 2)
        warned = [r.getMessage() for r in caplog.records if "acknowledgements failed" in r.message]
        assert len(warned) == 1, caplog.text
        assert f"{topic}-0" in warned[0] and "InvalidRecordStateError" in warned[0]
        consumer.acknowledge(again)
        assert await consumer.commit() == {tp: None}


async def test_undeserializable_record_is_raised_and_released(broker, new_topic):
    """A value the deserializer refuses: a poll raises its error (the good records of that
    fetch wait for the next poll) and the record is released, so it comes back until
    share.delivery.count.limit archives it; the good records are accepted once."""
    await need_share_groups(broker)
    topic = await new_topic(partitions=1)
    group = _group()
    await configure_group(
        broker.bootstrap, group, share_auto_offset_reset="earliest", share_delivery_count_limit="2"
    )
    await produce_values(broker.bootstrap, topic, [b"ok-1", b"bad", b"ok-2"])

    def decode(value: bytes | None) -> str:
        if value == b"bad":
            raise ValueError("cannot decode")
        return (value or b"").decode()

    raised = 0
    seen: list[str] = []
    async with AIOKafkaShareConsumer(
        topic, bootstrap_servers=broker.bootstrap, group_id=group, value_deserializer=decode
    ) as consumer:
        deadline = time.monotonic() + 60
        while "sentinel" not in seen:
            assert time.monotonic() < deadline, (seen, raised)
            try:
                batch = await consumer.getmany(timeout_ms=500)
            except Errors.RecordDeserializationError as exc:  # as Java's poll
                assert isinstance(exc.__cause__, ValueError), exc
                assert (exc.topic_partition, exc.offset) == (TopicPartition(topic, 0), 1)
                raised += 1
                if raised == 2:  # archived now: what comes next proves it is not redelivered
                    await produce_values(broker.bootstrap, topic, [b"sentinel"])
                continue
            seen += [r.value for recs in batch.values() for r in recs]
        results = await consumer.commit()
        assert all(e is None for e in results.values()), results
    assert raised == 2
    assert sorted(seen) == ["ok-1", "ok-2", "sentinel"]


async def test_hooks_and_opentelemetry_see_receive_and_acknowledge(broker, new_topic):
    """Hooks see every record handed out (on_consume) and each answered acknowledgement
    (on_acknowledge: per partition the error and the offsets); the OpenTelemetry adapter
    turns them into receive spans and one "settle" span per partition and answer."""
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from aiokafka_lite.otel import OpenTelemetryHook

    await need_share_groups(broker)
    topic = await new_topic(partitions=1)
    group = _group()
    await configure_group(broker.bootstrap, group, share_auto_offset_reset="earliest")
    await produce_values(broker.bootstrap, topic, [b"a", b"b", b"c"])

    class Recorder:
        def __init__(self):
            self.consumed = []
            self.acks = []

        def on_consume(self, record):
            self.consumed.append(record.offset)

        def on_acknowledge(self, group_id, results, offsets):
            self.acks.append((group_id, dict(results), {tp: list(o) for tp, o in offsets.items()}))

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    recorder = Recorder()
    tp = TopicPartition(topic, 0)
    try:
        async with AIOKafkaShareConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            acknowledgement_mode="explicit",
            hooks=[recorder, OpenTelemetryHook(tracer_provider=provider)],
        ) as consumer:
            got = await _poll_until(
                consumer, lambda g: len(g) >= 3, 30, on_record=consumer.acknowledge
            )
            assert await consumer.commit() == {tp: None}
        assert sorted(recorder.consumed) == sorted(r.offset for r in got) == [0, 1, 2]
        acked = [o for g, results, offsets in recorder.acks for o in offsets.get(tp, [])]
        assert sorted(acked) == [0, 1, 2]  # each acknowledged record reported once
        assert all(g == group and results == {tp: None} for g, results, _ in recorder.acks)
        spans = exporter.get_finished_spans()
        receive = [s for s in spans if s.name == f"receive {topic}"]
        settle = [s for s in spans if s.name == f"ack {topic}"]
        assert len(receive) == 3
        assert len(settle) == len(recorder.acks) >= 1
        assert all(s.attributes["messaging.operation.type"] == "settle" for s in settle)
        assert sum(s.attributes["messaging.batch.message_count"] for s in settle) == 3
        assert all(s.attributes["messaging.consumer.group.name"] == group for s in settle)
    finally:
        provider.shutdown()
