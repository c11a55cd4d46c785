"""The share group member's state machine (KIP-932 ShareGroupHeartbeat), sans-I/O.

The member makes its own id (kept for the consumer's lifetime), joins with epoch 0 and its
subscription, then heartbeats at the interval the coordinator asks for; the subscription is
sent again only when it changed. The coordinator assigns partitions by topic id (several
members may share one). UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH (``RetryAction.REJOIN``): the
assignment is dropped and the member joins again with epoch 0. Leaving is a heartbeat with
epoch -1: at ``stop()``, when the subscription becomes empty, and when the application did not
poll for ``max_poll_interval_ms`` (as Java's share consumer; the next poll joins again).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from aiokafka_lite import errors as Errors
from aiokafka_lite.errors import RetryAction
from aiokafka_lite.ops import share as share_ops

from .machine import Action, Assign, Fatal, Leave, Machine, Rejoin, Send

__all__ = ["SHARE_TRANSITIONS", "ShareMachine", "ShareState"]


class ShareState(enum.Enum):
    """A share group member's states."""

    UNJOINED = "unjoined"  # epoch 0, no assignment: the next heartbeat joins
    STABLE = "stable"  # epoch > 0, heartbeating
    LEAVING = "leaving"  # the leave heartbeat (epoch -1) is out
    LEFT = "left"  # stop() or unsubscribe(): no heartbeats until a new subscription
    POLL_TIMEOUT = "poll_timeout"  # left for lack of polls: the next poll joins again
    FATAL = "fatal"  # a non-retriable error, raised by the next poll


_S = ShareState
#: the one table of share member state changes (:meth:`ShareMachine._to` refuses the rest;
#: FATAL is reachable from every state and never left)
SHARE_TRANSITIONS: dict[ShareState, frozenset[ShareState]] = {
    # UNJOINED: fenced again while joining; LEFT: leave() before the first answer
    _S.UNJOINED: frozenset({_S.STABLE, _S.UNJOINED, _S.LEAVING, _S.LEFT}),
    _S.STABLE: frozenset({_S.STABLE, _S.UNJOINED, _S.LEAVING}),
    # LEAVING: stop() while the loop's own leave (max poll interval) was cut short
    _S.LEAVING: frozenset({_S.LEFT, _S.POLL_TIMEOUT, _S.LEAVING}),
    _S.LEFT: frozenset({_S.UNJOINED, _S.LEFT}),
    _S.POLL_TIMEOUT: frozenset({_S.UNJOINED, _S.LEFT}),
    _S.FATAL: frozenset(),
}

_Assignment = dict[Any, frozenset[int]]


