"""A share group of Java ``KafkaShareConsumer`` and aiokafka_lite members (Apache Kafka 4.4).

The Java member (``tests/java/src/main/java/ShareOracle.java``, run by
``java_oracle.ShareMember``) and two AIOKafkaShareConsumers share one partition: every record
is accepted exactly once overall, and both kinds of member got work. The admin client's view
of such a group (listing, description, offsets) is the Java ``Admin`` client's
(``ShareAdminOracle.java``, run by ``java_oracle.share_group_view``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

import java_oracle
import pytest
from java_oracle import ShareMember
from share_helpers import (
    configure_group,
    need_java_share_groups,
    produce_values,
    wait_until,
)

from aiokafka_lite import AIOKafkaShareConsumer
from aiokafka_lite.admin import AIOKafkaAdminClient

pytestmark = pytest.mark.integration


async def test_java_and_lite_members_share_the_work(broker, new_topic):
    await need_java_share_groups(broker)
    topic = await new_topic(partitions=1)
    group = f"share-java-{uuid.uuid4().hex[:8]}"
    await configure_group(broker.bootstrap, group, share_auto_offset_reset="earliest")
    n = 200
    lite = [
        AIOKafkaShareConsumer(
            topic, bootstrap_servers=broker.bootstrap, group_id=group, max_poll_records=5
        )
        for _ in range(2)
    ]
    seen: list[Counter[bytes]] = [Counter() for _ in lite]
    java = ShareMember(broker.bootstrap, topic, group, run_ms=120_000)
    await asyncio.to_thread(java.start)
    for m in lite:
        await m.start()
    try:
        await wait_until(lambda: all(m.assignment() for m in lite), 30, "assignment")
        # the Java member's JVM may still be starting (a busy machine): produce only once the
        # broker has all three members in the group with the partition assigned, else the
        # lite members can take every record before the Java member polls at all
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:

            async def three_members_assigned() -> bool:
                desc = (await admin.describe_share_groups([group]))[group]
                return len(desc.members) == 3 and all(mb.assignment for mb in desc.members)

            await wait_until(three_members_assigned, 60, "three assigned members", step=0.2)
        finally:
            await admin.close()

        def total() -> int:
            return sum(len(c) for c in seen) + len({r["value"] for r in java.records})

        async def work(i: int) -> None:
            while total() < n:
                batch = await lite[i].getmany(timeout_ms=200)
                for recs in batch.values():
                    for r in recs:
                        seen[i][r.value] += 1
                await asyncio.sleep(0.02)  # "processing": the others get a turn

        workers = [asyncio.ensure_future(work(i)) for i in range(2)]
        await produce_values(broker.bootstrap, topic, (b"%d" % i for i in range(n)))
        await asyncio.wait_for(asyncio.gather(*workers), 90)
        for m in lite:
            results = await m.commit()
            assert all(exc is None for exc in results.values()), results
    finally:
        for m in lite:
            await m.stop()
        await asyncio.to_thread(java.stop)
    java_values = Counter(r["value"] for r in java.records)
    overall = sum(seen, Counter()) + java_values
    assert set(overall) == {b"%d" % i for i in range(n)}
    assert max(overall.values()) == 1, [v for v, c in overall.items() if c > 1]
    assert java_values and all(seen), (len(java_values), [len(c) for c in seen])
    assert all(r["delivery_count"] == 1 for r in java.records)
    commits = [e for e in java.events if e["event"] == "commit"]
    assert commits and all(e["errors"] == 0 for e in commits)


async def _lite_view(admin: AIOKafkaAdminClient, group: str) -> dict[str, Any]:
    """aiokafka_lite's admin view of ``group`` in the shape of ``java_oracle.share_group_view``."""
    listed = [
        {"group_id": g.group_id, "state": g.state}
        for g in sorted(await admin.list_share_groups(), key=lambda g: g.group_id)
    ]
    desc = (await admin.describe_share_groups([group]))[group]
    assert desc.error is None, desc.error
    offsets = await admin.list_share_group_offsets(group)
    return {
        "listed": listed,
        "group_id": desc.group_id,
        "state": desc.state,
        "group_epoch": desc.group_epoch,
        "assignment_epoch": desc.assignment_epoch,
        "members": [
            {
                "member_id": mb.member_id,
                "member_epoch": mb.member_epoch,
                "client_id": mb.client_id,
                "host": mb.client_host,
                "rack": mb.rack_id,
                "assignment": sorted([tp.topic, tp.partition] for tp in mb.assignment),
            }
            for mb in sorted(desc.members, key=lambda mb: mb.member_id)
        ],
        "offsets": [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "start_offset": o.start_offset,
                "leader_epoch": o.leader_epoch,
                "lag": o.lag,
            }
            for tp, o in sorted(offsets.items())
        ],
    }


async def test_share_admin_agrees_with_the_java_admin(broker, new_topic):
    """Listing, describing and the offsets of a share group of a Java and an aiokafka_lite
    member: aiokafka_lite's admin client reports what Java's ``Admin`` reports."""
    await need_java_share_groups(broker)
    topic = await new_topic(partitions=3)
    group = f"share-admin-java-{uuid.uuid4().hex[:8]}"
    await configure_group(broker.bootstrap, group, share_auto_offset_reset="earliest")
    for p in range(3):
        await produce_values(
            broker.bootstrap, topic, [b"%d-%d" % (p, i) for i in range(4)], partition=p
        )
    lite = AIOKafkaShareConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group)
    java = ShareMember(broker.bootstrap, topic, group, run_ms=120_000)
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    await lite.start()
    await asyncio.to_thread(java.start)
    try:
        got: list[bytes] = []

        async def all_read() -> bool:
            for recs in (await lite.getmany(timeout_ms=200)).values():
                got.extend(r.value for r in recs)
            return len(got) + len({r["value"] for r in java.records}) >= 12

        await wait_until(all_read, 60, "all 12 records read")
        assert all(e is None for e in (await lite.commit()).values())

        async def settled() -> bool:
            await lite.getmany(timeout_ms=100)  # keeps the lite member's heartbeats answered
            view = await _lite_view(admin, group)
            return (
                view["state"] == "Stable"
                and len(view["members"]) == 2
                and view["group_epoch"] == view["assignment_epoch"]
                and all(mb["assignment"] for mb in view["members"])
                and len(view["offsets"]) == 3
                and all(o["lag"] == 0 for o in view["offsets"])
            )

        await wait_until(settled, 60, "a stable group of two members with lag 0", step=0.2)
        # the group may still move between two looks (a heartbeat's epoch): compare a Java view
        # with the lite views taken just before and after it
        for _ in range(5):
            before = await _lite_view(admin, group)
            theirs = await asyncio.to_thread(java_oracle.share_group_view, broker.bootstrap, group)
            after = await _lite_view(admin, group)
            theirs["listed"] = [g for g in theirs["listed"] if g["group_id"] == group]
            for ours in (before, after):
                ours["listed"] = [g for g in ours["listed"] if g["group_id"] == group]
            if theirs in (before, after):
                break
        assert theirs in (before, after), (theirs, before, after)
        assert theirs["listed"] == [{"group_id": group, "state": "Stable"}]
    finally:
        await lite.stop()
        await asyncio.to_thread(java.stop)
        await admin.close()
