"""AIOKafkaConsumer against a real broker: manual assignment, seeks, prefetch bound,
max_poll_records, auto_offset_reset, offsets lookups, pause/resume, deserializers."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer as PeerProducer

from aiokafka_lite import errors as Errors
from aiokafka_lite.consumer import AIOKafkaConsumer
from aiokafka_lite.structs import TopicPartition

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]


async def produce(
    bootstrap: str,
    topic: str,
    per_partition: int,
    partitions: int = 1,
    *,
    prefix: str = "v",
    linger_ms: int = 5,
) -> None:
    """Write ``per_partition`` records to each partition with aiokafka's producer (interop)."""
    producer = PeerProducer(bootstrap_servers=bootstrap, linger_ms=linger_ms)
    await producer.start()
    try:
        futs = []
        for p in range(partitions):
            for i in range(per_partition):
                futs.append(
                    await producer.send(
                        topic,
                        f"{prefix}{p}-{i}".encode(),
                        key=f"k{i}".encode(),
                        partition=p,
                        headers=[("h", b"1")],
                    )
                )
        await asyncio.gather(*futs)
    finally:
        await producer.stop()


async def drain(consumer: AIOKafkaConsumer, want: int, timeout: float = 20.0) -> list[Any]:
    out: list[Any] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(out) < want and loop.time() < deadline:
        batch = await consumer.getmany(timeout_ms=500)
        for recs in batch.values():
            out.extend(recs)
    return out


async def test_manual_assignment_seek_and_positions(kafka_bootstrap: str, new_topic: Any) -> None:
    topic = await new_topic(partitions=3)
    await produce(kafka_bootstrap, topic, 20, 3)
    tps = [TopicPartition(topic, p) for p in range(3)]
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign(tps)
        assert consumer.assignment() == set(tps)
        records = await drain(consumer, 60)
        assert len(records) == 60
        for p in range(3):
            mine = [r for r in records if r.partition == p]
            assert [r.offset for r in mine] == list(range(20))
            assert [r.value for r in mine] == [f"v{p}-{i}".encode() for i in range(20)]
            assert mine[0].key == b"k0" and list(mine[0].headers) == [("h", b"1")]
            assert mine[0].topic == topic and mine[0].serialized_value_size == len(mine[0].value)
            assert await consumer.position(tps[p]) == 20
            assert consumer.highwater(tps[p]) == 20
        # seek inside a batch: the records before the offset are dropped
        consumer.seek(tps[1], 7)
        got = await drain(consumer, 13)
        assert [r.offset for r in got] == list(range(7, 20)) and {r.partition for r in got} == {1}
        await consumer.seek_to_beginning(tps[2])
        got = await drain(consumer, 20)
        assert [r.offset for r in got] == list(range(20))
        assert await consumer.beginning_offsets(tps) == {tp: 0 for tp in tps}
        # getone with a partition filter
        consumer.seek(tps[0], 19)
        rec = await asyncio.wait_for(consumer.getone(tps[0]), 10)
        assert (rec.partition, rec.offset) == (0, 19)
        with pytest.raises(Errors.IllegalStateError):
            await consumer.getmany(TopicPartition(topic, 9))
        with pytest.raises(ValueError):
            consumer.seek(tps[0], -1)
    finally:
        await consumer.stop()
    with pytest.raises(Errors.ConsumerStoppedError):
        await consumer.getmany()


