"""Hooks (aiokafka_lite.hooks) and metrics() against a real broker: every event once per
occurrence and in order, headers added by on_send reach the broker, a failing batch, a hook
that raises, a hook that raises CancelledError, the consumer's fetch/consume/commit/rebalance
events, and the metrics snapshots built on them."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from aiokafka_lite import errors as Errors
from aiokafka_lite.consumer import AIOKafkaConsumer
from aiokafka_lite.hooks import EVENTS, ClientInfo, Hook, HookSet
from aiokafka_lite.producer import AIOKafkaProducer
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition
from tests.test_consumer import drain
from tests.test_group import group_name, settle

pytestmark = [pytest.mark.timeout(120)]


def fast(broker: Any) -> dict[str, Any]:
    """Quick group settings (as tests/test_group.py: noida rejects sessions under 6 s)."""
    return dict(
        heartbeat_interval_ms=300,
        retry_backoff_ms=50,
        auto_offset_reset="earliest",
        session_timeout_ms=3000 if broker.kind == "tansu" else 6000,
    )


class Recorder(Hook):
    """Records every event as (name, args...) in order."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.bound_to: ClientInfo | None = None

    def bind(self, info: ClientInfo) -> Recorder:
        self.bound_to = info
        return self

    def named(self, name: str) -> list[tuple[Any, ...]]:
        return [e for e in self.events if e[0] == name]

    def index(self, name: str, *prefix: Any) -> int:
        for i, e in enumerate(self.events):
            if e[0] == name and e[1 : 1 + len(prefix)] == prefix:
                return i
        raise AssertionError(f"no {name} {prefix} in {self.events}")

    def on_connect(self, *args: Any) -> None:
        self.events.append(("on_connect", *args))

    def on_disconnect(self, *args: Any) -> None:
        self.events.append(("on_disconnect", *args))

    def on_request_sent(self, *args: Any) -> None:
        self.events.append(("on_request_sent", *args))

    def on_response(self, *args: Any) -> None:
        self.events.append(("on_response", *args))

    def on_send(self, *args: Any) -> None:
        self.events.append(("on_send", *args))

    def on_batch_sent(self, *args: Any) -> None:
        self.events.append(("on_batch_sent", *args))

    def on_batch_acked(self, *args: Any) -> None:
        self.events.append(("on_batch_acked", *args))

    def on_batch_failed(self, *args: Any) -> None:
        self.events.append(("on_batch_failed", *args))

    def on_fetch(self, *args: Any) -> None:
        self.events.append(("on_fetch", *args))

    def on_consume(self, record: Any) -> None:
        self.events.append(("on_consume", record.topic, record.partition, record.offset))

    def on_commit(self, group_id: str, offsets: Any, latency: float, error: Any) -> None:
        self.events.append(("on_commit", group_id, dict(offsets), latency, error))

    def on_partitions_revoked(self, group_id: str, revoked: Any) -> None:
        self.events.append(("on_partitions_revoked", group_id, set(revoked)))

    def on_partitions_assigned(self, group_id: str, assigned: Any) -> None:
        self.events.append(("on_partitions_assigned", group_id, set(assigned)))


