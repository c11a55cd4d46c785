"""The classic group protocol's member state machines (JoinGroup / SyncGroup / Heartbeat /
LeaveGroup), sans-I/O: one for the eager rebalance protocol, one for the cooperative (KIP-429).

The machine keeps the member's id, generation, chosen protocol and leader, and its phase; it
builds each request and reads each answer (error codes classified by
:func:`~aiokafka_lite.errors.retry_action`), and returns the actions the consumer's classic
driver (``consumer.group.ClassicCoordinator``) carries out: :class:`~.machine.Retry` (back
off, join again), :class:`~.machine.Rejoin` (join again at once), :class:`~.machine.Revoke`
(``lost``: the partitions went with the generation), :class:`~.machine.Assign` (the SyncGroup
answer's assignment, decoded by the driver), :class:`~.machine.Fatal`. The JoinGroup and
SyncGroup sends, the leader's assignor run and the listener calls are the driver's; between
joins the machine is a heartbeat machine of the member shell (:mod:`.shell`, its
``HeartbeatMachine`` protocol: ``heartbeating`` only in an applied generation, ``heartbeat``,
``answered``/``failed``, ``leave``/``left``, ``polled``), which sends, times and retries
the Heartbeats and the LeaveGroup.

``rejoin`` is not a phase: a rebalance can become due in any phase (a heartbeat or a commit
answered REBALANCE_IN_PROGRESS, a new subscription, a partition count the leader watches); it
is cleared when a SyncGroup completes the join.

The two protocols differ where Java's differ: an eager member gives up everything before it
joins, so its machine has no LOST phase; a cooperative member keeps its partitions through the
join, and loses them (LOST: ``on_partitions_lost``, then a join from scratch) when its
generation is gone, except for answers to requests of an older generation (Java's
``generationUnchanged()``) and ILLEGAL_GENERATION while its JoinGroup is out (the join's answer
brings the new generation).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from aiokafka_lite import errors as Errors
from aiokafka_lite.errors import RetryAction, retry_action
from aiokafka_lite.ops.membership import (
    heartbeat_request,
    join_group_request,
    leave_group_request,
    sync_group_request,
)

from .machine import Action, Assign, Fatal, Leave, Machine, Rejoin, Retry, Revoke, Send

__all__ = [
    "COOPERATIVE_TRANSITIONS",
    "EAGER_TRANSITIONS",
    "GENERATION_LOST",
    "ClassicMachine",
    "ClassicState",
    "CooperativeMachine",
    "EagerMachine",
]

#: answers that end the member's generation (a cooperative member's partitions are lost)
GENERATION_LOST = frozenset(
    {Errors.IllegalGenerationError.errno, Errors.UnknownMemberIdError.errno}
)


class ClassicState(enum.Enum):
    """A classic member's phases."""

    UNJOINED = "UNJOINED"  # no completed generation: the next step joins
    JOINING = "JOINING"  # a JoinGroup is out
    SYNCING = "SYNCING"  # joined; the SyncGroup is out
    STABLE = "STABLE"  # the generation's assignment is applied; heartbeating
    LOST = "LOST"  # cooperative: the generation went, the partitions to be given up
    POLL_TIMEOUT = "POLL_TIMEOUT"  # left for lack of polls: the next poll joins again
    FATAL = "FATAL"  # a JoinGroup/SyncGroup refused for good (raised once; joins again)


_C = ClassicState
#: the eager protocol's phase changes (FATAL is reachable from every phase)
EAGER_TRANSITIONS: dict[ClassicState, frozenset[ClassicState]] = {
    _C.UNJOINED: frozenset({_C.UNJOINED, _C.JOINING}),
    # JOINING: KIP-394's member-id-required round trip; UNJOINED: refused, join again later
    _C.JOINING: frozenset({_C.JOINING, _C.SYNCING, _C.UNJOINED}),
    _C.SYNCING: frozenset({_C.STABLE, _C.UNJOINED}),
    # JOINING: a rebalance (everything revoked first); UNJOINED: left or member id lost
    _C.STABLE: frozenset({_C.STABLE, _C.JOINING, _C.UNJOINED, _C.POLL_TIMEOUT}),
    _C.POLL_TIMEOUT: frozenset({_C.UNJOINED, _C.POLL_TIMEOUT}),
    _C.LOST: frozenset(),  # unreachable: an eager member has nothing left to lose
    _C.FATAL: frozenset({_C.JOINING, _C.UNJOINED}),
}
#: the cooperative protocol's: the eager table, and LOST wherever the generation can go
COOPERATIVE_TRANSITIONS: dict[ClassicState, frozenset[ClassicState]] = {
    _C.UNJOINED: frozenset({_C.UNJOINED, _C.JOINING, _C.LOST}),
    _C.JOINING: frozenset({_C.JOINING, _C.SYNCING, _C.UNJOINED, _C.LOST}),
    _C.SYNCING: frozenset({_C.STABLE, _C.UNJOINED, _C.LOST}),
    # JOINING: a rebalance keeping the partitions (only what moves is revoked, after it)
    _C.STABLE: frozenset({_C.STABLE, _C.JOINING, _C.UNJOINED, _C.LOST, _C.POLL_TIMEOUT}),
    _C.POLL_TIMEOUT: frozenset({_C.UNJOINED, _C.POLL_TIMEOUT}),
    # UNJOINED: the lost partitions were given up; a join from scratch follows
    _C.LOST: frozenset({_C.LOST, _C.UNJOINED}),
    _C.FATAL: frozenset({_C.JOINING, _C.UNJOINED, _C.LOST}),
}


