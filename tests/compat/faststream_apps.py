"""Real FastStream Kafka apps, run on aiokafka_lite through ``install_as_aiokafka()``.

    python tests/compat/faststream_apps.py {lite|aiokafka} SCENARIO   (COMPAT_BOOTSTRAP=host:port)

``lite`` installs aiokafka_lite as aiokafka BEFORE FastStream is imported (the point of the
test); ``aiokafka`` runs the same app on the real aiokafka (to check a scenario itself).  Each
scenario publishes numbered messages plus one end marker per partition and returns what the
handlers received; the test requires every message exactly once.  No sleeps: every wait is
for a condition, with a timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections import Counter
from typing import Any

if __name__ == "__main__" and sys.argv[1] == "lite":
    import aiokafka_lite

    aiokafka_lite.install_as_aiokafka()

import aiokafka  # noqa: E402  (after install_as_aiokafka() on purpose)
from aiokafka.abc import ConsumerRebalanceListener  # noqa: E402
from faststream.kafka import KafkaBroker, KafkaMessage, TopicPartition  # noqa: E402

BOOTSTRAP = os.environ.get("COMPAT_BOOTSTRAP", "127.0.0.1:9092")
RESULT_PREFIX = "FASTSTREAM-RESULT:"
TIMEOUT = 60.0


def _name(kind: str) -> str:
    return f"fs-{kind}-{uuid.uuid4().hex[:10]}"


async def _create_topic(name: str, partitions: int) -> None:
    from aiokafka_lite.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=BOOTSTRAP)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
        for _ in range(300):
            described = await admin.describe_topics([name])
            parts = described[0]["partitions"] if described else []
            if len(parts) == partitions and all(p["leader"] >= 0 for p in parts):
                return
            await asyncio.sleep(0.05)
    finally:
        await admin.close()


class _Seen:
    """Messages received, and an event per expected set."""

    def __init__(self, expected: set[str]) -> None:
        self.expected = expected
        self.got: list[str] = []
        self.done = asyncio.Event()

    def add(self, value: str) -> None:
        self.got.append(value)
        if self.expected <= set(self.got):
            self.done.set()

    def result(self) -> dict[str, Any]:
        counts = Counter(self.got)
        return {
            "missing": sorted(self.expected - set(counts)),
            "duplicates": sorted(v for v, n in counts.items() if n > 1),
            "unexpected": sorted(set(counts) - self.expected),
            "count": len(self.got),
        }


async def _publish_all(
    broker: KafkaBroker, seen: _Seen, topic: str, n: int, partitions: int, keyed: bool = True
) -> None:
    """n messages (keyed so they spread), then an end marker on every partition; ``seen``
    expects them all (set before the first publish: handlers run concurrently)."""
    seen.expected = seen.expected | {f"m{i}" for i in range(n)}
    seen.expected |= {f"end-{p}" for p in range(partitions)}
    seen.done.clear()
    for i in range(n):
        await broker.publish(f"m{i}", topic, key=f"k{i}".encode() if keyed else None)
    for p in range(partitions):
        await broker.publish(f"end-{p}", topic, partition=p)


async def pub_sub() -> dict[str, Any]:
    topic = _name("t")
    await _create_topic(topic, 1)
    broker = KafkaBroker(BOOTSTRAP)
    seen = _Seen(set())

    @broker.subscriber(topic, group_id=_name("g"), auto_offset_reset="earliest")
    async def handle(msg: str) -> None:
        seen.add(msg)

    publisher = broker.publisher(topic)
    async with broker:
        await broker.start()
        seen.expected = {f"p{i}" for i in range(5)}
        for i in range(5):
            await publisher.publish(f"p{i}")
        await asyncio.wait_for(seen.done.wait(), TIMEOUT)
        await _publish_all(broker, seen, topic, 10, 1)
        await asyncio.wait_for(seen.done.wait(), TIMEOUT)
    return seen.result()


async def request_reply() -> dict[str, Any]:
    """A subscriber that publishes its result to another topic (@publisher decorator)."""
    src, dst = _name("src"), _name("dst")
    await _create_topic(src, 1)
    await _create_topic(dst, 1)
    broker = KafkaBroker(BOOTSTRAP)
    seen = _Seen({f"M{i}" for i in range(5)})

    @broker.subscriber(src, group_id=_name("g"), auto_offset_reset="earliest")
    @broker.publisher(dst)
    async def upper(msg: str) -> str:
        return msg.upper()

    @broker.subscriber(dst, group_id=_name("g"), auto_offset_reset="earliest")
    async def sink(msg: str) -> None:
        seen.add(msg)

    async with broker:
        await broker.start()
        for i in range(5):
            await broker.publish(f"m{i}", src)
        await asyncio.wait_for(seen.done.wait(), TIMEOUT)
    return seen.result()


async def batch_subscriber() -> dict[str, Any]:
    topic = _name("t")
    await _create_topic(topic, 2)
    broker = KafkaBroker(BOOTSTRAP)
    seen = _Seen(set())
    batches: list[int] = []

    @broker.subscriber(
        topic, group_id=_name("g"), auto_offset_reset="earliest", batch=True, max_records=7
    )
    async def handle(msgs: list[str]) -> None:
        batches.append(len(msgs))
        for m in msgs:
            seen.add(m)

    async with broker:
        await broker.start()
        await _publish_all(broker, seen, topic, 30, 2)
        await asyncio.wait_for(seen.done.wait(), TIMEOUT)
    out = seen.result()
    out["max_batch_at_most_7"] = max(batches) <= 7
    return out


async def max_workers_group() -> dict[str, Any]:
    topic = _name("t")
    await _create_topic(topic, 4)
    broker = KafkaBroker(BOOTSTRAP)
    seen = _Seen(set())

    @broker.subscriber(topic, group_id=_name("g"), auto_offset_reset="earliest", max_workers=3)
    async def handle(msg: str) -> None:
        seen.add(msg)

    async with broker:
        await broker.start()
        await _publish_all(broker, seen, topic, 40, 4)
        await asyncio.wait_for(seen.done.wait(), TIMEOUT)
    return seen.result()


async def max_workers_ack_between_partitions() -> dict[str, Any]:
    """max_workers with a group and AckPolicy.ACK: one consumer per worker, each record carries
    its consumer (FastStream sets ``record.consumer``), acks commit per message."""
    from faststream import AckPolicy

    topic = _name("t")
    await _create_topic(topic, 3)
    broker = KafkaBroker(BOOTSTRAP)
    seen = _Seen(set())
    consumers: set[int] = set()

    @broker.subscriber(
        topic,
        group_id=_name("g"),
        auto_offset_reset="earliest",
        max_workers=3,
        ack_policy=AckPolicy.ACK,
    )
    async def handle(msg: str, message: KafkaMessage) -> None:
        consumers.add(id(getattr(message.raw_message, "consumer", None)))
        seen.add(msg)

    async with broker:
        await broker.start()
        await _publish_all(broker, seen, topic, 30, 3)
        await asyncio.wait_for(seen.done.wait(), TIMEOUT)
    out = seen.result()
    out["several_consumers"] = len(consumers) >= 2
    return out


async def two_apps_one_group() -> dict[str, Any]:
    """Two brokers (two app instances) in one consumer group share the partitions."""
    topic = _name("t")
    group = _name("g")
    await _create_topic(topic, 4)
    seen = _Seen(set())
    brokers = [KafkaBroker(BOOTSTRAP), KafkaBroker(BOOTSTRAP)]
    per_app: list[list[str]] = [[], []]
    for i, broker in enumerate(brokers):

        def make(idx: int) -> Any:
            async def handle(msg: str) -> None:
                per_app[idx].append(msg)
                seen.add(msg)

            return handle

        broker.subscriber(topic, group_id=group, auto_offset_reset="earliest")(make(i))
    async with brokers[0], brokers[1]:
        await brokers[0].start()
        await brokers[1].start()
        await _publish_all(brokers[0], seen, topic, 40, 4)
        await asyncio.wait_for(seen.done.wait(), TIMEOUT)
    out = seen.result()
    out["both_apps_consumed"] = all(per_app)
    return out


async def manual_partitions() -> dict[str, Any]:
    topic = _name("t")
    await _create_topic(topic, 3)
    broker = KafkaBroker(BOOTSTRAP)
    seen = _Seen(set())
    parts: set[int] = set()

    @broker.subscriber(
        partitions=[TopicPartition(topic, 1)], auto_offset_reset="earliest", group_id=None
    )
    async def handle(msg: str, message: KafkaMessage) -> None:
        parts.add(message.raw_message.partition)
        seen.add(msg)

    async with broker:
        await broker.start()
        seen.expected = {"x1", "x4", "end-1"}
        for i in range(6):
            await broker.publish(f"x{i}", topic, partition=i % 3)
        await broker.publish("end-1", topic, partition=1)
        await asyncio.wait_for(seen.done.wait(), TIMEOUT)
    out = seen.result()
    out["partitions"] = sorted(parts)
    return out


class _Listener(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self.events.append(("revoked", len(revoked)))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.events.append(("assigned", len(assigned)))


async def rebalance_listener() -> dict[str, Any]:
    topic = _name("t")
    await _create_topic(topic, 2)
    broker = KafkaBroker(BOOTSTRAP)
    seen = _Seen(set())
    listener = _Listener()

    @broker.subscriber(topic, group_id=_name("g"), auto_offset_reset="earliest", listener=listener)
    async def handle(msg: str) -> None:
        seen.add(msg)

    async with broker:
        await broker.start()
        await _publish_all(broker, seen, topic, 10, 2)
        await asyncio.wait_for(seen.done.wait(), TIMEOUT)
    out = seen.result()
    out["assigned_events"] = [e for e in listener.events if e[0] == "assigned"][:1]
    return out


async def pattern_subscriber() -> dict[str, Any]:
    prefix = _name("pat")
    topic = prefix + "-a"
    await _create_topic(topic, 1)
    broker = KafkaBroker(BOOTSTRAP)
    seen = _Seen(set())

    @broker.subscriber(pattern=f"{prefix}-.*", group_id=_name("g"), auto_offset_reset="earliest")
    async def handle(msg: str) -> None:
        seen.add(msg)

    async with broker:
        await broker.start()
        await _publish_all(broker, seen, topic, 5, 1)
        await asyncio.wait_for(seen.done.wait(), TIMEOUT)
    return seen.result()


async def manual_ack() -> dict[str, Any]:
    """Manual commit policy: the app acks; a restarted app resumes after the last ack."""
    from faststream import AckPolicy

    topic = _name("t")
    group = _name("g")
    await _create_topic(topic, 1)
    seen = _Seen({f"m{i}" for i in range(5)})

    def app() -> KafkaBroker:
        broker = KafkaBroker(BOOTSTRAP)

        @broker.subscriber(
            topic, group_id=group, auto_offset_reset="earliest", ack_policy=AckPolicy.MANUAL
        )
        async def handle(msg: str, message: KafkaMessage) -> None:
            seen.add(msg)
            await message.ack()

        return broker

    broker = app()
    async with broker:
        await broker.start()
        for i in range(5):
            await broker.publish(f"m{i}", topic)
        await asyncio.wait_for(seen.done.wait(), TIMEOUT)
    first = seen.result()
    seen2 = _Seen({"after"})
    seen.add = seen2.add  # type: ignore[method-assign]
    broker = app()
    async with broker:
        await broker.start()
        await broker.publish("after", topic)
        await asyncio.wait_for(seen2.done.wait(), TIMEOUT)
    return {"first": first, "second": seen2.result()}


async def publish_batch_nack_ping() -> dict[str, Any]:
    """publish_batch (the partitioner picks the partition), a nack that redelivers once and
    broker.ping()."""
    from faststream import AckPolicy

    topic = _name("t")
    await _create_topic(topic, 2)
    broker = KafkaBroker(BOOTSTRAP)
    seen = _Seen({f"b{i}" for i in range(6)})
    nacked: list[str] = []

    @broker.subscriber(
        topic,
        group_id=_name("g"),
        auto_offset_reset="earliest",
        ack_policy=AckPolicy.MANUAL,
    )
    async def handle(msg: str, message: KafkaMessage) -> None:
        if msg == "b3" and not nacked:
            nacked.append(msg)
            await message.nack()  # seek back: delivered again
            return
        seen.add(msg)
        await message.ack()

    out: dict[str, Any] = {}
    async with broker:
        await broker.start()
        out["ping"] = await broker.ping(10)
        md = await broker.publish_batch("b0", "b1", "b2", topic=topic)
        out["batch_partition_ok"] = md.partition in (0, 1) and md.offset == 0
        await broker.publish_batch("b3", "b4", "b5", topic=topic, partition=md.partition)
        await asyncio.wait_for(seen.done.wait(), TIMEOUT)
        # publish(no_confirm=True) hands back the send future (an asyncio.Future in aiokafka)
        fut = await broker.publish("", topic=_name("nc"), no_confirm=True)
        bfut = await broker.publish_batch(1, "hi", topic=_name("nc"), no_confirm=True)
        out["no_confirm_futures"] = [
            isinstance(fut, asyncio.Future),
            isinstance(bfut, asyncio.Future),
            (await fut).offset,
            (await bfut).offset,
        ]
    out.update(seen.result())
    out["nacked"] = nacked
    return out


async def graceful_shutdown_redelivers() -> dict[str, Any]:
    """A handler interrupted by shutdown (graceful_timeout) is not committed: the next app
    instance in the group gets the message again, once."""
    from faststream import AckPolicy

    topic = _name("t")
    group = _name("g")
    await _create_topic(topic, 1)
    started = asyncio.Event()
    broker = KafkaBroker(BOOTSTRAP, graceful_timeout=0.3)

    @broker.subscriber(
        topic, group_id=group, ack_policy=AckPolicy.NACK_ON_ERROR, auto_offset_reset="earliest"
    )
    async def slow(_: str) -> None:
        started.set()
        await asyncio.sleep(60)  # interrupted by the broker's shutdown

    async with broker:
        await broker.start()
        await broker.publish("payload", topic)
        await asyncio.wait_for(started.wait(), TIMEOUT)
    seen = _Seen({"payload", "end-0"})
    again = KafkaBroker(BOOTSTRAP)

    @again.subscriber(
        topic, group_id=group, ack_policy=AckPolicy.NACK_ON_ERROR, auto_offset_reset="earliest"
    )
    async def retry(msg: str) -> None:
        seen.add(msg)

    async with again:
        await again.start()
        await again.publish("end-0", topic)
        await asyncio.wait_for(seen.done.wait(), TIMEOUT)
    return seen.result()


async def test_client_with_real() -> dict[str, Any]:
    from faststream.kafka import TestKafkaBroker

    topic = _name("t")
    await _create_topic(topic, 1)
    broker = KafkaBroker(BOOTSTRAP)
    seen = _Seen({f"r{i}" for i in range(3)})

    @broker.subscriber(topic, group_id=_name("g"), auto_offset_reset="earliest")
    async def handle(msg: str) -> None:
        seen.add(msg)

    async with TestKafkaBroker(broker, with_real=True) as br:
        for i in range(3):
            await br.publish(f"r{i}", topic)
        await asyncio.wait_for(seen.done.wait(), TIMEOUT)
        await handle.wait_call(TIMEOUT)
    return seen.result()


def _fastapi_app() -> dict[str, Any]:
    """FastAPI integration through faststream's KafkaRouter (lifespan starts the broker)."""
    import warnings

    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from faststream.kafka.fastapi import KafkaRouter

    topic = _name("t")
    asyncio.run(_create_topic(topic, 1))
    router = KafkaRouter(BOOTSTRAP)
    got: list[str] = []

    @router.subscriber(topic, group_id=_name("g"), auto_offset_reset="earliest")
    async def handle(msg: str) -> None:
        got.append(msg)

    @router.get("/send/{text}")
    async def send(text: str) -> dict[str, str]:
        await router.broker.publish(text, topic)
        return {"sent": text}

    @router.get("/got")
    async def received() -> list[str]:
        return got

    app = FastAPI()
    app.include_router(router)
    import time

    with TestClient(app) as client:
        for i in range(3):
            assert client.get(f"/send/h{i}").json() == {"sent": f"h{i}"}
        deadline = time.monotonic() + TIMEOUT
        body: list[str] = []
        while time.monotonic() < deadline:
            body = client.get("/got").json()
            if len(body) >= 3:
                break
            time.sleep(0.05)  # polling a condition from the sync test client, bounded
    counts = Counter(body)
    expected = {f"h{i}" for i in range(3)}
    return {
        "missing": sorted(expected - set(counts)),
        "duplicates": sorted(v for v, n in counts.items() if n > 1),
        "unexpected": sorted(set(counts) - expected),
        "count": len(body),
    }