async def wait_until(predicate: Any, timeout: float = 30.0, what: str = "condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def check_connections(rec: Recorder) -> None:
    """Each connection opened is closed exactly once, after it opened."""
    opened = [(e[2], e[3], e[4]) for e in rec.named("on_connect")]
    closed = [(e[2], e[3], e[4]) for e in rec.named("on_disconnect")]
    assert opened and sorted(opened) == sorted(closed)
    assert rec.events[0][0] == "on_connect"


def check_requests(rec: Recorder) -> None:
    """Every request written is answered once (api names match, latencies are positive), each
    answer after its request; only requests abandoned by stop() (a long-poll fetch, a group
    request) end otherwise."""
    sent = [e[3] for e in rec.named("on_request_sent")]
    answered = [e[3] for e in rec.named("on_response")]
    assert sorted(sent) == sorted(answered)
    assert all(e[4] > 0 for e in rec.named("on_response"))
    for e in rec.named("on_response"):
        assert e[5] is None or isinstance(e[5], asyncio.CancelledError), e
    pending: dict[str, int] = {}
    for e in rec.events:
        if e[0] == "on_request_sent":
            pending[e[3]] = pending.get(e[3], 0) + 1
        elif e[0] == "on_response":
            assert pending.get(e[3], 0) > 0, f"{e[3]} answered before it was sent"
            pending[e[3]] -= 1


# -- registration -----------------------------------------------------------------------------


def test_hookset_registers_only_methods_a_hook_has() -> None:
    class OnlyAcks(Hook):
        def on_batch_acked(self, *args: Any) -> None:
            pass

    class Duck:  # not a Hook subclass: any object with on_* methods works
        def on_consume(self, record: Any) -> None:
            pass

    acks, duck = OnlyAcks(), Duck()
    hs = HookSet([acks, duck])
    for name in EVENTS:
        fns = getattr(hs, name)
        if name == "on_batch_acked":
            assert fns == (acks.on_batch_acked,)
        elif name == "on_consume":
            assert fns == (duck.on_consume,)
        else:
            assert fns == (), name  # Hook's inherited no-ops are not registered
    with pytest.raises(TypeError):
        HookSet(["not a hook"])


def test_no_user_hooks_leave_the_per_record_events_empty() -> None:
    producer = AIOKafkaProducer(bootstrap_servers="127.0.0.1:1")
    consumer = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1")
    try:
        # the built-in metrics hook implements no per-record event: send() and the consumer's
        # record hand-out stay on their fast paths
        assert producer._hooks.on_send == () and consumer._hooks.on_consume == ()
        assert producer._hooks.on_batch_acked and consumer._hooks.on_fetch
    finally:
        producer._closed = consumer._closed = True  # never started: nothing to stop


# -- producer ---------------------------------------------------------------------------------


async def test_produce_events_once_and_in_order(kafka_bootstrap: str, new_topic: Any) -> None:
    topic = await new_topic(partitions=1)
    rec = Recorder()
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, client_id="hooked", hooks=[rec])
    assert rec.bound_to == ClientInfo("producer", "hooked", None, kafka_bootstrap)
    await producer.start()
    try:
        md = await producer.send_and_wait(topic, b"v", headers=[("h", b"1")])
    finally:
        await producer.stop()

    # connect first, then the handshake: ApiVersions is the first request on a connection
    assert rec.events[0][0] == "on_connect" and rec.events[0][1] < 0  # a bootstrap address
    assert rec.events[1][0] == "on_request_sent" and rec.events[1][3] == "ApiVersions"
    assert rec.events[1][2] == 18  # api key
    check_connections(rec)
    check_requests(rec)
    assert rec.named("on_send") == [("on_send", topic, 0, None, b"v", [("h", b"1")])]
    sent = rec.named("on_batch_sent")
    assert len(sent) == 1
    _, t, p, records, size, queue_time, attempt = sent[0]
    assert (t, p, records, attempt) == (topic, 0, 1, 1) and size > 61 and queue_time >= 0
    acked = rec.named("on_batch_acked")
    assert len(acked) == 1
    _, t, p, records, size2, base_offset, latency = acked[0]
    assert (t, p, records, size2, base_offset) == (topic, 0, 1, size, md.offset)
    assert latency >= queue_time
    assert not rec.named("on_batch_failed")
    # send -> batch sent -> Produce written -> Produce answered -> acknowledged
    i_send = rec.index("on_send")
    i_batch = rec.index("on_batch_sent")
    i_req = next(i for i, e in enumerate(rec.events) if e[0] == "on_request_sent" and e[2] == 0)
    i_resp = next(i for i, e in enumerate(rec.events) if e[0] == "on_response" and e[2] == 0)
    i_ack = rec.index("on_batch_acked")
    assert i_send < i_batch < i_req < i_resp < i_ack
    assert rec.events[i_req][3] == rec.events[i_resp][3] == "Produce"