async def test_max_poll_records_and_prefetch_bound(kafka_bootstrap: str, new_topic: Any) -> None:
    topic = await new_topic(partitions=2)
    await produce(kafka_bootstrap, topic, 200, 2)
    tps = [TopicPartition(topic, p) for p in range(2)]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap,
        auto_offset_reset="earliest",
        max_poll_records=7,
        max_partition_fetch_bytes=2048,
    )
    await consumer.start()
    fetcher = consumer._fetcher
    assert fetcher is not None
    requests: list[tuple[TopicPartition, int, bool]] = []
    build = fetcher._fetch_request

    def spy(positions: Any) -> Any:  # record every fetch: partition, offset, data still buffered?
        requests.extend((tp, off, tp in fetcher._buffers) for tp, off in positions.items())
        return build(positions)

    fetcher._fetch_request = spy  # type: ignore[method-assign]
    try:
        consumer.assign(tps)
        seen: dict[int, list[int]] = {0: [], 1: []}
        while sum(map(len, seen.values())) < 400:
            batch = await consumer.getmany(timeout_ms=2000)
            assert batch, "no records within 2 s"
            assert sum(len(v) for v in batch.values()) <= 7
            # prefetch keeps at most one buffered response per partition
            assert len(fetcher._buffers) <= 2 and set(fetcher._buffers) <= set(tps)
            for tp, recs in batch.items():
                seen[tp.partition].extend(r.offset for r in recs)
        assert seen == {0: list(range(200)), 1: list(range(200))}
        # never refetched while data was waiting (a first batch larger than
        # max_partition_fetch_bytes still comes whole, so one fetch may be all)
        assert requests and not any(buffered for _, _, buffered in requests)
        for tp in tps:
            offsets = [off for t, off, _ in requests if t == tp]
            assert offsets and offsets == sorted(offsets) and offsets[0] == 0
        batch = await consumer.getmany(timeout_ms=0, max_records=3)
        assert batch == {}
    finally:
        await consumer.stop()


async def test_auto_offset_reset(kafka_bootstrap: str, broker: Any, new_topic: Any) -> None:
    topic = await new_topic(partitions=1)
    await produce(kafka_bootstrap, topic, 10, linger_ms=0)
    tp = TopicPartition(topic, 0)
    earliest = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest")
    latest = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, auto_offset_reset="latest")
    none = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, auto_offset_reset="none")
    for c in (earliest, latest, none):
        await c.start()
        c.assign([tp])
    try:
        assert [r.offset for r in await drain(earliest, 10)] == list(range(10))
        end = await latest.position(tp)
        if broker.kind != "tansu":  # Tansu's ListOffsets(latest) is off (DESIGN.md)
            assert end == 10
            await produce(kafka_bootstrap, topic, 3, prefix="new", linger_ms=0)
            got = await drain(latest, 3)
            assert [r.offset for r in got] == [10, 11, 12] and got[0].value == b"new0-0"
        if broker.kind != "tansu":  # Tansu answers a fetch past the end with no error
            # "none" with an out-of-range position raises to the caller
            none.seek(tp, 1000)
            with pytest.raises(Errors.OffsetOutOfRangeError):
                for _ in range(40):
                    await none.getmany(timeout_ms=500)
        # and an unknown position without a group raises NoOffsetForPartitionError
        none.assign([TopicPartition(topic, 0)])
        none._subscription.state(tp).position = None
        none._subscription.changed()
        with pytest.raises(Errors.NoOffsetForPartitionError):
            for _ in range(40):
                await none.getmany(timeout_ms=500)
    finally:
        for c in (earliest, latest, none):
            await c.stop()


async def test_a_slow_reader_of_a_backlog_is_not_held_by_a_long_poll(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    """One partition with a backlog, three at their end, fetches of 2 KiB per partition and a
    long fetch_max_wait_ms: while the application takes a few records at a time, no getmany()
    comes back empty before the backlog is read. (A fetch for the three idle partitions alone
    long-polls for fetch_max_wait_ms; the draining partition's next fetch must not queue behind
    it: no new fetch to a node while a partition it leads still has records, as aiokafka's.)"""
    topic = await new_topic(partitions=4)
    producer = PeerProducer(bootstrap_servers=kafka_bootstrap, linger_ms=5)
    await producer.start()
    try:
        futs = [await producer.send(topic, b"x" * 100, partition=0) for _ in range(400)]
        futs += [await producer.send(topic, b"y", partition=p) for p in (1, 2, 3)]
        await asyncio.gather(*futs)
    finally:
        await producer.stop()
    c = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap,
        fetch_max_wait_ms=20000,
        max_partition_fetch_bytes=2048,
    )
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(4)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)
        got = 0
        while got < 403:
            batch = await c.getmany(timeout_ms=5000, max_records=7)
            assert batch, f"getmany() came back empty with {403 - got} records still to read"
            got += sum(len(r) for r in batch.values())
            await asyncio.sleep(0.002)  # the application's work
    finally:
        await c.stop()


