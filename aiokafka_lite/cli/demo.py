"""``aiokafka-lite demo`` (``python -m aiokafka_lite demo``, ``make demo``): the client at work
on a real broker.

Starts an embedded broker (noida-db by default) unless ``--bootstrap`` or ``KAFKA_BOOTSTRAP``
names one, then:

1. creates a topic and prints the cluster metadata and the negotiated API versions;
2. produces ``--records`` records and consumes them back through a consumer group, printing both
   throughputs;
3. runs ``aiokafka-lite bench roundtrip --compare all`` on the same broker: aiokafka_lite,
   aiokafka, confluent-kafka and kafka-python side by side, with a live progress bar and the
   comparison table (skip it with ``--no-bench``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from .. import errors as Errors
from ..admin import AIOKafkaAdminClient, NewTopic
from ..client import KafkaClient
from ..conn import pick_version
from ..protocol.messages import REQUESTS_BY_KEY
from ..structs import TopicPartition
from ._common import CliError

__all__ = ["main", "register", "STEPS"]

Step = Callable[[str, argparse.Namespace], Awaitable[None]]


async def create_topic(bootstrap: str, args: argparse.Namespace) -> None:
    """Create the demo topic (fine if it already exists)."""
    async with AIOKafkaAdminClient(bootstrap_servers=bootstrap) as admin:
        t0 = time.perf_counter()
        resp = await admin.create_topics([NewTopic(args.topic, args.partitions, 1)])
        code = next((e.error_code for e in resp.topic_errors if e.topic == args.topic), 0)
        if code == Errors.TopicAlreadyExistsError.errno:
            print(f"topic {args.topic!r} already exists")
        elif code:
            raise Errors.for_code(code)(f"create topic {args.topic!r}")
        else:
            print(
                f"created topic {args.topic!r} with {args.partitions} partitions "
                f"in {(time.perf_counter() - t0) * 1000:.1f} ms"
            )


async def show_cluster(bootstrap: str, args: argparse.Namespace) -> None:
    """Print brokers, controller, topics with partition leaders, and the API version table."""
    async with KafkaClient(bootstrap_servers=bootstrap, client_id="aiokafka_lite-demo") as client:
        await client.wait_for_topic(args.topic, 10000)
        cluster = client.cluster
        print(f"\ncluster id: {cluster.cluster_id}   controller: {cluster.controller_id}")
        print("brokers:")
        for b in sorted(cluster.brokers(), key=lambda b: int(b.nodeId)):
            print(f"  node {b.nodeId:>4}  {b.host}:{b.port}  rack={b.rack}")
        print("topics:")
        for topic in sorted(cluster.topics(exclude_internal_topics=False)):
            parts = sorted(cluster.partitions_for_topic(topic) or ())
            leaders = {cluster.leader_for_partition(TopicPartition(topic, p)) for p in parts}
            internal = " (internal)" if topic in cluster.internal_topics else ""
            print(
                f"  {topic}{internal}: {len(parts)} partitions, leaders {sorted(leaders, key=str)}"
            )
        print_api_versions(client.api_versions)


def print_api_versions(broker: dict[int, tuple[int, int]]) -> None:
    """Print api key, name, broker range, client range and the version the client will use."""
    print("\nAPI versions (broker range / client range -> used):")
    print(f"  {'key':>4}  {'api':<28} {'broker':>8} {'client':>8}   used")
    for key in sorted(set(broker) | set(REQUESTS_BY_KEY)):
        cls: Any = REQUESTS_BY_KEY.get(key)
        name = cls.API_NAME if cls is not None else "?"
        b = "%d-%d" % broker[key] if key in broker else "-"
        c = f"{cls.MIN_VERSION}-{cls.MAX_VERSION}" if cls is not None else "-"
        used = "-"
        if cls is not None:
            try:
                used = f"v{pick_version(cls, broker, 'broker')}"
            except Errors.UnsupportedVersionError:
                used = "unsupported"
        print(f"  {key:>4}  {name:<28} {b:>8} {c:>8}   {used}")


async def produce_and_consume(bootstrap: str, args: argparse.Namespace) -> None:
    """Produce ``args.records`` records, then read them back through a consumer group."""
    from ..consumer import AIOKafkaConsumer
    from ..producer import AIOKafkaProducer

    n = args.records
    value = b"x" * 100
    async with AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        t0 = time.perf_counter()
        for i in range(n):
            await producer.send(args.topic, value, key=b"%d" % (i % 1000))
        await producer.flush()
        took = time.perf_counter() - t0
    print(f"\nproduced {n:,} records of 100 B in {took:.2f} s: {n / took:,.0f} records/s")

    group = f"demo-{os.getpid()}"
    consumer = AIOKafkaConsumer(
        args.topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
    )
    await consumer.start()
    try:
        # timed as the benchmarks time a consume: from the first getmany() call (the first
        # fetch included) to the last record, after start() has joined the group
        got = 0
        t0 = time.perf_counter()
        while got < n:
            batches = await consumer.getmany(timeout_ms=1000)
            got += sum(len(msgs) for msgs in batches.values())
            if time.perf_counter() - t0 > 60:
                raise Errors.KafkaTimeoutError(f"consumed only {got} of {n} records in 60 s")
        took = time.perf_counter() - t0
        await consumer.commit()
        print(
            f"consumed {got:,} records through group {group!r} "
            f"({len(consumer.assignment())} partitions) in {took:.2f} s: {got / took:,.0f} records/s"
        )
    finally:
        await consumer.stop()


#: the demo's steps, run in order against the same bootstrap servers
STEPS: list[Step] = [create_topic, show_cluster, produce_and_consume]


def run_bench(bootstrap: str, args: argparse.Namespace) -> int:
    """``aiokafka-lite bench roundtrip --compare all`` against the demo's broker."""
    from . import bench

    print("\nround trip, aiokafka_lite against aiokafka, confluent-kafka and kafka-python:")
    parser = argparse.ArgumentParser(prog="aiokafka-lite")
    bench.register(parser.add_subparsers())
    bench_args = parser.parse_args(
        [
            "bench",
            "roundtrip",
            "-n",
            str(args.bench_records),
            "--compare",
            "all",
            "--bootstrap",
            bootstrap,
            "--broker-label",
            args.broker_label,
        ]
    )
    try:
        return int(bench_args.func(bench_args))
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code


