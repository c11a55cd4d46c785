"""The one retry and deadline policy at the coordinators (tests/faults.py's proxy in front of
the real broker): a request answered NOT_COORDINATOR is sent again after a fresh
FindCoordinator, within the operation's budget; with a coordinator that stays unavailable the
call fails within its budget with the error class it always raised."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiokafka_lite import errors as Errors
from aiokafka_lite.admin import AIOKafkaAdminClient
from aiokafka_lite.producer import AIOKafkaProducer
from aiokafka_lite.structs import TopicPartition
from tests.faults import API, FaultProxy, Rule
from tests.test_faults import joined_member, read_values
from tests.test_group import _session_timeout

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]
__all__ = ["_session_timeout"]  # autouse fixture: short session timeouts per broker

NOT_COORDINATOR = Errors.NotCoordinatorForGroupError.errno
COORDINATOR_NOT_AVAILABLE = Errors.GroupCoordinatorNotAvailableError.errno
#: slack for an event loop on a loaded machine, on top of a call's budget
SLACK_S = 1.5


@pytest.fixture
async def proxy(broker: Any) -> AsyncIterator[FaultProxy]:
    """A fault-injecting proxy in front of the session's broker."""
    async with FaultProxy(broker.bootstrap) as p:
        yield p


def stop_rules(*rules: Rule) -> None:
    """Deactivate ``rules`` (so the clients' stop() talks to a healthy coordinator)."""
    for rule in rules:
        rule.times = rule.hits


async def elapsed(coro: Any) -> float:
    """Run ``coro``; the seconds it took on the loop clock."""
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await coro
    return loop.time() - t0


# -- consumer commit ---------------------------------------------------------------------------
async def test_commit_with_an_unavailable_coordinator_fails_within_its_budget(
    proxy: FaultProxy, new_topic: Any
) -> None:
    """Every commit answer says NOT_COORDINATOR and every look-up COORDINATOR_NOT_AVAILABLE:
    commit() raises KafkaTimeoutError (Java's commitSync: TimeoutException) once its
    request_timeout_ms budget is spent, not after a look-up budget on top of it."""
    topic = await new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    budget_s = 3.0
    c = await joined_member(proxy, topic, request_timeout_ms=int(budget_s * 1000))
    try:
        moved = proxy.add(Rule(API.OFFSET_COMMIT, "error", error_code=NOT_COORDINATOR, times=-1))
        gone = proxy.add(
            Rule(API.FIND_COORDINATOR, "error", error_code=COORDINATOR_NOT_AVAILABLE, times=-1)
        )
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(Errors.KafkaTimeoutError):
            await c.commit({tp: 4})
        took = loop.time() - t0
        assert moved.hits >= 1 and gone.hits >= 1
        assert took < budget_s + SLACK_S
        stop_rules(moved, gone)
        await c.commit({tp: 4})
        assert await c.committed(tp) == 4
    finally:
        await c.stop()


# -- transactions ----------------------------------------------------------------------------
def txn_producer(proxy: FaultProxy, topic: str, **kw: Any) -> AIOKafkaProducer:
    settings: dict[str, Any] = dict(
        bootstrap_servers=proxy.bootstrap,
        transactional_id=f"policy-{topic}",
        request_timeout_ms=2000,
        retry_backoff_ms=50,
        max_block_ms=20000,
    )
    settings.update(kw)
    return AIOKafkaProducer(**settings)


async def test_add_partitions_not_coordinator_is_retried_after_a_fresh_lookup(
    proxy: FaultProxy, broker: Any, kafka_bootstrap: str, new_topic: Any
) -> None:
    """AddPartitionsToTxn answered NOT_COORDINATOR twice: the transaction coordinator is
    looked up again before each retry and the transaction commits, within max_block_ms."""
    broker.skip_on("tansu", reason="Tansu does not filter aborted records (read_committed check)")
    topic = await new_topic(partitions=1)
    # transactions V1 (AddPartitionsToTxn): a broker without EndTxn v5 (Apache Kafka 4.4 offers
    # transactions V2, where Produce v12 adds the partition and no AddPartitionsToTxn is sent)
    # (noida has no transactions V2, and the proxy cannot decode its ApiVersions answer)
    if broker.kind != "noida":
        proxy.add(
            Rule(API.API_VERSIONS, "cap_version", cap_api_key=API.END_TXN, max_version=4, times=-1)
        )
    producer = txn_producer(proxy, topic)
    await producer.start()
    try:
        moved = proxy.add(
            Rule(
                API.ADD_PARTITIONS_TO_TXN,
                "error",
                error_code=NOT_COORDINATOR,
                topic=topic,
                times=2,
            )
        )
        find = proxy.add(Rule(API.FIND_COORDINATOR, "observe", times=-1))

        async def transaction() -> None:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"after NOT_COORDINATOR", partition=0)

        took = await elapsed(asyncio.wait_for(transaction(), 40))
        assert moved.hits == 2
        assert find.hits >= 2  # one fresh look-up per NOT_COORDINATOR
        assert took < 20 + SLACK_S
    finally:
        await producer.stop()
    values = await read_values(kafka_bootstrap, topic, isolation_level="read_committed")
    assert values == [b"after NOT_COORDINATOR"]


