"""Getting started: produce a record and read it back (docs/getting-started.md).

Run it against `aiokafka-lite broker` (which prints its address):
    KAFKA_BOOTSTRAP=127.0.0.1:9092 python docs/examples/quickstart.py
"""

import asyncio
import os

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer


async def main(bootstrap: str, topic: str = "greetings") -> bytes:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap) as producer:
        meta = await producer.send_and_wait(topic, b"hello", key=b"k1")
        print(f"written to {meta.topic}[{meta.partition}] at offset {meta.offset}")

    async with AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id="readers", auto_offset_reset="earliest"
    ) as consumer:
        record = await consumer.getone()
        print(f"read {record.value!r} (key {record.key!r}) at offset {record.offset}")
        return record.value


if __name__ == "__main__":
    asyncio.run(main(os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")))
