"""Corners of the KIP-848 member (``group_protocol="consumer"``), each run on the Java client
4.4 (``group.protocol=consumer``, KafkaOracle's ``group-member-consumer``) and on aiokafka_lite
against the same Apache Kafka 4.4 broker, the outcomes compared:

* partitions being revoked are paused before the commit and the revoke callback: nothing of
  them is handed out once the revocation started, and the next owner starts right after the
  last record handed out;
* ``pattern=`` is matched by the client under both protocols (a look-ahead RE2/J refuses works
  as in Java's ``subscribe(Pattern)``); ``SubscriptionPattern`` is matched by the broker and an
  expression it cannot compile is fatal;
* UNRELEASED_INSTANCE_ID and UNSUPPORTED_ASSIGNOR are fatal;
* a commit answered UNKNOWN_MEMBER_ID fails the commit and leaves the membership alone.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from java_oracle import GroupMember, unavailable_reason
from share_helpers import alter_group_configs

from aiokafka_lite import SubscriptionPattern
from aiokafka_lite import errors as Errors
from aiokafka_lite.consumer import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka_lite.producer import AIOKafkaProducer
from aiokafka_lite.protocol import messages as m
from aiokafka_lite.structs import TopicPartition
from tests.faults import FaultProxy, Rule

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.timeout(300),
    pytest.mark.skip_broker("tansu", "noida", "kafka", reason="KIP-848 groups of Apache 4.x"),
]

#: readiness: a JVM starting on a busy machine, Kafka's 5 s heartbeat interval where a test keeps it
SETTLE_S = 90.0


@pytest.fixture(autouse=True)
def _java() -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


def group_name() -> str:
    return f"c848-{uuid.uuid4().hex[:10]}"


async def fast_group(bootstrap: str) -> str:
    """A new group whose members heartbeat every second (the group config
    consumer.heartbeat.interval.ms; Kafka's default is 5 s): assignments and revocations reach
    them a second after the broker decided them, for Java's members and ours alike."""
    group = group_name()
    await alter_group_configs(bootstrap, group, consumer_heartbeat_interval_ms="1000")
    return group


class JavaMember(GroupMember):
    """KafkaOracle's ``group-member-consumer`` with the options given (``--name value``)."""

    command = "group-member-consumer"

    def __init__(self, bootstrap: str, group: str, **options: Any) -> None:
        super().__init__(bootstrap, "-", group)
        self.args = [*("--bootstrap", bootstrap, "--group", group, "--run-ms", "240000")]
        for name, value in options.items():
            self.args += [f"--{name.replace('_', '-')}", str(value)]

    def errors(self) -> list[str]:
        return [e["error"] for e in self.events if e["event"] == "error"]


def lite(bootstrap: str, group: str, **kwargs: Any) -> AIOKafkaConsumer:
    kwargs.setdefault("auto_offset_reset", "earliest")
    kwargs.setdefault("retry_backoff_ms", 50)
    kwargs.setdefault("group_protocol", "consumer")
    return AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, **kwargs)


