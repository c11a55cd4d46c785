"""What every membership state machine has in common (sans-I/O: no asyncio, no clock).

A machine takes events (a subscription change, a poll, a heartbeat answer, a failed send
classified by :func:`~aiokafka_lite.errors.retry_action`) and returns the *actions* the member
shell (:mod:`.shell`) carries out, in order. The shell owns every wait, send and timer; the
machine owns the member's state, epoch and assignment, and changes its state only through
:meth:`Machine._to`, which refuses what its transition table does not list (the house style of
``producer.transaction.TXN_TRANSITIONS``).
"""

from __future__ import annotations

import base64
import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from aiokafka_lite import errors as Errors

__all__ = [
    "Action",
    "Assign",
    "Fatal",
    "Leave",
    "Machine",
    "Rejoin",
    "Retry",
    "Revoke",
    "Send",
    "new_member_id",
]


def new_member_id() -> str:
    """A member id made by the client (KIP-1082), as the Java client's: a random UUID in
    Kafka's URL-safe base64 form (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(frozen=True)
class Send:
    """Send ``request`` to the group coordinator; its answer goes back to the machine."""

    request: Any
    what: str


@dataclass(frozen=True)
class Leave:
    """Send ``request`` (a leave) to the group coordinator within the shell's leave budget,
    looking the coordinator up again while it is unknown; the answer is not the machine's."""

    request: Any
    what: str


@dataclass(frozen=True)
class Assign:
    """The assignment is now ``partitions`` (topic id -> partitions); ``from_broker``: a
    heartbeat answer carried it (its topic ids may need a metadata refresh to be named)."""

    partitions: Mapping[Any, frozenset[int]] = field(default_factory=dict)
    from_broker: bool = False


@dataclass(frozen=True)
class Revoke:
    """Give up ``partitions`` (topic id -> partitions; None: all owned). ``lost``: another
    member may own them already (fenced: ``on_partitions_lost``, no commit)."""

    partitions: Mapping[Any, frozenset[int]] | None = None
    lost: bool = False


@dataclass(frozen=True)
class Rejoin:
    """The member lost its place (fenced): heartbeat again at once, joining."""


@dataclass(frozen=True)
class Retry:
    """Sending failed for now: back off (``retry_backoff_ms``), then try again."""


@dataclass(frozen=True)
class Fatal:
    """Sending again cannot help: ``exc`` is raised to the application (its next call)."""

    exc: BaseException


Action = Send | Leave | Assign | Revoke | Rejoin | Retry | Fatal

S = TypeVar("S", bound=enum.Enum)


class Machine(Generic[S]):
    """The state and its one setter; a machine class names its table and fatal state."""

    #: the state changes the machine may make (the rest raise IllegalStateError)
    TRANSITIONS: ClassVar[Mapping[Any, frozenset[Any]]]
    #: reachable from every state (its way out, if any, is in the table)
    FATAL: ClassVar[Any]

    state: S

    def _to(self, state: S) -> None:
        """The one place the state changes: refuses what ``TRANSITIONS`` does not list."""
        old = self.state
        if state is self.FATAL:
            self.state = state
            return
        if state not in self.TRANSITIONS[old]:
            raise Errors.IllegalStateError(
                f"{type(self).__name__}: state {old.value} cannot become {state.value}"
            )
        self.state = state
