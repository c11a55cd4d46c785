"""Moving a live group between the classic protocol and KIP-848 (Apache Kafka 4.4, whose default
``group.consumer.migration.policy`` is ``bidirectional``): Java and aiokafka_lite members on one
protocol consume a 6-partition topic while a producer keeps writing; one at a time each is
replaced by a member on the other (Java ``group.protocol``, ours ``group_protocol``), classic to
consumer (upgrade) and consumer to classic (downgrade: the broker converts the group back when
its last consumer-protocol member leaves). Every record written is read, none is read again
beyond the last commit of the member that had it, and the group ends on the new protocol.

:class:`Ledger` (what each member read and committed, and when) and :class:`LiteMember` /
:class:`TimedJavaMember` are shared with tests/test_group_churn.py."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import pytest
from cluster_helpers import wait_until as wait_async
from java_oracle import GroupMember, unavailable_reason
from share_helpers import alter_group_configs

from aiokafka_lite import errors as Errors
from aiokafka_lite.admin import AIOKafkaAdminClient
from aiokafka_lite.consumer import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka_lite.producer import AIOKafkaProducer
from aiokafka_lite.structs import TopicPartition

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(420)]

PARTITIONS = 6
#: readiness: rebalances of classic members (3 s heartbeats) and JVMs starting on a busy machine
SETTLE_S = 90.0


@dataclass
class Ledger:
    """Every read and every successful commit of every member, with monotonic times."""

    reads: list[tuple[float, str, int, int]] = field(default_factory=list)  # t, member, p, o
    commits: list[tuple[float, str, int, int]] = field(default_factory=list)  # t, member, p, o
    java: list[TimedJavaMember] = field(default_factory=list)

    def read(self, member: str, partition: int, offset: int) -> None:
        self.reads.append((time.monotonic(), member, partition, offset))

    def all_reads(self) -> list[tuple[float, str, int, int]]:
        out = list(self.reads)
        for j in self.java:
            out += [(r["_t"], j.name, r["partition"], r["offset"]) for r in j.records]
        return sorted(out)

    def all_commits(self) -> list[tuple[float, str, int, int]]:
        out = list(self.commits)
        for j in self.java:
            out += j.commits()
        return sorted(out)

    def read_keys(self) -> set[tuple[int, int]]:
        return {(p, o) for _, _, p, o in self.all_reads()}

    def bad_duplicates(self) -> list[str]:
        """Reads of a record again after the member that read it before had committed past it
        (a duplicate inside the uncommitted window of the previous reader is allowed)."""
        commits = self.all_commits()
        by_key: dict[tuple[int, int], list[tuple[float, str]]] = {}
        for t, member, p, o in self.all_reads():
            by_key.setdefault((p, o), []).append((t, member))
        bad = []
        for (p, o), reads in by_key.items():
            for (_, before), (t2, again) in pairwise(reads):
                past = [c for c in commits if c[1] == before and c[2] == p and c[0] < t2]
                if any(c[3] > o for c in past):
                    bad.append(f"p{p}@{o}: {before} committed past it, {again} read it again")
        return bad

    def pauses(self, members: set[str], since: float, until: float) -> dict[str, float]:
        """Per member, the longest gap between two reads within [since, until]."""
        out: dict[str, float] = {}
        times: dict[str, list[float]] = {}
        for t, member, _, _ in self.all_reads():
            if member in members and since <= t <= until:
                times.setdefault(member, []).append(t)
        for member, ts in times.items():
            pts = [since, *ts, until]
            out[member] = max(b - a for a, b in pairwise(pts))
        return out


class TimedJavaMember(GroupMember):
    """The Java client in a group (classic with ``protocol="classic"``, else KIP-848), each
    line it prints stamped with the monotonic time it arrived (``_t``)."""

    def __init__(
        self, name: str, bootstrap: str, topic: str, group: str, protocol: str, run_ms: int
    ) -> None:
        super().__init__(bootstrap, topic, group, assignor="roundrobin", run_ms=run_ms)
        self.name = name
        if protocol == "consumer":
            self.command = "group-member-consumer"
            self.args = [
                *("--bootstrap", bootstrap, "--topic", topic, "--group", group),
                *("--run-ms", str(run_ms), "--from", "beginning"),
            ]

    def _read_stdout(self, stream: Any) -> None:
        for raw in stream:
            now = time.monotonic()
            try:
                line = json.loads(raw)
            except ValueError:
                with self._changed:
                    self._stderr.append("stdout: " + raw.decode(errors="replace"))
                continue
            line["_t"] = now
            with self._changed:
                self._lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def commits(self) -> list[tuple[float, str, int, int]]:
        """Its commits as far as they can be told from its output: it commits synchronously
        after every poll that returned records and prints ``commit_failed`` when that fails,
        before the next poll runs the listener. So a record followed by ``revoked`` (or
        ``closed``) with no ``commit_failed`` in between was committed by then."""
        out = []
        pending: dict[int, int] = {}  # partition -> next offset, since the last commit_failed
        for line in self.lines:
            event = line.get("event")
            if event is None:
                pending[line["partition"]] = line["offset"] + 1
            elif event == "commit_failed":
                pending.clear()
            elif event in ("revoked", "closed"):
                out += [(line["_t"], self.name, p, o) for p, o in pending.items()]
                pending.clear()
        return out


class LiteMember:
    """An aiokafka_lite member reading in a task: it commits what each ``getmany`` returned,
    and its positions in ``on_partitions_revoked``; the ledger gets its reads and commits."""

    def __init__(
        self, name: str, ledger: Ledger, bootstrap: str, topic: str, group: str, **kwargs: Any
    ) -> None:
        self.name = name
        self.ledger = ledger
        kwargs.setdefault("auto_offset_reset", "earliest")
        kwargs.setdefault("enable_auto_commit", False)
        self.consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, **kwargs)
        self.topic = topic
        self.task: asyncio.Task[None] | None = None
        self.stopping = False

    async def start(self) -> LiteMember:
        member = self

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
                positions = {tp: await member.consumer.position(tp) for tp in revoked}
                await member.commit(positions)

            def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
                pass

        self.consumer.subscribe([self.topic], listener=Listener())
        await self.consumer.start()
        self.task = asyncio.create_task(self._run())
        return self

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        if not offsets:
            return
        try:
            await self.consumer.commit(offsets)
        except Errors.KafkaError:
            return  # not committed: these stay in the uncommitted window
        now = time.monotonic()
        self.ledger.commits += [(now, self.name, tp.partition, o) for tp, o in offsets.items()]

    async def _run(self) -> None:
        while not self.stopping:
            batch = await self.consumer.getmany(timeout_ms=100)
            offsets = {}
            for tp, recs in batch.items():
                for r in recs:
                    self.ledger.read(self.name, r.partition, r.offset)
                offsets[tp] = recs[-1].offset + 1
            await self.commit(offsets)

    def assignment(self) -> set[TopicPartition]:
        return set(self.consumer.assignment())

    async def stop(self) -> None:
        self.stopping = True
        if self.task is not None:
            await asyncio.wait_for(self.task, 60)
        await self.consumer.stop()


class Writer:
    """A producer writing round-robin over the partitions until stopped; what was written."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, per_second: float) -> None:
        self.producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        self.topic = topic
        self.partitions = partitions
        self.interval = partitions / per_second
        self.written: set[tuple[int, int]] = set()
        self.task: asyncio.Task[None] | None = None
        self.stopping = False

    async def start(self) -> Writer:
        await self.producer.start()
        self.task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        i = 0
        while not self.stopping:
            futs = [
                await self.producer.send(self.topic, f"r{i}-{p}".encode(), partition=p)
                for p in range(self.partitions)
            ]
            for meta in await asyncio.gather(*futs):
                self.written.add((meta.partition, meta.offset))
            i += 1
            await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        self.stopping = True
        if self.task is not None:
            await asyncio.wait_for(self.task, 60)
        await self.producer.stop()


