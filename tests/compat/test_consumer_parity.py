"""aiokafka_lite consumer behaviour the differential suite cannot compare (aiokafka 0.14 has no
``allow_auto_create_topics`` argument: its metadata requests always allow auto creation)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka_lite.admin import AIOKafkaAdminClient, NewTopic


async def _topics(bootstrap: str) -> list[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return await admin.list_topics()
    finally:
        await admin.close()


async def test_allow_auto_create_topics(kafka_bootstrap: str, broker: Any) -> None:
    broker.skip_on("noida", reason="noida creates topics on any metadata request")
    off = f"no-autocreate-{uuid.uuid4().hex[:8]}"
    on = f"autocreate-{uuid.uuid4().hex[:8]}"
    async with AIOKafkaConsumer(
        off, bootstrap_servers=kafka_bootstrap, allow_auto_create_topics=False
    ) as c:
        assert c.assignment() == set()
    async with AIOKafkaConsumer(on, bootstrap_servers=kafka_bootstrap) as c:
        assert c.assignment()  # created by start()'s metadata request, then assigned
    topics = await _topics(kafka_bootstrap)
    assert on in topics
    assert off not in topics


async def test_subscribed_topic_created_after_start_is_learned_quickly(
    kafka_bootstrap: str, broker: Any
) -> None:
    """metadata_max_age_ms is 5 minutes: a missing subscribed topic is looked up every second
    instead, so records of a topic created after start() arrive without that wait."""
    broker.skip_on("noida", reason="noida creates topics on any metadata request")
    broker.skip_on(
        "tansu", reason="Tansu keeps generation 0 on rejoin and syncs the old (empty) assignment"
    )
    topic = f"late-{uuid.uuid4().hex[:8]}"
    c = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
        allow_auto_create_topics=False,
    )
    await c.start()
    try:
        assert c.assignment() == set()
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, 2, 1)])
        finally:
            await admin.close()
        async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap) as p:
            await p.send_and_wait(topic, b"hello", partition=1)
        record = await asyncio.wait_for(c.getone(), 30)  # << metadata_max_age_ms (300 s)
        assert (record.partition, record.value) == (1, b"hello")
    finally:
        await c.stop()
