"""Chaos soak on a 3-node Apache Kafka (not part of ``make test``: minutes per run).

``make soak`` or ``python -m tests.soak SCENARIO [--protocol P] [--seconds S] [--seed N]``:

- ``group``: an idempotent producer floods a 6-partition topic (replication 3,
  min.insync.replicas 2) while three members of one group (``--protocol`` classic, consumer
  or share) read it and commit after each batch; every 6-12 s a random node is killed (-9),
  paused (SIGSTOP) or stopped cleanly, or a member is replaced. Passes when every acknowledged
  record was read.
- ``eos``: two consume-transform-produce processors (transactional producer, read_committed
  member of a ``--protocol`` classic or consumer group, offsets sent in the transaction) under
  the same node faults. Passes when the sink, read read_committed, holds every acknowledged
  source record exactly once.

Exit code 0 on a pass, 1 on loss or duplicates, 2 when a member or processor died. Every wait is
bounded; the seed chooses the faults (their timing still depends on the machine)."""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file

from cluster_helpers import create_topic  # noqa: E402
from share_helpers import configure_group  # noqa: E402

from aiokafka_lite import (  # noqa: E402
    AIOKafkaConsumer,
    AIOKafkaProducer,
    AIOKafkaShareConsumer,
)
from aiokafka_lite import errors as Errors  # noqa: E402
from aiokafka_lite.launchers.apache import QUICK_JVM_OPTIONS, ApacheKafka  # noqa: E402
from aiokafka_lite.structs import TopicPartition  # noqa: E402


def log(*parts: object) -> None:
    print(time.strftime("%H:%M:%S"), *parts, flush=True)


class Chaos:
    """Random node faults on ``kafka``, each followed by bringing the cluster back."""

    def __init__(self, kafka: ApacheKafka, rng: random.Random) -> None:
        self.kafka = kafka
        self.rng = rng

    async def one(self, actions: list[str]) -> str:
        await asyncio.sleep(self.rng.uniform(6, 12))
        action = self.rng.choice(actions)
        if action == "member":
            return action
        node = self.rng.choice(self.kafka.nodes)
        log("fault:", action, "node", node.node_id)
        if action == "kill":
            node.kill()
        elif action == "pause":
            node.pause()
        else:
            await asyncio.to_thread(node.stop)
        await asyncio.sleep(self.rng.uniform(3, 10))
        self.kafka.bring_back()
        await asyncio.to_thread(self.kafka.wait_ready)
        return action


