"""Test your application against a real broker started by the test session
(docs/guides/testing.md). Needs `pip install 'aiokafka_lite[broker]' pytest pytest-asyncio`;
run with `pytest docs/examples/test_with_embedded_broker.py`.
"""

import uuid
from collections.abc import Iterator

import pytest

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka_lite.launchers.embedded import EmbeddedBroker


@pytest.fixture(scope="session")
def kafka() -> Iterator[str]:
    """One broker for the whole session (started in milliseconds); its bootstrap address."""
    with EmbeddedBroker("tansu") as broker:  # or "noida"
        yield broker.bootstrap


@pytest.fixture
def topic() -> str:
    """A fresh topic per test: tests never see each other's records."""
    return f"test-{uuid.uuid4().hex[:8]}"


async def publish_order(bootstrap: str, topic: str, order_id: int) -> None:
    """The application code under test."""
    async with AIOKafkaProducer(bootstrap_servers=bootstrap) as producer:
        await producer.send_and_wait(topic, b'{"id": %d}' % order_id, key=b"%d" % order_id)


@pytest.mark.asyncio
async def test_publish_order_writes_one_keyed_record(kafka: str, topic: str) -> None:
    await publish_order(kafka, topic, 42)
    async with AIOKafkaConsumer(
        topic, bootstrap_servers=kafka, auto_offset_reset="earliest"
    ) as consumer:
        record = await consumer.getone()
    assert (record.key, record.value) == (b"42", b'{"id": 42}')
