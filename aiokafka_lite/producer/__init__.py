"""The producer: :class:`AIOKafkaProducer` (alias ``Producer``) and its partitioners."""

from aiokafka_lite.producer.batch import RecordHandle
from aiokafka_lite.producer.partitioner import DefaultPartitioner, RoundRobinPartitioner, murmur2
from aiokafka_lite.producer.producer import AIOKafkaProducer, Producer, TransactionContext
from aiokafka_lite.producer.user_batch import BatchBuilder

__all__ = [
    "AIOKafkaProducer",
    "BatchBuilder",
    "DefaultPartitioner",
    "Producer",
    "RecordHandle",
    "RoundRobinPartitioner",
    "TransactionContext",
    "murmur2",
]