async def test_on_send_headers_reach_the_broker(kafka_bootstrap: str, new_topic: Any) -> None:
    topic = await new_topic(partitions=2)

    class Stamp(Hook):
        def __init__(self) -> None:
            self.seen: list[tuple[Any, ...]] = []

        def on_send(self, topic: str, partition: int, key: Any, value: Any, headers: Any) -> Any:
            self.seen.append((partition, key, value))
            return [*headers, ("stamp", f"{partition}".encode())]

    stamp = Stamp()
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap,
        hooks=[stamp],
        key_serializer=lambda k: k.encode() if k is not None else None,
        linger_ms=20,
    )
    await producer.start()
    try:
        handles = [
            await producer.send(topic, b"unkeyed"),  # sticky partition
            await producer.send(topic, b"keyed", key="k"),  # serialized key seen by the hook
            await producer.send(topic, b"to-1", partition=1, headers=[("a", b"b")]),
        ]
        handles += list(await producer.send_many(topic, [b"m1", b"m2"], partition=0))
        mds = await asyncio.gather(*handles)
    finally:
        await producer.stop()
    assert [s[1:] for s in stamp.seen] == [
        (None, b"unkeyed"),
        (b"k", b"keyed"),
        (None, b"to-1"),
        (None, b"m1"),
        (None, b"m2"),
    ]
    # the hook saw the partition each record went to
    assert [s[0] for s in stamp.seen] == [md.partition for md in mds]

    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        records = await drain(consumer, 5)
    finally:
        await consumer.stop()
    by_value = {r.value: list(r.headers) for r in records}
    assert len(by_value) == 5
    for md, value in zip(mds, [b"unkeyed", b"keyed", b"to-1", b"m1", b"m2"]):
        expected = [("stamp", f"{md.partition}".encode())]
        if value == b"to-1":
            expected = [("a", b"b"), *expected]
        assert by_value[value] == expected


@pytest.mark.skip_broker("tansu", reason="Tansu has no message size limit")
async def test_failed_batch_fires_failed_once(kafka_bootstrap: str, new_topic: Any) -> None:
    topic = await new_topic(partitions=1, configs={"max.message.bytes": "1048588"})
    rec = Recorder()
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap,
        hooks=[rec],
        max_request_size=4 * 1024 * 1024,
        max_batch_size=4 * 1024 * 1024,
    )
    await producer.start()
    try:
        with pytest.raises(Errors.MessageSizeTooLargeError):
            await producer.send_and_wait(topic, b"x" * (1536 * 1024))
        ok = await producer.send_and_wait(topic, b"small")  # the producer goes on
        metrics = producer.metrics()
    finally:
        await producer.stop()
    failed = rec.named("on_batch_failed")
    assert len(failed) == 1
    _, t, p, records, size, error = failed[0]
    assert (t, p, records) == (topic, 0, 1) and size > 1536 * 1024
    assert isinstance(error, Errors.MessageSizeTooLargeError)
    acked = rec.named("on_batch_acked")
    assert [(e[1], e[3], e[5]) for e in acked] == [(topic, 1, ok.offset)]
    assert len(rec.named("on_batch_sent")) == 2  # not retried
    assert rec.index("on_batch_failed") < rec.index("on_batch_acked")
    assert metrics["record-error-total"] == 1 and metrics["batch-error-total"] == 1
    assert metrics["record-send-total"] == 1


async def test_a_hook_that_raises_is_logged_once_and_ignored(
    kafka_bootstrap: str, new_topic: Any, caplog: pytest.LogCaptureFixture
) -> None:
    topic = await new_topic(partitions=1)

    class Broken(Hook):
        calls = 0

        def on_send(self, *args: Any) -> Any:
            Broken.calls += 1
            raise ValueError("on_send is broken")

        def on_batch_acked(self, *args: Any) -> None:
            Broken.calls += 1
            raise RuntimeError("on_batch_acked is broken")

        def on_response(self, *args: Any) -> None:
            raise KeyError("on_response is broken")

    rec = Recorder()
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, hooks=[Broken(), rec])
    with caplog.at_level(logging.DEBUG, logger="aiokafka_lite.hooks"):
        await producer.start()
        try:
            mds = [
                await producer.send_and_wait(topic, b"%d" % i, headers=[("h", b"x")])
                for i in range(3)
            ]
        finally:
            await producer.stop()
    assert [md.offset for md in mds] == [mds[0].offset + i for i in range(3)]
    assert Broken.calls == 6
    # the hooks after the broken one still ran; on_send's failure kept the headers unchanged
    assert len(rec.named("on_send")) == 3 and len(rec.named("on_batch_acked")) == 3
    assert all(e[5] == [("h", b"x")] for e in rec.named("on_send"))
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert sorted(r.getMessage().split()[1] for r in errors) == [
        "Broken.on_batch_acked",
        "Broken.on_response",
        "Broken.on_send",
    ]
    assert all(r.exc_info is not None for r in errors)


