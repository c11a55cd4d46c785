"""Code written for aiokafka, unchanged, on aiokafka_lite (docs/guides/migrating.md).

install_as_aiokafka() runs before anything imports aiokafka; from then on `import aiokafka`
(yours, FastStream's, any library's) gets aiokafka_lite.
"""

import aiokafka_lite

aiokafka_lite.install_as_aiokafka()

import asyncio  # noqa: E402
import os  # noqa: E402

import aiokafka  # noqa: E402  (aiokafka_lite now)
from aiokafka.errors import KafkaError  # noqa: E402


async def main(bootstrap: str, topic: str = "migrated") -> str:
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"same code")
    except KafkaError as exc:
        print("failed:", exc)
        raise
    finally:
        await producer.stop()
    consumer = aiokafka.AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        record = await consumer.getone()
    finally:
        await consumer.stop()
    print(aiokafka.AIOKafkaProducer.__module__, record.value)
    return aiokafka.AIOKafkaProducer.__module__


if __name__ == "__main__":
    asyncio.run(main(os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")))
