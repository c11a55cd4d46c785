"""``SubscriptionState.wait_for_assignment()`` (aiokafka's name, read by code written against
its consumer): a waiter wakes at the next assignment, by the group or by ``assign()``, never at
a revocation, and fails when the consumer stops. Also the pattern forms ``subscribe()`` takes.
Broker-free."""

from __future__ import annotations

import asyncio

import pytest

from aiokafka_lite.consumer.subscription import SubscriptionState
from aiokafka_lite.errors import ConsumerStoppedError
from aiokafka_lite.structs import TopicPartition

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


async def test_a_waiter_wakes_at_the_next_assignment_not_at_a_revocation() -> None:
    subs = SubscriptionState()
    subs.subscribe(["t"])
    subs.assign_from_subscription([TP0, TP1])
    waiter = subs.wait_for_assignment()
    assert not waiter.done()  # an active assignment does not count: the NEXT one
    subs.revoke_to([TP1])
    subs.revoke_to(())
    assert not waiter.done()
    assert subs.assignment == {}
    subs.assign_from_subscription([TP0])
    assert waiter.done() and waiter.result() is None
    assert set(subs.assignment) == {TP0}


async def test_assign_wakes_waiters_and_stop_fails_them() -> None:
    subs = SubscriptionState()
    first = subs.wait_for_assignment()
    subs.assign_from_user([TP0])
    assert first.done()
    later = subs.wait_for_assignment()
    subs.abort_waiters(ConsumerStoppedError("consumer is stopped"))
    with pytest.raises(ConsumerStoppedError):
        await later
    cancelled = subs.wait_for_assignment()
    cancelled.cancel()
    subs.assign_from_user([TP1])  # a cancelled waiter is skipped
    await asyncio.sleep(0)
    assert cancelled.cancelled()


def test_patterns_str_compiled_and_broker_side() -> None:
    """A str and a compiled ``re.Pattern`` (aiokafka takes both) are matched by the client; a
    ``SubscriptionPattern`` is kept for the broker (KIP-848), never compiled here."""
    import re

    from aiokafka_lite.structs import SubscriptionPattern

    subs = SubscriptionState("earliest")
    subs.subscribe(pattern=re.compile("orders-.*"))
    assert subs.pattern is not None and subs.pattern.match("orders-eu")
    assert subs.broker_pattern is None and subs.subscribed
    subs.subscribe(pattern="pay-.*")
    assert subs.pattern is not None and subs.pattern.pattern == "pay-.*"
    subs.subscribe(pattern=SubscriptionPattern("(?!x).*"))  # RE2/J syntax is the broker's
    assert subs.pattern is None and subs.broker_pattern == "(?!x).*" and subs.subscribed