class Flood:
    """An idempotent producer writing ``v0, v1, ...`` until stopped; ``acked``: the values the
    broker acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=5
        )
        self.topic = topic
        self.acked: set[bytes] = set()
        self.errors: list[str] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> Flood:
        await self.producer.start()
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            sent = []
            for _ in range(20):
                value = f"v{i}".encode()
                i += 1
                sent.append((value, await self.producer.send(self.topic, value, key=value)))
            for value, fut in sent:
                try:
                    await asyncio.wait_for(fut, 120)
                    self.acked.add(value)
                except Errors.KafkaError as exc:
                    self.errors.append(repr(exc))
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        self._stop.set()
        assert self._task is not None
        await asyncio.wait_for(self._task, 150)
        await asyncio.wait_for(self.producer.stop(), 60)


async def group_member(
    bootstrap: str, topic: str, group: str, protocol: str, seen: list[bytes], stop: asyncio.Event
) -> None:
    """One member reading ``topic`` into ``seen`` and committing after each batch."""
    consumer: Any
    if protocol == "share":
        consumer = AIOKafkaShareConsumer(bootstrap_servers=bootstrap, group_id=group)
        await consumer.start()
        consumer.subscribe([topic])
    else:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            group_protocol=protocol,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
    try:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=200)
            for records in batch.values():
                seen.extend(r.value for r in records)
            if batch:
                try:
                    await consumer.commit()
                except Errors.CommitFailedError as exc:  # a rebalance: the next owner re-reads
                    log("commit failed:", exc)
    finally:
        await asyncio.wait_for(consumer.stop(), 60)


async def scenario_group(kafka: ApacheKafka, args: argparse.Namespace, chaos: Chaos) -> int:
    bootstrap = kafka.bootstrap
    topic = await create_topic(bootstrap, 6)
    group = f"soak-{os.getpid()}"
    if args.protocol == "share":
        await configure_group(bootstrap, group, share_auto_offset_reset="earliest")
    seen: list[bytes] = []
    members: list[tuple[asyncio.Task[None], asyncio.Event]] = []

    def spawn() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(group_member(bootstrap, topic, group, args.protocol, seen, stop))
        members.append((task, stop))

    for _ in range(3):
        spawn()
    flood = await Flood(bootstrap, topic).start()
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        if await chaos.one(["kill", "pause", "stop", "member"]) == "member":
            task, stop = members.pop(chaos.rng.randrange(len(members)))
            log("member replaced")
            stop.set()
            await asyncio.wait_for(task, 90)
            spawn()
        if any(task.done() for task, _ in members):
            log("a member died:", next(t for t, _ in members if t.done()).exception())
            return 2
    await flood.stop()
    log("acknowledged", len(flood.acked), "send errors", len(flood.errors))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not flood.acked <= set(seen):
        await asyncio.sleep(0.5)
    for _, stop in members:
        stop.set()
    await asyncio.wait_for(asyncio.gather(*(task for task, _ in members)), 90)
    missing = flood.acked - set(seen)
    log("read", len(set(seen)), "read again", len(seen) - len(set(seen)), "missing", len(missing))
    return 1 if missing else 0


async def processor(
    bootstrap: str, names: tuple[str, str, str], protocol: str, txid: str, stop: asyncio.Event
) -> dict[str, int]:
    """Consume-transform-produce from ``source`` to ``sink``, the offsets in each transaction;
    a fenced or rebalanced-away processor starts over with new clients."""
    source, sink, group = names
    counts = {"commits": 0, "aborts": 0, "restarts": 0}
    while not stop.is_set():
        consumer = AIOKafkaConsumer(
            source,
            bootstrap_servers=bootstrap,
            group_id=group,
            group_protocol=protocol,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txid)
        await consumer.start()
        await producer.start()
        try:
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=300, max_records=200)
                if not batch:
                    continue
                try:
                    async with producer.transaction():
                        for records in batch.values():
                            for r in records:
                                await producer.send(sink, r.value, key=r.key)
                        ends = {tp: records[-1].offset + 1 for tp, records in batch.items()}
                        await producer.send_offsets_to_transaction(ends, group)
                    counts["commits"] += 1
                except (Errors.ProducerFenced, Errors.CommitFailedError) as exc:
                    log(txid, "starts over:", repr(exc))
                    counts["restarts"] += 1
                    break
                except Errors.KafkaError as exc:  # aborted: read again from the commits
                    log(txid, "aborted:", repr(exc))
                    counts["aborts"] += 1
                    for tp in batch:
                        committed = await consumer.committed(tp)
                        if committed is None:
                            await consumer.seek_to_beginning(tp)
                        else:
                            consumer.seek(tp, committed)
        finally:
            await asyncio.wait_for(producer.stop(), 60)
            await asyncio.wait_for(consumer.stop(), 60)
    return counts


async def scenario_eos(kafka: ApacheKafka, args: argparse.Namespace, chaos: Chaos) -> int:
    bootstrap = kafka.bootstrap
    source = await create_topic(bootstrap, 4)
    sink = await create_topic(bootstrap, 4)
    names = (source, sink, f"soak-eos-{os.getpid()}")
    procs = []
    for i in range(2):
        stop = asyncio.Event()
        txid = f"{names[2]}-p{i}"
        procs.append(
            (asyncio.create_task(processor(bootstrap, names, args.protocol, txid, stop)), stop)
        )
    flood = await Flood(bootstrap, source).start()
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        await chaos.one(["kill", "pause", "stop"])
        if any(task.done() for task, _ in procs):
            log("a processor died:", next(t for t, _ in procs if t.done()).exception())
            return 2
    await flood.stop()
    log("acknowledged", len(flood.acked), "send errors", len(flood.errors))
    reader = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", auto_offset_reset="earliest"
    )
    await reader.start()
    reader.assign([TopicPartition(sink, p) for p in range(4)])
    got: list[bytes] = []
    deadline = time.monotonic() + 120
    quiet = 0
    while time.monotonic() < deadline and (not flood.acked <= set(got) or quiet < 6):
        batch = await reader.getmany(timeout_ms=500)
        quiet = 0 if batch else quiet + 1  # then 3 s more: a duplicate would arrive late
        for records in batch.values():
            got.extend(r.value for r in records)
    await reader.stop()
    for _, stop in procs:
        stop.set()
    counts = await asyncio.wait_for(asyncio.gather(*(t for t, _ in procs)), 90)
    missing = flood.acked - set(got)
    duplicates = len(got) - len(set(got))
    log("sink", len(got), "duplicates", duplicates, "missing", len(missing), "processors", counts)
    return 1 if missing or duplicates else 0


async def main(args: argparse.Namespace) -> int:
    kafka = ApacheKafka(nodes=3, jvm_options=QUICK_JVM_OPTIONS, class_data_sharing=True)
    await asyncio.to_thread(kafka.start)
    try:
        chaos = Chaos(kafka, random.Random(args.seed))
        run = scenario_group if args.scenario == "group" else scenario_eos
        result = await run(kafka, args, chaos)
        log("PASS" if result == 0 else "FAIL")
        return result
    finally:
        await asyncio.to_thread(kafka.stop)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", choices=["group", "eos"])
    parser.add_argument("--protocol", default="consumer", choices=["classic", "consumer", "share"])
    parser.add_argument("--seconds", type=float, default=150.0)
    parser.add_argument("--seed", type=int, default=1)
    ns = parser.parse_args()
    if ns.scenario == "eos" and ns.protocol == "share":
        parser.error("eos: share groups have no offsets to commit in a transaction")
    sys.exit(asyncio.run(main(ns)))
