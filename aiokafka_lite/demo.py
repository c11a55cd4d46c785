"""``python -m aiokafka_lite demo``: talk to a broker and show what the client learnt.

Starts an embedded broker (Tansu by default) unless ``--bootstrap`` or ``KAFKA_BOOTSTRAP`` names
one, creates a topic, then prints the cluster metadata and the negotiated API versions.
Each step is a small coroutine taking the bootstrap string, so later steps (produce, consume)
can be appended to :data:`STEPS`.
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

from . import errors as Errors
from .admin import AIOKafkaAdminClient, NewTopic
from .client import KafkaClient
from .conn import pick_version
from .protocol.messages import REQUESTS_BY_KEY
from .structs import TopicPartition

__all__ = ["main", "STEPS"]

Step = Callable[[str, argparse.Namespace], Awaitable[None]]


async def create_topic(bootstrap: str, args: argparse.Namespace) -> None:
    """Create the demo topic (fine if it already exists)."""
    async with AIOKafkaAdminClient(bootstrap_servers=bootstrap) as admin:
        t0 = time.perf_counter()
        try:
            await admin.create_topics([NewTopic(args.topic, args.partitions, 1)])
            print(
                f"created topic {args.topic!r} with {args.partitions} partitions "
                f"in {(time.perf_counter() - t0) * 1000:.1f} ms"
            )
        except Errors.TopicAlreadyExistsError:
            print(f"topic {args.topic!r} already exists")


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


#: the demo's steps, run in order against the same bootstrap servers
STEPS: list[Step] = [create_topic, show_cluster]


@contextlib.contextmanager
def _broker(args: argparse.Namespace) -> Iterator[str]:
    bootstrap = args.bootstrap or os.environ.get("KAFKA_BOOTSTRAP")
    if bootstrap:
        yield bootstrap
        return
    from ._embedded import EmbeddedBroker

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
        default="tansu",
        choices=["tansu", "noida"],
        help="embedded broker to start when no bootstrap is given",
    )
    p.add_argument("--topic", default="aiokafka-lite-demo")
    p.add_argument("--partitions", type=int, default=8)
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
    except (Errors.KafkaError, asyncio.TimeoutError) as exc:
        print(f"demo failed: {exc!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
