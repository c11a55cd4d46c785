"""Share-group administration on Apache Kafka 4.4 (KIP-932): the admin client's
describe/list of share groups, their start offsets (list, alter, delete) and deleting a group,
checked against what the group's members did."""

from __future__ import annotations

import uuid

import pytest
from share_helpers import configure_group, need_share_groups, produce_values, wait_until

from aiokafka_lite import AIOKafkaShareConsumer, TopicPartition
from aiokafka_lite import errors as Errors
from aiokafka_lite.admin import AIOKafkaAdminClient

pytestmark = pytest.mark.integration


async def _consume(consumer, n: int, timeout: float = 30.0) -> list:
    got: list = []

    async def more() -> bool:
        for recs in (await consumer.getmany(timeout_ms=500)).values():
            got.extend(recs)
        return len(got) >= n

    await wait_until(more, timeout, f"{n} records")
    return got


async def test_share_group_admin(broker, new_topic):
    await need_share_groups(broker)
    topic = await new_topic(partitions=2)
    group = f"share-admin-{uuid.uuid4().hex[:8]}"
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    await configure_group(broker.bootstrap, group, share_auto_offset_reset="earliest")
    for p in (0, 1):
        await produce_values(broker.bootstrap, topic, [b"%d" % i for i in range(5)], partition=p)
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    members = [
        AIOKafkaShareConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group)
        for _ in range(2)
    ]
    try:
        await members[0].start()  # alone: both partitions are its own
        got = await _consume(members[0], 10)
        results = await members[0].commit()  # (some may have gone with a fetch already)
        assert set(results) <= {tp0, tp1} and all(e is None for e in results.values()), results
        assert sorted((r.partition, r.offset) for r in got) == [
            (p, i) for p in (0, 1) for i in range(5)
        ]
        await members[1].start()
        await wait_until(lambda: all(m.assignment() for m in members), 30, "assignment")

        listed = {g.group_id: g for g in await admin.list_share_groups()}
        assert listed[group].group_type == "share"

        async def described_as_members_see_it() -> bool:
            desc = (await admin.describe_share_groups([group]))[group]
            assert desc.error is None
            seen = {m.member_id: m.assignment() for m in members}
            return (
                desc.state == "Stable"
                and {mb.member_id: set(mb.assignment) for mb in desc.members} == seen
                and all(mb.subscribed_topics == (topic,) for mb in desc.members)
            )

        # (the members learn a new assignment with their next heartbeat)
        await wait_until(described_as_members_see_it, 20, "description = members' assignments")

        async def accepted_all() -> bool:
            offsets = await admin.list_share_group_offsets(group)
            return set(offsets) == {tp0, tp1} and all(o.lag == 0 for o in offsets.values())

        # (Kafka 4.4 reports the persisted start offset, which may stay behind; the lag is 0)
        await wait_until(accepted_all, 15, "lag 0 in both partitions")
        # altering and deleting need an empty group: NON_EMPTY_GROUP (Java's GroupNotEmptyException)
        with pytest.raises(Errors.GroupNotEmptyError):
            await admin.alter_share_group_offsets(group, {tp0: 2})
        refused = await admin.delete_share_groups([group])
        assert isinstance(refused[group], Errors.GroupNotEmptyError), refused
    finally:
        for m in members:
            await m.stop()
    try:
        assert await admin.alter_share_group_offsets(group, {tp0: 2}) == {tp0: None}
        offsets = await admin.list_share_group_offsets(group, [tp0])
        assert offsets[tp0].start_offset == 2
        async with AIOKafkaShareConsumer(
            topic, bootstrap_servers=broker.bootstrap, group_id=group
        ) as again:
            redelivered = await _consume(again, 3)
        assert sorted((r.partition, r.offset) for r in redelivered) == [(0, 2), (0, 3), (0, 4)]

        assert await admin.delete_share_group_offsets(group, [topic]) == {topic: None}
        assert await admin.list_share_group_offsets(group) == {}
        assert await admin.delete_share_groups([group]) == {group: None}
        gone = (await admin.describe_share_groups([group]))[group]
        assert isinstance(gone.error.exception("x"), Errors.GroupIdNotFoundError)
    finally:
        await admin.close()
