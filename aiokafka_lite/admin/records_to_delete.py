"""``RecordsToDelete`` (aiokafka's name and path)."""

from __future__ import annotations

__all__ = ["RecordsToDelete"]


class RecordsToDelete:
    """Delete every record of a partition before ``before_offset`` (-1: up to the end)."""

    def __init__(self, before_offset: int) -> None:
        self.before_offset = before_offset

    def __repr__(self) -> str:
        return f"RecordsToDelete(before_offset={self.before_offset})"
