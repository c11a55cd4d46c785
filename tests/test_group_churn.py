"""Churn (Apache Kafka 4.4), for the eager classic protocol and KIP-848: six aiokafka_lite
members on a 12-partition topic under a steady stream; for 20 s a member joins or leaves every
2.5 s, and one member, in a subprocess, is killed with -9 at the start. Afterwards every record
written was read and a record was read again only inside the uncommitted window of the member
that had it. The longest pause of the members that stayed throughout is printed (and recorded
as the test's ``longest_pause_s`` property)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import uuid
from typing import Any

import pytest
from share_helpers import alter_group_configs
from test_group_migration import Ledger, LiteMember, Writer, wait_until

pytestmark = [pytest.mark.asyncio, pytest.mark.slow, pytest.mark.timeout(240)]

PARTITIONS = 12
#: eight steps, one every 2.5 s: a join or a leave lands while the last rebalance may still run
#: (with 5 s steps the test took twice as long and asserted the same)
CHURN_EVERY_S = 2.5
#: the KIP-848 group's session (the group config consumer.session.timeout.ms; Kafka's default is
#: 45 s): as the classic members' (session_timeout_ms's default), the killed member's partitions
#: move 10 s after the kill, during the churn, instead of after it
SESSION_MS = 10000
#: readiness bound of the read-back after the churn
DRAIN_S = 90.0

#: a member in its own process: one JSON line per record read and per successful commit
#: (times from the system-wide monotonic clock, comparable with the test's)
MEMBER = """
import asyncio, json, sys, time
from aiokafka_lite.consumer import AIOKafkaConsumer
from aiokafka_lite import errors

async def main(bootstrap, topic, group, protocol):
    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                         group_protocol=protocol, enable_auto_commit=False,
                         auto_offset_reset="earliest")
    await c.start()
    while True:
        batch = await c.getmany(timeout_ms=100)
        offsets = {}
        for tp, recs in batch.items():
            for r in recs:
                print(json.dumps(["read", time.monotonic(), r.partition, r.offset]), flush=True)
            offsets[tp] = recs[-1].offset + 1
        if offsets:
            try:
                await c.commit(offsets)
            except errors.KafkaError:
                continue
            now = time.monotonic()
            for tp, o in offsets.items():
                print(json.dumps(["commit", now, tp.partition, o]), flush=True)

asyncio.run(main(*sys.argv[1:]))
"""


async def follow(process: asyncio.subprocess.Process, name: str, ledger: Ledger) -> None:
    """Put the subprocess member's reads and commits in the ledger as they come."""
    assert process.stdout is not None
    async for raw in process.stdout:
        kind, t, p, o = json.loads(raw)
        (ledger.reads if kind == "read" else ledger.commits).append((t, name, p, o))


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_churn(
    broker: Any,
    kafka_bootstrap: str,
    new_topic: Any,
    protocol: str,
    record_property: Any,
) -> None:
    broker.skip_on("tansu", "noida", "kafka", reason="KIP-848 groups of Apache Kafka 4.x")
    topic = await new_topic(partitions=PARTITIONS)
    group = f"churn-{protocol}-{uuid.uuid4().hex[:8]}"
    if protocol == "consumer":  # and 1 s heartbeats (Kafka's 5 s): hand-overs in a second or two
        await alter_group_configs(
            kafka_bootstrap,
            group,
            consumer_session_timeout_ms=str(SESSION_MS),
            consumer_heartbeat_interval_ms="1000",
        )
    ledger = Ledger()
    members: dict[str, LiteMember] = {}

    async def join(name: str) -> None:
        members[name] = LiteMember(
            name, ledger, kafka_bootstrap, topic, group, group_protocol=protocol
        )
        await members[name].start()

    # twice the rate the 5 s steps had: as many records (> 2000) in half the churn
    writer = await Writer(kafka_bootstrap, topic, PARTITIONS, per_second=240).start()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        MEMBER,
        kafka_bootstrap,
        topic,
        group,
        protocol,
        stdout=asyncio.subprocess.PIPE,
        env=os.environ,
    )
    follower = asyncio.create_task(follow(process, "killed", ledger))
    try:
        for i in range(1, 6):
            await join(f"m{i}")

        def settled() -> bool:  # five here with two partitions each, the subprocess the rest
            sets = [m.assignment() for m in members.values()]
            return all(len(s) == 2 for s in sets) and len(set().union(*sets)) == 10

        await wait_until(settled, "six-way split", 120)
        since = time.monotonic()
        await wait_until(
            lambda: any(r[0] > since and r[1] == "killed" for r in ledger.reads),
            "a read of the subprocess member",
        )
        # the churn: the subprocess member killed, then a join or a leave every CHURN_EVERY_S
        t0 = time.monotonic()
        process.send_signal(signal.SIGKILL)
        await process.wait()
        steps = ["+m6", "-m1", "+m7", "-m6", "+m8", "-m2", "+m9", "-m7"]
        for n, step in enumerate(steps, 1):
            await asyncio.sleep(max(0.0, t0 + n * CHURN_EVERY_S - time.monotonic()))
            if step[0] == "+":
                await join(step[1:])
            else:
                await members.pop(step[1:]).stop()
        t1 = time.monotonic()
        await writer.stop()
        written = writer.written
        assert len(written) > 2000, len(written)
        await wait_until(lambda: written <= ledger.read_keys(), "every record read", DRAIN_S)
        assert ledger.bad_duplicates() == []
        # the members there throughout (m3, m4, m5) each kept partitions: their longest pause
        stayed = {"m3", "m4", "m5"}
        assert all(members[n].assignment() for n in stayed)
        pauses = ledger.pauses(stayed, t0, t1)
        assert set(pauses) == stayed, pauses
        longest = max(pauses.values())
        again = len(ledger.all_reads()) - len(ledger.read_keys())
        print(
            f"\n[{protocol}] {len(written)} records, {again} read again; longest pause of a "
            f"member that stayed: {longest:.2f} s ({', '.join(f'{k} {v:.2f}' for k, v in sorted(pauses.items()))})"
        )
        record_property("longest_pause_s", round(longest, 2))
    finally:
        follower.cancel()
        if process.returncode is None:
            process.kill()
            await process.wait()
        if not writer.stopping:
            await writer.stop()
        for m in members.values():
            await m.stop()
