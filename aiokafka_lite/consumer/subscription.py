"""Subscription state of one consumer: what it wants (topics, pattern or manual assignment)
and, per assigned partition, where it stands (position, pause, watermarks, pending reset).

Plain data with no I/O.  Every change that affects fetching bumps ``version`` and calls the
registered wakers, so the fetcher re-plans at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable, Iterable
from typing import Any

from aiokafka_lite.errors import IllegalStateError
from aiokafka_lite.structs import SubscriptionPattern, TopicPartition

__all__ = [
    "OFFSET_RESET_STRATEGIES",
    "ConsumerRebalanceListener",
    "PartitionState",
    "SubscriptionState",
    "check_subscribe",
]

EARLIEST = -2  # ListOffsets timestamps
LATEST = -1
OFFSET_RESET_STRATEGIES = {"earliest": EARLIEST, "latest": LATEST, "none": None}


class ConsumerRebalanceListener:
    """Base class for rebalance callbacks (sync or async methods both work).

    ``on_partitions_revoked`` runs before the consumer rejoins its group (commit or save
    state there); ``on_partitions_assigned`` runs after the new assignment is known and before
    fetching for it starts (``seek()`` there to choose where to start).
    """

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Any:
        """Called with the partitions taken away from this consumer."""

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Any:
        """Called with the partitions given to this consumer."""


def check_subscribe(topics: Iterable[str], pattern: Any, listener: Any) -> list[str]:
    """``subscribe()``'s arguments checked as aiokafka checks them (TypeError): topics (a list,
    not a string) or a pattern, not both; a listener with both callbacks. The topics, listed."""
    if isinstance(topics, str):
        raise TypeError("topics must be a list of topic names, not a string")
    topics = list(topics)
    if not topics and not pattern:
        raise TypeError("subscribe() needs either topics or a pattern")
    if topics and pattern:
        raise TypeError("subscribe() takes topics or a pattern, not both")
    if listener is not None and not (
        hasattr(listener, "on_partitions_revoked") and hasattr(listener, "on_partitions_assigned")
    ):
        raise TypeError("listener must be a ConsumerRebalanceListener")
    return topics


class PartitionState:
    """Where the consumer stands on one assigned partition."""

    __slots__ = (
        "position",
        "paused",
        "highwater",
        "lso",
        "reset",
        "error",
        "log_start",
        "last_poll_ms",
    )

    def __init__(self) -> None:
        self.position: int | None = None  # next offset to hand out; None = unknown yet
        self.paused = False
        self.highwater: int | None = None
        self.last_poll_ms: int | None = None  # wall clock of the latest fetch answer for it
        self.lso: int | None = None
        self.log_start: int | None = None
        self.reset: int | None = None  # pending ListOffsets timestamp (EARLIEST/LATEST)
        self.error: BaseException | None = None  # raised to the caller on the next poll

    @property
    def has_valid_position(self) -> bool:
        """True when fetching can start (position known, no reset pending)."""
        return self.position is not None and self.reset is None


class SubscriptionState:
    """Subscription and assignment of one consumer (aiokafka semantics: ``subscribe`` and
    ``assign`` are mutually exclusive)."""

    @property
    def _listener(self) -> Any:
        """aiokafka's name for :attr:`listener` (kstreams' test helpers read it)."""
        return self.listener

    def fetch_context(self) -> contextlib.AbstractContextManager[None]:
        """aiokafka's name: the context its ``getone()`` holds around a fetcher wait (kafkaesk's
        tests enter it). Our fetcher needs no such marker, so it does nothing."""
        return contextlib.nullcontext()

    def __init__(self, default_reset: str = "latest") -> None:
        if default_reset not in OFFSET_RESET_STRATEGIES:
            raise ValueError(f"auto_offset_reset must be one of {sorted(OFFSET_RESET_STRATEGIES)}")
        self.default_reset = OFFSET_RESET_STRATEGIES[default_reset]
        self.topics: frozenset[str] = frozenset()
        self.pattern: re.Pattern[str] | None = None  # matched here, against the metadata
        #: a :class:`SubscriptionPattern`'s regex: the broker matches it (KIP-848 only)
        self.broker_pattern: str | None = None
        self.listener: Any = None
        self.user_assigned = False
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self.version = 0  # bumped on every change that matters to the fetcher
        self.assignment_id = 0  # bumped when the set of assigned partitions changes
        #: bumped by every subscribe() call: a group member rejoins for each one, even with
        #: the same topics (aiokafka: a new subscription, so a rebalance that calls its listener)
        self.subscription_id = 0
        self._wakers: list[Callable[[], None]] = []
        self.errors = False  # True when some PartitionState.error may be set
        self._assignment_waiters: list[asyncio.Future[None]] = []

    def wait_for_assignment(self) -> asyncio.Future[None]:
        """aiokafka's name: a future done at the NEXT assignment (by the group or by
        ``assign()``), even when one is active now."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._assignment_waiters.append(fut)
        return fut

    def _assigned(self, exc: BaseException | None = None) -> None:
        waiters = self._assignment_waiters
        self._assignment_waiters = []
        for fut in waiters:
            if not fut.done():
                if exc is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(exc)

    def abort_waiters(self, exc: BaseException) -> None:
        """aiokafka's name: fail every :meth:`wait_for_assignment` waiter with ``exc`` (the
        consumer stopped)."""
        self._assigned(exc)

    def set_error(self, st: PartitionState, exc: BaseException) -> None:
        """Store an error to raise to the caller of the next poll."""
        st.error = exc
        self.errors = True

    # -- change notification -------------------------------------------------------------
    def add_waker(self, cb: Callable[[], None]) -> None:
        """Register a callback run after every relevant change."""
        self._wakers.append(cb)

    def remove_waker(self, cb: Callable[[], None]) -> None:
        """Unregister a callback added with add_waker."""
        if cb in self._wakers:
            self._wakers.remove(cb)

    def changed(self) -> None:
        """Bump the version and wake whoever waits for changes."""
        self.version += 1
        for cb in list(self._wakers):
            cb()

    # -- what the user wants ---------------------------------------------------------------
    @property
    def subscribed(self) -> bool:
        """True when partitions come from a topic/pattern subscription (group or not)."""
        return bool(self.topics) or self.pattern is not None or self.broker_pattern is not None

    def subscribe(
        self,
        topics: Iterable[str] = (),
        pattern: str | re.Pattern[str] | SubscriptionPattern | None = None,
        listener: Any = None,
    ) -> None:
        """Subscribe to topics or a regex pattern (replaces any previous subscription): a str
        (or compiled ``re.Pattern``) is matched here with ``re.match``, a
        :class:`SubscriptionPattern` by the broker."""
        if self.user_assigned:
            raise IllegalStateError("subscribe() after assign(): call unsubscribe() first")
        compiled = None
        broker = pattern.pattern if isinstance(pattern, SubscriptionPattern) else None
        if pattern is not None and not isinstance(pattern, SubscriptionPattern):
            try:  # a str, or an re.Pattern (as aiokafka: re.compile takes both)
                compiled = re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid subscription pattern {pattern!r}: {exc}") from None
        self.listener = listener
        self.subscription_id += 1
        self.broker_pattern = broker
        if compiled is not None or broker is not None:
            self.pattern = compiled
            self.topics = frozenset()
        else:
            self.pattern = None
            self.topics = frozenset(topics)
        self.changed()

    def match_pattern(self, all_topics: Iterable[str]) -> bool:
        """Pattern subscription: set topics to the matching ones; True when they changed."""
        if self.pattern is None:
            return False
        matched = frozenset(t for t in all_topics if self.pattern.match(t))
        if matched == self.topics:
            return False
        self.topics = matched
        self.changed()
        return True

    def unsubscribe(self) -> None:
        """Drop subscription and assignment."""
        self.topics = frozenset()
        self.pattern = None
        self.broker_pattern = None
        self.listener = None
        self.user_assigned = False
        self._set_assignment(())

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> None:
        """Manual assignment (no group membership)."""
        if self.subscribed:
            raise IllegalStateError("assign() after subscribe(): call unsubscribe() first")
        self.user_assigned = True
        self._set_assignment(partitions)
        self._assigned()

    def assign_from_subscription(self, partitions: Iterable[TopicPartition]) -> None:
        """Assignment decided by the group (or by metadata when there is no group)."""
        self._set_assignment(partitions)
        self._assigned()

    def revoke_to(self, partitions: Iterable[TopicPartition]) -> None:
        """Shrink the group's assignment to ``partitions`` (a revocation, or partitions lost:
        not an assignment, so no :meth:`wait_for_assignment` waiter wakes)."""
        self._set_assignment(partitions)

    def _set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        new = {TopicPartition(tp.topic, tp.partition) for tp in partitions}
        old = self.assignment
        self.assignment = {tp: old.get(tp) or PartitionState() for tp in sorted(new)}
        if new != set(old):
            self.assignment_id += 1
        self.changed()

    # -- per partition ---------------------------------------------------------------------
    def state(self, tp: TopicPartition) -> PartitionState:
        """State of an assigned partition (IllegalStateError when not assigned)."""
        try:
            return self.assignment[tp]
        except KeyError:
            raise IllegalStateError(f"partition {tp} is not assigned") from None

    def is_assigned(self, tp: TopicPartition) -> bool:
        """True when the partition is currently assigned."""
        return tp in self.assignment

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Set the next offset to fetch (cancels a pending reset and any error)."""
        st = self.state(tp)
        st.position = offset
        st.reset = None
        st.error = None
        self.changed()

    def request_reset(self, tp: TopicPartition, timestamp: int | None = None) -> None:
        """Ask for the position to be looked up by ListOffsets (EARLIEST / LATEST)."""
        st = self.state(tp)
        st.reset = self.default_reset if timestamp is None else timestamp
        st.position = None
        self.changed()

    def pause(self, tp: TopicPartition) -> None:
        """Stop fetching and handing out records of a partition."""
        self.state(tp).paused = True
        self.changed()

    def resume(self, tp: TopicPartition) -> None:
        """Undo pause()."""
        self.state(tp).paused = False
        self.changed()

    def paused(self) -> set[TopicPartition]:
        """Currently paused partitions."""
        return {tp for tp, st in self.assignment.items() if st.paused}

    def fetchable(self) -> list[TopicPartition]:
        """Assigned, not paused, position known."""
        return [
            tp
            for tp, st in self.assignment.items()
            if not st.paused and st.position is not None and st.reset is None
        ]

    def missing_positions(self) -> list[TopicPartition]:
        """Assigned partitions whose position is unknown and has no reset pending."""
        return [
            tp for tp, st in self.assignment.items() if st.position is None and st.reset is None
        ]

    def pending_resets(self) -> list[tuple[TopicPartition, int]]:
        """(partition, ListOffsets timestamp) of every partition waiting for a reset."""
        return [(tp, st.reset) for tp, st in self.assignment.items() if st.reset is not None]