async def test_start_returns_when_a_position_cannot_be_set(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    """auto_offset_reset="none", a subscription and no group: start() returns with the error
    held for the first poll (aiokafka's), not after its 40 s start wait."""
    topic = await new_topic(partitions=1)
    await produce(kafka_bootstrap, topic, 1, linger_ms=0)
    c = AIOKafkaConsumer(topic, bootstrap_servers=kafka_bootstrap, auto_offset_reset="none")
    try:
        await asyncio.wait_for(c.start(), 15)  # the start wait is request_timeout_ms (40 s)
        assert c.assignment() == {TopicPartition(topic, 0)}
        with pytest.raises(Errors.NoOffsetForPartitionError):
            await c.getmany(timeout_ms=1000)
    finally:
        await c.stop()


@pytest.mark.skip_broker("tansu", reason="Tansu answers a fetch past the log end with no error")
async def test_out_of_range_resets_to_earliest(kafka_bootstrap: str, new_topic: Any) -> None:
    topic = await new_topic(partitions=1)
    await produce(kafka_bootstrap, topic, 5)
    tp = TopicPartition(topic, 0)
    async with AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest"
    ) as c:
        c.assign([tp])
        c.seek(tp, 500)
        assert [r.offset for r in await drain(c, 5)] == list(range(5))


async def test_pause_resume_and_deserializers(kafka_bootstrap: str, new_topic: Any) -> None:
    topic = await new_topic(partitions=2)
    await produce(kafka_bootstrap, topic, 5, 2)
    tps = [TopicPartition(topic, p) for p in range(2)]
    async with AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap,
        auto_offset_reset="earliest",
        key_deserializer=lambda k: k.decode() if k is not None else None,
        value_deserializer=lambda v: v.decode(),
    ) as c:
        c.assign(tps)
        c.pause(tps[1])
        assert c.paused() == {tps[1]}
        got = await drain(c, 5)
        await asyncio.sleep(0.3)
        got += await drain(c, 1, timeout=1.0)
        assert {r.partition for r in got} == {0} and len(got) == 5
        assert got[0].value == "v0-0" and got[0].key == "k0"
        c.resume(tps[1])
        got = await drain(c, 5)
        assert [r.value for r in got] == [f"v1-{i}" for i in range(5)]


async def test_async_iteration_and_topics(kafka_bootstrap: str, new_topic: Any) -> None:
    topic = await new_topic(partitions=1)
    await produce(kafka_bootstrap, topic, 3)
    c = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest")
    await c.start()
    try:
        assert topic in await c.topics()
        assert c.partitions_for_topic(topic) in (None, {0})
        c.assign([TopicPartition(topic, 0)])
        values = []
        async for rec in c:
            values.append(rec.value)
            if len(values) == 3:
                break
        assert values == [b"v0-0", b"v0-1", b"v0-2"]
    finally:
        await c.stop()


