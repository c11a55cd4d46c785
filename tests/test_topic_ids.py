"""KIP-516: Fetch names topics by id (v13+), so a topic deleted and re-created under the same
name is not read as the old one. Beside the Java client 4.4 on the same Apache Kafka 4.4."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka_lite import errors as Errors
from aiokafka_lite.admin import AIOKafkaAdminClient, NewTopic
from aiokafka_lite.ops import topics as topic_ops
from aiokafka_lite.protocol import messages as m
from tests import java_oracle

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

OLD, NEW = 10, 15  # records of the old topic, of the re-created one (more: old positions exist)


async def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap) as producer:
        for v in values:
            await producer.send_and_wait(topic, v, partition=0)


#: readiness bound of the delete and re-create (set-up, not asserted behaviour: a busy machine
#: slows the controller's removal of the old log)
READY_S = 90.0


async def _topic_id(admin: AIOKafkaAdminClient, topic: str) -> Any:
    """``topic``'s id in a fresh Metadata answer (no auto-creation); None while it is gone."""
    resp = await topic_ops.metadata(admin._client, None)
    return next((t.topic_id for t in resp.topics if t.name == topic), None)


async def _recreate(bootstrap: str, topic: str) -> None:
    """Delete ``topic``, wait until the metadata no longer has it, create it again."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        old_id = await _topic_id(admin, topic)
        await admin.delete_topics([topic])
        deadline = time.monotonic() + READY_S
        # gone from the metadata, or back already under a new id: a client's metadata request
        # auto-created it again (the broker's auto.create.topics.enable), which under load can
        # happen between two looks, every time
        while await _topic_id(admin, topic) == old_id:
            assert time.monotonic() < deadline, "the topic was not deleted within READY_S (90 s)"
            await asyncio.sleep(0.1)
        deadline = time.monotonic() + READY_S
        while True:  # the controller may still be removing the old log
            resp = await admin.create_topics([NewTopic(topic, 1, 1)])
            code = resp.topic_errors[0].error_code
            if not code:
                break
            # TOPIC_ALREADY_EXISTS once the name was gone from the metadata: a client's metadata
            # request auto-created it again meanwhile (the broker's auto.create.topics.enable;
            # seen under load): a new topic under the old name all the same
            if code == Errors.TopicAlreadyExistsError.errno and topic in await admin.list_topics():
                break
            assert time.monotonic() < deadline, resp
            await asyncio.sleep(0.2)
        deadline = time.monotonic() + 15
        while True:
            described = await admin.describe_topics([topic])
            parts = described[0]["partitions"] if described else []
            if parts and parts[0]["leader"] >= 0:
                return
            assert time.monotonic() < deadline, "the new topic has no leader within 15 s"
            await asyncio.sleep(0.05)
    finally:
        await admin.close()


async def test_recreated_topic_is_not_read_at_old_positions(broker: Any, new_topic: Any) -> None:
    """Both consumers read OLD records of a topic, pause, the topic is deleted and re-created
    and gets NEW > OLD records, both resume. Java 4.4 (group-less, ``auto.offset.reset=
    earliest``) keeps its position and reads the new topic from offset OLD, no error: the
    first OLD records of the new topic are never seen. Ours fetches by topic id (Fetch v13+),
    sees the id change in the metadata and resets the position as ``auto_offset_reset`` says:
    the new topic is read from its start. (Unpaused, both usually reach the new topic while
    it is empty, get OFFSET_OUT_OF_RANGE and reset: the race the pause takes out.)"""
    broker.skip_on("tansu", "noida", reason="KIP-516 topic ids: Apache Kafka's Fetch v13+")
    if reason := java_oracle.unavailable_reason():
        pytest.skip(reason)
    topic = await new_topic(1)
    bootstrap = broker.bootstrap
    await _produce(bootstrap, topic, [b"old-%d" % i for i in range(OLD)])
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    java = java_oracle.KipScript("assign-reader", bootstrap, topic, run_ms=60_000).start()
    ours: list[tuple[int, bytes]] = []
    errors: list[BaseException] = []

    async def read() -> None:
        while True:
            try:
                batch = await consumer.getmany(timeout_ms=200)
            except Errors.KafkaError as exc:  # what a user's poll sees; it polls on
                errors.append(exc)
                await asyncio.sleep(0.1)
                continue
            for recs in batch.values():
                ours.extend((r.offset, r.value) for r in recs)

    async def wait_ours(n: int, what: str) -> None:
        deadline = time.monotonic() + 30
        while len(ours) < n:
            assert time.monotonic() < deadline, f"ours: no {what} within 30 s: {ours} {errors}"
            await asyncio.sleep(0.05)

    tp = TopicPartition(topic, 0)
    reader: asyncio.Task[None] | None = None
    try:
        consumer.assign([tp])
        reader = asyncio.create_task(read())
        await wait_ours(OLD, "old records")
        java.wait_for(lambda j: len(j.records) >= OLD, 30, "the old records")
        consumer.pause(tp)
        java.send("pause")
        java.wait_for(lambda j: any(e["event"] == "paused" for e in j.events), 10, "pause")
        assert consumer._client.supports(m.FetchRequest, 13), "Fetch by topic id (v13+)"
        await _recreate(bootstrap, topic)
        await _produce(bootstrap, topic, [b"new-%d" % i for i in range(NEW)])
        consumer.resume(tp)
        java.send("resume")
        # Java: the records from its old position on; ours: the new topic from its start
        java.wait_for(lambda j: len(j.records) >= OLD + NEW - OLD, 30, "the new records")
        await wait_ours(OLD + NEW, "the new topic's records")
    finally:
        if reader is not None:
            reader.cancel()
        java.stop(check=False)
        await consumer.stop()
    old = [(i, b"old-%d" % i) for i in range(OLD)]
    new = [(i, b"new-%d" % i) for i in range(NEW)]
    theirs = [(r["offset"], r["value"]) for r in java.records]
    assert theirs == old + new[OLD:], "Java 4.4 reads the new topic from the old position"
    assert not [e for e in java.events if e["event"] == "error"], java.events
    assert ours == old + new, "ours: the new topic from its start, nothing at old positions"
    assert not errors, errors


async def test_recreated_topic_with_reset_none_raises(broker: Any, new_topic: Any) -> None:
    """With ``auto_offset_reset="none"`` the new topic id is an error the next poll raises
    (InconsistentTopicIdError, naming both ids), once; nothing of the new topic is handed out
    until the application seeks."""
    broker.skip_on("tansu", "noida", reason="KIP-516 topic ids: Apache Kafka's Fetch v13+")
    topic = await new_topic(1)
    bootstrap = broker.bootstrap
    await _produce(bootstrap, topic, [b"old-%d" % i for i in range(OLD)])
    tp = TopicPartition(topic, 0)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="none")
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < OLD:
            assert time.monotonic() < deadline, got
            batch = await consumer.getmany(timeout_ms=500)
            got.extend(r.value for r in batch.get(tp, []))
        consumer.pause(tp)
        await _recreate(bootstrap, topic)
        await _produce(bootstrap, topic, [b"new-%d" % i for i in range(NEW)])
        consumer.resume(tp)
        deadline = time.monotonic() + 30
        with pytest.raises(Errors.InconsistentTopicIdError, match="re-created"):
            while True:
                assert time.monotonic() < deadline, "no error within 30 s"
                batch = await consumer.getmany(timeout_ms=500)
                assert not batch.get(tp), f"read the new topic: {batch}"
        await consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + 20
        new: list[bytes] = []
        while len(new) < NEW:
            assert time.monotonic() < deadline, new
            batch = await consumer.getmany(timeout_ms=500)
            new.extend(r.value for r in batch.get(tp, []))
        assert new == [b"new-%d" % i for i in range(NEW)]
    finally:
        await consumer.stop()
