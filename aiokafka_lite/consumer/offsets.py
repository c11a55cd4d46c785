"""Offset commits and committed-offset lookups of a consumer group (OffsetCommit /
OffsetFetch), the automatic commit of positions, and the initial position of newly assigned
partitions.

:class:`GroupOffsets` is a component both group drivers USE (the classic
:class:`~aiokafka_lite.consumer.group.ClassicCoordinator` and the KIP-848
:class:`~aiokafka_lite.consumer.group848.ConsumerGroupMember`): it reads the member's identity
and decides nothing about membership itself, it asks its driver through the small
:class:`Membership` protocol (``membership_lost``: what a membership error means).

Both run through the executor's :func:`~aiokafka_lite.ops._exec.coordinator_call` (the client's
coordinator cache, one request_timeout_ms budget on the loop clock), with a hook for the errors
that drive membership: REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID mark the
member for a rejoin and raise CommitFailedError, as aiokafka (REBALANCE_IN_PROGRESS as its
subclass RebalanceInProgressError: the partitions have not moved, Java's rule).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from aiokafka_lite import errors as Errors
from aiokafka_lite._timeouts import loop_time
from aiokafka_lite.errors import RetryAction, retry_action
from aiokafka_lite.hooks import emit
from aiokafka_lite.ops import ItemError
from aiokafka_lite.ops._exec import coordinator_call
from aiokafka_lite.ops.offsets import (
    offset_commit_max_version,
    offset_commit_request,
    offset_fetch_max_version,
    offset_fetch_request,
    offsets_topic_names,
    parse_offset_commit,
    parse_offset_fetch,
)
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

from .subscription import SubscriptionState

__all__ = ["GroupOffsets", "Membership"]

log = logging.getLogger(__name__)

#: the partition-level codes a commit retries at the same coordinator (any other code that is
#: not the coordinator's or the membership's fails the commit at once, as before)
_COMMIT_RETRY_CODES = frozenset(
    {Errors.GroupLoadInProgressError.errno, Errors.UnstableOffsetCommitError.errno}
)


def _commit_timed_out(what: str) -> Callable[[BaseException | None, bool], BaseException]:
    """The error a commit/committed raises when its budget ends with retriable errors only:
    KafkaTimeoutError, also when the coordinator could not be found (Java's commitSync
    TimeoutException)."""

    def expired(last: BaseException | None, looking_up: bool) -> BaseException:
        return Errors.KafkaTimeoutError(f"{what} (last error: {last!r})")

    return expired


class Membership(Protocol):
    """What :class:`GroupOffsets` reads of its group driver."""

    @property
    def member_id(self) -> str: ...
    @property
    def generation(self) -> int: ...
    @property
    def uses_group(self) -> bool: ...
    @property
    def rebalancing(self) -> bool:
        """A rebalance is under way (a commit without partitions: RebalanceInProgressError)."""

    def membership_lost(self, code: int, sent_generation: int) -> bool | None:
        """A commit of ``sent_generation`` answered the membership error ``code``; False when
        the partitions stay the member's (the commit raises RebalanceInProgressError)."""

    def fetch_member(self) -> tuple[str | None, int]:
        """The member id and epoch an OffsetFetch carries (KIP-848; classic: None, -1)."""


