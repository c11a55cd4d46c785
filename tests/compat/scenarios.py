"""Differential scenarios: each one async function written against the aiokafka API.

Every scenario runs twice on the same broker (see ``runner.py``): once with the real aiokafka,
once with aiokafka_lite installed as aiokafka.  It returns what a user observes (records and
their fields, assignments, return values, exception class names, callback calls in order);
``test_differential.py`` requires both results to be equal.  Scenarios never sleep to "prove"
something did not happen: they wait for conditions, with timeouts.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiokafka
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import KafkaError

# ---------------------------------------------------------------------------- producer


#: every group member here: Tansu answers a group's first JoinGroup only after half the session
#: timeout, so the default 10 s session cost 5 s a join there; 6 s is Apache Kafka's least
#: (group.min.session.timeout.ms), with the heartbeat under it. The same for both clients.
GROUP_TIMING: dict[str, Any] = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000}


async def producer_send_metadata(ctx: Any) -> Any:
    topic = await ctx.topic(3)
    async with AIOKafkaProducer(bootstrap_servers=ctx.bootstrap) as p:
        out = []
        for i in range(6):
            md = await p.send_and_wait(topic, f"v{i}".encode(), key=f"k{i}".encode())
            out.append(ctx.md(md))
        md = await p.send_and_wait(topic, b"x", partition=2, headers=[("h", b"1")])
        out.append(ctx.md(md))
        fut = await p.send(topic, b"y", partition=1)
        out.append(ctx.md(await fut))
        out.append(sorted(await p.partitions_for(topic)))
    return out


async def producer_acks0(ctx: Any) -> Any:
    topic = await ctx.topic(1)
    async with AIOKafkaProducer(bootstrap_servers=ctx.bootstrap, acks=0) as p:
        fut = await p.send(topic, b"a")
        res = await fut
        res2 = await p.send_and_wait(topic, b"b")
    return {"send": ctx.md(res), "send_and_wait": ctx.md(res2)}


async def producer_send_batch(ctx: Any) -> Any:
    topic = await ctx.topic(2)
    async with AIOKafkaProducer(bootstrap_servers=ctx.bootstrap) as p:
        out: dict[str, Any] = {}
        batch = p.create_batch()
        for i in range(3):
            out[f"append{i}"] = (
                batch.append(key=None, value=f"v{i}".encode(), timestamp=None) is not None
            )
        out["record_count"] = batch.record_count()
        fut = await p.send_batch(batch, topic, partition=1)
        out["explicit"] = ctx.md(await fut)
        batch = p.create_batch()
        batch.append(key=b"k", value=b"v", timestamp=None)
        out["no_partition"] = await ctx.outcome(
            _md_of(ctx, p.send_batch(batch, topic, partition=None))
        )
    return out


async def _md_of(ctx: Any, aw: Any) -> Any:
    fut = await aw
    md = await fut
    # the partitioner picks at random: partition 1 already holds 3 records, partition 0 none
    return {
        "partition_in_range": md.partition in (0, 1),
        "offset_consistent": md.offset == (3 if md.partition == 1 else 0),
    }


async def producer_errors(ctx: Any) -> Any:
    topic = await ctx.topic(1)
    out: dict[str, Any] = {}
    p = AIOKafkaProducer(bootstrap_servers=ctx.bootstrap, max_request_size=2000)
    # before start(): aiokafka waits for metadata that never comes (a hang); aiokafka_lite raises
    # IllegalStateError at once (a documented difference), so it is not compared here
    await p.start()
    try:
        out["str_value"] = await ctx.outcome(p.send(topic, "not-bytes"))
        out["no_value_no_key"] = await ctx.outcome(p.send(topic))
        out["too_large"] = await ctx.outcome(p.send(topic, b"x" * 5000))
        out["bad_partition"] = await ctx.outcome(p.send(topic, b"x", partition=7))
        out["bad_headers"] = await ctx.outcome(p.send(topic, b"x", headers=[("h", "str")]))
    finally:
        await p.stop()
    out["after_stop"] = await ctx.outcome(p.send(topic, b"x"))
    out["bad_acks"] = ctx.call(AIOKafkaProducer, bootstrap_servers=ctx.bootstrap, acks=2)
    out["bad_compression"] = ctx.call(
        AIOKafkaProducer, bootstrap_servers=ctx.bootstrap, compression_type="brotli"
    )
    out["idempotent_acks1"] = ctx.call(
        AIOKafkaProducer, bootstrap_servers=ctx.bootstrap, enable_idempotence=True, acks=1
    )
    return _classes_only(out)


def _classes_only(out: dict[str, Any]) -> dict[str, Any]:
    """Replace successful results by "ok" (the objects themselves differ between clients)."""
    return {k: ("ok" if isinstance(v, dict) and "ok" in v else v) for k, v in out.items()}


async def producer_serializers_and_headers(ctx: Any) -> Any:
    topic = await ctx.topic(1)
    async with AIOKafkaProducer(
        bootstrap_servers=ctx.bootstrap,
        key_serializer=lambda k: k.encode(),
        value_serializer=lambda v: repr(v).encode(),
        compression_type="gzip",
    ) as p:
        await p.send_and_wait(topic, {"a": 1}, key="k1", headers=[("x", b"1"), ("y", b"")])
        await p.send_and_wait(topic, None, key="k2")
    async with AIOKafkaConsumer(bootstrap_servers=ctx.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, 0)])
        recs = await _collect(c, 2)
    return [ctx.rec(r) for r in recs]


async def _collect(c: Any, n: int, timeout: float = 20.0) -> list[Any]:
    out: list[Any] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(out) < n and loop.time() < deadline:
        batch = await c.getmany(timeout_ms=500)
        for tp in sorted(batch):
            out.extend(batch[tp])
    return sorted(out, key=lambda r: (r.topic, r.partition, r.offset))


async def _produce(ctx: Any, topic: str, n: int, partition: int | None = None, **kw: Any) -> None:
    async with AIOKafkaProducer(bootstrap_servers=ctx.bootstrap, **kw) as p:
        for i in range(n):
            await p.send_and_wait(
                topic, f"v{i}".encode(), key=f"k{i}".encode(), partition=partition
            )


async def producer_linger0_same_turn_batch(ctx: Any) -> Any:
    """linger 0: send_and_wait() calls started in one event-loop turn (asyncio.gather, e.g.
    FastStream's concurrent publishes) share one record batch per partition; a lone call
    afterwards is a batch of its own. Seen in the log by a neutral reader (_batch_counts)."""
    topic = await ctx.topic(2)
    async with AIOKafkaProducer(bootstrap_servers=ctx.bootstrap, linger_ms=0) as p:
        for part in range(2):
            await p.send_and_wait(topic, b"warm-up", partition=part)
        mds = await asyncio.gather(
            *(p.send_and_wait(topic, b"%d" % i, partition=i % 2) for i in range(10))
        )
        await p.send_and_wait(topic, b"alone", partition=0)
    return {
        "offsets": [(md.partition, md.offset) for md in mds],
        "records_per_batch": await _batch_counts(ctx.bootstrap, topic, 2),
    }


async def _batch_counts(bootstrap: str, topic: str, partitions: int) -> dict[int, list[int]]:
    """The record count of each record batch in the log, per partition, read with
    aiokafka_lite's low-level client in both runs (aiokafka's consumer does not show batches)."""
    from aiokafka_lite.client import KafkaClient
    from aiokafka_lite.ops.fetch import fetch_request
    from aiokafka_lite.records.reader import iter_batches
    from aiokafka_lite.structs import TopicPartition as LiteTP

    client = KafkaClient(bootstrap_servers=bootstrap)
    await client.start()
    try:
        await client.wait_for_topic(topic, 10000)
        out: dict[int, list[int]] = {}
        for part in range(partitions):
            tp = LiteTP(topic, part)
            leader = client.cluster.leader_for_partition(tp)
            req = fetch_request(
                {tp: 0},
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=1 << 20,
                partition_max_bytes=1 << 20,
                topic_ids={topic: client.cluster.topic_id(topic)},
            )
            resp = await client.send(leader, req)
            records = resp.responses[0].partitions[0].records
            out[part] = [b.record_count for b in iter_batches(records)]
        return out
    finally:
        await client.close()


# ---------------------------------------------------------------------------- consumer


async def consumer_manual_assign(ctx: Any) -> Any:
    topic = await ctx.topic(2)
    await _produce(ctx, topic, 6)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    out: dict[str, Any] = {}
    async with AIOKafkaConsumer(bootstrap_servers=ctx.bootstrap) as c:
        c.assign([tp0, tp1])
        out["assignment"] = c.assignment()
        await c.seek_to_beginning()
        out["pos0"] = await c.position(tp0) + await c.position(tp1)
        recs = await _collect(c, 6)
        out["records"] = [ctx.rec(r) for r in recs]
        out["highwater"] = (c.highwater(tp0) or 0) + (c.highwater(tp1) or 0)
        now_ms = int(__import__("time").time() * 1000)
        lp = c.last_poll_timestamp(tp0)
        out["last_poll_recent"] = lp is not None and now_ms - 60000 <= lp <= now_ms
        out["end"] = sum((await c.end_offsets([tp0, tp1])).values())
        out["begin"] = await c.beginning_offsets([tp0, tp1])
        c.seek(tp0, 1)
        out["pos_after_seek"] = await c.position(tp0)
        c.pause(tp1)
        out["paused"] = c.paused()
        c.resume(tp1)
        out["paused_after_resume"] = c.paused()
        out["seek_negative"] = ctx.call(c.seek, tp0, -5)
        out["not_assigned_position"] = await ctx.outcome(c.position(TopicPartition(topic, 9)))
        out["commit_without_group"] = await ctx.outcome(c.commit())
        out["getmany_max0"] = await ctx.outcome(c.getmany(timeout_ms=10, max_records=0))
        out["subscription"] = c.subscription()
    return out


async def consumer_offsets_for_times(ctx: Any) -> Any:
    topic = await ctx.topic(1)
    tp = TopicPartition(topic, 0)
    # recent timestamps (noida-db deletes records older than retention within seconds), the
    # same in both runs: an hour boundary an hour ago; reported relative to it
    base = (int(time.time() * 1000) // 3_600_000 - 1) * 3_600_000
    async with AIOKafkaProducer(bootstrap_servers=ctx.bootstrap) as p:
        for i, ts in enumerate((1000, 2000, 3000)):
            await p.send_and_wait(topic, f"v{i}".encode(), timestamp_ms=base + ts)
    out: dict[str, Any] = {}
    # request_timeout_ms: aiokafka waits that long before failing on an unknown partition
    async with AIOKafkaConsumer(bootstrap_servers=ctx.bootstrap, request_timeout_ms=5000) as c:
        found = await c.offsets_for_times({tp: base + 1500})
        out["1500"] = [(k, (v[0], v[1] - base) if v else None) for k, v in found.items()]
        found = await c.offsets_for_times({tp: 10**13})
        out["future"] = [(k, v) for k, v in found.items()]
        out["unknown_partition"] = await ctx.outcome(
            c.offsets_for_times({TopicPartition(topic, 5): 0})
        )
        out["negative_ts"] = await ctx.outcome(c.offsets_for_times({tp: -1}))
        out["partitions_for_topic"] = c.partitions_for_topic(topic)
        out["topics_has_topic"] = topic in await c.topics()
    return out


async def consumer_group_start_assignment(ctx: Any) -> Any:
    """aiokafka's start() returns once the first assignment is known."""
    topic = await ctx.topic(2)
    c = AIOKafkaConsumer(
        topic,
        bootstrap_servers=ctx.bootstrap,
        group_id=ctx.name("group"),
        **GROUP_TIMING,
        auto_offset_reset="latest",
    )
    await c.start()
    try:
        out: dict[str, Any] = {"assignment_after_start": c.assignment()}
        out["positions"] = [await c.position(tp) for tp in sorted(c.assignment())]
        out["committed"] = [await c.committed(tp) for tp in sorted(c.assignment())]
        await _produce(ctx, topic, 4, partition=0)
        recs = await _collect(c, 4)
        out["records_sent_after_start"] = [ctx.rec(r) for r in recs]
        await c.commit()
        out["committed_after"] = await c.committed(TopicPartition(topic, 0))
        c.seek(TopicPartition(topic, 0), 1)
        out["seek_to_committed"] = await c.seek_to_committed()
    finally:
        await c.stop()
    return out


