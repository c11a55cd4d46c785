"""Topics and partitions: CreateTopics, DeleteTopics, CreatePartitions, Metadata lookups."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._wire import metadata_request
from ..protocol import messages as m
from ._exec import ItemError, to_controller, to_node

if TYPE_CHECKING:
    from ..client import KafkaClient

__all__ = [
    "TopicResult",
    "TopicSpec",
    "create_partitions",
    "create_partitions_request",
    "create_topics",
    "create_topics_request",
    "delete_topics",
    "delete_topics_request",
    "metadata",
    "metadata_request",
    "parse_create_partitions",
    "parse_create_topics",
    "parse_delete_topics",
]


@dataclass(frozen=True)
class TopicSpec:
    """A topic to create: partitions/replication (-1: broker default) or an assignment."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, Sequence[int]] | None = None
    configs: Mapping[str, str | None] | None = None


@dataclass(frozen=True)
class TopicResult:
    """A per-topic answer of CreateTopics / DeleteTopics / CreatePartitions."""

    name: str
    error_code: int = 0
    error_message: str | None = None

    @property
    def error(self) -> ItemError | None:
        """The error, or None on success."""
        return ItemError(self.error_code, self.error_message) if self.error_code else None


async def _at_controller(
    client: KafkaClient,
    request: Any,
    parse: Callable[[Any], list[TopicResult]],
    broker_timeout: int,
    what: str,
) -> list[TopicResult]:
    """Run ``request`` at the controller (the broker may take ``broker_timeout`` to answer)."""
    resp = await to_controller(
        client,
        request,
        lambda r: [t.error_code for t in parse(r)],
        timeout_ms=client.timeouts.client_wait_ms(broker_timeout),
        what=what,
    )
    return parse(resp)


# ------------------------------------------------------------------------------ CreateTopics


def create_topics_request(
    topics: Sequence[TopicSpec], timeout_ms: int, validate_only: bool = False
) -> Any:
    """CreateTopics of ``topics``."""
    return m.CreateTopicsRequest(
        topics=[
            m.CreateTopicsRequest.CreatableTopic(
                name=t.name,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                assignments=[
                    m.CreateTopicsRequest.CreatableReplicaAssignment(
                        partition_index=int(p), broker_ids=list(b)
                    )
                    for p, b in sorted((t.assignments or {}).items())
                ],
                configs=[
                    m.CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                    for k, v in (t.configs or {}).items()
                ],
            )
            for t in topics
        ],
        timeout_ms=timeout_ms,
        validate_only=validate_only,
    )


def parse_create_topics(resp: Any) -> list[TopicResult]:
    """Per-topic results, in the broker's order."""
    return [TopicResult(t.name, t.error_code, t.error_message) for t in resp.topics]


async def create_topics(
    client: KafkaClient,
    topics: Sequence[TopicSpec],
    *,
    timeout_ms: int | None = None,
    validate_only: bool = False,
) -> list[TopicResult]:
    """CreateTopics at the controller; per-topic errors are returned, not raised."""
    broker_timeout = timeout_ms if timeout_ms is not None else int(client.timeouts.broker_ms)
    return await _at_controller(
        client,
        create_topics_request(topics, broker_timeout, validate_only),
        parse_create_topics,
        broker_timeout,
        "CreateTopics",
    )


# ------------------------------------------------------------------------------ DeleteTopics


def delete_topics_request(topics: Sequence[str], timeout_ms: int) -> Any:
    """DeleteTopics by name."""
    return m.DeleteTopicsRequest(
        # both shapes: names (v0-5) and topic states (v6+); the codec writes the right one
        topic_names=list(topics),
        topics=[m.DeleteTopicsRequest.DeleteTopicState(name=t) for t in topics],
        timeout_ms=timeout_ms,
    )


def parse_delete_topics(resp: Any) -> list[TopicResult]:
    """Per-topic results, in the broker's order."""
    return [TopicResult(r.name, r.error_code, r.error_message) for r in resp.responses]


async def delete_topics(
    client: KafkaClient, topics: Sequence[str], *, timeout_ms: int | None = None
) -> list[TopicResult]:
    """DeleteTopics at the controller; per-topic errors are returned, not raised."""
    broker_timeout = timeout_ms if timeout_ms is not None else int(client.timeouts.broker_ms)
    return await _at_controller(
        client,
        delete_topics_request(topics, broker_timeout),
        parse_delete_topics,
        broker_timeout,
        "DeleteTopics",
    )


# -------------------------------------------------------------------------- CreatePartitions


def create_partitions_request(
    counts: Mapping[str, tuple[int, Sequence[Sequence[int]] | None]],
    timeout_ms: int,
    validate_only: bool = False,
) -> Any:
    """CreatePartitions: ``{topic: (new total count, replica assignment of new ones | None)}``."""
    return m.CreatePartitionsRequest(
        topics=[
            m.CreatePartitionsRequest.CreatePartitionsTopic(
                name=topic,
                count=count,
                assignments=None
                if assignments is None
                else [
                    m.CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=list(b))
                    for b in assignments
                ],
            )
            for topic, (count, assignments) in counts.items()
        ],
        timeout_ms=timeout_ms,
        validate_only=validate_only,
    )


def parse_create_partitions(resp: Any) -> list[TopicResult]:
    """Per-topic results."""
    return [TopicResult(r.name, r.error_code, r.error_message) for r in resp.results]


async def create_partitions(
    client: KafkaClient,
    counts: Mapping[str, tuple[int, Sequence[Sequence[int]] | None]],
    *,
    timeout_ms: int | None = None,
    validate_only: bool = False,
) -> list[TopicResult]:
    """CreatePartitions at the controller; per-topic errors are returned."""
    broker_timeout = timeout_ms if timeout_ms is not None else int(client.timeouts.broker_ms)
    return await _at_controller(
        client,
        create_partitions_request(counts, broker_timeout, validate_only),
        parse_create_partitions,
        broker_timeout,
        "CreatePartitions",
    )


# ---------------------------------------------------------------------------------- Metadata


async def metadata(
    client: KafkaClient, topics: Iterable[str] | None, *, timeout_ms: float | None = None
) -> Any:
    """A one-off Metadata answer (the decoded response) from the least-loaded node.

    This does not touch the client's cached metadata, which only its refresher updates.
    """
    return await to_node(
        client,
        metadata_request(None if topics is None else list(topics)),
        timeout_ms=timeout_ms,
        what="Metadata",
    )
