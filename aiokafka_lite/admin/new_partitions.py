"""``NewPartitions``: the new partition count of a topic (aiokafka's name and path)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["NewPartitions"]


class NewPartitions:
    """Grow a topic to ``total_count`` partitions; ``new_assignments`` optionally lists the
    replica broker ids of each new partition (one list per new partition)."""

    def __init__(
        self, total_count: int, new_assignments: Sequence[Sequence[int]] | None = None
    ) -> None:
        self.total_count = total_count
        self.new_assignments = new_assignments

    def __repr__(self) -> str:
        return (
            f"NewPartitions(total_count={self.total_count}, new_assignments={self.new_assignments})"
        )
