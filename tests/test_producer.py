"""AIOKafkaProducer against the real embedded brokers; records are read back with aiokafka's
consumer (or confluent-kafka's), so interoperability is checked too."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from aiokafka_lite import errors as Errors
from aiokafka_lite.producer import AIOKafkaProducer, Producer
from aiokafka_lite.producer.batch import RecordHandle
from aiokafka_lite.structs import RecordMetadata, TopicPartition


async def read_back(
    bootstrap: str,
    topic: str,
    count: int,
    partitions: int = 1,
    timeout: float = 20.0,
    isolation_level: str = "read_uncommitted",
) -> list[Any]:
    """Read ``count`` records of ``topic`` from the beginning with aiokafka's consumer."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioTP

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level=isolation_level
    )
    await consumer.start()
    try:
        tps = [AioTP(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=200)
            for recs in batch.values():
                out.extend(recs)
        return out
    finally:
        await consumer.stop()


CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("codec", CODECS)
async def test_round_trip_every_codec(kafka_bootstrap: str, new_topic, codec: str | None) -> None:
    topic = await new_topic(partitions=1)
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
        (b"k1", b"v1", []),
        (None, b"no key", []),
        (b"tombstone", None, []),
        (b"h", b"with headers", [("a", b"1"), ("b", b""), ("c", None)]),
        (None, None, []),  # both null: valid in Kafka
        (b"big", bytes(range(256)) * 40, [("x", b"y" * 300)]),
    ] + [(f"k{i}".encode(), f"value-{i}".encode() * 3, []) for i in range(200)]
    # a timestamp inside the topic's retention, so no retention check deletes the records
    base = (int(time.time()) - 3600) * 1000
    async with AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, compression_type=codec, linger_ms=2
    ) as producer:
        handles = [
            await producer.send(topic, v, key=k, partition=0, headers=h, timestamp_ms=base + i)
            for i, (k, v, h) in enumerate(records)
        ]
        mds = await asyncio.gather(*handles)
    assert [md.offset for md in mds] == list(range(len(records)))
    assert all(
        isinstance(md, RecordMetadata) and md.topic == topic and md.partition == 0 for md in mds
    )
    assert mds[3].timestamp == base + 3 and mds[3].timestamp_type == 0
    got = await read_back(kafka_bootstrap, topic, len(records))
    assert len(got) == len(records)
    for i, (rec, (k, v, h)) in enumerate(zip(got, records, strict=True)):
        assert rec.offset == i
        assert rec.key == k and rec.value == v, i
        assert [(hk, hv) for hk, hv in rec.headers] == [
            (hk, hv if hv is not None else None) for hk, hv in h
        ] or (
            # aiokafka returns b"" or None for null header values depending on version
            [hk for hk, _ in rec.headers] == [hk for hk, _ in h]
        )
        assert rec.timestamp == base + i


async def test_headers_repeated_in_every_form_read_back_verbatim(
    kafka_bootstrap: str, new_topic
) -> None:
    """Headers repeated across records (the same list, equal fresh lists, bytearray and
    memoryview values, list items, None values) arrive exactly as sent; a header of the wrong
    type is refused before anything is queued."""
    topic = await new_topic(partitions=1)
    shared = [("trace", b"0af7"), ("src", b"svc")]
    forms: list[Any] = [
        shared,
        shared,
        [("trace", b"0af7"), ("src", b"svc")],
        [("trace", bytearray(b"0af7")), ("src", b"svc")],
        [["trace", b"0af7"], ("src", memoryview(b"svc"))],
        [("trace", b"other"), ("src", None)],
        shared,
        [(b"trace".decode(), b"0af7"), ("src", b"svc")],
    ]
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=2) as producer:
        for bad in ([("k", 5)], [(7, b"v")]):
            with pytest.raises(TypeError, match="header"):
                await producer.send(topic, b"bad", headers=bad)
        handles = [
            await producer.send(topic, b"%d" % i, partition=0, headers=h)
            for i, h in enumerate(forms)
        ]
        mds = await asyncio.gather(*handles)
    assert [md.offset for md in mds] == list(range(len(forms)))
    got = await read_back(kafka_bootstrap, topic, len(forms))
    assert [r.value for r in got] == [b"%d" % i for i in range(len(forms))]
    for rec, sent in zip(got, forms, strict=True):
        expect = [(k, bytes(v) if v is not None else None) for k, v in sent]
        got_headers = [(k, v) for k, v in rec.headers]
        # aiokafka returns b"" or None for a null header value depending on version
        assert got_headers == expect or got_headers == [(k, v or b"") for k, v in expect]


