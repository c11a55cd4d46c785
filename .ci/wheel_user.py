"""What a user of the installed wheel runs (.ci/wheel-check): a typed produce/consume round trip
on the embedded broker of the ``broker`` extra. mypy --strict checks this file against the
installed package (py.typed); it is run from a directory outside the repository."""

from __future__ import annotations

import asyncio
import sys
import uuid

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka_lite.admin import AIOKafkaAdminClient, NewTopic
from aiokafka_lite.structs import ConsumerRecord, RecordMetadata


async def round_trip(bootstrap: str) -> list[bytes | None]:
    topic = f"wheel-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        await admin.close()
    async with AIOKafkaProducer(bootstrap_servers=bootstrap) as producer:
        sent: list[RecordMetadata] = [
            await producer.send_and_wait(topic, b"record %d" % i) for i in range(10)
        ]
    assert [md.offset for md in sent] == list(range(10)), sent
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=topic, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        got: list[ConsumerRecord[bytes, bytes]] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while len(got) < 10:
            assert loop.time() < deadline, f"read {len(got)} of 10"
            for records in (await consumer.getmany(timeout_ms=500)).values():
                got.extend(records)
        await consumer.commit()
    finally:
        await consumer.stop()
    return [r.value for r in got]


def main() -> int:
    from aiokafka_lite.launchers.embedded import EmbeddedBroker

    with EmbeddedBroker(sys.argv[1] if len(sys.argv) > 1 else "tansu") as broker:
        values = asyncio.run(round_trip(broker.bootstrap))
    assert values == [b"record %d" % i for i in range(10)], values
    print("round trip: 10 records produced and consumed through the installed wheel")
    return 0


if __name__ == "__main__":
    sys.exit(main())