async def wait_until(done: Callable[[], bool], what: str, timeout: float = SETTLE_S) -> None:
    """Wait (the members read in their tasks meanwhile) until ``done()`` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():
        if loop.time() > deadline:
            raise AssertionError(f"no {what} within {timeout:.0f}s")
        await asyncio.sleep(0.2)


def java_tps(java: GroupMember) -> set[TopicPartition]:
    return {TopicPartition(t, p) for t, p in java.assigned()}


@pytest.mark.parametrize(("start", "end"), [("classic", "consumer"), ("consumer", "classic")])
async def test_live_group_moves_between_protocols(
    broker: Any, kafka_bootstrap: str, new_topic: Any, start: str, end: str
) -> None:
    """Upgrade (classic to consumer) and downgrade (consumer to classic, the broker converts
    the group back when its last consumer-protocol member leaves), each rolled member by
    member with Java and aiokafka_lite members."""
    broker.skip_on("tansu", "noida", "kafka", reason="KIP-848 groups of Apache Kafka 4.x")
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    topic = await new_topic(partitions=PARTITIONS)
    tps = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    group = f"migrate-{uuid.uuid4().hex[:8]}"
    # KIP-848 members learn assignments and revocations a heartbeat later: 1 s, not 5 s
    await alter_group_configs(kafka_bootstrap, group, consumer_heartbeat_interval_ms="1000")
    ledger = Ledger()
    lites: dict[str, LiteMember] = {}
    javas: dict[str, TimedJavaMember] = {}

    def lite(name: str, protocol: str) -> LiteMember:
        lites[name] = LiteMember(
            name, ledger, kafka_bootstrap, topic, group, group_protocol=protocol
        )
        return lites[name]

    def java(name: str, protocol: str) -> TimedJavaMember:
        javas[name] = TimedJavaMember(name, kafka_bootstrap, topic, group, protocol, 380_000)
        ledger.java.append(javas[name])
        return javas[name].start()

    def owned() -> list[set[TopicPartition]]:
        return [m.assignment() for m in lites.values()] + [java_tps(j) for j in javas.values()]

    def split() -> bool:  # every live member has partitions, together each once
        sets = owned()
        return all(sets) and sum(map(len, sets)) == PARTITIONS and set().union(*sets) == tps

    writer = await Writer(kafka_bootstrap, topic, PARTITIONS, per_second=60).start()
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        # the group of the starting protocol: one Java member, two of ours
        java(f"java-{start}", start).wait_assigned(SETTLE_S)
        for name in (f"lite-{start}-1", f"lite-{start}-2"):
            await lite(name, start).start()
        await wait_until(split, f"three-way {start} split")
        listed = await admin.list_groups(group_types=[start])
        assert group in {g.group_id for g in listed}
        # one at a time: a member of the other protocol joins, then one of the first leaves
        steps = [
            (f"lite-{end}-1", f"lite-{start}-1"),
            (f"java-{end}", f"java-{start}"),
            (f"lite-{end}-2", f"lite-{start}-2"),
        ]
        for new, old in steps:
            if new.startswith("java"):
                java(new, end)
            else:
                await lite(new, end).start()
            await wait_until(split, f"split with {new}")
            if old.startswith("java"):
                javas.pop(old).stop(60)
            else:
                await lites.pop(old).stop()
            await wait_until(split, f"split after {old} left")
            if new == "lite-consumer-1":  # the first consumer-protocol member converted it
                listed = await admin.list_groups(group_types=["consumer"])
                assert group in {g.group_id for g in listed}
        await writer.stop()
        written = writer.written
        assert len(written) > 500, len(written)
        await wait_until(lambda: written <= ledger.read_keys(), "every record read")
        assert ledger.bad_duplicates() == []
        # the duplicate check had commits to go by, of every member that handed partitions over
        # (Java's as told by its output)
        committers = {c[1] for c in ledger.all_commits()}
        assert {old for _, old in steps} <= committers, committers
        again = len(ledger.all_reads()) - len(ledger.read_keys())
        print(f"{len(written)} records, {again} read again inside uncommitted windows")
        # a group of the end protocol now, of the three new members
        listed = await admin.list_groups(group_types=[end])
        assert group in {g.group_id for g in listed}
        listed = await admin.list_groups(group_types=[start])
        assert group not in {g.group_id for g in listed}

        # the members hold their split; the broker calls the group Stable once every member
        # has acknowledged its target epoch (a heartbeat later under KIP-848): wait for that
        seen: list[Any] = []  # the last description

        async def stable() -> bool:
            [resp] = await admin.describe_consumer_groups([group])
            seen[:] = resp.groups
            return bool(seen[0].state == "Stable")

        await wait_async("the broker's Stable", stable, SETTLE_S)
        [described] = seen
        assert described.state == "Stable", described
        assert len(described.members) == 3
        assert not any(e["event"] == "lost" for j in ledger.java for e in j.events)
    finally:
        if not writer.stopping:
            await writer.stop()
        for m in lites.values():
            await m.stop()
        for j in javas.values():
            if j.running:
                j.stop(check=False)
        await admin.close()
