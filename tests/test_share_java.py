"""A share group of Java ``KafkaShareConsumer`` and aiokafka_lite members (Apache Kafka 4.4).

The Java member (``tests/java/src/main/java/ShareOracle.java``, run by
``java_oracle.ShareMember``) and two AIOKafkaShareConsumers share one partition: every record
is accepted exactly once overall, and both kinds of member got work.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import java_oracle
import pytest
from java_oracle import ShareMember
from share_helpers import configure_group, need_share_groups, produce_values, wait_until

from aiokafka_lite import AIOKafkaShareConsumer
from aiokafka_lite.admin import AIOKafkaAdminClient

pytestmark = pytest.mark.integration


async def test_java_and_lite_members_share_the_work(broker, new_topic):
    if broker.kind != "apache":
        pytest.skip(f"[{broker.kind}] the Java client's reference broker is Apache Kafka")
    await need_share_groups(broker)
    reason = java_oracle.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
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
