"""The group membership engine: one member shell (:mod:`.shell`, all I/O and timing) driving
one sans-I/O state machine per protocol (:mod:`.share`; DESIGN.md, "The membership engine")."""

from .machine import Action, Assign, Fatal, Leave, Machine, Rejoin, Revoke, Send, new_member_id
from .share import SHARE_TRANSITIONS, ShareMachine, ShareState
from .shell import HeartbeatMachine, MemberShell

__all__ = [
    "SHARE_TRANSITIONS",
    "Action",
    "Assign",
    "Fatal",
    "HeartbeatMachine",
    "Leave",
    "Machine",
    "MemberShell",
    "Rejoin",
    "Revoke",
    "Send",
    "ShareMachine",
    "ShareState",
    "new_member_id",
]
