"""Offset commits and committed-offset lookups of a consumer group (OffsetCommit /
OffsetFetch), and the initial position of newly assigned partitions.

:class:`OffsetsMixin` is part of :class:`~aiokafka_lite.consumer.group.Coordinator`; it uses
the coordinator's connection (``_send``), membership (``generation``, ``member_id``) and
subscription state.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite.hooks import emit
from aiokafka_lite.ops import ItemError
from aiokafka_lite.ops.offsets import (
    offset_commit_request,
    offset_fetch_request,
    parse_offset_commit,
    parse_offset_fetch,
)
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

from .subscription import SubscriptionState

__all__ = ["OffsetsMixin"]

log = logging.getLogger(__name__)

_REJOIN_CODES = {
    Errors.RebalanceInProgressError.errno,
    Errors.IllegalGenerationError.errno,
    Errors.UnknownMemberIdError.errno,
}
_COORDINATOR_CODES = {
    Errors.NotCoordinatorForGroupError.errno,
    Errors.GroupCoordinatorNotAvailableError.errno,
    Errors.RequestTimedOutError.errno,
}
_RETRY_CODES = {Errors.GroupLoadInProgressError.errno, Errors.UnstableOffsetCommitError.errno}


class OffsetsMixin:
    """Commits and committed offsets (mixed into the group coordinator)."""

    group_id: str | None
    group_instance_id: str | None
    member_id: str
    generation: int
    _subs: SubscriptionState
    _rejoin: bool
    _wake: asyncio.Event
    _backoff: float
    _request_timeout_ms: int
    _require_stable: bool
    #: set while commit_through() commits for a stopped consumer, from outside the group
    _outside_group: bool
    _last_committed: dict[TopicPartition, int]
    _h_commit: tuple[Callable[..., Any], ...]

    @property
    def uses_group(self) -> bool:  # pragma: no cover - overridden by the coordinator
        """True when partitions come from group membership."""
        raise NotImplementedError

    async def _send(self, request: Any, timeout_ms: float | None = None) -> Any:  # pragma: no cover
        raise NotImplementedError

    def _coordinator_error(self, code: int) -> bool:  # pragma: no cover
        raise NotImplementedError

    def _check_group(self) -> None:
        if self.group_id is None:
            raise Errors.IllegalOperation("commit/committed need a group_id")

    async def _commit_positions(self) -> None:
        offsets = {
            tp: OffsetAndMetadata(st.position, "")
            for tp, st in self._subs.assignment.items()
            if st.position is not None and self._last_committed.get(tp) != st.position
        }
        if offsets:
            await self.commit_offsets(self._subs.assignment, offsets)

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """OffsetCommit, retrying coordinator errors until request_timeout_ms. Raises
        CommitFailedError when the group rebalanced (the partitions may belong to another
        member now)."""
        self._check_group()
        if not offsets:
            return
        hooks = self._h_commit
        if not hooks:
            return await self._commit(offsets)
        started = time.monotonic()
        try:
            await self._commit(offsets)
        except Exception as exc:  # a cancellation is not a commit outcome: not reported
            emit(hooks, self.group_id, offsets, time.monotonic() - started, exc)
            raise
        emit(hooks, self.group_id, offsets, time.monotonic() - started, None)

    async def _commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        # a stopped consumer's member has left (commit_through): the commit goes out as
        # aiokafka's does then, generation -1 and no member id, and the broker decides
        group_managed = self.uses_group and not self._outside_group
        if group_managed and (self.generation < 0 or (self._rejoin and not self._subs.assignment)):
            raise Errors.CommitFailedError(
                "Commit cannot be completed: the consumer is not part of an active group generation "
                "(a rebalance is in progress or max_poll_interval_ms was exceeded)"
            )
        deadline = time.monotonic() + self._request_timeout_ms / 1000
        request = offset_commit_request(
            self.group_id,  # type: ignore[arg-type]  # checked by _check_group
            offsets,
            generation=self.generation if group_managed else -1,
            member_id=self.member_id if group_managed else "",
            group_instance_id=self.group_instance_id if group_managed else None,
        )
        while True:
            retry = False
            try:
                resp = await self._send(request)
            except (
                Errors.KafkaConnectionError,
                Errors.KafkaTimeoutError,
                Errors.NodeNotReadyError,
            ) as exc:
                retry = True
                log.debug("commit failed: %r", exc)
            else:
                for tp, code in parse_offset_commit(resp).items():
                    if code == 0:
                        om = offsets[tp]
                        self._last_committed[tp] = om[0] if isinstance(om, tuple) else int(om)
                        continue
                    if code in _REJOIN_CODES:
                        if code == Errors.UnknownMemberIdError.errno:
                            self.member_id = ""
                            self.generation = -1
                        self._rejoin = True
                        self._wake.set()
                        raise Errors.CommitFailedError(
                            f"Commit cannot be completed: the group rebalanced "
                            f"({Errors.for_code(code).__name__}); the partitions may have moved to "
                            f"another member. Poll more often or raise max_poll_interval_ms."
                        )
                    if self._coordinator_error(code) or code in _RETRY_CODES:
                        retry = True
                        continue
                    raise Errors.for_code(code)(f"commit failed for {tp.topic}[{tp.partition}]")
            if not retry:
                return
            if time.monotonic() + self._backoff >= deadline:
                raise Errors.KafkaTimeoutError("offset commit timed out")
            await asyncio.sleep(self._backoff)

    async def commit_offsets(
        self, assignment: Any, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """aiokafka's name and signature for :meth:`commit` (``assignment`` is unused): the
        consumer commits through it so tracers patching
        ``aiokafka.consumer.group_coordinator.GroupCoordinator.commit_offsets`` (ddtrace) work."""
        await self.commit(offsets)

    async def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """OffsetFetch: the committed offset of each partition (None when there is none)."""
        self._check_group()
        tps = list(partitions)
        group_id: str = self.group_id  # type: ignore[assignment]  # checked by _check_group
        request = offset_fetch_request(group_id, tps, self._require_stable)
        deadline = time.monotonic() + self._request_timeout_ms / 1000
        while True:
            try:
                resp = await self._send(request)
            except (
                Errors.KafkaConnectionError,
                Errors.KafkaTimeoutError,
                Errors.NodeNotReadyError,
            ):
                pass  # retried below
            else:
                parsed = parse_offset_fetch(resp, group_id)[group_id]
                if isinstance(parsed, ItemError):
                    code = parsed.code
                    if not (
                        self._coordinator_error(code) or code in _RETRY_CODES or parsed.retriable
                    ):
                        raise parsed.exception(f"OffsetFetch failed for group {group_id!r}")
                else:
                    out: dict[TopicPartition, OffsetAndMetadata | None] = dict.fromkeys(tps)
                    for tp, om in parsed.items():
                        if isinstance(om, ItemError):
                            if om.code != Errors.UnknownTopicOrPartitionError.errno:
                                raise om.exception(f"OffsetFetch failed for {tp}")
                            continue
                        if om.offset >= 0:
                            out[tp] = om
                    return out
            if time.monotonic() + self._backoff >= deadline:
                raise Errors.KafkaTimeoutError("fetching committed offsets timed out")
            await asyncio.sleep(self._backoff)

    # -- positions ---------------------------------------------------------------------
    async def _init_positions(self) -> None:
        subs = self._subs
        missing = [tp for tp in subs.missing_positions() if subs.assignment[tp].error is None]
        if not missing:
            return
        committed: Mapping[TopicPartition, OffsetAndMetadata | None] = {}
        if self.group_id is not None:
            committed = await self.committed(missing)
        for tp in missing:
            st = subs.assignment.get(tp)
            if st is None or st.position is not None or st.reset is not None:
                continue  # changed meanwhile (seek, unassign)
            om = committed.get(tp)
            if om is not None:
                st.position = om.offset
                self._last_committed[tp] = om.offset
            elif subs.default_reset is None:
                subs.set_error(
                    st,
                    Errors.NoOffsetForPartitionError(
                        f"no committed offset for {tp} and auto_offset_reset='none'"
                    ),
                )
            else:
                st.reset = subs.default_reset
        subs.changed()