async def test_cancelled_error_from_a_hook_propagates(kafka_bootstrap: str, new_topic: Any) -> None:
    topic = await new_topic(partitions=1)

    class Cancels(Hook):
        def on_send(self, *args: Any) -> Any:
            raise asyncio.CancelledError()

    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, hooks=[Cancels()])
    await producer.start()
    try:
        with pytest.raises(asyncio.CancelledError):
            await producer.send(topic, b"never")
        assert producer.metrics()["record-send-total"] == 0
    finally:
        await producer.stop()


async def test_producer_metrics(kafka_bootstrap: str, new_topic: Any) -> None:
    topic = await new_topic(partitions=1)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=50)
    await producer.start()
    try:
        empty = producer.metrics()
        handles = [await producer.send(topic, b"x" * 100) for _ in range(500)]
        await asyncio.gather(*handles)
        m = producer.metrics()
    finally:
        await producer.stop()
    assert empty["record-send-total"] == 0 and empty["connection-count"] >= 1
    assert m["record-send-total"] == 500 and m["record-send-rate"] > 0
    assert m["record-error-total"] == 0 and m["batch-error-total"] == 0
    assert 1 <= m["batch-total"] < 500  # batched
    assert m["records-per-batch-avg"] == 500 / m["batch-total"]
    assert m["batch-size-avg"] > 100 and m["batch-size-max"] >= m["batch-size-avg"]
    assert m["byte-total"] >= 500 * 100
    assert 0 < m["record-queue-time-avg"] <= m["record-queue-time-max"]
    assert 0 < m["produce-latency-avg"] <= m["produce-latency-max"]
    assert m["delivery-latency-avg"] >= m["record-queue-time-avg"]
    assert 0 < m["request-latency-avg"] <= m["request-latency-max"]
    assert m["requests-by-api"]["Produce"]["total"] == m["batch-total"] or (
        m["requests-by-api"]["Produce"]["total"] <= m["batch-total"]
    )
    assert m["requests-by-api"]["ApiVersions"]["total"] >= 1
    assert m["request-total"] >= sum(a["total"] for a in m["requests-by-api"].values())
    assert m["outgoing-byte-total"] >= m["byte-total"]
    after = producer.metrics()
    assert after["connection-count"] == 0
    assert after["connection-close-total"] == after["connection-creation-total"] >= 1


# -- consumer ---------------------------------------------------------------------------------


async def produce_values(bootstrap: str, topic: str, per_partition: int, partitions: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        handles = [
            await producer.send(topic, b"%d-%d" % (p, i), partition=p)
            for p in range(partitions)
            for i in range(per_partition)
        ]
        await asyncio.gather(*handles)
    finally:
        await producer.stop()


async def test_consumer_events_in_order(kafka_bootstrap: str, broker: Any, new_topic: Any) -> None:
    topic = await new_topic(partitions=2)
    tps = {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    await produce_values(kafka_bootstrap, topic, 10, 2)
    group = group_name()
    rec = Recorder()
    first = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=group,
        enable_auto_commit=False,
        client_id="first",
        hooks=[rec],
        **fast(broker),
    )
    second = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=group,
        enable_auto_commit=False,
        **fast(broker),
    )
    await first.start()
    try:
        assert rec.bound_to == ClientInfo("consumer", "first", group, kafka_bootstrap)
        records = await drain(first, 20)
        assert len(records) == 20
        # a rebalance: the first join, nothing to revoke
        assert rec.named("on_partitions_revoked") == [("on_partitions_revoked", group, set())]
        assert rec.named("on_partitions_assigned") == [("on_partitions_assigned", group, tps)]
        assert rec.index("on_partitions_revoked") < rec.index("on_partitions_assigned")
        assert rec.index("on_partitions_assigned") < rec.index("on_fetch")
        # every record handed out once, in the order getmany returned them
        consumed = [e[1:] for e in rec.named("on_consume")]
        assert consumed == [(r.topic, r.partition, r.offset) for r in records]
        # fetch answers: records and lag counted from the fetch position
        fetched: dict[int, int] = {}
        for _, t, p, n, size, hw, lag in rec.named("on_fetch"):
            assert t == topic and hw == 10 and size >= 0
            if n:
                assert lag == hw - fetched.get(p, 0) and size > 0
            fetched[p] = fetched.get(p, 0) + n
        assert fetched == {0: 10, 1: 10}
        m = first.metrics()
        assert m["records-consumed-total"] == 20 and m["records-lag-max"] == 0
        assert m["records-lag"] == {tp: 0 for tp in tps}
        assert m["assigned-partitions"] == 2 and m["rebalance-total"] == 1
        assert m["fetch-total"] >= 1 and m["fetch-latency-max"] > 0

        offsets = {tp: OffsetAndMetadata(10, "") for tp in tps}
        await first.commit()
        commits = rec.named("on_commit")
        assert len(commits) == 1
        _, g, committed, latency, error = commits[0]
        assert (g, committed, error) == (group, offsets, None) and latency > 0
        assert first.metrics()["commit-total"] == 1

        # a second member: everything is revoked, then half comes back
        await second.start()
        await settle([first, second], tps)
        revoked = rec.named("on_partitions_revoked")
        assigned = rec.named("on_partitions_assigned")
        assert [e[2] for e in revoked] == [set(), tps]
        assert len(assigned) == 2 and assigned[1][2] == first.assignment()
        assert len(assigned[1][2]) == 1
        i_revoke = rec.events.index(revoked[1])
        assert rec.events.index(assigned[0]) < i_revoke < rec.events.index(assigned[1])
        m = first.metrics()
        assert m["rebalance-total"] == 2 and m["partitions-revoked-total"] == 2
        assert m["assigned-partitions"] == 1
    finally:
        await second.stop()
        await first.stop()
    check_connections(rec)
    check_requests(rec)


