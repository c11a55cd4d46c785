"""``stop()`` of a group member cancelled by its caller while it leaves (issue 30).

The leave at ``stop()`` now looks for the coordinator and retries within the close bound
(``request_timeout_ms``; ``tests/test_cluster_leave.py`` kills the coordinator). A caller that
cancels ``stop()`` meanwhile (``asyncio.wait_for`` around it, a task group torn down) gets the
``CancelledError`` at once, and none of the consumer's tasks stays running. The leave request
is held by the fault proxy (dropped before the broker sees it), so ``stop()`` is provably inside
the leave when it is cancelled.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from share_helpers import need_share_groups

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaShareConsumer
from aiokafka_lite.protocol import messages as m
from tests.faults import FaultProxy, Rule

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]

NO_KIP848 = ("tansu", "noida")
#: far above the test's bounds: a stop() that is not cancelled would still be leaving
REQUEST_TIMEOUT_MS = 60_000


def _ours_running() -> list[asyncio.Task[Any]]:
    """The unfinished tasks running aiokafka_lite code (not the test's, not the proxy's)."""
    out = []
    for task in asyncio.all_tasks():
        code = getattr(task.get_coro(), "cr_code", None)
        if not task.done() and code is not None and "/aiokafka_lite/" in code.co_filename:
            out.append(task)
    return out


async def _until(what: str, cond: Any, timeout: float, state: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}" + (
            f": {state()}" if state else ""
        )
        await asyncio.sleep(0.05)


async def _cancel_inside_the_leave(proxy: FaultProxy, stopped: Any, leave: Rule) -> None:
    """stop() until the proxy holds its leave, then cancel it: CancelledError, and no task
    of the consumer left."""
    proxy.add(leave)
    task = asyncio.create_task(stopped.stop())
    await _until("the leave request", lambda: leave.hits > 0 or task.done(), 30)
    assert not task.done(), "stop() ended before its leave was answered"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)  # at once: nothing waits for the held request
    await _until(
        "the consumer's tasks to end",
        lambda: not _ours_running(),
        5,
        lambda: [t.get_coro().__qualname__ for t in _ours_running()],  # type: ignore[union-attr]
    )


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_cancelled_stop_propagates_and_leaves_nothing_running(
    broker: Any, new_topic: Any, protocol: str
) -> None:
    if protocol == "consumer":
        broker.skip_on(*NO_KIP848, reason="the broker has no KIP-848 consumer groups")
    topic = await new_topic(partitions=1)
    if protocol == "classic":
        leave = Rule(m.LeaveGroupRequest.API_KEY, "drop", times=-1, direction="request")
    else:
        leave = Rule(
            m.ConsumerGroupHeartbeatRequest.API_KEY,
            "drop",
            times=-1,
            direction="request",
            when=lambda r: r.member_epoch < 0,
        )
    async with FaultProxy(broker.bootstrap) as proxy:
        c = AIOKafkaConsumer(
            topic,
            bootstrap_servers=proxy.bootstrap,
            group_id=f"leave-{uuid.uuid4().hex[:8]}",
            group_protocol=protocol,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
            # aiokafka's default session: Tansu completes a classic join after half the session
            # (45 s cost 23 s there); nothing here outlives it
            **({"session_timeout_ms": 10_000} if protocol == "classic" else {}),
        )
        await c.start()
        try:
            await _until("the assignment", lambda: bool(c.assignment()), 60)
            await _cancel_inside_the_leave(proxy, c, leave)
        finally:
            await c.stop()  # a second stop() returns at once (the first one set it stopped)


async def test_cancelled_share_stop_propagates_and_leaves_nothing_running(
    broker: Any, new_topic: Any
) -> None:
    await need_share_groups(broker)
    topic = await new_topic(partitions=1)
    leave = Rule(
        m.ShareGroupHeartbeatRequest.API_KEY,
        "drop",
        times=-1,
        direction="request",
        when=lambda r: r.member_epoch < 0,
    )
    async with FaultProxy(broker.bootstrap) as proxy:
        c = AIOKafkaShareConsumer(
            topic,
            bootstrap_servers=proxy.bootstrap,
            group_id=f"leave-{uuid.uuid4().hex[:8]}",
            request_timeout_ms=REQUEST_TIMEOUT_MS,
        )
        await c.start()
        try:
            await _until("the assignment", lambda: bool(c.assignment()), 60)
            await _cancel_inside_the_leave(proxy, c, leave)
        finally:
            await c.stop()