async def test_send_and_wait_serializers_and_alias(kafka_bootstrap: str, new_topic) -> None:
    topic = await new_topic(partitions=3)
    async with Producer(
        bootstrap_servers=kafka_bootstrap,
        key_serializer=str.encode,
        value_serializer=lambda v: repr(v).encode(),
    ) as producer:
        md = await producer.send_and_wait(topic, {"a": 1}, key="user-1")
        assert md.topic_partition == TopicPartition(topic, md.partition)
        assert md.offset == 0
        assert await producer.partitions_for(topic) == {0, 1, 2}
    got = await read_back(kafka_bootstrap, topic, 1, partitions=3)
    assert got[0].key == b"user-1" and got[0].value == b"{'a': 1}"


async def test_handles_are_future_like(kafka_bootstrap: str, new_topic) -> None:
    topic = await new_topic(partitions=1)
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=20) as producer:
        h1 = await producer.send(topic, b"a")
        h2 = await producer.send(topic, b"b")
        assert isinstance(h1, RecordHandle) and asyncio.isfuture(h1)
        assert not h1.done()
        called: list[Any] = []
        h2.add_done_callback(lambda f: called.append(f.result().offset))
        md1 = await asyncio.wait_for(h1, 10)
        done, _ = await asyncio.wait([h2], timeout=10)
        assert done == {h2} and h2.done() and h2.exception() is None
        await asyncio.sleep(0)
        assert md1.offset == 0 and h2.result().offset == 1 and called == [1]
        h3 = await producer.send(topic, b"c")
        assert h3.cancel() and h3.cancelled()  # detaches this waiter only
        await producer.flush()
    got = await read_back(kafka_bootstrap, topic, 3)
    assert [r.value for r in got] == [b"a", b"b", b"c"]


async def test_handle_callbacks_behave_like_future_callbacks(
    kafka_bootstrap: str, new_topic
) -> None:
    """Done callbacks of record handles, pending or already done: never run inside
    add_done_callback, run once each in the order added, in the context current when added;
    one that raises goes to the loop's exception handler and the others still run."""
    import contextvars

    topic = await new_topic(partitions=1)
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    loop = asyncio.get_running_loop()
    reported: list[BaseException] = []
    loop.set_exception_handler(lambda _loop, ctx: reported.append(ctx["exception"]))
    try:
        async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=20) as producer:
            seen: list[tuple[str, int, str]] = []

            def cb(tag: str) -> Any:
                return lambda h: seen.append((tag, h.result().offset, var.get()))

            def boom(h: Any) -> None:
                raise RuntimeError("callback failed")

            pending = [await producer.send(topic, b"%d" % i) for i in range(3)]
            var.set("pending")
            for h in pending:
                h.add_done_callback(cb("p"))
            pending[0].add_done_callback(boom)
            pending[0].add_done_callback(cb("after-boom"))
            assert seen == []
            await asyncio.gather(*pending)
            await asyncio.sleep(0)
            assert seen == [
                ("p", 0, "pending"),
                ("after-boom", 0, "pending"),
                ("p", 1, "pending"),
                ("p", 2, "pending"),
            ]
            assert [str(e) for e in reported] == ["callback failed"]

            seen.clear()
            var.set("done")
            for h in pending:  # already done: scheduled, not called here
                h.add_done_callback(cb("d"))
            assert seen == []
            await asyncio.sleep(0)
            assert seen == [("d", 0, "done"), ("d", 1, "done"), ("d", 2, "done")]
            assert await asyncio.gather(*pending) == [h.result() for h in pending]
    finally:
        loop.set_exception_handler(None)


