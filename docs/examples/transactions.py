"""Exactly-once consume-transform-produce (docs/guides/transactions.md).

Each batch of input records becomes output records AND a commit of the input offsets in one
transaction: either both happen or neither, so a crash never loses or doubles a record
downstream (for readers with isolation_level="read_committed").
"""

import asyncio
import os

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition


async def transform(bootstrap: str, source: str, sink: str, group: str, expected: int) -> None:
    consumer = AIOKafkaConsumer(
        source,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,  # offsets are committed by the transaction
        isolation_level="read_committed",  # never read another transaction's aborted records
        auto_offset_reset="earliest",
    )
    # one transactional_id per input partition set: a restarted instance fences its zombie
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{group}-0")
    async with consumer, producer:
        done = 0
        while done < expected:
            batches = await consumer.getmany(timeout_ms=1000)
            if not batches:
                continue
            async with producer.transaction():  # commits on success, aborts on an exception
                offsets: dict[TopicPartition, int] = {}
                for tp, records in batches.items():
                    for record in records:
                        await producer.send(sink, record.value.upper(), key=record.key)
                    offsets[tp] = records[-1].offset + 1
                await producer.send_offsets_to_transaction(offsets, group)
            done += sum(len(records) for records in batches.values())


async def main(bootstrap: str, source: str = "orders-in", sink: str = "orders-out") -> list[bytes]:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap) as producer:
        for word in (b"one", b"two", b"three"):
            await producer.send(source, word)
    await transform(bootstrap, source, sink, group="upper", expected=3)

    async with AIOKafkaConsumer(
        sink,
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
    ) as reader:
        out: list[bytes] = []
        while len(out) < 3:
            batches = await reader.getmany(timeout_ms=1000)
            out += [r.value for records in batches.values() for r in records]
    print(out)
    return out


if __name__ == "__main__":
    asyncio.run(main(os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")))
