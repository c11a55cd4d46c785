"""``NewTopic``: a topic for :meth:`AIOKafkaAdminClient.create_topics` (aiokafka's name and path)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .. import errors as Errors

__all__ = ["NewTopic"]


class NewTopic:
    """A topic to create: ``num_partitions``/``replication_factor`` or an explicit assignment.

    ``replica_assignments`` maps partition id -> list of broker ids (then pass -1 for
    ``num_partitions`` and ``replication_factor``); ``topic_configs`` maps config name -> value.
    """

    def __init__(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        replica_assignments: Mapping[int, Sequence[int]] | None = None,
        topic_configs: Mapping[str, str | None] | None = None,
        *,
        replica_assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> None:
        assignment = replica_assignments if replica_assignments is not None else replica_assignment
        if not ((num_partitions == -1 or replication_factor == -1) ^ (assignment is None)):
            raise Errors.IllegalArgumentError(
                "either num_partitions/replication_factor or replica_assignment must be specified"
            )
        self.name = name
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.replica_assignments: dict[int, list[int]] = {
            int(p): list(b) for p, b in (assignment or {}).items()
        }
        self.topic_configs: dict[str, str | None] = dict(topic_configs or {})

    @property
    def replica_assignment(self) -> dict[int, list[int]]:
        """Alias of ``replica_assignments``."""
        return self.replica_assignments

    def __repr__(self) -> str:
        return (
            f"NewTopic(name={self.name!r}, num_partitions={self.num_partitions}, "
            f"replication_factor={self.replication_factor})"
        )