class GroupOffsets:
    """Commits, committed offsets and auto commit of one group member (a component)."""

    def __init__(
        self,
        client: Any,
        subscriptions: SubscriptionState,
        member: Membership,
        *,
        group_id: str | None,
        group_instance_id: str | None,
        retry_backoff_ms: int,
        enable_auto_commit: bool,
        auto_commit_interval_ms: int,
        isolation_level: str,
        on_commit: tuple[Callable[..., Any], ...] = (),
    ) -> None:
        self._client = client
        self._subs = subscriptions
        self._member = member
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self._backoff = retry_backoff_ms / 1000
        #: a commit's or a fetch's budget with its retries: timeouts.retry_ms
        self._timeouts = client.timeouts
        self._require_stable = isolation_level == "read_committed"
        #: enable_auto_commit with a group
        self.auto_commit = enable_auto_commit and group_id is not None
        self.auto_commit_interval = auto_commit_interval_ms / 1000
        self.next_auto_commit = loop_time() + self.auto_commit_interval
        #: the offset last committed (or fetched) per partition: auto commit skips those
        self.last_committed: dict[TopicPartition, int] = {}
        #: set while commit_through() commits for a stopped consumer, from outside the group
        self.outside_group = False
        self._h_commit = on_commit

    #: the settings a group driver's constructor takes under these names (both drivers)
    SETTINGS = (
        "group_id",
        "group_instance_id",
        "retry_backoff_ms",
        "enable_auto_commit",
        "auto_commit_interval_ms",
        "isolation_level",
    )

    @classmethod
    def of(
        cls,
        client: Any,
        subscriptions: SubscriptionState,
        member: Membership,
        arguments: Mapping[str, Any],
    ) -> GroupOffsets:
        """The offsets component of a group driver (``member``): its settings found by name
        among the driver's constructor ``arguments`` (its ``locals()``; :attr:`SETTINGS`),
        the commit hooks from ``arguments["hooks"]`` (a HookSet or None)."""
        hooks = arguments.get("hooks")
        return cls(
            client,
            subscriptions,
            member,
            **{name: arguments[name] for name in cls.SETTINGS},
            on_commit=hooks.on_commit if hooks is not None else (),
        )

    def keep_only(self, partitions: Iterable[TopicPartition]) -> None:
        """Forget the committed offsets of partitions no longer owned."""
        keep = set(partitions)
        self.last_committed = {tp: o for tp, o in self.last_committed.items() if tp in keep}

    def auto_commit_due(self) -> bool:
        """True (and the next one scheduled) when the automatic commit is due now."""
        now = loop_time()
        if not self.auto_commit or now < self.next_auto_commit:
            return False
        self.next_auto_commit = now + self.auto_commit_interval
        return True

    def until_auto_commit(self, cap: float) -> float:
        """Seconds until the next automatic commit (at most ``cap``)."""
        if not self.auto_commit or not self._subs.assignment:
            return cap
        return max(0.0, min(cap, self.next_auto_commit - loop_time()))

    async def commit_through(
        self, client: Any, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """Commit ``offsets`` through another ``client`` from outside the group (the consumer
        stopped: generation -1, no member id, as aiokafka's commit after stop())."""
        own, self._client = self._client, client
        self.outside_group = True
        try:
            await self.commit_offsets(self._subs.assignment, offsets)
        finally:
            self.outside_group = False
            self._client = own

    def _topic_ids(self, tps: Iterable[TopicPartition]) -> dict[str, Any]:
        """name -> topic id of the topics of ``tps`` the metadata has an id for: with all of
        them, OffsetCommit / OffsetFetch go at v10, by topic id."""
        cluster = self._client.cluster
        ids = {tp.topic: cluster.topic_id(tp.topic) for tp in tps}
        return {t: i for t, i in ids.items() if i is not None and i.int}

    def _check_group(self) -> None:
        if self.group_id is None:
            raise Errors.IllegalOperation("commit/committed need a group_id")

    async def commit_positions(self) -> None:
        """Commit every position not committed yet (auto commit)."""
        offsets = {
            tp: OffsetAndMetadata(st.position, "")
            for tp, st in self._subs.assignment.items()
            if st.position is not None and self.last_committed.get(tp) != st.position
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
        member = self._member
        group_managed = member.uses_group and not self.outside_group
        generation = member.generation
        if group_managed and generation < 0:
            raise Errors.CommitFailedError(
                "Commit cannot be completed: the consumer is not part of an active group "
                "generation (it left, was removed or max_poll_interval_ms was exceeded)"
            )
        if group_managed and member.rebalancing and not self._subs.assignment:
            # Java's rule: no stable generation while a rebalance is going on is not a lost
            # membership (RebalanceInProgressException): poll, then commit again
            raise Errors.RebalanceInProgressError(
                "Commit cannot be completed: the group is rebalancing; poll to finish the "
                "rebalance, then commit again"
            )
        request = offset_commit_request(
            self.group_id,  # type: ignore[arg-type]  # checked by _check_group
            offsets,
            generation=generation if group_managed else -1,
            member_id=member.member_id if group_managed else "",
            group_instance_id=self.group_instance_id if group_managed else None,
            topic_ids=self._topic_ids(offsets),
        )
        names = offsets_topic_names(request)
        failed: list[TopicPartition] = []

        def error_of(resp: Any) -> int:
            # partitions committed are recorded; the first code that fails the commit wins,
            # else one worth a retry (a coordinator's error first: it is looked up again)
            retry = 0
            for tp, code in parse_offset_commit(resp, names).items():
                if code == 0:
                    om = offsets[tp]
                    self.last_committed[tp] = om[0] if isinstance(om, tuple) else int(om)
                    continue
                action = self._commit_action(code)
                if action.retriable:
                    if not retry or action is RetryAction.FIND_COORDINATOR:
                        retry = code
                    continue
                failed[:] = [tp]
                return code
            return retry

        def failure(code: int) -> BaseException:
            if retry_action(code) is RetryAction.REJOIN:
                if member.membership_lost(code, generation) is False:
                    # REBALANCE_IN_PROGRESS, or a generation that moved on while this member
                    # rejoins: the partitions stay (Java: the retriable
                    # RebalanceInProgressException); a CommitFailedError subclass
                    return Errors.RebalanceInProgressError(
                        "Commit cannot be completed: the group is rebalancing; poll to finish "
                        "the rebalance, then commit again"
                    )
                return Errors.CommitFailedError(
                    f"Commit cannot be completed: the group rebalanced "
                    f"({Errors.for_code(code).__name__}); the partitions may have moved to "
                    f"another member. Poll more often or raise max_poll_interval_ms."
                )
            tp = failed[0]
            return Errors.for_code(code)(f"commit failed for {tp.topic}[{tp.partition}]")

        await coordinator_call(
            self._client,
            self.group_id,
            0,
            request,
            error_of,
            timeout_ms=self._timeouts.retry_ms,
            backoff_ms=self._backoff * 1000,
            what="OffsetCommit",
            on_error=self._commit_action,
            failure=failure,
            on_expired=_commit_timed_out("offset commit timed out"),
            max_version=offset_commit_max_version(request),
        )

    @staticmethod
    def _commit_action(code: int) -> RetryAction:
        """The commit's hook on the classifier: the coordinator's errors are retried after a
        fresh look-up, loading/unstable at the same node; membership errors and the rest fail."""
        action = retry_action(code, coordinator=True)
        if action is RetryAction.FIND_COORDINATOR or action is RetryAction.REJOIN:
            return action
        return RetryAction.RETRY if code in _COMMIT_RETRY_CODES else RetryAction.FATAL

    async def commit_offsets(
        self, assignment: Any, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """aiokafka's name and signature for :meth:`commit` (``assignment`` is unused): every
        commit of both group drivers (and auto commit) goes through it, so tracers patching
        ``aiokafka.consumer.group_coordinator.GroupCoordinator.commit_offsets`` (ddtrace: this
        class under install_as_aiokafka(); it reads ``group_id`` and ``_client``) see them."""
        await self.commit(offsets)

    async def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """OffsetFetch: the committed offset of each partition (None when there is none)."""
        self._check_group()
        tps = list(partitions)
        group_id: str = self.group_id  # type: ignore[assignment]  # checked by _check_group
        member_id, member_epoch = self._member.fetch_member()
        request = offset_fetch_request(
            group_id,
            tps,
            self._require_stable,
            member_id=member_id,
            member_epoch=member_epoch,
            topic_ids=self._topic_ids(tps),
        )
        names = offsets_topic_names(request)
        answer: list[Any] = []

        def error_of(resp: Any) -> int:
            parsed = parse_offset_fetch(resp, group_id, names)[group_id]
            answer[:] = [parsed]
            return parsed.code if isinstance(parsed, ItemError) else 0

        def failure(code: int) -> BaseException:
            err = answer[0] if answer and isinstance(answer[0], ItemError) else ItemError(code)
            return err.exception(f"OffsetFetch failed for group {group_id!r}")

        resp = await coordinator_call(
            self._client,
            group_id,
            0,
            request,
            error_of,
            timeout_ms=self._timeouts.retry_ms,
            backoff_ms=self._backoff * 1000,
            what="OffsetFetch",
            failure=failure,
            on_expired=_commit_timed_out("fetching committed offsets timed out"),
            max_version=offset_fetch_max_version(request),
        )
        parsed = parse_offset_fetch(resp, group_id, names)[group_id]
        assert not isinstance(parsed, ItemError)  # error_of returned 0
        out: dict[TopicPartition, OffsetAndMetadata | None] = dict.fromkeys(tps)
        for tp, om in parsed.items():
            if isinstance(om, ItemError):
                if om.code != Errors.UnknownTopicOrPartitionError.errno:
                    raise om.exception(f"OffsetFetch failed for {tp}")
                continue
            if om.offset >= 0:
                out[tp] = om
        return out

    # -- positions ---------------------------------------------------------------------
    async def init_positions(self, committed_of: Any = None) -> None:
        """Set the position of every assigned partition without one: its committed offset
        (``committed_of(partitions)``, default :meth:`committed`), else the reset policy."""
        subs = self._subs
        missing = [tp for tp in subs.missing_positions() if subs.assignment[tp].error is None]
        if not missing:
            return
        committed: Mapping[TopicPartition, OffsetAndMetadata | None] = {}
        if self.group_id is not None:
            committed = await (committed_of or self.committed)(missing)
        for tp in missing:
            st = subs.assignment.get(tp)
            if st is None or st.position is not None or st.reset is not None:
                continue  # changed meanwhile (seek, unassign)
            om = committed.get(tp)
            if om is not None:
                st.position = om.offset
                self.last_committed[tp] = om.offset
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