async def consumer_group_commit_resume(ctx: Any) -> Any:
    topic = await ctx.topic(1)
    group = ctx.name("group")
    await _produce(ctx, topic, 5)
    tp = TopicPartition(topic, 0)
    out: dict[str, Any] = {}
    async with AIOKafkaConsumer(
        topic,
        bootstrap_servers=ctx.bootstrap,
        group_id=group,
        **GROUP_TIMING,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    ) as c:
        recs = await _collect(c, 5)
        out["first"] = [r.offset for r in recs]
        await c.commit({tp: 3})
        out["committed"] = await c.committed(tp)
        out["bad_commit_key"] = await ctx.outcome(c.commit({"x": 1}))
        out["bad_commit_value"] = await ctx.outcome(c.commit({tp: "x"}))
    async with AIOKafkaConsumer(
        topic,
        bootstrap_servers=ctx.bootstrap,
        group_id=group,
        **GROUP_TIMING,
        auto_offset_reset="earliest",
    ) as c:
        out["position_after_restart"] = await c.position(tp)
        recs = await _collect(c, 2)
        out["second"] = [r.offset for r in recs]
    return out


class _Recorder(ConsumerRebalanceListener):
    def __init__(self, events: list[Any], tag: str) -> None:
        self.events = events
        self.tag = tag

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self.events.append((self.tag, "revoked", sorted(revoked)))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.events.append((self.tag, "assigned", sorted(assigned)))


async def consumer_rebalance_listener(ctx: Any) -> Any:
    topic = await ctx.topic(4)
    group = ctx.name("group")
    ev1: list[Any] = []
    ev2: list[Any] = []
    c1 = AIOKafkaConsumer(bootstrap_servers=ctx.bootstrap, group_id=group, **GROUP_TIMING)
    c1.subscribe([topic], listener=_Recorder(ev1, "c1"))
    await c1.start()
    out: dict[str, Any] = {"c1_after_start": len(c1.assignment()), "c1_events": list(ev1)}
    c2 = AIOKafkaConsumer(bootstrap_servers=ctx.bootstrap, group_id=group, **GROUP_TIMING)
    c2.subscribe([topic], listener=_Recorder(ev2, "c2"))
    started = asyncio.ensure_future(c2.start())
    # c1 must poll to take part in the rebalance (aiokafka runs it in the background anyway);
    # done once its listener heard the new assignment too (aiokafka shows assignment() a moment
    # before it calls on_partitions_assigned: a snapshot in between differed by timing only)
    ok = await ctx.wait_for(
        lambda: started.done() and len(c1.assignment()) == 2 and ev1[-1][1] == "assigned", 40
    )
    await started
    out["balanced"] = ok
    out["sizes"] = sorted([len(c1.assignment()), len(c2.assignment())])
    out["union"] = sorted(c1.assignment() | c2.assignment())
    out["c1_event_kinds"] = [e[1] for e in ev1]
    out["c2_event_kinds"] = [e[1] for e in ev2]
    await c2.stop()
    ok = await ctx.wait_for(lambda: len(c1.assignment()) == 4, 40)
    out["c1_all_after_c2_left"] = ok
    await c1.stop()
    return out