async def write(bootstrap: str, topic: str, per_partition: int, partitions: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
    await producer.start()
    try:
        futs = [
            await producer.send(topic, b"x", partition=p)
            for _ in range(per_partition)
            for p in range(partitions)
        ]
        await asyncio.gather(*futs)
    finally:
        await producer.stop()


async def poll_until(consumers: list[AIOKafkaConsumer], done: Any, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_S
    while not done():
        if loop.time() > deadline:
            raise AssertionError(
                f"no {what} within {SETTLE_S:.0f}s: {[sorted(c.assignment()) for c in consumers]}"
            )
        await asyncio.gather(*(c.getmany(timeout_ms=200) for c in consumers))


async def wait_until(done: Any, what: str) -> None:
    """Wait (members read in their own tasks meanwhile) until ``done()`` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_S
    while not done():
        if loop.time() > deadline:
            raise AssertionError(f"no {what} within {SETTLE_S:.0f}s")
        await asyncio.sleep(0.1)


async def java_wait(java: JavaMember, predicate: Any, what: str) -> None:
    """Wait for the Java member without blocking the event loop (a fault proxy may run in it)."""
    await asyncio.to_thread(java.wait_for, predicate, SETTLE_S, what)


async def first_error(c: AIOKafkaConsumer, timeout: float = SETTLE_S) -> BaseException:
    """The error ``start()`` or a later ``getmany()`` raises (AssertionError if none)."""
    try:
        await c.start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            await c.getmany(timeout_ms=200)
    except Errors.KafkaError as exc:
        return exc
    raise AssertionError(f"no error within {timeout:.0f}s; assignment {c.assignment()}")


# -- 1. partitions being revoked are paused ---------------------------------------------------
def handed_out_after_revocation(log: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The records of a partition handed out after its revocation started (``log``: records
    ``("record", partition, offset)`` and ``("revoked", partitions)`` in the order seen)."""
    revoked: set[int] = set()
    late = []
    for entry in log:
        if entry[0] == "revoked":
            revoked |= set(entry[1])
        elif entry[0] == "assigned":
            revoked -= set(entry[1])
        elif entry[1] in revoked:
            late.append(entry)
    return late


def next_owner_starts_after(
    log: list[tuple[Any, ...]], revoked: set[int], firsts: dict[int, int]
) -> dict[int, tuple[int, int]]:
    """Per revoked partition whose next owner did not start right after the last record the
    revoking member handed out: (last handed out + 1, the next owner's first offset)."""
    last: dict[int, int] = {}
    for entry in log:
        if entry[0] == "record":
            last[entry[1]] = entry[2]
    return {
        p: (last.get(p, -1) + 1, firsts[p])
        for p in revoked
        if p in firsts and firsts[p] != last.get(p, -1) + 1
    }


async def read_firsts(c: AIOKafkaConsumer, partitions: Any, what: str) -> dict[int, int]:
    """The first offset ``c`` reads of each of ``partitions()`` (polled until it has them all)."""
    firsts: dict[int, int] = {}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_S
    while not (partitions() and partitions() <= set(firsts)):
        if loop.time() > deadline:
            raise AssertionError(f"no {what} within {SETTLE_S:.0f}s: {firsts}")
        for tp, recs in (await c.getmany(timeout_ms=200)).items():
            firsts.setdefault(tp.partition, recs[0].offset)
    return firsts


async def test_revoked_partitions_are_paused_before_the_commit_and_callback(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    partitions = 4
    topic = await new_topic(partitions=partitions)
    await write(kafka_bootstrap, topic, 5000, partitions)

    # Java: a slow onPartitionsRevoked (3 s); a second member takes partitions from it
    group = await fast_group(kafka_bootstrap)
    java = JavaMember(
        kafka_bootstrap, group, topic=topic, revoke_sleep_ms=3000, max_poll_records=1
    ).start()
    b = lite(kafka_bootstrap, group, enable_auto_commit=False)
    b.subscribe([topic])
    try:
        await java_wait(java, lambda j: len(j.records) > 100, "records read by Java")
        await b.start()
        await java_wait(
            java, lambda j: any(e["event"] == "revoked_done" for e in j.events), "revocation"
        )
        java_log: list[tuple[Any, ...]] = []
        for line in java.lines:
            if "event" not in line:
                java_log.append(("record", line["partition"], line["offset"]))
            elif line["event"] in ("revoked", "assigned"):
                java_log.append((line["event"], [p for _, p in line["partitions"]]))
        java_revoked = {p for e in java_log if e[0] == "revoked" for p in e[1]}
        firsts = await read_firsts(
            b, lambda: {tp.partition for tp in b.assignment()}, "b's first records"
        )
        java_late = handed_out_after_revocation(java_log)
        java_gap = next_owner_starts_after(java_log, java_revoked, firsts)
    finally:
        await b.stop()
        java.stop(check=False)
    assert java_revoked and java_late == [] and java_gap == {}, (java_late, java_gap)

    # ours: the same, the revoke callback awaited in the background while getmany() runs
    group = await fast_group(kafka_bootstrap)
    log: list[tuple[Any, ...]] = []

    revoking: list[bool] = []  # non-empty while the callback runs

    class SlowRevoke(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
            if revoked:
                log.append(("revoked", [tp.partition for tp in revoked]))
                revoking.append(True)
                await asyncio.sleep(3)
                revoking.clear()

        def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
            log.append(("assigned", [tp.partition for tp in assigned]))

    a = lite(kafka_bootstrap, group, enable_auto_commit=True, max_poll_records=10)
    a.subscribe([topic], listener=SlowRevoke())
    b = lite(kafka_bootstrap, group, enable_auto_commit=False)
    b.subscribe([topic])
    stop = asyncio.Event()
    polls_during: list[int] = []

    async def read_a() -> None:
        # getmany() of each partition in turn (the fetcher's buffers hold whole fetches, so
        # a plain getmany() may stay on one partition for seconds), slower than the fetcher
        while not stop.is_set():
            for tp in sorted(a.assignment()):
                try:
                    batch = await a.getmany(tp, max_records=5)
                except Errors.IllegalStateError:
                    continue  # revoked meanwhile
                if revoking:
                    polls_during.append(1)
                log.extend(("record", tp.partition, r.offset) for r in batch.get(tp, ()))
            await asyncio.sleep(0.02)

    try:
        await a.start()
        reader = asyncio.create_task(read_a())
        await wait_until(lambda: sum(e[0] == "record" for e in log) > 100, "a reads")
        await b.start()
        await wait_until(lambda: b.assignment() != set(), "b's assignment")
        revoked = {tp.partition for tp in b.assignment()}
        firsts = await read_firsts(b, lambda: revoked, "b's first records")
        stop.set()
        await asyncio.wait_for(reader, 30)
    finally:
        stop.set()
        await a.stop()
        await b.stop()
    assert polls_during, "a's getmany() never returned during the revocation"
    late = handed_out_after_revocation(log)
    assert late == [], f"handed out after their revocation started: {late[:5]} ({len(late)})"
    assert next_owner_starts_after(log, revoked, firsts) == {}


# -- 2. pattern= is client-side; SubscriptionPattern is the broker's ----------------------------
async def test_pattern_is_client_side_and_subscription_pattern_the_brokers(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    names = [f"{prefix}-one", f"{prefix}-two", f"{prefix}-three", f"other-{prefix}"]
    for name in names:
        await new_topic(partitions=1, name=name)
    # a look-ahead: Python's re and Java's java.util.regex take it, the broker's RE2/J does not
    client_side = f"(?!{prefix}-two){prefix}-.*"
    expected = {f"{prefix}-one", f"{prefix}-three"}
    every = {f"{prefix}-one", f"{prefix}-two", f"{prefix}-three"}

    def java_topics(j: GroupMember) -> set[str]:
        return {t for t, _ in j.assigned()}

    with JavaMember(kafka_bootstrap, group_name(), pattern=client_side) as java:
        await java_wait(java, lambda j: java_topics(j) == expected, "Java's pattern topics")
    with JavaMember(kafka_bootstrap, group_name(), subscription_pattern=f"{prefix}-.*") as java:
        await java_wait(java, lambda j: java_topics(j) == every, "Java's broker-side topics")
    with JavaMember(kafka_bootstrap, group_name(), subscription_pattern=client_side) as java:
        await java_wait(java, lambda j: j.errors() != [], "Java's error")
        assert java.errors() == ["InvalidRegularExpression"]

    # ours: the same pattern, the same topics, under both protocols
    for protocol in ("classic", "consumer"):
        c = lite(kafka_bootstrap, group_name(), group_protocol=protocol)
        c.subscribe(pattern=client_side)
        try:
            await c.start()
            await poll_until(
                [c], lambda c=c: {tp.topic for tp in c.assignment()} == expected, protocol
            )
            assert c.subscription() == expected
        finally:
            await c.stop()
    c = lite(kafka_bootstrap, group_name())
    c.subscribe(pattern=SubscriptionPattern(f"{prefix}-.*"))
    try:
        await c.start()
        await poll_until([c], lambda: {tp.topic for tp in c.assignment()} == every, "broker's")
    finally:
        await c.stop()
    bad = lite(kafka_bootstrap, group_name())
    bad.subscribe(pattern=SubscriptionPattern(client_side))
    try:
        assert isinstance(await first_error(bad), Errors.InvalidRegularExpressionError)
    finally:
        await bad.stop()


async def test_subscription_pattern_needs_the_consumer_protocol() -> None:
    for kwargs in ({"group_protocol": "classic"}, {"group_id": None}):
        c = AIOKafkaConsumer(**{"bootstrap_servers": "localhost:1", "group_id": "g", **kwargs})
        with pytest.raises(Errors.IllegalStateError, match="group_protocol='consumer'"):
            c.subscribe(pattern=SubscriptionPattern("t.*"))
        c.subscribe(pattern="t.*")  # client-side: fine under both
        assert c._subscription.pattern is not None


async def test_retry_action_knows_the_member_epoch_errors() -> None:
    """FENCED_MEMBER_EPOCH rejoins (epoch 0), STALE_MEMBER_EPOCH is sent again with the
    current epoch; neither is retried as is by a generic loop (as before: not retriable)."""
    fenced, stale = Errors.FencedMemberEpochError, Errors.StaleMemberEpochError
    assert Errors.retry_action(fenced.errno) is Errors.RetryAction.REJOIN
    assert Errors.retry_action(fenced("x")) is Errors.RetryAction.REJOIN
    assert Errors.retry_action(stale.errno) is Errors.RetryAction.REFRESH_EPOCH
    assert Errors.retry_action(stale) is Errors.RetryAction.REFRESH_EPOCH
    for err in (fenced, stale):
        assert not Errors.retry_action(err, coordinator=True).retriable


# -- 3. errors Java treats as fatal ---------------------------------------------------------
async def test_unreleased_instance_id_and_unsupported_assignor_are_fatal(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    topic = await new_topic(partitions=2)
    group = group_name()
    first = lite(kafka_bootstrap, group, group_instance_id="static-1")
    first.subscribe([topic])
    try:
        await first.start()
        await poll_until([first], lambda: len(first.assignment()) == 2, "the static member")
        with JavaMember(kafka_bootstrap, group, topic=topic, instance_id="static-1") as java:
            await java_wait(java, lambda j: j.errors() != [], "Java's error")
            assert java.errors() == ["UnreleasedInstanceIdException"]
        second = lite(kafka_bootstrap, group, group_instance_id="static-1")
        second.subscribe([topic])
        try:
            assert isinstance(await first_error(second), Errors.UnreleasedInstanceIdError)
        finally:
            await second.stop()
        assert len(first.assignment()) == 2  # the first one is untouched
    finally:
        await first.stop()

    with JavaMember(kafka_bootstrap, group_name(), topic=topic, remote_assignor="nosuch") as java:
        await java_wait(java, lambda j: j.errors() != [], "Java's error")
        assert java.errors() == ["UnsupportedAssignorException"]
    c = lite(kafka_bootstrap, group_name(), group_remote_assignor="nosuch")
    c.subscribe([topic])
    try:
        assert isinstance(await first_error(c), Errors.UnsupportedAssignorError)
    finally:
        await c.stop()


# -- 4. a commit answered UNKNOWN_MEMBER_ID -------------------------------------------------
async def test_commit_answered_unknown_member_id_keeps_the_membership(
    broker: Any, new_topic: Any
) -> None:
    topic = await new_topic(partitions=2)
    tps = {TopicPartition(topic, p) for p in range(2)}
    await write(broker.bootstrap, topic, 5, 2)
    async with FaultProxy(broker.bootstrap) as proxy:
        # Java: commitSync() after its first poll fails; it stays in the group and goes on
        unknown = proxy.add(Rule(m.OffsetCommitRequest.API_KEY, "error", error_code=25))
        java = JavaMember(proxy.bootstrap, await fast_group(broker.bootstrap), topic=topic).start()
        try:
            await java_wait(java, lambda j: len(j.records) == 10, "Java's records")
            await java_wait(
                java, lambda j: any(e["event"] == "commit_failed" for e in j.events), "failure"
            )
            await write(broker.bootstrap, topic, 5, 2)
            await java_wait(java, lambda j: len(j.records) == 20, "Java's next records")
        finally:
            # what is asserted happened while it ran; its close() after the refused commit
            # does not finish (it was killed after stop()'s 30 s, every time): 5 s are enough
            java.stop(timeout=5, check=False)
        assert unknown.done.is_set()
        kinds = [e["event"] for e in java.events]
        failures = [e["error"] for e in java.events if e["event"] == "commit_failed"]
        assert len(failures) == 1 and "CommitFailedException" in failures[0], failures
        assert "lost" not in kinds and kinds.count("assigned") == 1, java.events

        # ours: commit() raises CommitFailedError; no on_partitions_lost, same epoch, goes on
        events: list[str] = []

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
                events.append("revoked")

            def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
                events.append("assigned")

            def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
                events.append("lost")

        c = lite(proxy.bootstrap, await fast_group(broker.bootstrap), enable_auto_commit=False)
        c.subscribe([topic], listener=Listener())
        try:
            await c.start()
            await poll_until([c], lambda: c.assignment() == tps, "the assignment")
            epoch = c._coordinator.generation  # type: ignore[union-attr]
            proxy.add(Rule(m.OffsetCommitRequest.API_KEY, "error", error_code=25))
            with pytest.raises(Errors.CommitFailedError):
                await c.commit({TopicPartition(topic, 0): 1})
            # the next heartbeat goes out with the same epoch and is answered without error
            beat = proxy.add(
                Rule(
                    m.ConsumerGroupHeartbeatRequest.API_KEY,
                    "observe",
                    when=lambda resp: resp.error_code == 0,
                )
            )
            await poll_until([c], beat.done.is_set, "a heartbeat after the failed commit")
            await c.commit({TopicPartition(topic, 0): 2})
            assert await c.committed(TopicPartition(topic, 0)) == 2
            assert c.assignment() == tps
            assert c._coordinator.generation == epoch  # type: ignore[union-attr]
            assert events == ["assigned"]
        finally:
            await c.stop()
