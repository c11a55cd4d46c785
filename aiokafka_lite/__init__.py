"""aiokafka_lite: an asyncio-native Apache Kafka client written from the wire protocol up."""

__version__ = "0.1.0"
