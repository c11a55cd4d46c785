"""The admin client on three Apache Kafka nodes: routing by coordinator and leader, failover."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from aiokafka_lite.admin import AIOKafkaAdminClient, NewTopic
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

pytestmark = pytest.mark.cluster


@pytest.mark.timeout(300)  # a hang guard: the node's restart (readiness) is inside the test
async def test_groups_on_every_coordinator_and_offsets_across_a_leader_failover(apache_cluster):
    topic = f"admin-cluster-{uuid.uuid4().hex[:8]}"
    tp0 = TopicPartition(topic, 0)
    async with AIOKafkaAdminClient(
        bootstrap_servers=apache_cluster.bootstrap, request_timeout_ms=30000
    ) as admin:
        resp = await admin.create_topics([NewTopic(topic, 3, 3)])
        assert [e.error_code for e in resp.topic_errors] == [0]

        # enough groups that their coordinators spread over the three nodes
        groups = [f"admin-cluster-g{i}-{uuid.uuid4().hex[:6]}" for i in range(12)]
        coordinators = {g: await admin.find_coordinator(g) for g in groups}
        assert len(set(coordinators.values())) > 1, coordinators
        for i, g in enumerate(groups):
            await admin.alter_consumer_group_offsets(g, {tp0: OffsetAndMetadata(i, "")})
        listed = {gid for gid, _ptype in await admin.list_consumer_groups()}
        assert set(groups) <= listed
        described = await admin.describe_consumer_groups(groups)
        assert len(described) == len(set(coordinators.values()))  # one per coordinator (aiokafka)
        assert sorted(g.group for resp in described for g in resp.groups) == sorted(groups)
        for i, g in enumerate(groups):
            assert (await admin.list_consumer_group_offsets(g))[tp0].offset == i

        # the leader of partition 0 dies: the lookup follows the new leader
        leader = next(
            p["leader"]
            for t in await admin.describe_topics([topic])
            for p in t["partitions"]
            if p["partition"] == 0
        )
        node = apache_cluster.process.node(leader)
        node.kill()
        try:
            found = await asyncio.wait_for(admin.list_offsets({tp0: "latest"}), 60)
            assert found[tp0].offset == 0
        finally:
            # back before the deletes: with a replica down, the coordinators' writes wait until
            # the ISR shrinks (replica.lag.time.max.ms, 30 s), as long as request_timeout_ms
            node.start()
            await asyncio.to_thread(apache_cluster.process.wait_ready)
        await admin.delete_consumer_groups(groups)
        await admin.delete_topics([topic])
