"""Rebalance pauses on Apache Kafka 4.4: ``python -m benchmarks --only rebalance`` (or
``python -m benchmarks.bench_rebalance``).

A group of six members of one client reads a 12-partition topic that a producer writes to at a
steady rate (240 records/s, 20 per partition and second); every member commits what each poll
returned (as ``tests/java_oracle.GroupMember`` does: a classic member then learns of a rebalance
from the commit's answer as well as from its heartbeat). Two events are timed:

* **leave**: one of the six leaves (closes, so it sends LeaveGroup / a leave heartbeat);
* **join**: (after a replacement brought the group back to six) a seventh member joins.
  The replacement starts a different delay after the leave in each round (``replacement_delay``,
  the same for every client), so the rounds sample its heartbeat phase relative to the members
  that stayed: an eager member that keeps a phase of its own delays the whole group's rejoin.

For each member that keeps at least one partition through the event, its pause is the longest
gap between two records it read from the partitions it kept, from the event until the group has
settled again plus 2 s (the steady gap is ~50 ms). A row gives the worst member's pause, the
median over ``--rounds`` runs.

Configurations: eager classic (aiokafka_lite, aiokafka, the Java client), KIP-848
(``group_protocol="consumer"``: aiokafka_lite, Java), and cooperative classic (the Java
``CooperativeStickyAssignor``; aiokafka_lite's row when
``aiokafka_lite.consumer.assignors.CooperativeStickyAssignor`` exists). Java members run in
their own JVMs (``tests/java_oracle.GroupMember``, which prints every record it reads).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

from aiokafka_lite import AIOKafkaProducer
from aiokafka_lite.admin import AIOKafkaAdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

PARTITIONS = 12
RATE = 240.0
SETTLE_S = 120.0
AFTER_S = 2.0
#: the default heartbeat interval of every client here (heartbeat.interval.ms)
HEARTBEAT_S = 3.0
#: a commit refused because the group is rebalancing (aiokafka's and aiokafka_lite's names)
_COMMIT_ERRORS = {
    "CommitFailedError",
    "RebalanceInProgressError",
    "IllegalStateError",
    "IllegalGenerationError",
    "UnknownMemberIdError",
    "StaleMemberEpochError",
}


class Reads:
    """Every read of every member: (monotonic time, partition)."""

    def __init__(self) -> None:
        self.by_member: dict[str, list[tuple[float, int]]] = {}

    def pause(self, member: str, kept: set[int], since: float, until: float) -> float:
        times = [t for t, p in self.by_member.get(member, []) if p in kept and since <= t <= until]
        points = [since, *sorted(times), until]
        return max(b - a for a, b in pairwise(points))


class AsyncMember:
    """An asyncio consumer (aiokafka_lite's or aiokafka's) reading in a task."""

    def __init__(self, name: str, reads: Reads, consumer: Any) -> None:
        self.name = name
        self.reads = reads.by_member.setdefault(name, [])
        self.consumer = consumer
        self.task: asyncio.Task[None] | None = None
        self.stopping = False

    async def start(self) -> None:
        await self.consumer.start()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while not self.stopping:
            batch = await self.consumer.getmany(timeout_ms=100)
            now = time.monotonic()
            for tp, recs in batch.items():
                self.reads += [(now, tp.partition)] * len(recs)
            if batch:  # as the Java member does: commit what each poll returned
                try:
                    await self.consumer.commit(
                        {tp: recs[-1].offset + 1 for tp, recs in batch.items()}
                    )
                except Exception as exc:  # both clients' CommitFailedError & co
                    if type(exc).__name__ not in _COMMIT_ERRORS:
                        raise

    def partitions(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    async def stop(self) -> None:
        self.stopping = True
        if self.task is not None:
            await asyncio.wait_for(self.task, 60)
        await self.consumer.stop()


class JavaMember:
    """The Java client in its own JVM (classic with an assignor, or KIP-848)."""

    def __init__(
        self, name: str, reads: Reads, bootstrap: str, topic: str, group: str, how: str
    ) -> None:
        from java_oracle import GroupMember

        self.name = name
        self.reads = reads.by_member.setdefault(name, [])
        mine = self.reads

        class Timed(GroupMember):
            def _read_stdout(self, stream: Any) -> None:
                for raw in stream:
                    now = time.monotonic()
                    line = json.loads(raw)
                    if "event" not in line:
                        mine.append((now, line["partition"]))
                        continue
                    with self._changed:
                        self._lines.append(line)
                        self._changed.notify_all()
                with self._changed:
                    self._changed.notify_all()

        if how == "consumer":
            self.member = Timed(bootstrap, topic, group, run_ms=600_000, from_beginning=False)
            self.member.command = "group-member-consumer"
            self.member.args = [
                *("--bootstrap", bootstrap, "--topic", topic, "--group", group),
                *("--run-ms", "600000", "--from", "latest"),
            ]
        else:
            self.member = Timed(
                bootstrap, topic, group, assignor=how, run_ms=600_000, from_beginning=False
            )

    async def start(self) -> None:
        await asyncio.to_thread(self.member.start)

    def partitions(self) -> set[int]:
        return {p for _, p in self.member.assigned()}

    async def stop(self) -> None:
        await asyncio.to_thread(self.member.stop, 60.0, check=False)


def configs() -> list[tuple[str, str, str]]:
    """(row label, client, how): how is an assignor (classic) or ``consumer`` (KIP-848)."""
    from aiokafka_lite.consumer import assignors

    rows = [
        ("eager classic (roundrobin)", "aiokafka_lite", "roundrobin"),
        ("eager classic (roundrobin)", "aiokafka", "roundrobin"),
        ("eager classic (roundrobin)", "java", "roundrobin"),
        ("KIP-848 (broker default: uniform)", "aiokafka_lite", "consumer"),
        ("KIP-848 (broker default: uniform)", "java", "consumer"),
        ("cooperative classic (cooperative-sticky)", "java", "cooperative-sticky"),
    ]
    if hasattr(assignors, "CooperativeStickyAssignor"):
        rows.insert(5, ("cooperative classic (cooperative-sticky)", "aiokafka_lite", "cooperative"))
    return rows


def make_member(
    client: str, how: str, name: str, reads: Reads, bootstrap: str, topic: str, group: str
) -> Any:
    if client == "java":
        return JavaMember(name, reads, bootstrap, topic, group, how)
    kwargs: dict[str, Any] = dict(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="latest",
        enable_auto_commit=False,
    )
    if client == "aiokafka":
        from aiokafka import AIOKafkaConsumer as Peer

        return AsyncMember(name, reads, Peer(topic, **kwargs))
    from aiokafka_lite.consumer import AIOKafkaConsumer, assignors

    if how == "consumer":
        kwargs["group_protocol"] = "consumer"
    elif how == "cooperative":
        kwargs["partition_assignment_strategy"] = (assignors.CooperativeStickyAssignor,)  # type: ignore[attr-defined]
    return AsyncMember(name, reads, AIOKafkaConsumer(topic, **kwargs))


async def _wait(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + SETTLE_S
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {SETTLE_S:.0f}s")
        await asyncio.sleep(0.05)


def _settled(members: dict[str, Any]) -> bool:
    sets = [m.partitions() for m in members.values()]
    return all(sets) and sum(map(len, sets)) == PARTITIONS and len(set().union(*sets)) == PARTITIONS


async def _event(members: dict[str, Any], reads: Reads, change: Callable[[], Any]) -> float | None:
    """Run ``change`` (a join or a leave); the worst pause of the members that kept partitions."""
    before = {n: m.partitions() for n, m in members.items()}
    t0 = time.monotonic()
    await change()
    await _wait(lambda: _settled(members), "settled group")
    await asyncio.sleep(AFTER_S)
    t1 = time.monotonic()
    pauses = []
    for name, m in members.items():
        kept = before.get(name, set()) & m.partitions()
        if kept:
            pauses.append(reads.pause(name, kept, t0, t1))
    return max(pauses) if pauses else None


def replacement_delay(round_index: int) -> float:
    """How long after the leave settled the replacement starts in round ``round_index``: spread
    over a heartbeat interval (0, 1.85, 0.71, 2.56 ... s), the same for every client, as a
    replacement starts at any moment: it samples the heartbeat phase the replacement takes
    relative to the members that stayed."""
    return HEARTBEAT_S * ((round_index * 0.618) % 1.0)


async def one_run(
    bootstrap: str, client: str, how: str, delay: float = 0.0
) -> dict[str, float | None]:
    topic = f"bench-rebalance-{uuid.uuid4().hex[:8]}"
    group = f"bench-rebalance-{uuid.uuid4().hex[:8]}"
    async with AIOKafkaAdminClient(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    reads = Reads()
    members: dict[str, Any] = {}
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    stopping = False

    async def write() -> None:
        i = 0
        while not stopping:
            for p in range(PARTITIONS):
                await producer.send(topic, b"x" * 100, partition=p)
            i += 1
            await asyncio.sleep(PARTITIONS / RATE)

    writer = asyncio.create_task(write())

    async def add(name: str) -> None:
        members[name] = make_member(client, how, name, reads, bootstrap, topic, group)
        await members[name].start()

    try:
        # the six start together, as a deployment's members do (a client whose start() waits
        # for the first assignment would otherwise join one by one, which spreads the
        # members' heartbeat phases and so how soon each one learns of a rebalance)
        await asyncio.gather(*(add(f"m{i}") for i in range(6)))
        await _wait(lambda: _settled(members), "six-way split")
        await asyncio.sleep(AFTER_S)

        async def leave() -> None:
            await members.pop("m0").stop()

        out = {"leave": await _event(members, reads, leave)}
        await asyncio.sleep(delay)
        await add("m6")  # back to six
        await _wait(lambda: _settled(members), "six-way split again")
        await asyncio.sleep(AFTER_S)
        out["join"] = await _event(members, reads, lambda: add("m7"))
        return out
    finally:
        stopping = True
        await writer
        await producer.stop()
        await asyncio.gather(*(m.stop() for m in members.values()))


async def main(args: argparse.Namespace) -> dict[str, Any]:
    """Every configuration ``args.rounds`` times; prints and returns the medians."""
    bootstrap = args.bootstrap
    broker = None
    if bootstrap is None:
        from aiokafka_lite.launchers.apache import ApacheKafka

        broker = ApacheKafka()
        await asyncio.to_thread(broker.start)
        bootstrap = broker.bootstrap
    from java_oracle import unavailable_reason

    java_missing = unavailable_reason()
    out: dict[str, Any] = {}
    try:
        print(f"{'protocol':42s} {'client':14s} {'leave s':>8s} {'join s':>8s}  runs")
        for label, client, how in configs():
            if client == "java" and java_missing:
                print(f"{label:42s} {client:14s} skipped: {java_missing}")
                continue
            if args.clients and client not in args.clients.split(","):
                continue
            if args.protocols and not any(w in label for w in args.protocols.split(",")):
                continue
            runs = [
                await one_run(bootstrap, client, how, replacement_delay(i))
                for i in range(args.rounds)
            ]
            row: dict[str, Any] = {"runs": runs}
            for event in ("leave", "join"):
                values = [r[event] for r in runs if r[event] is not None]
                row[event] = statistics.median(values) if values else None
            out[f"{label} / {client}"] = row

            def fmt(v: float | None) -> str:
                return "-" if v is None else f"{v:.2f}"

            detail = "; ".join(f"{fmt(r['leave'])}/{fmt(r['join'])}" for r in runs)
            print(
                f"{label:42s} {client:14s} {fmt(row['leave']):>8s} {fmt(row['join']):>8s}  "
                f"{detail}",
                flush=True,
            )
        return out
    finally:
        if broker is not None:
            await asyncio.to_thread(broker.stop)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bootstrap", default=None, help="an Apache Kafka 4.x (default: start one)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--clients", default="", help="comma list of aiokafka_lite, aiokafka, java (default: all)"
    )
    parser.add_argument(
        "--protocols",
        default="",
        help="comma list of words a row's protocol must contain, e.g. eager (default: all)",
    )
    parser.add_argument("--json", default=None, metavar="FILE")
    return parser.parse_args(argv)


def run(argv: list[str] | None = None) -> int:
    """Entry point (``python -m benchmarks --only rebalance`` comes here)."""
    from aiokafka_lite.launchers.apache import apache_available

    ns = parse(argv)
    missing = apache_available()
    if ns.bootstrap is None and missing is not None:
        print(f"rebalance benchmark skipped: it needs Apache Kafka 4.x ({missing})")
        return 0
    result = asyncio.run(main(ns))
    if ns.json:
        Path(ns.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(run())