async def test_async_iteration_moves_the_position_record_by_record(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    """`async for` hands out one record at a time: the position (what a commit would store)
    is always just past the last record the application got, across batches and a seek."""
    topic = await new_topic(partitions=1)
    await produce(kafka_bootstrap, topic, 40)
    tp = TopicPartition(topic, 0)
    c = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest")
    with pytest.raises(Errors.IllegalStateError):
        await c.__anext__()
    await c.start()
    try:
        c.assign([tp])
        offsets = []
        async for rec in c:
            offsets.append(rec.offset)
            assert await c.position(tp) == rec.offset + 1
            if rec.offset == 24:
                c.seek(tp, 30)
            if rec.offset == 39:
                break
        assert offsets == list(range(25)) + list(range(30, 40))
    finally:
        await c.stop()
    with pytest.raises(StopAsyncIteration):
        await c.__anext__()


async def test_async_iteration_covers_partitions_and_honours_pause(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    """`async for` over two partitions hands out every record of both, each partition in
    offset order (one partition's fetched records before the next one's, as aiokafka), and
    none of a paused partition until it is resumed, then from where it stopped."""
    topic = await new_topic(partitions=2)
    await produce(kafka_bootstrap, topic, 30, partitions=2)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    c = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest")
    await c.start()
    try:
        c.assign(tps)
        got: list[tuple[int, int]] = []
        async for rec in c:
            got.append((rec.partition, rec.offset))
            if len(got) == 5:
                break
        first = got[0][0]
        assert all(p == first for p, _ in got)  # from one partition's fetched records
        paused, other = tps[first], tps[1 - first]
        c.pause(paused)
        paused_at = await c.position(paused)
        assert paused_at == 5
        async for rec in c:
            assert rec.partition == other.partition, "a record of the paused partition"
            got.append((rec.partition, rec.offset))
            if rec.offset == 29:
                break
        assert await c.position(paused) == paused_at
        c.resume(paused)
        async for rec in c:
            got.append((rec.partition, rec.offset))
            if len(got) == 60:
                break
        assert got[35] == (paused.partition, paused_at)  # resumed where it stopped
        for p in (0, 1):  # each partition in offset order, no gaps, nothing twice
            assert [o for q, o in got if q == p] == list(range(30))
    finally:
        await c.stop()


@pytest.mark.skip_broker(
    "tansu", reason="Tansu's ListOffsets is wrong for latest and for timestamps"
)
async def test_end_offsets_seek_to_end_and_offsets_for_times(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    topic = await new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    # timestamps inside the topic's retention (7 days): brokers delete records older than that
    # at their next retention check (noida within seconds), which empties offsets_for_times
    base = (int(time.time()) - 3600) * 1000
    producer = PeerProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        for i in range(6):
            await producer.send_and_wait(
                topic, b"x%d" % i, partition=0, timestamp_ms=base + i * 1000
            )
    finally:
        await producer.stop()
    async with AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest"
    ) as c:
        c.assign([tp])
        assert await c.end_offsets([tp]) == {tp: 6}
        found = await c.offsets_for_times({tp: base + 2_500})
        assert (
            found[tp] is not None and found[tp].offset == 3 and found[tp].timestamp == base + 3_000
        )
        assert (await c.offsets_for_times({tp: base + 9_000_000}))[tp] is None
        await c.seek_to_end(tp)
        assert await c.position(tp) == 6
        c.seek(tp, 4)
        got = await drain(c, 2)
        assert [r.offset for r in got] == [4, 5] and got[0].timestamp == base + 4_000


async def test_subscribe_without_group_takes_every_partition(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    topic = await new_topic(partitions=3)
    await produce(kafka_bootstrap, topic, 2, 3)
    async with AIOKafkaConsumer(
        topic, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest"
    ) as c:
        recs = await drain(c, 6)
        assert sorted((r.partition, r.offset) for r in recs) == [
            (p, o) for p in range(3) for o in range(2)
        ]
        assert c.assignment() == {TopicPartition(topic, p) for p in range(3)}
        assert c.subscription() == {topic}
        with pytest.raises(TypeError):
            c.subscribe([topic], pattern="^x")  # topics or a pattern, not both
        with pytest.raises(Errors.IllegalOperation):
            await c.commit()
        with pytest.raises(Errors.IllegalStateError):
            c.assign([TopicPartition(topic, 0)])  # subscribe() and assign() exclude each other
        c.unsubscribe()
        c.assign([TopicPartition(topic, 0)])
        assert c.assignment() == {TopicPartition(topic, 0)}


async def test_stop_wakes_a_waiting_getone(kafka_bootstrap: str, new_topic: Any) -> None:
    topic = await new_topic(partitions=1)
    c = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, auto_offset_reset="latest")
    await c.start()
    c.assign([TopicPartition(topic, 0)])

    async def iterate() -> int:
        n = 0
        async for _ in c:
            n += 1
        return n

    waiter = asyncio.create_task(c.getone())
    looper = asyncio.create_task(iterate())
    await asyncio.sleep(0.5)
    await asyncio.wait_for(c.stop(), 10)
    with pytest.raises(Errors.ConsumerStoppedError):
        await asyncio.wait_for(waiter, 5)
    assert await asyncio.wait_for(looper, 5) == 0  # async for just ends


async def test_assign_before_start_knows_the_topic_at_start(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    """assign() before start(): the bootstrap metadata already answers the assigned topics (as
    aiokafka's, which loads every topic), so the latest position is looked up at once and a
    record produced right after start() is consumed. FastStream's ``subscriber(partitions=[...])``
    creates the topic, starts such a consumer and publishes at once (its test_consume's
    test_manual_partition_consume): the lookup used to wait for the next metadata refresh
    (>= retry_backoff_ms later) and answered the offset after that record."""
    topic = await new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    c = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, auto_offset_reset="latest")
    c.assign([tp])
    await c.start()
    try:
        # known from the bootstrap answer itself, with no refresh in between
        assert c._client.cluster.leader_for_partition(tp) is not None
        producer = PeerProducer(bootstrap_servers=kafka_bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"right-after-start", partition=0)
        finally:
            await producer.stop()
        rec = await asyncio.wait_for(c.getone(), 10)
        assert (rec.offset, rec.value) == (0, b"right-after-start")
    finally:
        await c.stop()


async def test_wait_for_data_wakes_on_the_next_loop_turn() -> None:
    """A getone()/getmany() waiting for data resumes on the loop turn after the fetch answer,
    and the planner on the turn after a buffer is drained (one future with a timer per wait, as
    aiokafka's fetch waiters; asyncio.wait_for's task per wait took two turns more). FastStream's
    test_concurrent_consume stops its broker right after publishing and counts the records
    handed to its workers by then."""
    from aiokafka_lite.consumer.fetcher import Fetcher
    from aiokafka_lite.consumer.subscription import SubscriptionState

    fetcher = Fetcher(object(), SubscriptionState())
    for signal, wait in (
        (fetcher._data, fetcher.wait_for_data),
        (fetcher._wake, fetcher._wake.wait),
    ):
        waiter = asyncio.create_task(wait(30))
        await asyncio.sleep(0)
        assert not waiter.done()
        signal.set()
        await asyncio.sleep(0)
        assert waiter.done()
        # and the timeout still ends a wait that nothing wakes
        signal.clear()
        await asyncio.wait_for(wait(0.05), 5)
        # cancelling a waiter leaves nothing behind
        waiter = asyncio.create_task(wait(30))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert not signal._waiters


async def test_commit_after_stop_commits_outside_the_group(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    """As aiokafka's: a subscribed group consumer can still commit after stop() (kafkaesk
    commits what it handled on shutdown): the stopped assignment, outside the group it left,
    explicit offsets or the positions; with another member in the group the broker refuses it
    (CommitFailedError)."""
    topic = await new_topic(partitions=1)
    await produce(kafka_bootstrap, topic, 3)
    tp = TopicPartition(topic, 0)
    group = f"g-{topic}"

    async def committed() -> int | None:
        reader = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group)
        await reader.start()
        try:
            return await reader.committed(tp)
        finally:
            await reader.stop()

    c = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await c.start()
    try:
        got = [(await asyncio.wait_for(c.getone(), 20)).offset for _ in range(2)]
    finally:
        await c.stop()
    assert got == [0, 1]
    await asyncio.wait_for(c.commit({tp: 1}), 30)
    assert await committed() == 1
    await asyncio.wait_for(c.commit(), 30)  # the positions at stop()
    assert await committed() == 2
    other = AIOKafkaConsumer(
        topic, bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False
    )
    await other.start()
    try:
        assert other.assignment() == {tp}
        with pytest.raises(Errors.CommitFailedError):
            await asyncio.wait_for(c.commit({tp: 3}), 30)
    finally:
        await other.stop()
    assert await committed() == 2


async def test_stop_makes_the_last_auto_commit_as_a_member(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    """stop() of an auto-committing group consumer commits its positions while still a member
    (before the LeaveGroup), even when the auto-commit interval has not come round."""
    topic = await new_topic(partitions=1)
    await produce(kafka_bootstrap, topic, 3)
    tp = TopicPartition(topic, 0)
    group = f"g-{topic}"
    c = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=group,
        auto_commit_interval_ms=600000,
        auto_offset_reset="earliest",
    )
    await c.start()
    try:
        got = [(await asyncio.wait_for(c.getone(), 20)).offset for _ in range(3)]
    finally:
        await c.stop()
    assert got == [0, 1, 2]
    reader = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group)
    await reader.start()
    try:
        assert await reader.committed(tp) == 3
    finally:
        await reader.stop()