async def test_handle_callbacks_each_run_in_their_own_context_copy(
    kafka_bootstrap: str, new_topic
) -> None:
    """As with Future callbacks, a done callback that sets a ContextVar changes only its own
    copy of the context: neither the next callback nor the caller sees it (pending and
    already-done handles, callbacks added from the same context)."""
    import contextvars

    topic = await new_topic(partitions=1)
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    seen: list[tuple[int, str]] = []

    def cb(h: Any) -> None:
        seen.append((h.result().offset, var.get()))
        var.set(f"changed by {h.result().offset}")

    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=20) as producer:
        var.set("caller")
        handles = [await producer.send(topic, b"%d" % i) for i in range(4)]
        for h in handles:  # pending: run when the batch completes
            h.add_done_callback(cb)
        await asyncio.gather(*handles)
        await asyncio.sleep(0)
        assert seen == [(i, "caller") for i in range(4)]
        seen.clear()
        for h in handles:  # already done: run at the next loop turn
            h.add_done_callback(cb)
        await asyncio.sleep(0)
        assert seen == [(i, "caller") for i in range(4)]
        assert var.get() == "caller"


async def test_create_batch_and_send_batch(kafka_bootstrap: str, new_topic) -> None:
    topic = await new_topic(partitions=2)
    async with AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, compression_type="lz4"
    ) as producer:
        batch = producer.create_batch()
        n = 0
        while True:
            meta = batch.append(key=f"{n}".encode(), value=b"x" * 100, timestamp=None)
            if meta is None:
                break
            assert meta.offset == n
            n += 1
        assert batch.record_count() == n > 50
        fut = await producer.send_batch(batch, topic, partition=1)
        md = await fut
        assert md.partition == 1 and md.offset == 0
        md2 = await producer.send_and_wait(topic, b"after", partition=1)
        assert md2.offset == n
    got = await read_back(kafka_bootstrap, topic, n + 1, partitions=2)
    assert [r.key for r in got[:n]] == [f"{i}".encode() for i in range(n)]


async def test_acks_zero_resolves_to_none(kafka_bootstrap: str, new_topic) -> None:
    # aiokafka's behaviour: with acks=0 the broker answers nothing, the send futures give None
    topic = await new_topic(partitions=1)
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks=0) as producer:
        handles = [await producer.send(topic, b"fire-and-forget %d" % i) for i in range(50)]
        mds = await asyncio.gather(*handles)
        assert mds == [None] * 50
        assert await producer.send_and_wait(topic, b"one more") is None
        # read while the producer (and its connection) is still open: with acks=0 nothing says
        # when the broker has processed the last request, and closing the socket right after
        # writing it may drop it (Tansu does)
        got = await read_back(kafka_bootstrap, topic, 51)
    assert len(got) == 51


async def test_too_large_record_fails_at_once(kafka_bootstrap: str, new_topic) -> None:
    topic = await new_topic(partitions=1)
    async with AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, max_request_size=10_000
    ) as producer:
        t0 = time.monotonic()
        with pytest.raises(Errors.MessageSizeTooLargeError):
            await producer.send(topic, b"x" * 20_000)
        assert time.monotonic() - t0 < 1
        with pytest.raises(Errors.IllegalArgumentError):
            await producer.send(topic, b"x", partition=5)
        md = await producer.send_and_wait(topic, b"small")
        assert md.offset == 0