class ShareMachine(Machine[ShareState]):
    """One share group member: its epoch, subscription and assignment (no I/O, no clock)."""

    TRANSITIONS: ClassVar[Mapping[Any, frozenset[Any]]] = SHARE_TRANSITIONS
    FATAL: ClassVar[Any] = ShareState.FATAL

    def __init__(self, group_id: str, member_id: str, *, rack_id: str | None = None) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.rack_id = rack_id
        self.state = ShareState.UNJOINED
        self.epoch = 0
        #: the subscribed topics, and those the coordinator last heard of (None: send them)
        self.topics: frozenset[str] = frozenset()
        self.topics_sent: frozenset[str] | None = None
        #: the heartbeat interval the coordinator asked for (seconds)
        self.interval_s = 5.0
        #: the assignment by topic id, as the coordinator last sent it
        self.assignment: _Assignment = {}
        self._after_leave = ShareState.LEFT

    # -- events from the application --------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> list[Action]:
        """The subscription changed; the next heartbeat carries it. No topics: the assignment
        is dropped at once (as Java's ``unsubscribe()``; the shell then leaves)."""
        self.topics = frozenset(topics)
        return [] if self.topics else self._drop()

    @property
    def subscribed(self) -> bool:
        """Some topics are subscribed."""
        return bool(self.topics)

    def resync(self) -> None:
        """The next heartbeat carries the subscription again."""
        self.topics_sent = None

    @property
    def in_group(self) -> bool:
        """In the group (epoch > 0)."""
        return self.epoch > 0

    @property
    def heartbeating(self) -> bool:
        """True while the member heartbeats (joining or in the group)."""
        return self.state in (ShareState.UNJOINED, ShareState.STABLE)

    @property
    def subscription_unsent(self) -> bool:
        """The subscription changed since the last heartbeat that carried it (while it was
        out): the next heartbeat goes now."""
        return self.topics_sent is not None and self.topics != self.topics_sent

    def join(self) -> None:
        """Heartbeating starts (again) after a leave: epoch 0, same member id."""
        if self.state is ShareState.LEFT:
            self._rejoin()

    def polled(self) -> bool:
        """The application polled; True when that joins again (it had left for lack of polls)."""
        if self.state is ShareState.POLL_TIMEOUT:
            self._rejoin()
            return True
        return False

    # -- the heartbeat --------------------------------------------------------------------------

    def heartbeat(self) -> Send:
        """The next heartbeat: epoch 0 joins with the full state; later ones carry the
        subscription only when it changed."""
        send = self.topics if (self.epoch == 0 or self.topics != self.topics_sent) else None
        self._sending = send
        return Send(
            share_ops.share_heartbeat_request(
                self.group_id,
                self.member_id,
                self.epoch,
                send,
                self.rack_id if self.epoch == 0 else None,
            ),
            "ShareGroupHeartbeat",
        )

    def answered(self, resp: Any) -> list[Action]:
        """A heartbeat answered without error: epoch, interval and (when sent) assignment."""
        result = share_ops.parse_share_heartbeat(resp)
        if self._sending is not None:
            self.topics_sent = self._sending
        self.epoch = result.member_epoch
        self._to(ShareState.STABLE)
        if result.heartbeat_interval_ms > 0:
            self.interval_s = result.heartbeat_interval_ms / 1000
        if result.assignment is None:
            return []
        new = {tid: frozenset(ps) for tid, ps in result.assignment.items()}
        if new == self.assignment:
            return []
        self.assignment = new
        return [Assign(new, from_broker=True)]

    def failed(self, exc: Errors.KafkaError, action: RetryAction) -> list[Action]:
        """A heartbeat failed with ``exc`` (``action``: its ``retry_action``, as sent to a
        coordinator). Retriable: nothing (the shell backs off and sends again); REJOIN: epoch
        0, assignment dropped, join at once; anything else is fatal."""
        if action is RetryAction.REJOIN:
            return [*self._reset(), Rejoin()]
        if action.retriable:
            return []
        self._to(ShareState.FATAL)
        return [Fatal(exc)]

    # -- leaving --------------------------------------------------------------------------------

    def leave(self, *, poll_timeout: bool = False, operation: str = "default") -> list[Action]:
        """Leave the group: a heartbeat with epoch -1 when in it (then :meth:`left`), else just
        drop the assignment. ``poll_timeout``: for lack of polls (the next poll joins again).
        ``operation``: KIP-1092's, not applicable to share members (Java's share consumer has no
        CloseOptions)."""
        if self.state is ShareState.FATAL:
            return self._drop()
        if self.epoch <= 0:
            self._to(ShareState.LEFT)
            return self._drop()
        self._after_leave = ShareState.POLL_TIMEOUT if poll_timeout else ShareState.LEFT
        self._to(ShareState.LEAVING)
        what = "ShareGroupHeartbeat (leave: max poll interval)" if poll_timeout else None
        request = share_ops.share_heartbeat_request(self.group_id, self.member_id, -1, None)
        return [Leave(request, what or "ShareGroupHeartbeat (leave)")]

    def left(self) -> list[Action]:
        """The leave was sent (answered or not: the coordinator drops the member anyway)."""
        if self.state is not ShareState.LEAVING:
            return []
        if self._after_leave is ShareState.POLL_TIMEOUT:
            self.epoch = 0
            self.topics_sent = None
        else:
            self.epoch = -1
        self._to(self._after_leave)
        return self._drop()

    # -- helpers --------------------------------------------------------------------------------

    def _rejoin(self) -> None:
        self.epoch = 0
        self.topics_sent = None
        self._to(ShareState.UNJOINED)

    def _reset(self) -> list[Action]:
        self._rejoin()
        return self._drop()

    def _drop(self) -> list[Action]:
        if not self.assignment:
            return []
        self.assignment = {}
        return [Assign({})]

    _sending: frozenset[str] | None = None
