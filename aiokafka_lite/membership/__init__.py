"""The group membership engine: one sans-I/O state machine per group protocol (classic eager
and cooperative: :mod:`.classic`; KIP-848: :mod:`.consumer`; share: :mod:`.share`), and the
member shell (:mod:`.shell`, all I/O and timing of the heartbeat protocols; DESIGN.md, "The
membership engine")."""

from .classic import (
    COOPERATIVE_TRANSITIONS,
    EAGER_TRANSITIONS,
    ClassicMachine,
    ClassicState,
    CooperativeMachine,
    EagerMachine,
)
from .machine import (
    Action,
    Assign,
    Fatal,
    Leave,
    Machine,
    Rejoin,
    Retry,
    Revoke,
    Send,
    new_member_id,
)
from .share import SHARE_TRANSITIONS, ShareMachine, ShareState
from .shell import HeartbeatMachine, MemberShell

__all__ = [
    "COOPERATIVE_TRANSITIONS",
    "EAGER_TRANSITIONS",
    "SHARE_TRANSITIONS",
    "ClassicMachine",
    "ClassicState",
    "CooperativeMachine",
    "EagerMachine",
    "Action",
    "Assign",
    "Fatal",
    "HeartbeatMachine",
    "Leave",
    "Machine",
    "MemberShell",
    "Rejoin",
    "Retry",
    "Revoke",
    "Send",
    "ShareMachine",
    "ShareState",
    "new_member_id",
]