async def test_misuse_raises_kafka_errors(kafka_bootstrap: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    with pytest.raises(Errors.IllegalStateError):
        await producer.send("t", b"x")
    with pytest.raises(ValueError):
        AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True, acks=1)
    with pytest.raises(ValueError):
        AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, compression_type="brotli")
    await producer.start()
    with pytest.raises(Errors.IllegalOperation):
        await producer.begin_transaction()
    await producer.stop()
    with pytest.raises(Errors.ProducerClosed):
        await producer.send("t", b"x")


async def test_unknown_topic_waits_max_block(kafka_bootstrap: str, broker) -> None:
    broker.skip_on("tansu", reason="Tansu auto-creates topics on metadata requests")
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, max_block_ms=800) as producer:
        producer.client.allow_auto_topic_creation = False
        t0 = time.monotonic()
        try:
            await producer.send("no-such-topic-%d" % time.time_ns(), b"x")
        except Errors.KafkaError as exc:
            assert isinstance(exc, (Errors.KafkaTimeoutError, Errors.UnknownTopicOrPartitionError))
            assert time.monotonic() - t0 < 5
        # (a broker that auto-creates the topic lets the send through: also fine)


async def test_idempotent_10k_in_order_no_duplicates(kafka_bootstrap: str, new_topic) -> None:
    topic = await new_topic(partitions=2)
    n = 10_000
    async with AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, enable_idempotence=True, max_batch_size=4096, linger_ms=1
    ) as producer:
        handles = []
        for i in range(n):
            handles.append(
                await producer.send(topic, b"%06d" % i, key=b"%d" % (i % 2), partition=i % 2)
            )
        mds = await asyncio.gather(*handles)
        assert producer._txn is not None and producer._txn.producer_id >= 0
    for p in (0, 1):
        offs = [md.offset for md in mds if md.partition == p]
        assert offs == list(range(n // 2))
    got = await read_back(kafka_bootstrap, topic, n, partitions=2, timeout=30)
    assert len(got) == n
    for p in (0, 1):
        vals = [int(r.value) for r in got if r.partition == p]
        assert vals == list(range(p, n, 2))


async def test_bad_value_type_leaves_producer_usable(kafka_bootstrap: str, new_topic) -> None:
    topic = await new_topic(partitions=1)
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap) as producer:
        with pytest.raises(TypeError):
            await producer.send(topic, "not bytes", partition=0)  # type: ignore[arg-type]
        with pytest.raises(Errors.IllegalArgumentError):
            await producer.send_batch(producer.create_batch(), topic, partition=0)
        assert producer._acc.pool.used == 0
        md = await producer.send_and_wait(topic, b"ok", partition=0)
        assert md.offset == 0
        await producer.flush(timeout=10)
    got = await read_back(kafka_bootstrap, topic, 1)
    assert [r.value for r in got] == [b"ok"]


async def test_concurrent_send_and_wait_from_many_tasks(kafka_bootstrap: str, new_topic) -> None:
    """Web-app pattern: many tasks share one producer (linger 0); every record lands once."""
    topic = await new_topic(partitions=2)
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap) as producer:

        async def worker(w: int) -> list[RecordMetadata]:
            return [
                await producer.send_and_wait(topic, b"%d-%d" % (w, i), key=b"%d" % w)
                for i in range(20)
            ]

        results = await asyncio.wait_for(asyncio.gather(*(worker(w) for w in range(50))), 60)
    seen = {(md.partition, md.offset) for mds in results for md in mds}
    assert len(seen) == 1000  # no two records share an offset
    for mds in results:  # per key (hence per partition), offsets increase in send order
        offs = [md.offset for md in mds]
        assert offs == sorted(offs) and len({md.partition for md in mds}) == 1