@contextlib.contextmanager
def _broker(args: argparse.Namespace) -> Iterator[str]:
    bootstrap = args.bootstrap or os.environ.get("KAFKA_BOOTSTRAP")
    if bootstrap:
        args.broker_label = "external"
        yield bootstrap
        return
    from ..launchers.embedded import EmbeddedBroker

    args.broker_label = f"embedded {args.broker}"
    with EmbeddedBroker(args.broker) as b:
        print(f"started embedded {args.broker} broker at {b.bootstrap}")
        yield b.bootstrap


def _parse(argv: list[str] | None) -> argparse.Namespace:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "demo":
        argv = argv[1:]
    p = argparse.ArgumentParser(prog="python -m aiokafka_lite demo", description=__doc__)
    p.add_argument("--bootstrap", help="host:port[,host:port] of a running broker")
    p.add_argument(
        "--broker",
        default="noida",
        choices=["tansu", "noida"],
        help="embedded broker to start when no bootstrap is given (default: noida; Tansu "
        "answers a waiting fetch only at its max wait, which hides round-trip latency)",
    )
    p.add_argument("--topic", default="aiokafka-lite-demo")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--records", type=int, default=20000, help="records to produce and consume")
    p.add_argument(
        "--bench-records", type=int, default=20000, help="records per client in the comparison"
    )
    p.add_argument("--no-bench", action="store_true", help="skip the client comparison")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m aiokafka_lite demo``; returns the process exit status."""
    args = _parse(argv)

    async def run(bootstrap: str) -> None:
        for step in STEPS:
            await asyncio.wait_for(step(bootstrap, args), 60)

    try:
        with _broker(args) as bootstrap:
            asyncio.run(run(bootstrap))
            if not args.no_bench:
                return run_bench(bootstrap, args)
    except (Errors.KafkaError, asyncio.TimeoutError) as exc:
        print(f"demo failed: {exc!r}", file=sys.stderr)
        return 1
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``demo`` command (its own options are passed through to :func:`main`)."""
    p = sub.add_parser(
        "demo",
        help="start an embedded broker and show the client at work",
        description="Runs the demo; options after 'demo' go to it (see demo --help).",
        add_help=False,
    )
    p.add_argument("demo_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    """Run :func:`main` with the options after ``demo``."""
    rest = list(args.demo_args)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    return int(main(rest))