async def consumer_pattern_subscription(ctx: Any) -> Any:
    prefix = ctx.name("pat")
    t1 = prefix + "-a"
    out: dict[str, Any] = {}
    from aiokafka_lite.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=ctx.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(t1, 1, 1)])
        c = AIOKafkaConsumer(
            bootstrap_servers=ctx.bootstrap,
            group_id=ctx.name("group"),
            **GROUP_TIMING,
            auto_offset_reset="earliest",
            metadata_max_age_ms=1000,
        )
        c.subscribe(pattern=f"^{prefix}-.*")
        await c.start()
        try:
            await ctx.wait_for(lambda: bool(c.assignment()), 30)
            out["assignment"] = c.assignment()
            out["subscription"] = c.subscription()
            await _produce(ctx, t1, 2)
            out["records"] = [r.value for r in await _collect(c, 2)]
        finally:
            await c.stop()
    finally:
        await admin.close()
    return out


async def consumer_subscribe_rules(ctx: Any) -> Any:
    topic = await ctx.topic(1)
    out: dict[str, Any] = {}
    c = AIOKafkaConsumer(bootstrap_servers=ctx.bootstrap)
    out["pattern_no_group"] = ctx.call(c.subscribe, pattern="^nothing-.*")
    out["topics_and_pattern"] = ctx.call(c.subscribe, [topic], pattern="^x")
    out["neither"] = ctx.call(c.subscribe)
    out["string_topics"] = ctx.call(c.subscribe, topic)
    out["bad_listener"] = ctx.call(c.subscribe, [topic], listener=object())
    c2 = AIOKafkaConsumer(bootstrap_servers=ctx.bootstrap)
    c2.subscribe([topic])
    out["assign_after_subscribe"] = ctx.call(c2.assign, [TopicPartition(topic, 0)])
    c2.unsubscribe()
    out["after_unsubscribe"] = c2.subscription()
    out["assign_str"] = ctx.call(c2.assign, ["x"])
    return _classes_only(out)


async def consumer_no_group_subscribe(ctx: Any) -> Any:
    topic = await ctx.topic(3)
    await _produce(ctx, topic, 3)
    async with AIOKafkaConsumer(
        topic, bootstrap_servers=ctx.bootstrap, auto_offset_reset="earliest"
    ) as c:
        await ctx.wait_for(lambda: len(c.assignment()) == 3, 20)
        out = {"assignment": c.assignment()}
        out["records"] = [ctx.rec(r) for r in await _collect(c, 3)]
        out["commit"] = await ctx.outcome(c.commit())
    return out


async def consumer_stop_semantics(ctx: Any) -> Any:
    topic = await ctx.topic(1)
    out: dict[str, Any] = {}
    c = AIOKafkaConsumer(
        topic, bootstrap_servers=ctx.bootstrap, group_id=ctx.name("group"), **GROUP_TIMING
    )
    await c.start()
    pending = asyncio.ensure_future(c.getmany(timeout_ms=30000))
    await asyncio.sleep(0.2)  # let getmany start waiting (not an assertion)
    await c.stop()
    out["getmany_in_flight"] = await ctx.outcome(asyncio.wait_for(pending, 10))
    out["getmany_after_stop"] = await ctx.outcome(c.getmany(timeout_ms=10))
    out["getone_after_stop"] = await ctx.outcome(c.getone())

    async def iterate() -> Any:
        async for _ in c:
            return "record"
        return "stopped iteration"

    out["async_for_after_stop"] = await ctx.outcome(asyncio.wait_for(iterate(), 10))
    out["restart"] = await ctx.outcome(c.start())
    out["stop_twice"] = await ctx.outcome(c.stop())

    c2 = AIOKafkaConsumer(
        topic, bootstrap_servers=ctx.bootstrap, group_id=ctx.name("group"), **GROUP_TIMING
    )
    await c2.start()
    pending = asyncio.ensure_future(c2.getone())
    await asyncio.sleep(0.2)
    await c2.stop()
    out["getone_in_flight"] = await ctx.outcome(asyncio.wait_for(pending, 10))
    return out


async def consumer_not_started(ctx: Any) -> Any:
    topic = await ctx.topic(1)
    c = AIOKafkaConsumer(topic, bootstrap_servers=ctx.bootstrap)
    out: dict[str, Any] = {}
    out["getmany"] = await ctx.outcome(c.getmany(timeout_ms=10))
    out["getone"] = await ctx.outcome(asyncio.wait_for(c.getone(), 2))
    out["position"] = await ctx.outcome(c.position(TopicPartition(topic, 0)))
    out["assignment"] = c.assignment()
    out["subscription"] = c.subscription()
    await c.stop()
    return out


async def consumer_argument_validation(ctx: Any) -> Any:
    bs = ctx.bootstrap
    out: dict[str, Any] = {}
    out["bad_protocol"] = ctx.call(AIOKafkaConsumer, bootstrap_servers=bs, security_protocol="FOO")
    out["ssl_no_context"] = ctx.call(
        AIOKafkaConsumer, bootstrap_servers=bs, security_protocol="SSL"
    )
    out["sasl_no_creds"] = ctx.call(
        AIOKafkaConsumer,
        bootstrap_servers=bs,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
    )
    out["bad_mechanism"] = ctx.call(
        AIOKafkaConsumer,
        bootstrap_servers=bs,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="FOO",
        sasl_plain_username="u",
        sasl_plain_password="p",
    )
    out["bad_reset"] = ctx.call(AIOKafkaConsumer, bootstrap_servers=bs, auto_offset_reset="x")
    out["bad_isolation"] = ctx.call(AIOKafkaConsumer, bootstrap_servers=bs, isolation_level="x")
    out["bad_max_poll"] = ctx.call(AIOKafkaConsumer, bootstrap_servers=bs, max_poll_records=0)
    out["p_bad_protocol"] = ctx.call(
        AIOKafkaProducer, bootstrap_servers=bs, security_protocol="FOO"
    )
    out["p_ssl_no_context"] = ctx.call(
        AIOKafkaProducer, bootstrap_servers=bs, security_protocol="SSL"
    )
    out["p_sasl_no_creds"] = ctx.call(
        AIOKafkaProducer,
        bootstrap_servers=bs,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
    )
    out["p_txn_no_idempotence"] = ctx.call(
        AIOKafkaProducer, bootstrap_servers=bs, transactional_id="t", enable_idempotence=False
    )
    return _classes_only(out)


async def consumer_auto_create_topics(ctx: Any) -> Any:
    topic = ctx.name("auto")
    out: dict[str, Any] = {}
    async with AIOKafkaConsumer(
        topic,
        bootstrap_servers=ctx.bootstrap,
        group_id=ctx.name("group"),
        **GROUP_TIMING,
        auto_offset_reset="earliest",
    ) as c:
        out["assignment_after_start"] = c.assignment()
        await _produce(ctx, topic, 2)
        out["records"] = [r.offset for r in await _collect(c, 2)]
    return out


async def consumer_late_topic_assign(ctx: Any) -> Any:
    """assign() a partition of a topic that is created only after start()."""
    topic = ctx.name("late")
    out: dict[str, Any] = {}
    async with AIOKafkaConsumer(
        bootstrap_servers=ctx.bootstrap,
        auto_offset_reset="earliest",
    ) as c:
        c.assign([TopicPartition(topic, 0)])
        await _produce(ctx, topic, 3)  # the producer auto-creates it
        out["records"] = [r.offset for r in await _collect(c, 3)]
    return out


async def consumer_read_committed(ctx: Any) -> Any:
    topic = await ctx.topic(1)
    txn = ctx.name("txn")
    async with AIOKafkaProducer(bootstrap_servers=ctx.bootstrap, transactional_id=txn) as p:
        async with p.transaction():
            await p.send_and_wait(topic, b"committed-1")
        await p.begin_transaction()
        await p.send_and_wait(topic, b"aborted")
        await p.abort_transaction()
        async with p.transaction():
            await p.send_and_wait(topic, b"committed-2")
        out: dict[str, Any] = {"nested_begin": None}
        await p.begin_transaction()
        out["nested_begin"] = await ctx.outcome(p.begin_transaction())
        await p.abort_transaction()
        out["commit_outside"] = await ctx.outcome(p.commit_transaction())
    tp = TopicPartition(topic, 0)
    for level in ("read_committed", "read_uncommitted"):
        async with AIOKafkaConsumer(
            bootstrap_servers=ctx.bootstrap, isolation_level=level, auto_offset_reset="earliest"
        ) as c:
            c.assign([tp])
            end = (await c.end_offsets([tp]))[tp]
            recs: list[Any] = []
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 20
            while loop.time() < deadline:
                batch = await c.getmany(timeout_ms=300)
                recs.extend(batch.get(tp, []))
                if await c.position(tp) >= end:
                    break
            out[level] = [(r.offset, r.value) for r in recs]
            out[level + "_lso"] = c.last_stable_offset(tp)
    return out