async def test_commit_transaction_with_an_unavailable_coordinator_fails_within_max_block(
    proxy: FaultProxy, new_topic: Any
) -> None:
    """EndTxn answered NOT_COORDINATOR and every look-up COORDINATOR_NOT_AVAILABLE:
    commit_transaction() raises CoordinatorNotAvailableError within max_block_ms."""
    topic = await new_topic(partitions=1)
    max_block_s = 4.0
    producer = txn_producer(proxy, topic, max_block_ms=int(max_block_s * 1000))
    await producer.start()
    try:
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"never committed", partition=0)
        moved = proxy.add(Rule(API.END_TXN, "error", error_code=NOT_COORDINATOR, times=-1))
        gone = proxy.add(
            Rule(API.FIND_COORDINATOR, "error", error_code=COORDINATOR_NOT_AVAILABLE, times=-1)
        )
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(Errors.CoordinatorNotAvailableError):
            await asyncio.wait_for(producer.commit_transaction(), 30)
        took = loop.time() - t0
        assert moved.hits >= 1 and gone.hits >= 1
        assert took < max_block_s + SLACK_S
        stop_rules(moved, gone)
    finally:
        await asyncio.wait_for(producer.stop(), 30)


# -- admin -----------------------------------------------------------------------------------
async def test_describe_consumer_groups_not_coordinator_is_retried_after_a_fresh_lookup(
    proxy: FaultProxy, new_topic: Any
) -> None:
    """DescribeGroups answered NOT_COORDINATOR twice: the group's coordinator is looked up
    again before each retry, and the group is described as the broker sees it."""
    topic = await new_topic(partitions=1)
    c = await joined_member(proxy, topic)
    admin = AIOKafkaAdminClient(bootstrap_servers=proxy.bootstrap, request_timeout_ms=10000)
    await admin.start()
    try:
        group = c._group_id
        before = await admin.describe_consumer_groups([group])
        moved = proxy.add(Rule(API.DESCRIBE_GROUPS, "error", error_code=NOT_COORDINATOR, times=2))
        find = proxy.add(Rule(API.FIND_COORDINATOR, "observe", times=-1))
        took = await elapsed(admin.describe_consumer_groups([group]))
        after = await admin.describe_consumer_groups([group])
        assert moved.hits == 2
        assert find.hits >= 2
        assert took < 10 + SLACK_S
        assert [list(r.groups) for r in after] == [list(r.groups) for r in before]
        assert after[0].groups[0][0] == 0 and after[0].groups[0][1] == group
    finally:
        await admin.close()
        await c.stop()


async def test_describe_consumer_groups_with_an_unavailable_coordinator_fails_within_budget(
    proxy: FaultProxy,
) -> None:
    """Every look-up answers COORDINATOR_NOT_AVAILABLE: describe_consumer_groups raises
    CoordinatorNotAvailableError once request_timeout_ms is spent."""
    budget_s = 2.0
    admin = AIOKafkaAdminClient(
        bootstrap_servers=proxy.bootstrap,
        request_timeout_ms=int(budget_s * 1000),
        retry_backoff_ms=50,
    )
    await admin.start()
    try:
        gone = proxy.add(
            Rule(API.FIND_COORDINATOR, "error", error_code=COORDINATOR_NOT_AVAILABLE, times=-1)
        )
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(Errors.CoordinatorNotAvailableError):
            await admin.describe_consumer_groups(["policy-no-coordinator"])
        took = loop.time() - t0
        assert gone.hits >= 2  # retried, not given up at the first answer
        assert took < budget_s + SLACK_S
    finally:
        await admin.close()