async def test_consumer_lag_in_metrics_and_fetch_events(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    topic = await new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    await produce_values(kafka_bootstrap, topic, 30, 1)
    rec = Recorder()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest", hooks=[rec]
    )
    await consumer.start()
    try:
        consumer.assign([tp])
        got = await consumer.getmany(tp, timeout_ms=10000, max_records=5)
        assert len(got[tp]) == 5
        m = consumer.metrics()
        assert m["records-lag"] == {tp: 25} and m["records-lag-max"] == 25
        one = await consumer.getone()
        assert one.offset == 5
        async for record in consumer:  # the async-for path reports each record too
            if record.offset == 29:
                break
        assert consumer.metrics()["records-lag"] == {tp: 0}
    finally:
        await consumer.stop()
    first_fetch = next(e for e in rec.named("on_fetch") if e[3])
    assert first_fetch[5:] == (30, 30)  # high watermark 30, fetched from 0
    assert [e[3] for e in rec.named("on_consume")] == list(range(30))
    # a manual assignment: no group, no rebalance or commit events
    assert not rec.named("on_commit") and not rec.named("on_partitions_assigned")


async def test_max_poll_revoke_and_a_failed_commit_are_reported(
    kafka_bootstrap: str, broker: Any, new_topic: Any
) -> None:
    topic = await new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    rec = Recorder()
    group = group_name()
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=group,
        enable_auto_commit=False,
        max_poll_interval_ms=1000,
        hooks=[rec],
        **fast(broker),
    )
    await consumer.start()
    try:
        assert consumer.assignment() == {tp}
        # no poll for longer than max_poll_interval_ms: the consumer leaves the group, and
        # its partitions are revoked
        await wait_until(
            lambda: ("on_partitions_revoked", group, {tp}) in rec.events, what="the revoke"
        )
        # the listener runs while still a member (as Java's onLeavePrepare), then the leave
        # goes out: a commit after the leave is refused
        coordinator = consumer._coordinator
        assert coordinator is not None
        await wait_until(lambda: coordinator.generation < 0, what="the leave")
        with pytest.raises(Errors.CommitFailedError):
            await consumer.commit({tp: 0})
    finally:
        await consumer.stop()
    commits = rec.named("on_commit")
    assert len(commits) == 1
    _, g, offsets, _latency, error = commits[0]
    assert g == group and offsets == {tp: OffsetAndMetadata(0, "")}
    assert isinstance(error, Errors.CommitFailedError)
    assert [e[2] for e in rec.named("on_partitions_revoked")] == [set(), {tp}]
