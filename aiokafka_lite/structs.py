"""Plain data types shared by the producer, consumer, admin client and cluster metadata.

Same names, fields and field order as aiokafka's, so code written against aiokafka keeps working.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar

if TYPE_CHECKING:
    from aiokafka_lite.errors import KafkaError

__all__ = [
    "BrokerMetadata",
    "ConsumerRecord",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionMetadata",
    "RecordMetadata",
    "SubscriptionPattern",
    "TopicPartition",
]


class TopicPartition(NamedTuple):
    """A partition of a topic: the unit of ordering, assignment and offsets."""

    topic: str
    partition: int


@dataclass(frozen=True)
class SubscriptionPattern:
    """A regular expression the BROKER matches against the topic names (KIP-848), for
    ``subscribe(pattern=SubscriptionPattern("..."))`` with ``group_protocol="consumer"``
    (the Java client's ``SubscriptionPattern``).

    The broker uses RE2/J syntax and a full match, and refuses an expression it cannot
    compile (INVALID_REGULAR_EXPRESSION, raised to the application). A plain string
    ``pattern=`` is matched by the client with Python's ``re.match`` under both group
    protocols, as aiokafka and Java's ``subscribe(Pattern)``.
    """

    pattern: str

    def __post_init__(self) -> None:
        if not isinstance(self.pattern, str) or not self.pattern:
            raise ValueError(f"SubscriptionPattern needs a non-empty str, got {self.pattern!r}")


class BrokerMetadata(NamedTuple):
    """A broker as listed in a metadata response."""

    nodeId: int | str  # aiokafka spelling
    host: str
    port: int
    rack: str | None = None


class PartitionMetadata(NamedTuple):
    """The state of one partition as reported by a metadata response.

    ``error`` is the partition-level error (an exception instance) or None.
    """

    topic: str
    partition: int
    leader: int
    replicas: Sequence[int]
    isr: Sequence[int]
    error: KafkaError | None = None
    leader_epoch: int = -1
    offline_replicas: Sequence[int] = ()


class OffsetAndMetadata(NamedTuple):
    """A committed offset (the next record to read) and a free-form metadata string."""

    offset: int
    metadata: str


class OffsetAndTimestamp(NamedTuple):
    """An offset found by timestamp lookup, with the timestamp of that record."""

    offset: int
    timestamp: int | None


class RecordMetadata(NamedTuple):
    """Where a produced record was written, returned once the broker acknowledged it.

    ``timestamp_type`` is 0 (CreateTime: the producer's timestamp was kept) or 1 (LogAppendTime:
    the broker's). ``offset`` is -1 for ``acks=0``, whose records are never acknowledged.
    """

    topic: str
    partition: int
    topic_partition: TopicPartition
    offset: int
    timestamp: int | None
    timestamp_type: int
    log_start_offset: int | None


KT = TypeVar("KT")
VT = TypeVar("VT")


@dataclass
class ConsumerRecord(Generic[KT, VT]):
    """A record read by the consumer (key and value after deserialization).

    ``serialized_key_size``/``serialized_value_size`` are the uncompressed byte sizes (-1 for a
    null key or value); ``checksum`` is only set for legacy (v0/v1) messages.

    Fields are slots; ``__dict__`` is one too, so code may attach its own attributes to a
    record as it can to aiokafka's (FastStream sets ``record.consumer``). CPython allocates that
    dict only when an attribute is set, so plain records cost what slotted ones do.
    """

    __slots__ = (
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestamp_type",
        "key",
        "value",
        "checksum",
        "serialized_key_size",
        "serialized_value_size",
        "headers",
        "__dict__",
    )

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: KT | None
    value: VT | None
    checksum: int | None
    serialized_key_size: int
    serialized_value_size: int
    headers: Sequence[tuple[str, bytes]]