async def producer_fenced(ctx: Any) -> Any:
    topic = await ctx.topic(1)
    txn = ctx.name("txn")
    out: dict[str, Any] = {}
    p1 = AIOKafkaProducer(bootstrap_servers=ctx.bootstrap, transactional_id=txn)
    await p1.start()
    await p1.begin_transaction()
    await p1.send_and_wait(topic, b"p1")
    p2 = AIOKafkaProducer(bootstrap_servers=ctx.bootstrap, transactional_id=txn)
    await p2.start()
    try:

        async def p1_again() -> None:
            await p1.send_and_wait(topic, b"p1-again")
            await p1.commit_transaction()

        out["p1_after_fence"] = await ctx.outcome(asyncio.wait_for(p1_again(), 30))
        async with p2.transaction():
            await p2.send_and_wait(topic, b"p2")
        out["p2_ok"] = True
    finally:
        await p2.stop()
        await p1.stop()
    return out


async def transaction_cancelled_calls(ctx: Any) -> Any:
    """Transaction calls whose caller is cancelled one loop turn in: a begin that had not run
    starts nothing; a commit or an abort goes on (the caller only stops waiting), its outcome
    reaches the broker and the producer is ready for the next transaction."""
    topic = await ctx.topic(1)
    out: dict[str, Any] = {}

    async def cancelled(aw: Any) -> str:
        task = asyncio.ensure_future(aw)
        await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled"
        return "completed"

    async def begin_when_ready() -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while True:  # a commit or abort still finishing refuses a new begin meanwhile
            seen = await ctx.outcome(p.begin_transaction())
            if "ok" in seen or loop.time() > deadline:
                return seen
            await asyncio.sleep(0.05)

    async with AIOKafkaProducer(
        bootstrap_servers=ctx.bootstrap, transactional_id=ctx.name("txn")
    ) as p:
        out["begin"] = await cancelled(p.begin_transaction())
        out["begin_after"] = await ctx.outcome(p.begin_transaction())
        await p.send_and_wait(topic, b"committed-1")
        out["commit"] = await cancelled(p.commit_transaction())
        out["begin_after_commit"] = await begin_when_ready()
        await p.send_and_wait(topic, b"aborted")
        out["abort"] = await cancelled(p.abort_transaction())
        out["begin_after_abort"] = await begin_when_ready()
        await p.send_and_wait(topic, b"committed-2")
        await p.commit_transaction()
    tp = TopicPartition(topic, 0)
    async with AIOKafkaConsumer(
        bootstrap_servers=ctx.bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
    ) as c:
        c.assign([tp])
        out["read_committed"] = [r.value for r in await _collect(c, 2)]
    return out


async def transaction_send_offsets(ctx: Any) -> Any:
    src = await ctx.topic(1)
    dst = await ctx.topic(1)
    group = ctx.name("group")
    await _produce(ctx, src, 3)
    out: dict[str, Any] = {}
    async with (
        AIOKafkaConsumer(
            src,
            bootstrap_servers=ctx.bootstrap,
            group_id=group,
            **GROUP_TIMING,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level="read_committed",
        ) as c,
        AIOKafkaProducer(bootstrap_servers=ctx.bootstrap, transactional_id=ctx.name("txn")) as p,
    ):
        recs = await _collect(c, 3)
        async with p.transaction():
            for r in recs:
                await p.send(dst, r.value.upper())
            await p.send_offsets_to_transaction(
                {TopicPartition(src, 0): recs[-1].offset + 1}, group
            )
        # the group applies transactional offsets when the commit markers are written, a
        # moment after commit_transaction() returns: wait for them
        committed = None
        for _ in range(200):
            committed = await c.committed(TopicPartition(src, 0))
            if committed is not None:
                break
            await asyncio.sleep(0.05)
        out["committed"] = committed
    return out


async def consumer_getmany_partitions(ctx: Any) -> Any:
    topic = await ctx.topic(2)
    await _produce(ctx, topic, 3, partition=0)
    await _produce(ctx, topic, 2, partition=1)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    out: dict[str, Any] = {}
    async with AIOKafkaConsumer(
        bootstrap_servers=ctx.bootstrap, auto_offset_reset="earliest", max_poll_records=2
    ) as c:
        c.assign([tp0, tp1])
        only1: list[Any] = []
        keys: set[Any] = set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while len(only1) < 2 and loop.time() < deadline:
            batch = await c.getmany(tp1, timeout_ms=300)
            keys |= set(batch)
            only1.extend(batch.get(tp1, []))
        out["only_tp1_keys"] = sorted(keys)
        out["tp1"] = [r.offset for r in only1]
        batch = await c.getmany(tp0, timeout_ms=5000)
        out["max_poll_records_respected"] = sum(len(v) for v in batch.values()) <= 2
        r = await c.getone(tp0)
        out["getone_tp0"] = r.partition
        out["getmany_unassigned"] = await ctx.outcome(
            c.getmany(TopicPartition(topic, 9), timeout_ms=10)
        )
    return out


async def top_level_api(ctx: Any) -> Any:
    """Names and shapes an application touches without a broker."""
    from aiokafka.errors import for_code
    from aiokafka.partitioner import DefaultPartitioner, murmur2
    from aiokafka.structs import ConsumerRecord, OffsetAndMetadata, RecordMetadata

    out: dict[str, Any] = {}
    out["missing_from_all"] = sorted(
        n
        for n in (
            "AIOKafkaClient",
            "AIOKafkaConsumer",
            "AIOKafkaProducer",
            "ConsumerRebalanceListener",
            "ConsumerRecord",
            "ConsumerStoppedError",
            "IllegalOperation",
            "OffsetAndMetadata",
            "OffsetAndTimestamp",
            "TopicPartition",
        )
        if n not in aiokafka.__all__ or not hasattr(aiokafka, n)
    )
    out["tp"] = list(TopicPartition("t", 1)._asdict().items())
    out["oam"] = OffsetAndMetadata(5, "m")._fields
    out["rm"] = RecordMetadata._fields
    out["cr"] = sorted(ConsumerRecord.__dataclass_fields__)
    out["murmur2"] = [murmur2(k) for k in (b"", b"a", b"key-123", b"\xff" * 9)]
    part = DefaultPartitioner()
    out["partition"] = [part(k, [0, 1, 2], [0, 1, 2]) for k in (b"a", b"b", b"key-9")]
    out["for_code"] = [for_code(c).__name__ for c in (1, 3, 6, 15, 22, 25, 27, 36, 47)]
    out["kafka_error_retriable"] = [for_code(c).retriable for c in (3, 6, 15, 22, 25, 27, 36, 47)]
    out["is_kafka_error"] = issubclass(for_code(3), KafkaError)
    return out


async def custom_assignor(ctx: Any) -> Any:
    """An application's own assignor, written against aiokafka's abstract class and structs."""
    from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
    from aiokafka.coordinator.protocol import (
        ConsumerProtocolMemberAssignment,
        ConsumerProtocolMemberMetadata,
    )

    calls: list[Any] = []

    class EvenOnly(AbstractPartitionAssignor):
        name = "even-only"
        version = 0

        @classmethod
        def assign(cls, cluster: Any, members: Any) -> Any:
            out = {}
            for member_id, meta in members.items():
                topics = sorted(meta.subscription)
                calls.append(("assign", topics))
                assignment = [
                    (t, sorted(p for p in cluster.partitions_for_topic(t) if p % 2 == 0))
                    for t in topics
                ]
                out[member_id] = ConsumerProtocolMemberAssignment(cls.version, assignment, b"")
            return out

        @classmethod
        def metadata(cls, topics: Any) -> Any:
            return ConsumerProtocolMemberMetadata(cls.version, list(topics), b"")

        @classmethod
        def on_assignment(cls, assignment: Any) -> None:
            calls.append(("on_assignment", sorted(tuple(x) for x in assignment.assignment)))

    topic = await ctx.topic(4)
    async with AIOKafkaConsumer(
        topic,
        bootstrap_servers=ctx.bootstrap,
        group_id=ctx.name("group"),
        **GROUP_TIMING,
        partition_assignment_strategy=(EvenOnly,),
    ) as c:
        assignment = c.assignment()
    return {"assignment": assignment, "calls": calls}