async def test_idempotent_epoch_bump_keeps_delivering(
    broker: Any, kafka_bootstrap: str, new_topic
) -> None:
    """KIP-360 path: bump the epoch mid-stream (as on OutOfOrderSequence/UnknownProducerId);
    sequences restart at 0 under the new epoch and nothing is lost or duplicated. The epoch is
    bumped locally (same producer id, so the broker fences the old epoch's stragglers); only a
    broker refusing that (Tansu) makes the producer take a new id."""
    topic = await new_topic(partitions=1)
    async with AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, enable_idempotence=True
    ) as producer:
        txn = producer._txn
        assert txn is not None
        first = [await producer.send(topic, b"a%d" % i, partition=0) for i in range(300)]
        await asyncio.gather(*first)
        pid, epoch = txn.producer_id, txn.producer_epoch
        txn.need_bump()
        producer._sender.wakeup()
        second = [await producer.send(topic, b"b%d" % i, partition=0) for i in range(300)]
        mds = await asyncio.wait_for(asyncio.gather(*second), 30)
        if broker.kind == "tansu":
            assert (txn.producer_id, txn.producer_epoch) != (pid, epoch)
        else:
            assert (txn.producer_id, txn.producer_epoch) == (pid, epoch + 1)
        assert [md.offset for md in mds] == list(range(300, 600))
    got = await read_back(kafka_bootstrap, topic, 600)
    assert [r.value for r in got] == [b"a%d" % i for i in range(300)] + [
        b"b%d" % i for i in range(300)
    ]


async def test_cancelled_waiter_does_not_affect_other_records(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = await new_topic(partitions=1)
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=200) as producer:
        h1 = await producer.send(topic, b"one", partition=0)
        h2 = await producer.send(topic, b"two", partition=0)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(_await(h1), 0.01)  # a task awaiting h1 is cancelled
        md2 = await asyncio.wait_for(h2, 10)
        md1 = await asyncio.wait_for(_await(h1), 10)  # h1 itself is still fine
        assert (md1.offset, md2.offset) == (0, 1)


async def _await(handle: Any) -> Any:
    return await handle


@pytest.mark.parametrize("return_exceptions", [False, True])
async def test_cancelling_a_gather_of_send_handles_finishes(
    kafka_bootstrap: str, new_topic, return_exceptions: bool
) -> None:
    """A task awaiting ``asyncio.gather(*handles)`` of records still lingering is cancelled
    (an application's writer loop stopped): the task ends cancelled (it hung before), and
    the records are still delivered."""
    topic = await new_topic(partitions=1)
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=2000) as producer:
        handles = [await producer.send(topic, b"%d" % i, partition=0) for i in range(3)]

        async def writer() -> Any:
            return await asyncio.gather(*handles, return_exceptions=return_exceptions)

        task = asyncio.ensure_future(writer())
        await asyncio.sleep(0)  # the task waits in the gather
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=10)
        assert task in done and task.cancelled()
        await producer.flush(30)
        # (gather cancelled the handles, as it cancels any children: each raises
        # CancelledError now; the records themselves are not cancelled)
        assert all(h.cancelled() for h in handles)
    got = await read_back(kafka_bootstrap, topic, 3)
    assert [r.value for r in got] == [b"0", b"1", b"2"]


async def test_broker_rejection_fails_only_affected_records(
    kafka_bootstrap: str, new_topic, broker: Any
) -> None:
    """A record the broker refuses (over its 1 MiB message limit) fails with the mapped error;
    the other partition's record in the same request is delivered."""
    broker.skip_on("tansu", reason="Tansu has no message size limit")
    topic = await new_topic(partitions=2)
    async with AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap,
        max_request_size=8 * 1024 * 1024,
        max_batch_size=4 * 1024 * 1024,
        linger_ms=20,
    ) as producer:
        big = await producer.send(topic, b"x" * (2 * 1024 * 1024), partition=0)
        small = await producer.send(topic, b"small", partition=1)
        with pytest.raises(Errors.KafkaError) as info:
            await asyncio.wait_for(big, 30)
        assert isinstance(
            info.value, (Errors.MessageSizeTooLargeError, Errors.RecordListTooLargeError)
        ), info.value
        md = await asyncio.wait_for(small, 30)
        assert (md.partition, md.offset) == (1, 0)
        assert producer._acc.pool.used == 0


