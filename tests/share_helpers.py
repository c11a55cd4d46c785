"""Helpers for the share-group tests (``test_share_consumer.py``, ``test_share_java.py``).

Share groups need Apache Kafka 4.x; brokers without them (Tansu, noida-db, Kafka 3.9) are
detected from ApiVersions (no ShareGroupHeartbeat) and the scenario tests skip there.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import pytest

from aiokafka_lite import AIOKafkaProducer
from aiokafka_lite.admin import AIOKafkaAdminClient
from aiokafka_lite.admin.config_resource import ConfigResource
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.ops.share import supports_share_groups

#: the acquisition lock of the tests whose work and renewal timings are tuned to it (Kafka's
#: default group.share.min.record.lock.duration.ms; the test brokers allow locks from 2 s)
MIN_LOCK_MS = 15000
#: the acquisition lock of the tests that wait for a lock to expire (the expiry is the scenario):
#: short, so they do not wait 15 s, with seconds left for a busy machine to acknowledge in time
#: once a record is delivered again
EXPIRY_LOCK_MS = 6000
#: the share heartbeat interval :func:`configure_group` sets unless told otherwise: a member gets
#: its assignment (and notices a rebalance) a heartbeat after joining, 1 s instead of Kafka's 5 s
#: (group.share.heartbeat.interval.ms; the test brokers allow it from 0.5 s)
HEARTBEAT_MS = 1000


async def share_groups_supported(bootstrap: str) -> bool:
    """True when the broker at ``bootstrap`` has share groups (from ApiVersions)."""
    client = KafkaClient(bootstrap_servers=bootstrap)
    await client.start()
    try:
        return supports_share_groups(client)
    finally:
        await client.close()


async def need_share_groups(broker: Any) -> None:
    """Skip the running test on a broker without share groups."""
    if not await share_groups_supported(broker.bootstrap):
        pytest.skip(f"[{broker.kind}] no share groups (KIP-932): ShareGroupHeartbeat missing")


async def need_java_share_groups(broker: Any) -> None:
    """Skip unless the broker is Apache Kafka with share groups and the Java oracle runs (the
    side-by-side share tests)."""
    import java_oracle

    if broker.kind != "apache":
        pytest.skip(f"[{broker.kind}] the Java client's reference broker is Apache Kafka")
    await need_share_groups(broker)
    reason = java_oracle.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


async def configure_group(bootstrap: str, group: str, **configs: str) -> None:
    """Set share-group configs (``share_auto_offset_reset="earliest"`` ...) on ``group``, and
    ``share.heartbeat.interval.ms`` = :data:`HEARTBEAT_MS` unless ``configs`` names it."""
    await alter_group_configs(
        bootstrap, group, **{"share_heartbeat_interval_ms": str(HEARTBEAT_MS), **configs}
    )


async def alter_group_configs(bootstrap: str, group: str, **configs: str) -> None:
    """Set group configs on ``group`` (Apache Kafka 4.x; names with ``_`` for ``.``, e.g.
    ``consumer_heartbeat_interval_ms="1000"``), before or after the group exists."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        values = {k.replace("_", "."): v for k, v in configs.items()}
        for resp in await admin.incremental_alter_configs([ConfigResource("group", group, values)]):
            for res in resp.resources:
                assert res.error_code == 0, (res.error_code, res.error_message)
    finally:
        await admin.close()


async def produce_values(bootstrap: str, topic: str, values: Iterable[bytes], **kw: Any) -> None:
    """Produce each value as its own record batch (send_and_wait one at a time), so share
    fetches can acquire a few records at a time."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for v in values:
            await producer.send_and_wait(topic, v, **kw)
    finally:
        await producer.stop()


async def wait_until(
    check: Callable[[], object | Awaitable[object]], timeout: float, what: str, step: float = 0.05
) -> None:
    """Wait for ``check()`` to hold, at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        ok = check()
        if inspect.isawaitable(ok):
            ok = await ok
        if ok:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout} s")
        await asyncio.sleep(step)