async def consumer_seek_and_pause_flow(ctx: Any) -> Any:
    """Group consumer: seek_to_end, pause/resume while records arrive, seek_to_beginning."""
    topic = await ctx.topic(2)
    await _produce(ctx, topic, 4, partition=0)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    out: dict[str, Any] = {}
    async with AIOKafkaConsumer(
        topic,
        bootstrap_servers=ctx.bootstrap,
        group_id=ctx.name("group"),
        **GROUP_TIMING,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    ) as c:
        await c.seek_to_end(tp0)
        out["pos_end"] = await c.position(tp0)
        c.pause(tp1)
        await _produce(ctx, topic, 2, partition=1)
        await _produce(ctx, topic, 1, partition=0)
        recs = await _collect(c, 1)
        out["while_paused"] = [(r.partition, r.offset) for r in recs]
        c.resume(tp1)
        recs = await _collect(c, 2)
        out["after_resume"] = [(r.partition, r.offset) for r in recs]
        await c.seek_to_beginning(tp0)
        recs = await _collect(c, 5)
        out["from_beginning"] = [(r.partition, r.offset) for r in recs]
        out["last_stable"] = c.last_stable_offset(tp0)
        out["committed_none"] = await c.committed(tp0)
    return out


async def admin_topics(ctx: Any) -> Any:
    """The admin calls FastStream and most applications make."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    name = ctx.name("admintopic")
    out: dict[str, Any] = {}
    admin = AIOKafkaAdminClient(bootstrap_servers=ctx.bootstrap)
    await admin.start()
    try:
        resp = await admin.create_topics([NewTopic(name, 2, 1)])
        out["create"] = [(e["topic"], e["error_code"]) for e in resp.to_object()["topic_errors"]]
        # (KRaft brokers apply a created topic to their metadata a moment after answering)
        listed = False
        for _ in range(200):
            listed = name in await admin.list_topics()
            if listed:
                break
            await asyncio.sleep(0.05)
        out["listed"] = listed
        again = await ctx.outcome(admin.create_topics([NewTopic(name, 2, 1)]))
        out["create_again"] = (
            again
            if "raised" in again
            else [e["error_code"] for e in again["ok"].to_object()["topic_errors"]]
        )
        cluster = await admin.describe_cluster()
        out["cluster_keys"] = sorted(cluster)
        await admin.delete_topics([name])
    finally:
        await admin.close()
    return out


async def consumer_offset_reset_none(ctx: Any) -> Any:
    """auto_offset_reset="none" without a committed offset: the error reaches the iterator."""
    topic = await ctx.topic(1)
    await _produce(ctx, topic, 1)
    out: dict[str, Any] = {}
    async with AIOKafkaConsumer(
        topic, bootstrap_servers=ctx.bootstrap, auto_offset_reset="none"
    ) as c:

        async def iterate() -> Any:
            async for _ in c:
                return "record"
            return "ended"

        out["async_for"] = await ctx.outcome(asyncio.wait_for(iterate(), 20))
        out["getmany"] = await ctx.outcome(asyncio.wait_for(c.getmany(timeout_ms=2000), 20))
    return out


async def client_helpers(ctx: Any) -> Any:
    """The AIOKafkaClient calls aiokafka's own test helpers and some applications make."""
    from aiokafka.client import AIOKafkaClient

    topic = await ctx.topic(2)
    client = AIOKafkaClient(bootstrap_servers=ctx.bootstrap)
    await client.bootstrap()
    try:
        client.add_topic(topic)
        ok = await client.force_metadata_update()
        out = {
            "ok": ok,
            "known": topic in client.cluster.topics(),
            "partitions": client.cluster.partitions_for_topic(topic),
            "brokers": len(client.cluster.brokers()),
            "wait_on_metadata": await client._wait_on_metadata(topic),
        }
    finally:
        await client.close()
    async with AIOKafkaProducer(bootstrap_servers=ctx.bootstrap) as p:
        out["producer_client_parts"] = await p.client._wait_on_metadata(topic)
    return out


async def consumer_commit_and_seek_validation(ctx: Any) -> Any:
    """commit()/seek*() argument checks (aiokafka's own tests exercise these)."""
    topic = await ctx.topic(2)
    tp = TopicPartition(topic, 0)
    out: dict[str, Any] = {}
    async with AIOKafkaConsumer(
        topic,
        bootstrap_servers=ctx.bootstrap,
        group_id=ctx.name("group"),
        **GROUP_TIMING,
        auto_offset_reset="earliest",
    ) as c:
        pos = await c.position(tp)
        out["empty"] = await ctx.outcome(c.commit({}))
        out["string"] = await ctx.outcome(c.commit("something"))
        out["triple"] = await ctx.outcome(c.commit({tp: (pos, "m", 100)}))
        out["key"] = await ctx.outcome(c.commit({"t": (pos, "")}))
        out["meta_int"] = await ctx.outcome(c.commit({tp: (pos, 1000)}))
        out["meta_bytes"] = await ctx.outcome(c.commit({tp: (pos, b"\x00")}))
        out["unassigned"] = await ctx.outcome(c.commit({TopicPartition(topic, 10): 1}))
        out["ok"] = await ctx.outcome(c.commit({tp: (pos, "meta")}))
        out["seek_str"] = ctx.call(c.seek, tp, "")
        out["seek_to_beginning_int"] = await ctx.outcome(c.seek_to_beginning(1))
        out["seek_to_end_int"] = await ctx.outcome(c.seek_to_end(1))
        out["seek_to_committed_int"] = await ctx.outcome(c.seek_to_committed(1))
        out["seek_unassigned"] = await ctx.outcome(c.seek_to_beginning(TopicPartition(topic, 7)))
        out["bad_pattern"] = ctx.call(c.subscribe, pattern="^(spome(")
        out["committed_unknown_topic"] = await c.committed(TopicPartition("no-such-topic", 2))
        c.unsubscribe()
        out["after_unsubscribe"] = await ctx.outcome(c.commit({tp: 1}))
    return out


async def consumer_pattern_no_group(ctx: Any) -> Any:
    """Pattern subscription without a group_id learns matching topics as they appear."""
    prefix = ctx.name("nogrouppat")
    out: dict[str, Any] = {}
    c = AIOKafkaConsumer(
        bootstrap_servers=ctx.bootstrap,
        metadata_max_age_ms=200,
        fetch_max_wait_ms=50,
        auto_offset_reset="earliest",
    )
    await c.start()
    try:
        c.subscribe(pattern=f"^{prefix}-.*$")
        task = asyncio.ensure_future(c.getone())
        out["subscription_before"] = c.subscription()
        t1 = prefix + "-1"
        async with AIOKafkaProducer(bootstrap_servers=ctx.bootstrap) as p:
            await p.client._wait_on_metadata(t1)
            out["learned"] = await ctx.wait_for(lambda: c.subscription() == {t1}, 20)
            await p.send_and_wait(t1, b"test msg")
        out["value"] = (await asyncio.wait_for(task, 20)).value
    finally:
        await c.stop()
    c = AIOKafkaConsumer(
        bootstrap_servers=ctx.bootstrap,
        group_id=ctx.name("group"),
        **GROUP_TIMING,
        exclude_internal_topics=False,
        metadata_max_age_ms=200,
    )
    c.subscribe(pattern="^__consumer_off.*$")
    await c.start()
    try:
        out["internal_included"] = "__consumer_offsets" in c.subscription()
    finally:
        await c.stop()
    return out


