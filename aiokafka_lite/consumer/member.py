"""What the two consumer group drivers share, as components they USE (not a base class).

* :class:`Coordinator`: the interface the consumer needs of a group driver (the classic
  :class:`~aiokafka_lite.consumer.group.ClassicCoordinator`, the KIP-848
  :class:`~aiokafka_lite.consumer.group848.ConsumerGroupMember`);
* :class:`Reconciler`: the reconciliation steps every protocol shares, in Java's order: pause
  the partitions being revoked (nothing more of them is handed out), commit (auto commit), call
  ``on_partitions_revoked`` (``on_partitions_lost`` when the partitions are already someone
  else's), then ``on_partitions_assigned`` for the new ones; and the listener calls themselves
  (a failing listener is logged, never breaks the membership; a cancellation propagates).

Offset commits and fetches are :class:`~aiokafka_lite.consumer.offsets.GroupOffsets`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

from aiokafka_lite import errors as Errors
from aiokafka_lite.hooks import HookSet, emit
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

from .subscription import SubscriptionState

__all__ = ["Coordinator", "Reconciler", "call_listener"]

log = logging.getLogger("aiokafka_lite.consumer.group")


class Coordinator(Protocol):
    """What the consumer uses of its group driver (either protocol)."""

    group_id: str | None
    #: set once the first assignment is applied, or a fatal error is stored (start() waits)
    assigned_once: asyncio.Event

    @property
    def member_id(self) -> str: ...
    @property
    def generation(self) -> int: ...
    @property
    def uses_group(self) -> bool: ...
    @property
    def fatal(self) -> BaseException | None: ...
    @fatal.setter
    def fatal(self, value: BaseException | None) -> None: ...
    def start(self) -> None: ...
    def abandon(self) -> None: ...
    async def close(self, leave: str = "default") -> None: ...
    def poll(self) -> None: ...
    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None: ...
    async def commit_offsets(
        self, assignment: Any, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None: ...
    async def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]: ...
    async def commit_through(
        self, client: Any, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None: ...
    async def _init_positions(self) -> None: ...


async def call_listener(fn: Any, partitions: set[TopicPartition]) -> None:
    """Call a rebalance listener method (sync or async); its failure is logged, not raised."""
    try:
        res = fn(partitions)
        if inspect.isawaitable(res):
            await res
    except Exception:  # not CancelledError (a BaseException): it propagates
        log.exception("rebalance listener %r failed", fn)


class Reconciler:
    """The listener calls and the revoke steps of one member (a component of each driver)."""

    def __init__(
        self,
        subscriptions: SubscriptionState,
        group_id: str | None,
        hooks: HookSet | None,
        commit_positions: Callable[[], Awaitable[None]],
        auto_commit: bool,
        on_revoking: Callable[[bool], None] = lambda running: None,
    ) -> None:
        self._subs = subscriptions
        self._group_id = group_id
        self._commit_positions = commit_positions
        self._auto_commit = auto_commit
        self._h_revoked = hooks.on_partitions_revoked if hooks is not None else ()
        self._h_assigned = hooks.on_partitions_assigned if hooks is not None else ()
        #: the revoke listener runs (the classic heartbeat keeps going meanwhile)
        self.revoking = False
        self._on_revoking = on_revoking  # told when the revoke listener starts and ends

    async def commit_before(self, what: str) -> None:
        """The automatic commit before partitions change hands (its failure is logged)."""
        if not self._auto_commit:
            return
        try:
            await self._commit_positions()
        except Errors.KafkaError as exc:
            log.warning("commit before %s failed: %r", what, exc)

    async def revoked(self, partitions: set[TopicPartition]) -> None:
        """The hooks and ``on_partitions_revoked`` for ``partitions`` (no commit, no pause)."""
        if self._h_revoked:
            emit(self._h_revoked, self._group_id, set(partitions))
        listener = self._subs.listener
        if listener is not None:
            await self._revoke(listener.on_partitions_revoked, partitions)

    async def revoke_paused(self, partitions: set[TopicPartition]) -> None:
        """Stop fetching ``partitions`` (paused: nothing more is handed out), commit (auto
        commit) and call ``on_partitions_revoked``; the other partitions keep going. The
        revoke steps of every incremental protocol (cooperative, KIP-848), in Java's order."""
        subs = self._subs
        for tp in partitions:
            subs.assignment[tp].paused = True
        subs.changed()
        await self.commit_before(f"revoking {sorted(partitions)}")
        await self.revoked(partitions)

    async def lost(self, partitions: set[TopicPartition]) -> None:
        """``on_partitions_lost`` (no commit: another member may own them already), or
        ``on_partitions_revoked`` when the listener has no such method."""
        if self._h_revoked:
            emit(self._h_revoked, self._group_id, set(partitions))
        listener = self._subs.listener
        if listener is None:
            return
        await self._revoke(getattr(listener, "on_partitions_lost", None), partitions)

    async def assigned(self, partitions: set[TopicPartition]) -> None:
        """The hooks and ``on_partitions_assigned`` (as Java: also with nothing added)."""
        if self._h_assigned:
            emit(self._h_assigned, self._group_id, set(partitions))
        listener = self._subs.listener
        if listener is not None:
            await call_listener(listener.on_partitions_assigned, set(partitions))

    async def _revoke(self, fn: Any, partitions: set[TopicPartition]) -> None:
        self.revoking = True
        self._on_revoking(True)
        try:
            await call_listener(fn or self._subs.listener.on_partitions_revoked, partitions)
        finally:
            self.revoking = False
            self._on_revoking(False)