class ClassicMachine(Machine[ClassicState]):
    """One classic group member (no I/O, no clock); :class:`EagerMachine` and
    :class:`CooperativeMachine` name their table and what a lost generation means."""

    FATAL: ClassVar[Any] = ClassicState.FATAL
    #: KIP-429: the member keeps its partitions through a rebalance
    COOPERATIVE: ClassVar[bool] = False

    def __init__(
        self, group_id: str, *, instance_id: str | None = None, interval_s: float = 3.0
    ) -> None:
        self.group_id = group_id
        self.instance_id = instance_id
        self.state = ClassicState.UNJOINED
        self.member_id = ""
        self.generation = -1
        #: the assignor the group chose, and its leader (the last JoinGroup answer's)
        self.protocol: str | None = None
        self.leader_id: str | None = None
        #: a rebalance is due (cleared when a SyncGroup completes a join)
        self.rejoin = True
        #: heartbeat_interval_ms, in seconds (the member shell keeps the time)
        self.interval_s = interval_s
        #: the driver's subscription through the group (``subscribed``: the shell's loop runs)
        self.topics: frozenset[str] = frozenset()
        self.subscribed = False
        #: the revoke listener runs before a join: the heartbeats go on meanwhile, so a slow
        #: callback keeps the membership
        self.revoking = False
        self._sent_generation = -1  # the generation of the last Heartbeat built

    # -- what the driver asks ---------------------------------------------------------------

    @property
    def leader(self) -> bool:
        """This member was elected leader by the last join (it runs the assignor)."""
        return self.leader_id is not None and self.leader_id == self.member_id

    # -- what the member shell reads (its HeartbeatMachine protocol) ------------------------

    @property
    def epoch(self) -> int:
        """The generation (-1: not in one)."""
        return self.generation

    @property
    def in_group(self) -> bool:
        """A generation is applied (its number may be 0: Tansu's first)."""
        return self.state is ClassicState.STABLE and self.generation >= 0

    @property
    def heartbeating(self) -> bool:
        """Heartbeats go on in a generation applied (STABLE: never while a JoinGroup or
        SyncGroup is out), not while a rejoin is due (but while the revoke listener runs
        before it, so a slow callback keeps the membership)."""
        return (
            self.subscribed
            and self.state is ClassicState.STABLE
            and self.generation >= 0
            and (not self.rejoin or self.revoking)
        )

    @property
    def subscription_unsent(self) -> bool:
        """Never: a classic Heartbeat carries no subscription (a change rejoins)."""
        return False

    def subscribe(self, topics: Iterable[str] | None) -> list[Action]:
        """The driver's subscription through the group (None: none; the shell then stops
        heartbeating and leaves). A change of topics is the driver's rejoin."""
        self.topics = frozenset(topics or ())
        self.subscribed = topics is not None
        return []

    def join(self) -> bool:
        """Nothing: a classic member joins through the driver's JoinGroup/SyncGroup."""
        return False

    def resync(self) -> None:
        """Nothing: a Heartbeat carries no state to send again."""

    def need_rejoin(self) -> None:
        """A rebalance is due (a subscription or partition count changed, partitions were
        revoked by a cooperative assignment)."""
        self.rejoin = True

    # -- JoinGroup --------------------------------------------------------------------------

    def join_request(
        self,
        protocols: Iterable[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
    ) -> Send:
        """The JoinGroup (``protocols``: each assignor's name and subscription)."""
        self._to(ClassicState.JOINING)
        request = join_group_request(
            self.group_id,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            protocols=list(protocols),
        )
        return Send(request, "JoinGroup")

    def join_answered(self, resp: Any, owns_partitions: bool) -> list[Action]:
        """The JoinGroup answer: [] joined (SYNCING: the SyncGroup is next); Rejoin: send the
        JoinGroup again now (KIP-394's member id, or a new member); Retry: back off and join
        again; Revoke(lost): give the partitions up first; Fatal."""
        code = resp.error_code
        if self.state is ClassicState.LOST:  # the generation went while the join was out
            return [Revoke(None, lost=True)]
        if code == 0:
            self.generation = resp.generation_id
            self.member_id = resp.member_id
            self.protocol = resp.protocol_name
            self.leader_id = resp.leader
            self._to(ClassicState.SYNCING)
            return []
        if code == Errors.MemberIdRequired.errno:
            self.member_id = resp.member_id
            return [Rejoin()]
        if code == Errors.UnknownMemberIdError.errno:
            self.member_id = ""
            if self.COOPERATIVE and owns_partitions:
                self.membership_lost(code)  # give the partitions up, then join anew
                return [Revoke(None, lost=True)]
            return [Rejoin()]
        action = retry_action(code, coordinator=True)
        if action.retriable or code == Errors.RebalanceInProgressError.errno:
            self._to(ClassicState.UNJOINED)
            return [Retry()]
        self._to(ClassicState.FATAL)
        return [Fatal(Errors.for_code(code)(f"JoinGroup failed for group {self.group_id!r}"))]

    def join_failed(self) -> None:
        """The JoinGroup (or SyncGroup) was not answered: join again (after the back-off)."""
        if self.state in (ClassicState.JOINING, ClassicState.SYNCING):
            self._to(ClassicState.UNJOINED)

    # -- SyncGroup --------------------------------------------------------------------------

    def sync_request(self, assignments: Mapping[str, bytes]) -> Send:
        """The SyncGroup (the leader's ``assignments``, member id -> bytes; {} for others)."""
        request = sync_group_request(
            self.group_id,
            generation=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_name=self.protocol,
            assignments=assignments,
        )
        return Send(request, "SyncGroup")

    def sync_answered(self, code: int) -> list[Action]:
        """The SyncGroup answer: Assign (STABLE: the driver applies the answer's assignment);
        Rejoin: join again now; Revoke(lost); Fatal."""
        if self.state is ClassicState.LOST:
            return [Revoke(None, lost=True)]
        if code == 0:
            self._to(ClassicState.STABLE)
            self.rejoin = False
            return [Assign()]
        if code == Errors.UnknownMemberIdError.errno:
            self.member_id = ""
        if self.COOPERATIVE and code in GENERATION_LOST:
            self.membership_lost(code)
            return [Revoke(None, lost=True)]
        action = retry_action(code, coordinator=True)
        if action is RetryAction.REJOIN or action is RetryAction.FIND_COORDINATOR:
            self.rejoin = True
            self._to(ClassicState.UNJOINED)
            return [Rejoin()]
        self._to(ClassicState.FATAL)
        return [Fatal(Errors.for_code(code)(f"SyncGroup failed for group {self.group_id!r}"))]

    # -- Heartbeat --------------------------------------------------------------------------

    def heartbeat(self) -> Send:
        """The Heartbeat of the current generation."""
        self._sent_generation = self.generation
        request = heartbeat_request(
            self.group_id,
            generation=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
        )
        return Send(request, "Heartbeat")

    def heartbeat_answered(self, code: int, sent_generation: int) -> list[Action]:
        """A Heartbeat of ``sent_generation`` answered ``code``: FENCED_INSTANCE_ID is fatal
        (another member took this static id); the membership errors (REBALANCE_IN_PROGRESS,
        ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID) mark a rejoin: Rejoin when it was not due yet
        (the driver joins), nothing when the driver already knew; Revoke(lost): a cooperative
        member's partitions went with its generation. The rest (a moved coordinator: the
        shell looks it up again) changes nothing."""
        if code == 0:
            return []
        if code == Errors.FencedInstanceIdError.errno:
            self.rejoin = True
            return [
                Fatal(
                    Errors.FencedInstanceIdError(f"group_instance_id {self.instance_id!r} fenced")
                )
            ]
        if retry_action(code) is RetryAction.REJOIN:
            due = self.rejoin
            if self.membership_lost(code, sent_generation) and self.COOPERATIVE:
                return [Revoke(None, lost=True)]
            return [Rejoin()] if self.rejoin and not due else []
        return []

    def answered(self, resp: Any) -> list[Action]:
        """A Heartbeat answered without error (the shell's event)."""
        return self.heartbeat_answered(int(resp.error_code), self._sent_generation)

    def failed(self, exc: Errors.KafkaError, action: RetryAction) -> list[Action]:
        """A Heartbeat failed with ``exc`` (``action``: its ``retry_action`` as sent to a
        coordinator): a refusal is :meth:`heartbeat_answered` with its code; a lost
        connection or an unknown coordinator changes nothing (the shell backs off and looks
        the coordinator up again)."""
        if not isinstance(exc, Errors.BrokerResponseError):
            return []
        return self.heartbeat_answered(exc.errno, self._sent_generation)

    # -- membership errors (heartbeats, commits, joins) ---------------------------------------

    def membership_lost(self, code: int, sent_generation: int | None = None) -> bool | None:
        """REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID (answered to a
        request of ``sent_generation``): a rejoin is due (the latter with a new member id).
        True when the generation is gone with it; False when the partitions stay the
        member's (a refused commit then raises RebalanceInProgressError, as Java)."""
        if code == Errors.UnknownMemberIdError.errno:
            self.member_id = ""
            self.generation = -1
            if not self.COOPERATIVE and self.state is ClassicState.STABLE:
                self._to(ClassicState.UNJOINED)
        self.rejoin = True
        return code in GENERATION_LOST

    # -- leaving --------------------------------------------------------------------------------

    def poll_timed_out(self) -> list[Action]:
        """No poll for ``max_poll_interval_ms``: revoke everything (still a member: commits in
        the callback work), then leave (:meth:`leave`); the next poll joins again."""
        self._to(ClassicState.POLL_TIMEOUT)
        return [Revoke(None)]

    def polled(self) -> bool:
        """The application polled; True when that joins again (it had left for lack of polls)."""
        if self.state is not ClassicState.POLL_TIMEOUT:
            return False
        self.rejoin = True
        self._to(ClassicState.UNJOINED)
        return True

    def leave(
        self, reason: str | None = None, operation: str = "default", *, poll_timeout: bool = False
    ) -> list[Action]:
        """LeaveGroup, then :meth:`left`. ``operation`` (KIP-1092's, as Java 4.4's
        CloseOptions): "default": not for a static member (the broker keeps its partitions for
        its return); "leave_group": a static member too (with its instance id);
        "remain_in_group": none. ``poll_timeout``: for lack of polls (:meth:`poll_timed_out`
        first: the host revokes everything while still a member). ``reason``: the
        LeaveGroup's (by default what made the member leave)."""
        lost = self.poll_timed_out() if poll_timeout else []
        if reason is None:
            reason = (
                "max_poll_interval_ms exceeded"
                if poll_timeout
                else "consumer stopped"
                if self.subscribed
                else "unsubscribed"
            )
        return [*lost, *self._leave(reason, operation)]

    def _leave(self, reason: str, operation: str) -> list[Action]:
        if self.generation < 0 and not self.member_id:
            return []
        stays = operation == "remain_in_group" or (
            self.instance_id is not None and operation != "leave_group"
        )
        if stays or not self.member_id:
            self.generation = -1
            return []
        request = leave_group_request(self.group_id, self.member_id, reason, self.instance_id)
        return [Leave(request, "LeaveGroup")]

    def left(self) -> list[Action]:
        """The LeaveGroup was sent (answered or not)."""
        self.generation = -1
        self.member_id = ""
        if self.state not in (ClassicState.POLL_TIMEOUT, ClassicState.UNJOINED):
            self._to(ClassicState.UNJOINED)
        return []


class EagerMachine(ClassicMachine):
    """The eager protocol: everything is revoked before each join."""

    TRANSITIONS: ClassVar[Mapping[Any, frozenset[Any]]] = EAGER_TRANSITIONS


class CooperativeMachine(ClassicMachine):
    """KIP-429's cooperative protocol: the partitions stay through a join; only those that
    move are revoked after it (then a follow-up join); a lost generation loses them."""

    TRANSITIONS: ClassVar[Mapping[Any, frozenset[Any]]] = COOPERATIVE_TRANSITIONS
    COOPERATIVE: ClassVar[bool] = True

    def membership_lost(self, code: int, sent_generation: int | None = None) -> bool | None:
        """As :meth:`ClassicMachine.membership_lost`; a lost generation loses the partitions
        (LOST), except for an answer to an older generation's request (ignored) and
        ILLEGAL_GENERATION while the JoinGroup is out (its answer brings the new one)."""
        if sent_generation is not None and sent_generation != self.generation:
            return False
        if self.state is ClassicState.JOINING and code == Errors.IllegalGenerationError.errno:
            self.rejoin = True
            return False
        if code == Errors.UnknownMemberIdError.errno:
            self.member_id = ""
        if code in GENERATION_LOST:
            self.generation = -1
            if self.state is not ClassicState.POLL_TIMEOUT:
                self._to(ClassicState.LOST)
        self.rejoin = True
        return code in GENERATION_LOST

    def gave_up(self) -> None:
        """The lost partitions were given up (``on_partitions_lost``): join from scratch."""
        if self.state is ClassicState.LOST:
            self._to(ClassicState.UNJOINED)