async def consumer_stop_and_out_of_range(ctx: Any) -> Any:
    topic = await ctx.topic(1)
    await _produce(ctx, topic, 1)
    tp = TopicPartition(topic, 0)
    out: dict[str, Any] = {}
    c = AIOKafkaConsumer(
        topic,
        bootstrap_servers=ctx.bootstrap,
        group_id=ctx.name("group"),
        **GROUP_TIMING,
        auto_offset_reset="none",
    )
    await c.start()
    try:
        out["no_offset"] = await ctx.outcome(c.getmany(timeout_ms=1000))
        c.seek(tp, 19999)
        got = await ctx.outcome(c.getmany(tp, timeout_ms=1000))
        if "ok" in got:
            got = await ctx.outcome(c.getmany(tp, timeout_ms=1000))
        out["out_of_range"] = got
        c.seek(tp, 0)
        r = await c.getone(tp)
        out["after_seek_back"] = r.offset
        pending = asyncio.ensure_future(c.getmany(timeout_ms=10000))
        await asyncio.sleep(0.1)  # let it start waiting (not an assertion)
    finally:
        await c.stop()
    out["done_when_stop_returns"] = pending.done()
    out["result"] = pending.result() if pending.done() else "pending"
    out["later_timeout0"] = await ctx.outcome(c.getmany(timeout_ms=0))
    return out