SCENARIOS = {
    "pub_sub": pub_sub,
    "request_reply": request_reply,
    "batch_subscriber": batch_subscriber,
    "max_workers_group": max_workers_group,
    "two_apps_one_group": two_apps_one_group,
    "manual_partitions": manual_partitions,
    "rebalance_listener": rebalance_listener,
    "pattern_subscriber": pattern_subscriber,
    "manual_ack": manual_ack,
    "test_client_with_real": test_client_with_real,
    "publish_batch_nack_ping": publish_batch_nack_ping,
    "max_workers_ack_between_partitions": max_workers_ack_between_partitions,
    "graceful_shutdown_redelivers": graceful_shutdown_redelivers,
}
SYNC_SCENARIOS = {"fastapi_router": _fastapi_app}


def main() -> int:
    mode, scenario = sys.argv[1], sys.argv[2]
    want = "aiokafka_lite" if mode == "lite" else "aiokafka"
    assert aiokafka.__name__ == want, (aiokafka.__name__, want)
    if scenario in SYNC_SCENARIOS:
        result = SYNC_SCENARIOS[scenario]()
    else:
        result = asyncio.run(asyncio.wait_for(SCENARIOS[scenario](), TIMEOUT * 2))
    if mode == "lite":  # nothing of the real aiokafka was loaded behind our back
        result["real_aiokafka_modules"] = sorted(
            name
            for name, mod in list(sys.modules.items())
            if name.split(".")[0] == "aiokafka"
            and "aiokafka_lite" not in (getattr(mod, "__file__", None) or "aiokafka_lite")
        )
    print(RESULT_PREFIX + json.dumps(result, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
