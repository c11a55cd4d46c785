"""The eager classic protocol's pause when a member joins (issue 21): the members of a group
heartbeat in phase after each rebalance (as the Java client and aiokafka do), so when a new
member joins, the existing ones learn of it together and the pause between an existing member's
``on_partitions_revoked`` and its next ``on_partitions_assigned`` is a join round trip, not the
difference of the members' heartbeat phases (up to ``heartbeat_interval_ms``)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

import pytest

from aiokafka_lite.consumer import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka_lite.structs import TopicPartition

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(180)]

HEARTBEAT_S = 4.0
#: generous bounds for readiness (joins on a loaded machine; Tansu holds a first JoinGroup
#: for half the session timeout); the asserted quantity is bounded separately
READY_S = 60.0


class Timeline(ConsumerRebalanceListener):
    """Every revoke and assign callback of one member, with its monotonic time."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str, set[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events.append((time.monotonic(), "revoked", set(revoked)))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append((time.monotonic(), "assigned", set(assigned)))


async def _until(done: Any, what: str) -> None:
    deadline = time.monotonic() + READY_S
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {READY_S:.0f}s")
        await asyncio.sleep(0.02)


async def _poll(consumer: AIOKafkaConsumer) -> None:
    while True:
        await consumer.getmany(timeout_ms=100)


async def test_existing_members_rejoin_together_when_a_member_joins(
    kafka_bootstrap: str, broker: Any, new_topic: Any
) -> None:
    broker.skip_on(
        "tansu",
        reason="Tansu holds a rebalance's JoinGroups for half the session timeout: every "
        "client's members (aiokafka's too) pause that long",
    )
    topic = await new_topic(partitions=6)
    group = f"g-{uuid.uuid4().hex[:10]}"
    timelines = [Timeline() for _ in range(3)]
    members = [
        AIOKafkaConsumer(
            bootstrap_servers=kafka_bootstrap,
            group_id=group,
            heartbeat_interval_ms=int(HEARTBEAT_S * 1000),
            session_timeout_ms=12000,
            retry_backoff_ms=50,
            enable_auto_commit=False,
        )
        for _ in timelines
    ]
    for c, tl in zip(members, timelines, strict=True):
        c.subscribe([topic], listener=tl)
    pollers: list[asyncio.Task[None]] = []
    joiner: asyncio.Task[None] | None = None
    a, b, c = members
    try:
        # the first two members start half a heartbeat interval apart (modulo the interval),
        # as members of a deployment started at different times do
        started = time.monotonic()
        await asyncio.wait_for(a.start(), READY_S)
        pollers.append(asyncio.create_task(_poll(a)))
        k = 1
        while started + k * HEARTBEAT_S + HEARTBEAT_S / 2 < time.monotonic() + 0.2:
            k += 1
        await asyncio.sleep(started + k * HEARTBEAT_S + HEARTBEAT_S / 2 - time.monotonic())
        await asyncio.wait_for(b.start(), READY_S)
        pollers.append(asyncio.create_task(_poll(b)))
        await _until(
            lambda: (
                len(a.assignment()) + len(b.assignment()) == 6
                and a.assignment()
                and b.assignment()
                and a.group_generation == b.group_generation
            ),
            "two-way split",
        )
        # a third member joins: both existing members revoke everything, rejoin and are
        # assigned again
        marks = [len(tl.events) for tl in timelines[:2]]
        joiner = asyncio.create_task(c.start())

        def reassigned() -> bool:
            return all(
                [e for _, e, _ in tl.events[mark:]][-2:] == ["revoked", "assigned"]
                for tl, mark in zip(timelines[:2], marks, strict=True)
            )

        await _until(reassigned, "revoke and assignment of both existing members")
        await asyncio.wait_for(joiner, READY_S)
        pauses = []
        for tl, mark in zip(timelines[:2], marks, strict=True):
            (t_revoked, _, _), (t_assigned, _, _) = tl.events[mark:][-2:]
            pauses.append(t_assigned - t_revoked)
        # without partitions from its revoke until its assignment: a join round trip (under
        # 0.1 s on an idle machine); the members' heartbeat phases differ by half an interval
        # (2 s) unless each rebalance puts them back in step
        assert max(pauses) < HEARTBEAT_S / 4, pauses
    finally:
        if joiner is not None and not joiner.done():
            joiner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await joiner
        for t in pollers:
            t.cancel()
        for t in pollers:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        for m in members:
            await m.stop()
