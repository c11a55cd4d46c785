"""An embedded broker inside a script: no server to install (pip install 'aiokafka_lite[broker]')."""

import asyncio

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka_lite.launchers.embedded import EmbeddedBroker


async def round_trip(bootstrap: str) -> list[bytes]:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap) as producer:
        for i in range(3):
            await producer.send("demo", b"record %d" % i)
    async with AIOKafkaConsumer(
        "demo", bootstrap_servers=bootstrap, auto_offset_reset="earliest"
    ) as consumer:
        values: list[bytes] = []
        while len(values) < 3:
            batches = await consumer.getmany(timeout_ms=1000)
            values += [r.value for records in batches.values() for r in records]
        return values


def main() -> list[bytes]:
    # "noida" keeps its data in a directory; "tansu" in memory
    with EmbeddedBroker("noida") as broker:
        print("broker at", broker.bootstrap)  # 127.0.0.1:<free port>
        return asyncio.run(round_trip(broker.bootstrap))


if __name__ == "__main__":
    print(main())
