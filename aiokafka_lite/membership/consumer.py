"""The KIP-848 consumer group member's state machine (ConsumerGroupHeartbeat), sans-I/O.

ONE request, ConsumerGroupHeartbeat, carries the member's state; the broker computes the
assignment and hands every member its target, one member at a time. The machine builds each
heartbeat (the full state when joining or after any error, else only the fields that changed,
as the Java client's ``HeartbeatState``), reads each answer (epoch, interval, a new target) and
each refusal (classified by :func:`~aiokafka_lite.errors.retry_action`), and knows the member's
state. The member shell (:mod:`.shell`) sends, waits and times it; the reconciliation (naming
topic ids, pause, commit, listener calls) is the consumer's driver's
(``consumer.group848.ConsumerGroupMember``), which reports each step back
(:meth:`ConsumerMachine.reconciling`, :meth:`~ConsumerMachine.owns`,
:meth:`~ConsumerMachine.gave_up`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from aiokafka_lite import errors as Errors
from aiokafka_lite.errors import RetryAction, retry_action
from aiokafka_lite.ops.membership import consumer_group_heartbeat_request

from .machine import Action, Assign, Fatal, Leave, Machine, Rejoin, Revoke, Send

__all__ = [
    "CONSUMER_PROTOCOL_NOT_SUPPORTED",
    "CONSUMER_TRANSITIONS",
    "ConsumerMachine",
    "ConsumerState",
    "LEAVE_EPOCH",
    "STATIC_LEAVE_EPOCH",
]

#: the Java client's words when the cluster lacks KIP-848 (UnsupportedVersionException)
CONSUMER_PROTOCOL_NOT_SUPPORTED = (
    "The cluster does not support the new CONSUMER group protocol. Set "
    "group_protocol='classic' on the consumer to revert to the CLASSIC protocol until the "
    "cluster is upgraded."
)
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
_UNSENT = object()

Owned = dict[Any, frozenset[int]]  # topic id -> partitions


class ConsumerState(enum.Enum):
    """A KIP-848 member's states (as the Java client's ``MemberState``)."""

    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    RECONCILING = "RECONCILING"
    STABLE = "STABLE"
    FENCED = "FENCED"
    STALE = "STALE"
    LEAVING = "LEAVING"
    FATAL = "FATAL"


_C = ConsumerState
#: the one table of KIP-848 member state changes (:meth:`ConsumerMachine._to` refuses the rest;
#: FATAL is reachable from every state). A fatal error is raised once by the next poll, and the
#: heartbeats go on: FATAL is left by the next answer (or fence, or leave).
CONSUMER_TRANSITIONS: dict[ConsumerState, frozenset[ConsumerState]] = {
    # JOINING: partitions lost while out of the group are given up, then the member joins
    _C.UNSUBSCRIBED: frozenset({_C.JOINING}),
    _C.JOINING: frozenset({_C.JOINING, _C.RECONCILING, _C.FENCED, _C.LEAVING}),
    _C.RECONCILING: frozenset({_C.RECONCILING, _C.STABLE, _C.FENCED, _C.STALE, _C.LEAVING}),
    _C.STABLE: frozenset({_C.STABLE, _C.RECONCILING, _C.FENCED, _C.STALE, _C.LEAVING}),
    # FENCED -> JOINING once the lost partitions are given up
    _C.FENCED: frozenset({_C.FENCED, _C.JOINING, _C.LEAVING, _C.UNSUBSCRIBED}),
    _C.STALE: frozenset({_C.LEAVING}),
    # FENCED: the answer of a heartbeat that was out when the leave began
    _C.LEAVING: frozenset({_C.LEAVING, _C.UNSUBSCRIBED, _C.FENCED}),
    _C.FATAL: frozenset(
        {_C.JOINING, _C.RECONCILING, _C.FENCED, _C.STALE, _C.LEAVING, _C.UNSUBSCRIBED}
    ),
}


class ConsumerMachine(Machine[ConsumerState]):
    """One KIP-848 member: epoch, target and owned assignment (by topic id), what the last
    heartbeat carried (no I/O, no clock)."""

    TRANSITIONS: ClassVar[Mapping[Any, frozenset[Any]]] = CONSUMER_TRANSITIONS
    FATAL: ClassVar[Any] = ConsumerState.FATAL

    def __init__(
        self,
        group_id: str,
        member_id: str,
        *,
        instance_id: str | None = None,
        rack_id: str | None = None,
        server_assignor: str | None = None,
        rebalance_timeout_ms: int = -1,
        interval_s: float = 3.0,
    ) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.instance_id = instance_id
        self.rack_id = rack_id
        self.server_assignor = server_assignor
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.state = ConsumerState.UNSUBSCRIBED
        #: the member epoch: -1 = not in the group, 0 = joining
        self.epoch = -1
        #: the heartbeat interval the broker asked for (seconds)
        self.interval_s = interval_s
        #: the latest target assignment, and the target the assignment was last made from
        self.target: Owned | None = None
        self.reconciled: Owned | None = None
        #: what this member owns, by topic id (acknowledged by the next heartbeat)
        self.owned: Owned = {}
        #: the fields of the last heartbeat (None: send everything)
        self.sent: dict[str, Any] | None = None
        #: fenced or stale: the partitions are to be given up before joining again
        self.lost_pending = False
        #: no poll for max_poll_interval_ms: out of the group until the next poll
        self.stale = False
        #: the subscription: topic names (a client-side pattern's matches), or a broker-side
        #: regex; ``subscribed`` False: the member is not in the group's business
        self.topics: frozenset[str] = frozenset()
        self.regex: str | None = None
        self.subscribed = False

    # -- what the shell reads ---------------------------------------------------------------

    @property
    def in_group(self) -> bool:
        """In the group (epoch > 0)."""
        return self.epoch > 0

    @property
    def heartbeating(self) -> bool:
        """Subscribed, and no lost partitions to give up first, and polled in time."""
        return self.subscribed and not self.lost_pending and not self.stale

    @property
    def subscription_unsent(self) -> bool:
        """The subscription changed since the last heartbeat."""
        sent = self.sent
        return sent is not None and (sent["names"], sent["regex"]) != self._subscription()

    def _subscription(self) -> tuple[tuple[str, ...], str | None]:
        names = () if self.regex is not None else tuple(sorted(self.topics))
        return names, self.regex

    def resync(self) -> None:
        """The next heartbeat carries the full state (as after any error)."""
        self.sent = None

    # -- events -----------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | None, regex: str | None = None) -> list[Action]:
        """The subscription: ``topics`` (names), or a broker-side ``regex``; ``topics`` None
        and no regex: unsubscribed (the shell then leaves)."""
        self.topics = frozenset(topics or ())
        self.regex = regex
        self.subscribed = topics is not None or regex is not None
        return []

    def join(self) -> bool:
        """Heartbeating (re)starts: out of the group, the member joins with epoch 0, owning
        nothing (the broker refuses partitions then), the full state. True when it joins."""
        if self.epoch >= 0:
            return False
        self.epoch = 0
        self.sent = None
        self.owned = {}
        self._to(ConsumerState.JOINING)
        return True

    def polled(self) -> bool:
        """The application polled; True when a stale member may join again now."""
        if self.stale and not self.lost_pending:
            self.stale = False
            return True
        return False

    def poll_timed_out(self) -> list[Action]:
        """No poll for ``max_poll_interval_ms``: the partitions are lost, the member leaves
        (the host sends :meth:`leave`) and joins again on the next poll."""
        self.stale = True
        self._to(ConsumerState.STALE)
        self.target = None  # nothing is reconciled until the member joins again
        self.lost_pending = True
        return [Revoke(None, lost=True)]

    # -- the heartbeat ------------------------------------------------------------------------

    def heartbeat(self, names: Iterable[str] | None = None, regex: str | None = None) -> Send:
        """The next heartbeat: everything when joining / after an error, else what changed.
        ``names``: the subscribed topics (a str pattern matched by the client); ``regex``: a
        broker-side pattern (then no names are sent); both None: the subscription's."""
        if names is None and regex is None:
            names, regex = self.topics, self.regex
        full = self.sent is None or self.epoch == 0
        sent: dict[str, Any] = {} if full else dict(self.sent or {})
        now: dict[str, Any] = {
            "names": () if regex is not None else tuple(sorted(names or ())),
            "regex": regex,
            "owned": self.owned,
            "assignor": self.server_assignor,
        }
        changed = {k: v for k, v in now.items() if full or sent.get(k, _UNSENT) != v}
        if full and regex is None:
            changed.pop("regex")  # never subscribed by regex: nothing to clear
        self.sent = now
        request = consumer_group_heartbeat_request(
            self.group_id,
            member_id=self.member_id,
            member_epoch=self.epoch,
            instance_id=self.instance_id,
            rack_id=self.rack_id if full else None,
            rebalance_timeout_ms=self.rebalance_timeout_ms if full else -1,
            subscribed_topic_names=changed.get("names"),
            # "" clears a regex sent before (as Java)
            subscribed_topic_regex=(changed["regex"] or "") if "regex" in changed else None,
            server_assignor=changed.get("assignor"),
            owned=changed.get("owned"),
        )
        return Send(request, "ConsumerGroupHeartbeat")

    def answered(self, resp: Any) -> list[Action]:
        """A heartbeat answered without error: interval, epoch, maybe a new target (the host
        reconciles it: :class:`Assign`)."""
        if resp.heartbeat_interval_ms > 0:
            self.interval_s = resp.heartbeat_interval_ms / 1000
        self.epoch = resp.member_epoch
        if self.state is ConsumerState.JOINING:
            self._to(ConsumerState.RECONCILING)
        if resp.assignment is None:
            return []
        target = {tp.topic_id: frozenset(tp.partitions) for tp in resp.assignment.topic_partitions}
        if target == self.target:
            return []
        self.target = target
        return [Assign(target, from_broker=True)]

    def refused(self, code: int, message: str, action: RetryAction) -> list[Action]:
        """A heartbeat answered with error ``code`` (``action``: its ``retry_action`` as sent
        to a coordinator): :meth:`failed` with the code's error."""
        exc = Errors.for_code(code)(f"ConsumerGroupHeartbeat of group {self.group_id!r}: {message}")
        return self.failed(exc, action)

    def failed(self, exc: Errors.KafkaError, action: RetryAction | None = None) -> list[Action]:
        """The heartbeat failed with ``exc`` (``action``: its ``retry_action`` as sent to a
        coordinator). REJOIN (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID): fenced; retriable:
        nothing (the shell backs off; the next heartbeat carries the full state); anything else
        is fatal (a broker without ConsumerGroupHeartbeat in the Java client's words)."""
        self.sent = None
        if isinstance(exc, Errors.UnsupportedVersionError):
            return self.fail(Errors.UnsupportedVersionError(CONSUMER_PROTOCOL_NOT_SUPPORTED))
        if action is None:
            action = retry_action(exc, coordinator=True)
        if action is RetryAction.REJOIN:
            return self.fence(f"{type(exc).__name__} {exc}")
        if action.retriable:
            return []
        return self.fail(exc)

    def fence(self, why: str) -> list[Action]:
        """Fenced: epoch 0, no target; the partitions are lost (given up before joining)."""
        self._to(ConsumerState.FENCED)
        self.epoch = 0
        self.target = None
        self.sent = None
        self.lost_pending = True
        self.why = why
        return [Revoke(None, lost=True), Rejoin()]

    def fail(self, exc: BaseException) -> list[Action]:
        """A fatal error, for the application's next poll."""
        self._to(ConsumerState.FATAL)
        return [Fatal(exc)]

    # -- reconciliation steps (the host's) ----------------------------------------------------

    def reconciling(self) -> None:
        """The host reconciles towards :attr:`target`."""
        self._to(ConsumerState.RECONCILING)

    def owns(self, owned: Owned) -> None:
        """The host's owned partitions changed: the next heartbeat acknowledges them; equal to
        the target, the member is STABLE."""
        self.owned = owned
        target = self.target or {}
        if self.state in (ConsumerState.RECONCILING, ConsumerState.STABLE) and owned == {
            t: p for t, p in target.items() if p
        }:
            self._to(ConsumerState.STABLE)

    def gave_up(self) -> None:
        """The lost partitions were given up: the member joins again (a stale one on its next
        poll)."""
        self.owned = {}
        self.lost_pending = False
        if not self.stale:
            self._to(ConsumerState.JOINING)

    # -- leaving --------------------------------------------------------------------------------

    def leave(self, *, poll_timeout: bool = False, operation: str = "default") -> list[Action]:
        """The leave heartbeat: epoch -1 (a static member: -2, the broker keeps its assignment
        for its return); nothing to send when not in the group. ``poll_timeout``: for lack of
        polls (the partitions are lost first: :meth:`poll_timed_out`). ``operation``
        (KIP-1092): "leave_group": -1 for a static member too; "remain_in_group" is "default"
        here, as for Java 4.4's consumer (a dynamic member closing so is gone at once,
        measured)."""
        lost = self.poll_timed_out() if poll_timeout else []
        if self.epoch < 0:
            return lost
        static = self.instance_id is not None and operation != "leave_group"
        epoch = STATIC_LEAVE_EPOCH if static else LEAVE_EPOCH
        self._to(ConsumerState.LEAVING)
        request = consumer_group_heartbeat_request(
            self.group_id,
            member_id=self.member_id,
            member_epoch=epoch,
            instance_id=self.instance_id,
        )
        return [*lost, Leave(request, "ConsumerGroupHeartbeat (leave)")]

    def left(self) -> list[Action]:
        """The leave was sent (answered or not)."""
        self.epoch = -1
        self.target = None
        self.reconciled = None
        self.owned = {}
        self.sent = None
        self._to(ConsumerState.UNSUBSCRIBED)
        return []

    why = ""
