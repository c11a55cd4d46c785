"""The consumer: :class:`AIOKafkaConsumer` (alias ``Consumer``) and its partition assignors."""

from .assignors import (
    AbstractPartitionAssignor,
    CooperativeStickyAssignor,
    CooperativeStickyPartitionAssignor,
    RangePartitionAssignor,
    RoundRobinPartitionAssignor,
    StickyPartitionAssignor,
)
from .consumer import AIOKafkaConsumer, Consumer, ConsumerRebalanceListener

__all__ = [
    "AIOKafkaConsumer",
    "AbstractPartitionAssignor",
    "Consumer",
    "CooperativeStickyAssignor",
    "CooperativeStickyPartitionAssignor",
    "ConsumerRebalanceListener",
    "RangePartitionAssignor",
    "RoundRobinPartitionAssignor",
    "StickyPartitionAssignor",
]
