"""A consumer group mixing aiokafka and aiokafka_lite members (one process, no aliasing): each
member's start() returns with its share of the partitions, and every record is consumed once."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import aiokafka_lite

aiokafka = pytest.importorskip("aiokafka")


async def _drain_until(consumers: list[Any], want: set[bytes], timeout: float = 60) -> Counter:
    got: Counter[bytes] = Counter()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not want <= set(got) and loop.time() < deadline:
        for c in consumers:
            batch = await c.getmany(timeout_ms=200)
            for records in batch.values():
                got.update(r.value for r in records)
    return got


@pytest.mark.parametrize("first", ["aiokafka", "lite"])
async def test_mixed_group_shares_partitions(
    kafka_bootstrap: str, broker: Any, new_topic: Any, first: str
) -> None:
    broker.skip_on("noida", reason="aiokafka itself does not finish a two-member rebalance there")
    topic = await new_topic(partitions=4)
    group = f"mixed-{topic}"
    kinds = {"aiokafka": aiokafka.AIOKafkaConsumer, "lite": aiokafka_lite.AIOKafkaConsumer}
    order = [first, "lite" if first == "aiokafka" else "aiokafka"]
    consumers = [
        kinds[k](
            topic,
            bootstrap_servers=kafka_bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            heartbeat_interval_ms=500,
        )
        for k in order
    ]
    await consumers[0].start()
    try:
        assert len(consumers[0].assignment()) == 4
        # the first member takes part in the rebalance while the second one's start() waits
        second = asyncio.ensure_future(consumers[1].start())
        while not second.done():
            await consumers[0].getmany(timeout_ms=100)
        await second
        assert len(consumers[1].assignment()) == 2  # known when start() returns
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while len(consumers[0].assignment()) != 2 and loop.time() < deadline:
            await consumers[0].getmany(timeout_ms=100)
        assert consumers[0].assignment() | consumers[1].assignment() == {
            aiokafka_lite.TopicPartition(topic, p) for p in range(4)
        }
        async with aiokafka_lite.AIOKafkaProducer(bootstrap_servers=kafka_bootstrap) as p:
            for i in range(40):
                await p.send(topic, b"v%d" % i, key=b"k%d" % i)
        want = {b"v%d" % i for i in range(40)}
        got = await _drain_until(consumers, want)
        assert set(got) == want
        assert max(got.values()) == 1
    finally:
        for c in consumers:
            await c.stop()
