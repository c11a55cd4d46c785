"""aiokafka_lite: an asyncio-native Apache Kafka client written from the wire protocol up.

The public API follows aiokafka's, so code written for aiokafka runs after changing the import::

    from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer

or, for code and frameworks that import ``aiokafka`` themselves (FastStream, ...), call
:func:`install_as_aiokafka` once before importing them.
"""

from .admin import AIOKafkaAdminClient, NewTopic
from .client import AIOKafkaClient, KafkaClient
from .compat import install_as_aiokafka
from .consumer import (
    AbstractPartitionAssignor,
    AIOKafkaConsumer,
    Consumer,
    ConsumerRebalanceListener,
    CooperativeStickyAssignor,
    CooperativeStickyPartitionAssignor,
    RangePartitionAssignor,
    RoundRobinPartitionAssignor,
    StickyPartitionAssignor,
)
from .errors import ConsumerStoppedError, IllegalOperation
from .producer import AIOKafkaProducer, DefaultPartitioner, Producer, RoundRobinPartitioner
from .share import AcknowledgeType, AIOKafkaShareConsumer
from .structs import (
    BrokerMetadata,
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    PartitionMetadata,
    RecordMetadata,
    SubscriptionPattern,
    TopicPartition,
)

__version__ = "0.1.0"

__all__ = [
    "AIOKafkaClient",
    "AIOKafkaAdminClient",
    "AIOKafkaConsumer",
    "AIOKafkaProducer",
    "AIOKafkaShareConsumer",
    "AcknowledgeType",
    "AbstractPartitionAssignor",
    "BrokerMetadata",
    "Consumer",
    "CooperativeStickyAssignor",
    "CooperativeStickyPartitionAssignor",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConsumerStoppedError",
    "DefaultPartitioner",
    "IllegalOperation",
    "KafkaClient",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionMetadata",
    "Producer",
    "RangePartitionAssignor",
    "RecordMetadata",
    "RoundRobinPartitionAssignor",
    "RoundRobinPartitioner",
    "StickyPartitionAssignor",
    "SubscriptionPattern",
    "TopicPartition",
    "__version__",
    "install_as_aiokafka",
]