async def test_start_against_silent_broker_fails_in_time() -> None:
    """A server that accepts connections and never answers: start() fails, stop() is clean."""
    import socket

    with socket.socket() as srv:  # a "broker" that accepts and never answers
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=500)
        with pytest.raises(Errors.KafkaError):
            await asyncio.wait_for(producer.start(), 10)
        await asyncio.wait_for(producer.stop(), 10)


async def test_idempotent_producer_recovers_from_a_rejected_batch(
    kafka_bootstrap: str, new_topic, broker: Any
) -> None:
    """A rejected batch leaves a sequence gap; the producer moves to a new epoch and the
    following records of the same partition are delivered."""
    broker.skip_on("tansu", reason="Tansu has no message size limit")
    topic = await new_topic(partitions=1)
    async with AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap,
        enable_idempotence=True,
        max_request_size=8 * 1024 * 1024,
        max_batch_size=4 * 1024 * 1024,
    ) as producer:
        assert (await producer.send_and_wait(topic, b"before")).offset == 0
        big = await producer.send(topic, b"x" * (2 * 1024 * 1024))
        with pytest.raises(Errors.KafkaError):
            await asyncio.wait_for(big, 30)
        after = [await producer.send(topic, b"after-%d" % i) for i in range(50)]
        mds = await asyncio.wait_for(asyncio.gather(*after), 30)
        assert [md.offset for md in mds] == list(range(1, 51))


async def test_send_many_bulk_path(kafka_bootstrap: str, new_topic) -> None:
    topic = await new_topic(partitions=3)
    async with AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, max_batch_size=4096, linger_ms=5
    ) as producer:
        values = [b"%05d" % i + b"." * 100 for i in range(2000)]
        handles = await producer.send_many(topic, values, partition=2, headers=[("h", b"1")])
        assert len(handles) == 2000
        mds = await asyncio.gather(*handles)
        assert [md.offset for md in mds] == list(range(2000))
        assert {md.partition for md in mds} == {2}
        spread = await asyncio.gather(*await producer.send_many(topic, values[:600]))
        assert len({md.partition for md in spread}) >= 2  # sticky: whole batches move on
        keyed = await producer.send_many(topic, [b"a", b"b"], keys=[b"k1", b"k2"])
        assert len(await asyncio.gather(*keyed)) == 2
    got = await read_back(kafka_bootstrap, topic, 2602, partitions=3)
    p2 = [r for r in got if r.partition == 2][:2000]
    assert [r.value for r in p2] == values
    assert list(p2[0].headers) == [("h", b"1")]


class _ProduceCounter:
    """Counts Produce requests written and the batches they carried (a hook)."""

    def __init__(self) -> None:
        self.requests = 0
        self.batches: list[tuple[int, int]] = []  # (partition, records) per batch sent

    def on_request_sent(self, node_id: int | None, api_key: int, api_name: str, size: int) -> None:
        if api_name == "Produce":
            self.requests += 1

    def on_batch_sent(
        self, topic: str, partition: int, records: int, size: int, queue_time: float, attempt: int
    ) -> None:
        self.batches.append((partition, records))


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
async def test_linger0_sends_of_one_turn_share_a_batch(
    kafka_bootstrap: str, new_topic, idempotent: bool
) -> None:
    """linger 0: send_and_wait() calls started in one event-loop turn (asyncio.gather) go out
    as one batch per partition, in one Produce request per leader (aiokafka batches them
    too); a lone send_and_wait() afterwards is still its own request."""
    topic = await new_topic(partitions=3)
    counter = _ProduceCounter()
    async with AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap,
        linger_ms=0,
        enable_idempotence=idempotent,
        hooks=[counter],
    ) as producer:
        for p in range(3):  # metadata known, connection open, nothing in flight after this
            await producer.send_and_wait(topic, b"warm-up", partition=p)
        leaders = {
            producer.client.cluster.leader_for_partition(TopicPartition(topic, p)) for p in range(3)
        }
        before_requests, before_batches = counter.requests, len(counter.batches)
        n = 30
        mds = await asyncio.wait_for(
            asyncio.gather(
                *(producer.send_and_wait(topic, b"%d" % i, partition=i % 3) for i in range(n))
            ),
            30,
        )
        assert counter.requests - before_requests == len(leaders)
        assert sorted(counter.batches[before_batches:]) == [(0, 10), (1, 10), (2, 10)]
        for p in range(3):  # one batch: consecutive offsets in send order
            offs = [md.offset for i, md in enumerate(mds) if i % 3 == p]
            assert offs == list(range(offs[0], offs[0] + 10))
        before_requests = counter.requests
        await asyncio.wait_for(producer.send_and_wait(topic, b"alone", partition=0), 30)
        assert counter.requests - before_requests == 1
        assert counter.batches[-1] == (0, 1)
    got = await read_back(kafka_bootstrap, topic, n + 4, partitions=3)
    assert sorted(r.value for r in got if r.value not in (b"warm-up", b"alone")) == sorted(
        b"%d" % i for i in range(n)
    )


