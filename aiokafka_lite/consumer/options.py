"""The consumer's argument rules: what its constructor and ``stop()`` accept, with aiokafka's
error types, and the defaults derived from them."""

from __future__ import annotations

from aiokafka_lite import errors as Errors

__all__ = ["BULK_LIMIT", "MEMBERSHIP_OPERATIONS", "check_arguments", "check_membership_operation"]

#: records one getmany() hands out when max_poll_records is None (Java's max.poll.records): no
#: fixed limit, but a huge buffered response never holds the event loop for long, and the records
#: an application holds between two calls stay below CPython's gen-0 threshold (700 new
#: objects): with 2048 per call a consume spent 0.16 of 1.04 us per record in the garbage
#: collector, promoting live records to older generations; with 500, none when the caller keeps
#: no new objects per record (benchmarks/README.md)
BULK_LIMIT = 500

#: KIP-1092's GroupMembershipOperation values, as ``stop()`` takes them
MEMBERSHIP_OPERATIONS = ("default", "leave_group", "remain_in_group")


def check_arguments(
    max_poll_records: int | None,
    auto_offset_reset: str,
    isolation_level: str,
    group_id: str | None,
    group_instance_id: str | None,
) -> None:
    """Raise ValueError (as aiokafka's constructor does) for a value the consumer refuses."""
    if max_poll_records is not None and (
        not isinstance(max_poll_records, int) or max_poll_records < 1
    ):
        raise ValueError("max_poll_records should be a positive integer")
    if auto_offset_reset not in ("earliest", "latest", "none"):
        raise ValueError(f"invalid auto_offset_reset {auto_offset_reset!r}")
    if isolation_level not in ("read_uncommitted", "read_committed"):
        raise ValueError(f"Incorrect isolation level {isolation_level}")
    if group_id is None and group_instance_id is not None:
        raise ValueError("group_instance_id needs a group_id")


def check_membership_operation(operation: str) -> None:
    """IllegalArgumentError unless ``operation`` is one of :data:`MEMBERSHIP_OPERATIONS`."""
    if operation not in MEMBERSHIP_OPERATIONS:
        raise Errors.IllegalArgumentError(
            f"group_membership_operation must be one of {MEMBERSHIP_OPERATIONS}, got {operation!r}"
        )
