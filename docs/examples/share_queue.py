"""A work queue on a share group (KIP-932; Apache Kafka 4.2+): docs/guides/share-groups.md.

Each job is acknowledged on its own: ACCEPT when done, RELEASE to try again later (on any
worker, delivery_count + 1), REJECT for a poison message that must never come back.
"""

import asyncio
import json
import os
from typing import Any

from aiokafka_lite import AcknowledgeType, AIOKafkaProducer, AIOKafkaShareConsumer
from aiokafka_lite.admin import AIOKafkaAdminClient
from aiokafka_lite.admin.config_resource import ConfigResource

MAX_ATTEMPTS = 3


class TransientError(Exception):
    """A failure worth another attempt (a timeout of a service the job calls)."""


async def handle(job: dict[str, Any], attempt: int) -> str:
    """The work itself: here, jobs named "flaky" fail on their first attempt."""
    if job["kind"] == "poison":
        raise ValueError(f"cannot process {job}")
    if job["kind"] == "flaky" and attempt == 1:
        raise TransientError("the thumbnail service timed out")
    return f"done {job['id']}"


async def setup(bootstrap: str, group: str) -> None:
    """Group settings are broker-side group configs: a new group starts at the earliest job,
    and a job delivered MAX_ATTEMPTS times without being accepted is archived."""
    async with AIOKafkaAdminClient(bootstrap_servers=bootstrap) as admin:
        await admin.incremental_alter_configs(
            [
                ConfigResource(
                    "group",
                    group,
                    {
                        "share.auto.offset.reset": "earliest",
                        "share.delivery.count.limit": str(MAX_ATTEMPTS),
                    },
                )
            ]
        )


async def worker(bootstrap: str, topic: str, group: str, expected: int) -> dict[str, list[str]]:
    outcome: dict[str, list[str]] = {"done": [], "retried": [], "rejected": []}
    async with AIOKafkaShareConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        acknowledgement_mode="explicit",
        value_deserializer=json.loads,
    ) as jobs:
        while len(outcome["done"]) + len(outcome["rejected"]) < expected:
            batches = await jobs.getmany(timeout_ms=1000)
            for records in batches.values():
                for job in records:
                    try:
                        result = await handle(job.value, job.delivery_count)
                    except TransientError:
                        outcome["retried"].append(job.value["id"])
                        jobs.acknowledge(job, AcknowledgeType.RELEASE)  # comes back later
                    except Exception:
                        outcome["rejected"].append(job.value["id"])
                        jobs.acknowledge(job, AcknowledgeType.REJECT)  # never delivered again
                    else:
                        outcome["done"].append(result)
                        jobs.acknowledge(job, AcknowledgeType.ACCEPT)
        await jobs.commit()  # send the last acknowledgements before leaving
    return outcome


async def main(bootstrap: str, topic: str = "thumbnails", group: str = "thumbnailers") -> Any:
    await setup(bootstrap, group)
    jobs = [{"id": 1, "kind": "ok"}, {"id": 2, "kind": "flaky"}, {"id": 3, "kind": "poison"}]
    async with AIOKafkaProducer(bootstrap_servers=bootstrap) as producer:  # the web app's side
        for job in jobs:
            await producer.send_and_wait(topic, json.dumps(job).encode())
    outcome = await worker(bootstrap, topic, group, expected=len(jobs))
    print(outcome)
    return outcome


if __name__ == "__main__":
    asyncio.run(main(os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")))