async def listener_calls_consumer(ctx: Any) -> Any:
    """on_partitions_assigned may await committed()/position()/seek_to_end() (no deadlock)."""
    topic = await ctx.topic(1)
    await _produce(ctx, topic, 3)
    tp0 = TopicPartition(topic, 0)
    result: dict[str, Any] = {}

    class Reseek(ConsumerRebalanceListener):
        def __init__(self, consumer: Any) -> None:
            self.consumer = consumer

        async def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        async def on_partitions_assigned(self, assigned: Any) -> None:
            if tp0 not in assigned:
                return
            result["committed"] = await self.consumer.committed(tp0)
            result["position"] = await self.consumer.position(tp0)
            await self.consumer.seek_to_end(tp0)
            result["position_after_seek_to_end"] = await self.consumer.position(tp0)

    c = AIOKafkaConsumer(
        bootstrap_servers=ctx.bootstrap,
        group_id=ctx.name("group"),
        **GROUP_TIMING,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    c.subscribe([topic], listener=Reseek(c))
    await c.start()
    try:
        await ctx.wait_for(lambda: "position_after_seek_to_end" in result, 30)
    finally:
        await c.stop()
    return result


async def producer_batch_limits(ctx: Any) -> Any:
    """create_batch(): fills up to max_batch_size (append -> None), a too-large FIRST record is
    accepted, send_batch after stop raises."""
    topic = await ctx.topic(2)
    out: dict[str, Any] = {}
    p = AIOKafkaProducer(bootstrap_servers=ctx.bootstrap, max_batch_size=10000)
    await p.start()
    try:
        md = await p.send_and_wait(topic, b"discovering offset", partition=1)
        batch = p.create_batch()
        out["empty_count"] = batch.record_count()
        num = 0
        while batch.append(key=b"test key", value=b"test value", timestamp=None) is not None:
            num += 1
        out["filled_some"] = num > 0
        out["count_matches"] = batch.record_count() == num
        fut = await p.send_batch(batch, topic, partition=1)
        resp = await fut
        out["batch_md"] = (resp.topic == topic, resp.partition, resp.offset - md.offset)
        big = b"m" * 10001
        batch = p.create_batch()
        out["first_too_large_accepted"] = (
            batch.append(key=None, value=big, timestamp=None) is not None
        )
        batch = p.create_batch()
        batch.append(key=None, value=b"short", timestamp=None)
        out["second_too_large_rejected"] = batch.append(key=None, value=big, timestamp=None) is None
    finally:
        await p.stop()
    out["after_stop"] = await ctx.outcome(p.send_batch(batch, topic, partition=1))
    out["stop_twice"] = await ctx.outcome(p.stop())
    return out


async def transactions_public_api(ctx: Any) -> Any:
    """Transaction API edge cases as aiokafka's own tests use them."""
    topic = await ctx.topic(1)
    txn = ctx.name("txn")
    out: dict[str, Any] = {}
    p1 = AIOKafkaProducer(bootstrap_servers=ctx.bootstrap, transactional_id=txn)
    await p1.start()
    try:
        await p1.begin_transaction()
        await p1.commit_transaction()  # empty transactions are fine
        await p1.begin_transaction()
        await p1.abort_transaction()
        out["offsets_outside_txn"] = await ctx.outcome(p1.send_offsets_to_transaction({}, None))
        async with p1.transaction():
            out["offsets_no_group"] = await ctx.outcome(
                p1.send_offsets_to_transaction({}, group_id=None)
            )
        await p1.begin_transaction()
        batch = p1.create_batch()
        batch.append(timestamp=None, key=None, value=b"1")
        batch.close()
        f1 = await p1.send_batch(batch, topic, partition=0)
        futs = [await p1.send(topic, b"x") for _ in range(5)]
        await p1.commit_transaction()
        out["all_done_after_commit"] = f1.done() and all(f.done() for f in futs)
        p2 = AIOKafkaProducer(bootstrap_servers=ctx.bootstrap, transactional_id=txn)
        await p2.start()
        try:
            async with p2.transaction():
                await p2.send_and_wait(topic, b"p2")

            async def fenced() -> None:
                async with p1.transaction():
                    await p1.send_and_wait(topic, b"p1")

            out["fenced"] = await ctx.outcome(asyncio.wait_for(fenced(), 30))
        finally:
            await p2.stop()
    finally:
        await p1.stop()
    plain = AIOKafkaProducer(bootstrap_servers=ctx.bootstrap)
    await plain.start()
    try:
        out["no_txn_id"] = [
            await ctx.outcome(plain.begin_transaction()),
            await ctx.outcome(plain.commit_transaction()),
            await ctx.outcome(plain.abort_transaction()),
        ]
    finally:
        await plain.stop()
    return out


async def consumer_assign_topic_created_at_start(ctx: Any) -> Any:
    """assign() a partition of a topic that does not exist yet, then start(): start() waits
    while the broker auto-creates it, so a record published right after start() is delivered
    (its position, "latest", is taken before the record)."""
    topic = ctx.name("created-at-start")
    out: dict[str, Any] = {}
    async with AIOKafkaConsumer(bootstrap_servers=ctx.bootstrap) as c0:
        out["exists_before"] = topic in await c0.topics()
    c = AIOKafkaConsumer(bootstrap_servers=ctx.bootstrap)  # auto_offset_reset="latest"
    c.assign([TopicPartition(topic, 0)])
    await c.start()
    try:
        out["partitions_after_start"] = sorted(c.partitions_for_topic(topic) or ())
        await _produce(ctx, topic, 1, partition=0)
        out["records"] = [r.offset for r in await _collect(c, 1, timeout=15)]
    finally:
        await c.stop()
    return out


async def consumer_subscribe_again(ctx: Any) -> Any:
    """A started group member calls subscribe() again: with the same topics and a new
    listener, with the same topics and the same listener, with other topics: each call
    rebalances and the (new) listener sees the revoke and the assignment. Without commits the
    positions start again from the earliest record after each rebalance (each step waits for
    that record: aiokafka's fetcher fails when subscribe() comes before it has caught up)."""
    t1 = await ctx.topic(2)
    t2 = await ctx.topic(1)
    await _produce(ctx, t1, 1, partition=0)
    await _produce(ctx, t2, 1, partition=0)
    names = {t1: "t1", t2: "t2"}
    events: list[Any] = []

    def tags(tps: Any) -> list[Any]:
        return sorted((names[p.topic], p.partition) for p in tps)

    class Named(ConsumerRebalanceListener):
        def __init__(self, tag: str) -> None:
            self.tag = tag

        async def on_partitions_revoked(self, revoked: Any) -> None:
            events.append((self.tag, "revoked", tags(revoked)))

        async def on_partitions_assigned(self, assigned: Any) -> None:
            events.append((self.tag, "assigned", tags(assigned)))

    async def step(want: str) -> dict[str, Any]:
        got: list[Any] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while loop.time() < deadline:
            batch = await c.getmany(timeout_ms=100)
            got.extend((names[r.topic], r.partition, r.offset) for rs in batch.values() for r in rs)
            if any(e[1] == "assigned" for e in events) and any(g[0] == want for g in got):
                break
        return {"events": list(events), "records": got}

    out: dict[str, Any] = {}
    c = AIOKafkaConsumer(
        bootstrap_servers=ctx.bootstrap,
        group_id=ctx.name("group"),
        **GROUP_TIMING,
        heartbeat_interval_ms=500,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    first = Named("first")
    c.subscribe([t1], listener=first)
    await c.start()
    try:
        out["start"] = await step("t1")
        second = Named("second")
        for name, topics, listener, want in (
            ("same_topics_new_listener", [t1], second, "t1"),
            ("same_topics_same_listener", [t1], second, "t1"),
            ("other_topics", [t2], Named("third"), "t2"),
        ):
            events.clear()
            c.subscribe(topics, listener=listener)
            out[name] = await step(want)
    finally:
        await c.stop()
    return out


async def consumer_deserializer_error_retried(ctx: Any) -> Any:
    """A value deserializer fails on a record: getone() raises the deserializer's error with
    the position left at the record, and deserializes it again on the next call (a transient
    failure goes away); a permanent one is raised on every call until a seek past it."""
    topic = await ctx.topic(1)
    tp = TopicPartition(topic, 0)
    async with AIOKafkaProducer(bootstrap_servers=ctx.bootstrap) as p:
        for v in (b"a0", b"flaky", b"a2", b"broken", b"a4"):
            await p.send_and_wait(topic, v, partition=0)
    flaky_failures = [1]

    def deserialize(value: bytes) -> str:
        if value == b"flaky" and flaky_failures[0] > 0:
            flaky_failures[0] -= 1
            raise ValueError("transient")
        if value == b"broken":
            raise ValueError("permanent")
        return value.decode()

    steps: list[Any] = []
    async with AIOKafkaConsumer(
        bootstrap_servers=ctx.bootstrap,
        value_deserializer=deserialize,
        auto_offset_reset="earliest",
    ) as c:
        c.assign([tp])
        for i in range(7):
            if i == 6:
                c.seek(tp, 4)
                steps.append(("seek", 4))
            try:
                r = await asyncio.wait_for(c.getone(), 15)
                steps.append(("record", r.offset, r.value))
            except ValueError as exc:
                steps.append(("raised", type(exc).__name__, str(exc)))
            steps.append(("position", await c.position(tp)))
    return steps


async def consumer_partition_order(ctx: Any) -> Any:
    """Records of two partitions fetched together: getone() hands out one partition's fetched
    records before the next one's (aiokafka and the Java client alike; aiokafka's own
    test_manual_subscribe_pattern relies on it when an earlier run left a matching topic)."""
    topic = await ctx.topic(2)
    for p in (0, 1):
        await _produce(ctx, topic, 10, partition=p)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    out: dict[str, Any] = {}
    async with AIOKafkaConsumer(bootstrap_servers=ctx.bootstrap, auto_offset_reset="earliest") as c:
        c.assign(tps)
        order = []
        for _ in range(20):
            r = await asyncio.wait_for(c.getone(), 15)
            order.append((r.partition, r.offset))
    runs: list[int] = []
    for i, (p, _) in enumerate(order):
        if i and order[i - 1][0] == p:
            runs[-1] += 1
        else:
            runs.append(1)
    out["run_lengths"] = runs
    out["each_partition_in_order"] = all(
        [o for q, o in order if q == p] == list(range(10)) for p in (0, 1)
    )
    return out


# ------------------------------------------------------- kafkaesk's use of aiokafka (issue 19)


async def producer_sender_task(ctx: Any) -> Any:
    # kafkaesk checks producer._sender.sender_task before every publish (producer_healthy)
    topic = await ctx.topic(1)
    p = AIOKafkaProducer(bootstrap_servers=ctx.bootstrap)
    out: dict[str, Any] = {"before_start": p._sender.sender_task is None}
    await p.start()
    try:
        await p.send_and_wait(topic, b"v")
        task = p._sender.sender_task
        out["started_done"] = task is not None and task.done()
    finally:
        await p.stop()
    task = p._sender.sender_task
    out["stopped_done"] = task is not None and task.done()
    return out


async def fetcher_next_record_and_cancel(ctx: Any) -> Any:
    # kafkaesk's test_cancel_getone: getone()'s inner step through aiokafka's names, a wait for
    # a record cancelled by a timeout leaves no waiter behind, then a record arrives through it
    topic = await ctx.topic(1)
    out: dict[str, Any] = {}
    async with AIOKafkaConsumer(
        topic,
        bootstrap_servers=ctx.bootstrap,
        group_id=ctx.name("group"),
        **GROUP_TIMING,
        auto_offset_reset="earliest",
    ) as c:
        with c._subscription.fetch_context():
            try:
                await asyncio.wait_for(c._fetcher.next_record([]), timeout=0.1)
                out["first"] = "record"
            except asyncio.TimeoutError:
                out["first"] = "timeout"
            out["waiters_after_cancel"] = len(c._fetcher._fetch_waiters)
        await _produce(ctx, topic, 1)
        with c._subscription.fetch_context():
            rec = await asyncio.wait_for(c._fetcher.next_record([]), 20)
        out["record"] = (rec.topic == topic, rec.offset, type(rec).__name__)
        out["waiters_after_record"] = len(c._fetcher._fetch_waiters)
    return out


async def client_bootstrap_none(ctx: Any) -> Any:
    # kafkaesk builds its clients from a setting that may be None: the error comes at start()
    out: dict[str, Any] = {}
    for name, make in (
        ("producer", lambda: AIOKafkaProducer(bootstrap_servers=None)),
        ("consumer", lambda: AIOKafkaConsumer(bootstrap_servers=None, group_id="g")),
        ("consumer_topic", lambda: AIOKafkaConsumer("t", bootstrap_servers=None)),
    ):
        made = ctx.call(make)
        out[f"{name}_ctor"] = sorted(made)
        if "ok" in made:
            client = made["ok"]
            out[f"{name}_start"] = await ctx.outcome(client.start())
            out[f"{name}_stop"] = await ctx.outcome(client.stop())
    return out


async def _committed(ctx: Any, group: str, tp: TopicPartition) -> Any:
    c = AIOKafkaConsumer(bootstrap_servers=ctx.bootstrap, group_id=group, **GROUP_TIMING)
    await c.start()
    try:
        return await c.committed(tp)
    finally:
        await c.stop()


async def consumer_commit_after_stop(ctx: Any) -> Any:
    # kafkaesk's consumer commits the offsets it handled after stop() (on shutdown). A group
    # consumer with assign()ed partitions: no membership, so the outcome is the same on every
    # broker (a subscribed one leaves the group on stop(); aiokafka 0.14 skips that LeaveGroup
    # when the broker numbers generations from 0, as tansu does, and its commit then meets the
    # member it left behind: tests/test_consumer.py covers the subscribed case)
    topic = await ctx.topic(2)
    await _produce(ctx, topic, 3, partition=0)
    tp = TopicPartition(topic, 0)
    group = ctx.name("group")
    out: dict[str, Any] = {}
    c = AIOKafkaConsumer(
        bootstrap_servers=ctx.bootstrap,
        group_id=group,
        **GROUP_TIMING,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await c.start()
    try:
        c.assign([tp])
        out["read"] = [(await c.getone(tp)).offset, (await c.getone(tp)).offset]
        # (a commit while running: aiokafka finds the group coordinator only for one, and after
        # stop() it cannot find it any more)
        out["running"] = await ctx.outcome(c.commit({tp: 0}))
    finally:
        await c.stop()
    out["explicit"] = await ctx.outcome(c.commit({tp: 1}))
    out["explicit_committed"] = await _committed(ctx, group, tp)
    out["positions"] = await ctx.outcome(c.commit())
    out["positions_committed"] = await _committed(ctx, group, tp)
    out["not_assigned"] = await ctx.outcome(c.commit({TopicPartition(topic, 1): 1}))
    # with a member in the group the broker refuses a commit from outside it
    other = AIOKafkaConsumer(
        topic,
        bootstrap_servers=ctx.bootstrap,
        group_id=group,
        **GROUP_TIMING,
        enable_auto_commit=False,
    )
    await other.start()
    try:
        out["other_member_assigned"] = sorted(other.assignment())
        out["with_other_member"] = await ctx.outcome(c.commit({tp: 3}))
    finally:
        await other.stop()
    # (not started: aiokafka 0.14's stop() right after start() without a group can raise
    # CancelledError from its own committed-offsets task)
    no_group = AIOKafkaConsumer(bootstrap_servers=ctx.bootstrap)
    await no_group.stop()
    out["no_group"] = await ctx.outcome(no_group.commit({tp: 1}))
    never = AIOKafkaConsumer(topic, bootstrap_servers=ctx.bootstrap, group_id=group)
    await never.stop()
    out["stopped_before_start"] = await ctx.outcome(never.commit({tp: 1}))
    return out


async def unclosed_and_deprecated_warnings(ctx: Any) -> Any:
    """aiokafka's own tests: a STARTED producer/consumer dropped without stop() warns
    "Unclosed ..." (ResourceWarning) on ``del`` + ``gc.collect()`` and is collected; the
    deprecated ``loop`` / ``api_version`` arguments warn with DeprecationWarning."""
    import gc
    import warnings
    import weakref

    topic = await ctx.topic(1)
    out: dict[str, Any] = {}
    for cls in (AIOKafkaProducer, AIOKafkaConsumer):
        args = (topic,) if cls is AIOKafkaConsumer else ()
        obj: Any = cls(*args, bootstrap_servers=ctx.bootstrap)
        await obj.start()
        ref = weakref.ref(obj)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loop = asyncio.get_running_loop()
            handler = loop.get_exception_handler()
            reported: list[str] = []
            loop.set_exception_handler(
                lambda loop, context, reported=reported: reported.append(context["message"])
            )
            try:
                del obj
                await asyncio.sleep(0)
                gc.collect()
            finally:
                loop.set_exception_handler(handler)
            unclosed = [
                str(w.message).split(" ")[:2]
                for w in caught
                if issubclass(w.category, ResourceWarning)
                and str(w.message).startswith("Unclosed AIOKafka")
            ]
            del caught[:]
        out[cls.__name__] = {
            "warned": unclosed,
            "collected": ref() is None,
            # aiokafka reports it there too (besides "Task was destroyed but it is pending!" for
            # its collected tasks, where aiokafka_lite cancels them)
            "loop_exception_handler": [m for m in reported if m.startswith("Unclosed")],
        }
    for cls in (AIOKafkaProducer, AIOKafkaConsumer):
        # as aiokafka's test_producer_warn_unclosed / test_consumer_warn_unclosed exactly: no
        # loop turn between the drop and gc.collect(), so no task of the client may still hold
        # it (the KIP-714 push loop's metrics callback did)
        args = (topic,) if cls is AIOKafkaConsumer else ()
        obj = cls(*args, bootstrap_servers=ctx.bootstrap)
        await obj.start()
        ref = weakref.ref(obj)
        loop = asyncio.get_running_loop()
        handler = loop.get_exception_handler()
        loop.set_exception_handler(lambda loop, context: None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                del obj
                gc.collect()
                warned = any(
                    issubclass(w.category, ResourceWarning)
                    and str(w.message).startswith(f"Unclosed {cls.__name__}")
                    for w in caught
                )
                del caught[:]
            finally:
                loop.set_exception_handler(handler)
        out[f"{cls.__name__}/at_once"] = {"warned": warned, "collected": ref() is None}
        await asyncio.sleep(0.1)  # the abandoned tasks' cancellations run
    for cls in (AIOKafkaProducer, AIOKafkaConsumer):
        # as aiokafka's test harness: a loop of its own, closed after the drop; what is left
        # unreleased (sockets, transports) warns when collected
        released = await asyncio.to_thread(_drop_unclosed_on_own_loop, cls, ctx.bootstrap, topic)
        out[f"{cls.__name__}/at_loop_close"] = released
    loop = asyncio.get_running_loop()
    for cls in (AIOKafkaProducer, AIOKafkaConsumer):
        for kwargs in ({"loop": loop}, {"api_version": "auto"}):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                obj = cls(bootstrap_servers=ctx.bootstrap, **kwargs)
                categories = sorted(
                    {w.category.__name__ for w in caught if w.category is DeprecationWarning}
                )
            # aiokafka's semi-private ``_loop`` (its tests' listeners create tasks with it)
            out[f"{cls.__name__}/_loop"] = obj._loop is loop
            await obj.stop()  # never started: stop() only closes
            out[f"{cls.__name__}/{next(iter(kwargs))}"] = categories
    return out


def _drop_unclosed_on_own_loop(cls: Any, bootstrap: str, topic: str) -> list[str]:
    """Start ``cls`` on a new event loop, drop it unstopped, close the loop: the kinds of
    ResourceWarning seen ("Unclosed AIOKafkaProducer", "unclosed transport", ...)."""
    import gc
    import warnings

    loop = asyncio.new_event_loop()
    loop.set_exception_handler(lambda loop, context: None)

    async def drop() -> None:
        args = (topic,) if cls is AIOKafkaConsumer else ()
        obj = cls(*args, bootstrap_servers=bootstrap)
        await obj.start()
        del obj
        await asyncio.sleep(0)
        gc.collect()
        await asyncio.sleep(0.2)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            loop.run_until_complete(drop())
            loop.call_soon(loop.stop)
            loop.run_forever()
        finally:
            loop.close()
        gc.collect()
        kinds = {
            " ".join(str(w.message).split("<")[0].split()[:2])
            for w in caught
            if issubclass(w.category, ResourceWarning)
        }
    return sorted(kinds)


async def names_aiokafka_tests_read(ctx: Any) -> Any:
    # aiokafka's own tests read these (test_kafka_consumer_sets_coordinator_values,
    # test_consumer_position and test_kip_345_*, test_admin's test_metadata,
    # test_describe_cluster and test_describe_configs_broker). wait_for_assignment() and
    # position() across a rebalance: tests/test_subscription_waiters.py and
    # tests/test_faults.py::test_position_rides_out_a_rebalance_and_stop_fails_its_wait
    topic = await ctx.topic(1)
    out: dict[str, Any] = {}
    group = ctx.name("group")
    c = AIOKafkaConsumer(
        topic,
        bootstrap_servers=ctx.bootstrap,
        group_id=group,
        session_timeout_ms=12345,
        heartbeat_interval_ms=3456,
        retry_backoff_ms=567,
        auto_commit_interval_ms=6789,
        exclude_internal_topics=False,
        enable_auto_commit=True,
    )
    await c.start()
    try:
        co = c._coordinator
        out["coordinator"] = [
            co.group_id == group,
            co._session_timeout_ms,
            co._heartbeat_interval_ms,
            co._retry_backoff_ms,
            co._auto_commit_interval_ms,
            co._exclude_internal_topics,
            co._enable_auto_commit,
        ]
    finally:
        await c.stop()
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=ctx.bootstrap)
    await admin.start()
    try:
        ids = sorted(admin._client.cluster._brokers.keys())
        cluster = await admin.describe_cluster()
        out["brokers_known"] = ids == sorted(b["node_id"] for b in cluster["brokers"])
        md = await admin._get_cluster_metadata()
        out["metadata"] = (len(md.brokers) == len(ids), md.topics is not None)
    finally:
        await admin.close()
    return out
