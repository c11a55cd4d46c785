"""KIP-1092 close options: ``stop(group_membership_operation=...)`` as Java's
``close(CloseOptions.groupMembershipOperation(...))``, seen from the broker.

After each member's stop the group is described (ConsumerGroupDescribe for the KIP-848 protocol,
DescribeGroups for the classic one): is the member still in the group, with its partitions? The
Java 4.4 consumer runs the same cases under both protocols on the same broker and must agree.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from aiokafka_lite import AIOKafkaConsumer
from aiokafka_lite import errors as Errors
from aiokafka_lite.conn import BrokerConnection
from aiokafka_lite.protocol import messages as m
from tests.java_oracle import GroupMember, unavailable_reason

pytestmark = pytest.mark.slow

#: (static member?, operation) -> still in the group after stop(), classic protocol (Java's
#: ConsumerCoordinator: LeaveGroup for leave_group, and for a dynamic member by default)
CASES = [
    (True, "default", True),
    (True, "leave_group", False),
    (True, "remain_in_group", True),
    (False, "default", False),
    (False, "remain_in_group", True),
]
#: the same for the KIP-848 protocol, as Java 4.4's consumer behaves on the broker (measured
#: by test_close_options_beside_java): a dynamic member closing with remain_in_group is gone
CASES_848 = [(s, op, False if (not s and op == "remain_in_group") else st) for s, op, st in CASES]
WAIT_S = 60.0


async def _describe(bootstrap: str, group: str, protocol: str) -> list[tuple[str, str | None]]:
    """(member id, instance id) of each member the coordinator lists (single-node broker)."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    conn = BrokerConnection(host, int(port))
    await conn.connect(timeout_ms=10000)
    try:
        if protocol == "consumer":
            resp = await conn.send(m.ConsumerGroupDescribeRequest(group_ids=[group]))
            g = resp.groups[0]
            return [(mb.member_id, mb.instance_id) for mb in g.members]
        resp = await conn.send(m.DescribeGroupsRequest(groups=[group]))
        return [(mb.member_id, mb.group_instance_id) for mb in resp.groups[0].members]
    finally:
        conn.close()
        await conn.wait_closed()


async def _ours(bootstrap: str, topic: str, protocol: str, static: bool, operation: str) -> bool:
    group = f"co-{protocol}-{uuid.uuid4().hex[:8]}"
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        group_protocol=protocol,
        group_instance_id="static-1" if static else None,
        auto_offset_reset="earliest",
        retry_backoff_ms=50,
    )
    await consumer.start()
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_S
        while not consumer.assignment():  # readiness, bounded
            assert loop.time() < deadline, "no assignment"
            await consumer.getmany(timeout_ms=200)
        assert len(await _describe(bootstrap, group, protocol)) == 1
    finally:
        await consumer.stop(group_membership_operation=operation)
    return len(await _describe(bootstrap, group, protocol)) == 1


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_close_options_broker_view(broker: Any, new_topic: Any, protocol: str) -> None:
    """Each (static?, operation) case: the member is in the group after stop() or not, as
    Java 4.4 decides (default: a static member stays, a dynamic one leaves; leave_group: both
    leave; remain_in_group: both stay, but a KIP-848 dynamic member, which leaves)."""
    broker.skip_on("tansu", "noida", reason="static membership and KIP-848 are Apache Kafka's")
    topic = await new_topic(partitions=2)
    cases = CASES if protocol == "classic" else CASES_848
    got = await asyncio.gather(
        *(_ours(broker.bootstrap, topic, protocol, static, op) for static, op, _ in cases)
    )
    want = [stays for _, _, stays in cases]
    assert got == want, list(zip(cases, got))


async def test_bad_operation_is_refused(broker: Any) -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap)
    with pytest.raises(Errors.IllegalArgumentError):
        await consumer.stop(group_membership_operation="vanish")
    await consumer.stop()


class _JavaMember(GroupMember):
    command = "group-member-consumer"

    def __init__(self, bootstrap: str, group: str, topic: str, **options: Any) -> None:
        super().__init__(bootstrap, topic, group)
        self.args = [*("--bootstrap", bootstrap, "--group", group, "--topic", topic)]
        self.args += ["--run-ms", "120000"]
        for name, value in options.items():
            if value is not None:
                self.args += [f"--{name.replace('_', '-')}", str(value)]


async def _java(bootstrap: str, topic: str, protocol: str, static: bool, operation: str) -> bool:
    group = f"co-java-{uuid.uuid4().hex[:8]}"
    member = _JavaMember(
        bootstrap,
        group,
        topic,
        instance_id="static-1" if static else None,
        close_operation=operation,
        group_protocol=protocol,
    ).start()
    try:
        await asyncio.to_thread(member.wait_for, lambda mb: bool(mb.assigned()), WAIT_S)
    finally:
        await asyncio.to_thread(member.stop)
    return len(await _describe(bootstrap, group, protocol)) == 1


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_close_options_beside_java(broker: Any, new_topic: Any, protocol: str) -> None:
    """Each case on Java 4.4's consumer (``group.protocol`` classic or consumer): the broker's
    view after its close() matches ours (same table)."""
    broker.skip_on("tansu", "noida", reason="the Java comparison runs on Apache Kafka")
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    topic = await new_topic(partitions=2)
    cases = CASES if protocol == "classic" else CASES_848
    java = await asyncio.gather(
        *(_java(broker.bootstrap, topic, protocol, s, op) for s, op, _ in cases)
    )
    ours = await asyncio.gather(
        *(_ours(broker.bootstrap, topic, protocol, s, op) for s, op, _ in cases)
    )
    assert java == ours == [st for _, _, st in cases], list(zip(cases, java, ours))