class _ShiftedClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock is ``time.monotonic()`` plus a day: a deadline computed on
    one clock and compared with the other is a day off (every batch expired at once, or a
    wait that never ends)."""

    def time(self) -> float:
        return super().time() + 86400.0


async def _round_trip_on_the_loop_clock(bootstrap: str, ends_right: bool) -> None:
    from aiokafka_lite import AIOKafkaConsumer
    from aiokafka_lite.admin import AIOKafkaAdminClient, NewTopic

    loop = asyncio.get_running_loop()
    topic = f"loop-clock-{time.time_ns()}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        await admin.close()
    # linger, retry back-offs and delivery_timeout_ms run on the batches' clock
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, linger_ms=20, delivery_timeout_ms=30000
    )
    await producer.start()
    try:
        handles = [await producer.send(topic, b"v%d" % i, partition=i % 2) for i in range(40)]
        sent = await asyncio.wait_for(asyncio.gather(*handles), 30)
    finally:
        await producer.stop(timeout=10)
    assert sorted(md.offset for md in sent) == sorted(list(range(20)) * 2)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", request_timeout_ms=10000
    )
    consumer.assign(tps)
    await consumer.start()
    try:
        got = 0
        until = loop.time() + 30
        while got < 40 and loop.time() < until:
            got += sum(len(r) for r in (await consumer.getmany(timeout_ms=500)).values())
        assert got == 40
        ends = await consumer.end_offsets(tps)  # ListOffsets: a retry budget
        if ends_right:  # Tansu's ListOffsets(latest) is the newest batch's base + 1 (DESIGN.md)
            assert ends == {tp: 20 for tp in tps}
        assert await consumer.position(tps[0]) == 20
        # nothing more to read: getmany() returns after its timeout_ms, on the loop's clock
        started = loop.time()
        assert await consumer.getmany(timeout_ms=300) == {}
        assert 0.25 <= loop.time() - started < 10
    finally:
        await consumer.stop()


@pytest.mark.parametrize("loop_kind", ["shifted-clock", "uvloop"])
def test_deadlines_run_on_the_event_loop_clock(broker: Any, loop_kind: str) -> None:
    # _timeouts: every deadline (batches, back-offs, retry budgets, getmany's wait) is on the
    # running loop's clock; on a loop whose clock is not time.monotonic() (shifted by a day,
    # or uvloop's own) a produce/consume round trip behaves as on the default loop
    if loop_kind == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        factory: Any = uvloop.new_event_loop
    else:
        factory = _ShiftedClockLoop
    loop = factory()
    try:
        loop.run_until_complete(
            asyncio.wait_for(
                _round_trip_on_the_loop_clock(broker.bootstrap, broker.kind != "tansu"), 120
            )
        )
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
