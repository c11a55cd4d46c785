"""Consumer groups: the three ways a group shares partitions (docs/guides/consumer-groups.md).

KAFKA_BOOTSTRAP=127.0.0.1:9092 python docs/examples/consumer_groups.py consumer
"""

import asyncio
import os
import sys
from typing import Any, Literal

from aiokafka_lite import (
    AIOKafkaConsumer,
    AIOKafkaProducer,
    CooperativeStickyAssignor,
    RangePartitionAssignor,
)
from aiokafka_lite.errors import CommitFailedError, RebalanceInProgressError

Kind = Literal["eager", "cooperative", "upgrade", "consumer"]


# --8<-- [start:settings]
def group_settings(kind: Kind) -> dict[str, Any]:
    """The consumer arguments of each kind of group."""
    if kind == "eager":  # aiokafka's default: every rebalance revokes everything from everyone
        return {"partition_assignment_strategy": (RangePartitionAssignor,)}
    if kind == "upgrade":  # step 1 of a rolling move from eager to cooperative: offer both
        return {
            "partition_assignment_strategy": (CooperativeStickyAssignor, RangePartitionAssignor)
        }
    if kind == "cooperative":  # KIP-429: only the partitions that move are revoked
        return {"partition_assignment_strategy": (CooperativeStickyAssignor,)}
    # KIP-848 (Apache Kafka 4.x): the broker assigns, one member at a time
    return {"group_protocol": "consumer", "group_remote_assignor": "uniform"}


# --8<-- [end:settings]


# --8<-- [start:kip848]
def kip848_member(bootstrap: str) -> AIOKafkaConsumer:
    """A member of a KIP-848 group (Apache Kafka 4.x)."""
    return AIOKafkaConsumer(
        "orders",
        bootstrap_servers=bootstrap,
        group_id="billing",
        group_protocol="consumer",  # default "classic": nothing changes
        group_remote_assignor="uniform",  # or "range"; None: the broker's default (uniform)
        group_instance_id="billing-0",  # optional: static membership, a restart keeps the partitions
    )


# --8<-- [end:kip848]


# --8<-- [start:cooperative]
def cooperative_member(bootstrap: str) -> AIOKafkaConsumer:
    """A member of a classic group that rebalances cooperatively (KIP-429)."""
    return AIOKafkaConsumer(
        "orders",
        bootstrap_servers=bootstrap,
        group_id="billing",
        partition_assignment_strategy=(CooperativeStickyAssignor,),
    )


# --8<-- [end:cooperative]


# --8<-- [start:commit]
async def commit(consumer: AIOKafkaConsumer) -> None:
    """Commit what was handed out; a rebalance in progress is worth one more try."""
    try:
        await consumer.commit()
    except RebalanceInProgressError:
        await consumer.getmany(timeout_ms=0)  # poll: that finishes the rebalance
        await consumer.commit()  # the partitions are still ours
    except CommitFailedError:
        pass  # the partitions went to another member: it reads them from the last commit


# --8<-- [end:commit]


async def main(bootstrap: str, kind: Kind, topic: str = "orders", group: str = "billing") -> int:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap) as producer:
        for i in range(10):
            await producer.send(topic, b"order %d" % i, key=b"customer-%d" % (i % 3))

    read = 0
    async with AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **group_settings(kind),
    ) as consumer:
        while read < 10:
            batches = await consumer.getmany(timeout_ms=1000)
            read += sum(len(records) for records in batches.values())
            await commit(consumer)
    print(f"{kind} group {group!r} read {read} records")
    return read


if __name__ == "__main__":
    asyncio.run(main(os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"), sys.argv[1]))  # type: ignore[arg-type]
