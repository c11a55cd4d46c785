"""The share consumer through ``tests/faults.py``'s FaultProxy in front of Apache Kafka 4.4:
a lost share session (SHARE_SESSION_NOT_FOUND) and every connection cut mid-consumption.
Either way the consumer goes on by itself, every record is eventually accepted, and nothing
is left behind (a new member's first record is one produced afterwards)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter

import pytest
from faults import FaultProxy, Rule
from share_helpers import configure_group, need_share_groups, produce_values

from aiokafka_lite import AIOKafkaShareConsumer
from aiokafka_lite import errors as Errors
from aiokafka_lite.protocol import messages as m

pytestmark = pytest.mark.integration

SHARE_FETCH = m.ShareFetchRequest.API_KEY


async def _drain(consumer, want: set[bytes], timeout: float, fault=None) -> Counter[bytes]:
    """Poll until every value of ``want`` was seen; failed acknowledgements (the fault's
    doing) are reported to the callback, never raised by the poll. ``fault()`` runs once,
    after the first records."""
    seen: Counter[bytes] = Counter()
    deadline = time.monotonic() + timeout
    while not want <= set(seen):
        assert time.monotonic() < deadline, f"missing {sorted(want - set(seen))[:5]}"
        batch = await consumer.getmany(timeout_ms=500)
        for recs in batch.values():
            for r in recs:
                seen[r.value] += 1
        if fault is not None and seen:
            await fault()
            fault = None
    results = await consumer.commit()
    assert all(e is None for e in results.values()), results
    return seen


async def _nothing_left(bootstrap: str, topic: str, group: str) -> None:
    await produce_values(bootstrap, topic, [b"sentinel"])
    async with AIOKafkaShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group) as late:
        seen = await _drain(late, {b"sentinel"}, 30)
    assert list(seen) == [b"sentinel"]


@pytest.mark.parametrize("fault", ["session_lost", "connections_cut"])
async def test_share_consumer_rides_out_faults(broker, new_topic, fault):
    await need_share_groups(broker)
    topic = await new_topic(partitions=1)
    group = f"share-fault-{uuid.uuid4().hex[:8]}"
    # the records acquired in a lost share session come back when their locks expire: 10 s
    # locks (Kafka's default is 30 s), long enough for a busy machine to acknowledge in time
    await configure_group(
        broker.bootstrap,
        group,
        share_auto_offset_reset="earliest",
        share_record_lock_duration_ms="10000",
    )
    values = {b"%d" % i for i in range(60)}
    await produce_values(broker.bootstrap, topic, sorted(values))
    async with FaultProxy(broker.bootstrap) as proxy:
        rule = None

        async def inject() -> None:
            nonlocal rule
            if fault == "session_lost":
                rule = proxy.add(Rule(SHARE_FETCH, "error", Errors.ShareSessionNotFoundError.errno))
            else:
                await proxy.cut_all()

        async with AIOKafkaShareConsumer(
            topic, bootstrap_servers=proxy.bootstrap, group_id=group, max_poll_records=10
        ) as consumer:
            seen = await asyncio.wait_for(_drain(consumer, values, 90, inject), 100)
        if rule is not None:
            assert rule.hits == 1
    assert set(seen) == values
    await _nothing_left(broker.bootstrap, topic, group)
