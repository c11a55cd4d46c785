"""Helpers for the tests on the 3-node Apache Kafka cluster (``apache_cluster``): replicated
topics with chosen leaders, a partition's leader, a fresh group and its coordinator."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

from aiokafka_lite.admin import AIOKafkaAdminClient, NewTopic

#: small client timeouts: a dead or paused node is noticed in seconds
REQUEST_TIMEOUT_MS = 3000


async def wait_until(what: str, cond: Callable[[], Any], timeout: float) -> None:
    """Poll the (sync or async) ``cond`` until truthy; AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        res = cond()
        if asyncio.iscoroutine(res):
            res = await res
        if res:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.1)


async def describe(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
    await admin.start()
    try:
        described = await admin.describe_topics([topic])
        return list(described[0]["partitions"]) if described else []
    finally:
        await admin.close()


async def create_topic(bootstrap: str, partitions: int, leader: int | None = None) -> str:
    """A replicated topic (rf 3, min.insync.replicas 2) whose partitions all have 3 in-sync
    replicas and a leader; ``leader``: the node to lead partition 0."""
    topic = f"cluster-{uuid.uuid4().hex[:10]}"
    configs = {"min.insync.replicas": "2"}
    if leader is None:
        new = NewTopic(topic, partitions, 3, topic_configs=configs)
    else:  # preferred leaders: partition p on node leader + p (1-based, modulo 3)
        firsts = [(leader - 1 + p) % 3 + 1 for p in range(partitions)]
        assignment = {p: [f, f % 3 + 1, (f + 1) % 3 + 1] for p, f in enumerate(firsts)}
        new = NewTopic(topic, -1, -1, assignment, configs)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([new])
    finally:
        await admin.close()

    async def healthy() -> bool:
        parts = await describe(bootstrap, topic)
        return (
            len(parts) == partitions
            and all(p["leader"] >= 0 and len(p["isr"]) == 3 for p in parts)
            and (
                leader is None or any(p["partition"] == 0 and p["leader"] == leader for p in parts)
            )
        )

    await wait_until(f"{topic}: leaders and 3 in-sync replicas", healthy, 60)
    return topic


async def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    parts = await describe(bootstrap, topic)
    return int(next(p["leader"] for p in parts if p["partition"] == partition))


async def new_group(bootstrap: str) -> tuple[str, int]:
    """A fresh group id and the node that coordinates it."""
    group = f"g-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return group, await admin.find_coordinator(group)
    finally:
        await admin.close()
