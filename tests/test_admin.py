"""AIOKafkaAdminClient against the real broker: create, list, describe, delete topics."""

from __future__ import annotations

import uuid

import pytest

from aiokafka_lite import errors as Errors
from aiokafka_lite.admin import AIOKafkaAdminClient, NewTopic


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def test_create_list_delete_topics(kafka_bootstrap):
    async with AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap) as admin:
        a, b = _name("admin-a"), _name("admin-b")
        resp = await admin.create_topics([NewTopic(a, 3, 1), NewTopic(b, 1, 1)])
        assert sorted(t.name for t in resp.topics) == sorted([a, b])
        topics = await admin.list_topics()
        assert a in topics and b in topics
        described = await admin.describe_topics([a])
        assert described[0]["topic"] == a
        assert sorted(p["partition"] for p in described[0]["partitions"]) == [0, 1, 2]

        with pytest.raises(Errors.TopicAlreadyExistsError):
            await admin.create_topics([NewTopic(a, 3, 1)])

        await admin.delete_topics([a])
        assert a not in await admin.list_topics()
        assert b in await admin.list_topics()
        await admin.delete_topics([b])


async def test_delete_unknown_topic(broker):
    async with AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        with pytest.raises(Errors.UnknownTopicOrPartitionError):
            await admin.delete_topics([_name("never-created")])


async def test_describe_cluster(kafka_bootstrap):
    async with AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap) as admin:
        info = await admin.describe_cluster()
        assert info["brokers"]
        ids = {b["node_id"] for b in info["brokers"]}
        assert info["controller_id"] in ids
        assert info["cluster_id"]
        assert await admin.find_coordinator("admin-test-group") in ids


def test_new_topic_validation():
    with pytest.raises(Errors.IllegalArgumentError):
        NewTopic("x", 3, 1, replica_assignments={0: [1]})
    t = NewTopic("x", -1, -1, replica_assignment={0: [1], 1: [1]})
    assert t.replica_assignments == {0: [1], 1: [1]}
    assert NewTopic("y", 1, 1, topic_configs={"retention.ms": "1000"}).topic_configs
