"""Share groups (KIP-932, "queues for Kafka"): :class:`AIOKafkaShareConsumer`.

Members of a share group share a topic's partitions (any number of members per partition);
each record is acquired by one member at a time and acknowledged on its own: accepted,
released for redelivery (``delivery_count`` + 1) or rejected.
"""

from .acks import AcknowledgeType, ShareAcknowledgementError, ShareConsumerRecord
from .consumer import AIOKafkaShareConsumer

__all__ = [
    "AIOKafkaShareConsumer",
    "AcknowledgeType",
    "ShareAcknowledgementError",
    "ShareConsumerRecord",
]
