"""Share-consumer API corners run side by side: the same steps on Java's ``KafkaShareConsumer``
4.4 (``ShareApiScript.java``, driven by ``java_oracle.ShareApiScript``) and on
:class:`AIOKafkaShareConsumer` (:class:`LiteScript`, which speaks the same commands), each
against a fresh topic and share group on the same Apache Kafka 4.4 broker; the outcomes are
compared.

- an undeserializable record: the poll raises (Java's RecordDeserializationException, our
  RecordDeserializationError) with its offset; in explicit mode the application acknowledges
  it REJECT by ``acknowledge(topic, partition, offset, type)`` and it never comes back; left
  alone it is released and comes back with ``delivery_count`` 2; any other offset cannot be
  acknowledged that way;
- ``commit_async()``: the acknowledgements go without waiting, their outcome to the
  acknowledgement callback, and a released record comes back;
- RENEW: the renewed record counts as acknowledged for the next poll and a later poll hands
  it out again, same ``delivery_count``;
- RENEW against brokers whose ShareAcknowledge/ShareFetch are below v2 (the fault proxy
  lowers the versions the broker announces): refused cleanly;
- ``max_poll_interval_ms``: a member that does not poll for that long leaves the group, and
  joins again at its next poll;
- ``share_acquire_mode="record_limit"``: a member holds exactly ``max_poll_records`` records,
  nothing fetched ahead: a second member gets all the others;
- a member fenced by its heartbeat's answer (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, put there
  by the fault proxy) joins again and reads what is produced next, each record once.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import java_oracle
import pytest
from faults import API, FaultProxy, Rule
from share_helpers import configure_group, need_java_share_groups, produce_values

from aiokafka_lite import AcknowledgeType, AIOKafkaShareConsumer
from aiokafka_lite import errors as Errors
from aiokafka_lite.admin import AIOKafkaAdminClient
from aiokafka_lite.protocol import messages as m
from aiokafka_lite.share import ShareConsumerRecord
from aiokafka_lite.structs import TopicPartition

pytestmark = pytest.mark.integration

#: Java's exception class names -> ours
_ERRORS = {
    Errors.RecordDeserializationError: "RecordDeserializationException",
    Errors.IllegalStateError: "IllegalStateException",
    Errors.UnsupportedVersionError: "UnsupportedVersionException",
}
#: Java's config names -> AIOKafkaShareConsumer's arguments
_CONFIGS = {
    "share.acknowledgement.mode": "acknowledgement_mode",
    "share.acquire.mode": "share_acquire_mode",
    "max.poll.records": "max_poll_records",
    "max.poll.interval.ms": "max_poll_interval_ms",
}
_INTS = ("max.poll.records", "max.poll.interval.ms")


def _error(exc: BaseException) -> dict[str, Any]:
    name = next((j for c, j in _ERRORS.items() if isinstance(exc, c)), type(exc).__name__)
    out: dict[str, Any] = {"class": name, "message": str(exc)}
    if isinstance(exc, Errors.RecordDeserializationError):
        tp = exc.topic_partition
        out.update(topic=tp.topic, partition=tp.partition, offset=exc.offset)
    return out


class LiteScript:
    """An AIOKafkaShareConsumer answering ``java_oracle.ShareApiScript``'s commands."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        *,
        config: dict[str, Any] | None = None,
        fail_prefix: str | None = None,
    ) -> None:
        self.callbacks: list[dict[str, Any]] = []
        prefix = fail_prefix.encode() if fail_prefix else None

        def values(v: bytes | None) -> bytes | None:
            if prefix is not None and v is not None and v.startswith(prefix):
                raise ValueError("cannot deserialize this value")
            return v

        def callback(results: dict[TopicPartition, Any], offsets: dict[TopicPartition, list[int]]):
            for tp, exc in results.items():
                self.callbacks.append(
                    {
                        "event": "callback",
                        "offsets": {f"{tp.topic}-{tp.partition}": sorted(offsets.get(tp, ()))},
                        "error": None if exc is None else type(exc).__name__,
                    }
                )

        kwargs = {_CONFIGS[k]: (int(v) if k in _INTS else v) for k, v in (config or {}).items()}
        self.consumer = AIOKafkaShareConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            value_deserializer=values if prefix else None,
            acknowledgement_callback=callback,
            **kwargs,
        )
        self.last: list[ShareConsumerRecord] = []

    async def start(self) -> LiteScript:
        await self.consumer.start()
        return self

    async def call(self, command: str) -> dict[str, Any]:
        words = command.split()
        c = self.consumer
        reply: dict[str, Any] = {"reply": words[0], "error": None}
        try:
            if words[0] in ("poll", "poll-until"):
                self.last = []
                until = time.monotonic() + int(words[1]) / 1000
                while True:
                    wait = int(words[1]) if words[0] == "poll" else 200
                    got = await c.getmany(timeout_ms=wait)
                    self.last = [r for recs in got.values() for r in recs]
                    if self.last or words[0] == "poll" or time.monotonic() >= until:
                        break
                reply["records"] = [
                    {
                        "topic": r.topic,
                        "partition": r.partition,
                        "offset": r.offset,
                        "delivery_count": r.delivery_count,
                        "value": r.value,
                    }
                    for r in sorted(self.last, key=lambda r: (r.partition, r.offset))
                ]
            elif words[0] == "ack":
                c.acknowledge(words[1], int(words[2]), int(words[3]), AcknowledgeType[words[4]])
            elif words[0] == "ack-record":
                c.acknowledge(self.last[int(words[1])], AcknowledgeType[words[2]])
            elif words[0] == "commit-sync":
                results = await c.commit()
                reply["results"] = {
                    f"{tp.topic}-{tp.partition}": None if e is None else type(e).__name__
                    for tp, e in results.items()
                }
            elif words[0] == "commit-async":
                c.commit_async()
            elif words[0] == "sleep":
                await asyncio.sleep(int(words[1]) / 1000)
            elif words[0] == "close":
                await c.stop()
            else:
                raise ValueError(command)
        except Errors.KafkaError as exc:
            reply["error"] = _error(exc)
        return reply

    async def close(self) -> None:
        await self.consumer.stop()


async def _fresh(broker: Any, new_topic: Any, values: list[bytes]) -> tuple[str, str]:
    topic = await new_topic(partitions=1)
    group = f"share-api-{uuid.uuid4().hex[:8]}"
    await configure_group(broker.bootstrap, group, share_auto_offset_reset="earliest")
    await produce_values(broker.bootstrap, topic, values)
    return topic, group


async def _both(broker, new_topic, values, scenario, **options) -> dict[str, Any]:
    """Run ``scenario(call, topic)`` on a Java member and on a lite member, each on its own
    topic and group; ``{"java": outcome, "lite": outcome}``."""
    out: dict[str, Any] = {}
    topic, group = await _fresh(broker, new_topic, values)
    java = java_oracle.ShareApiScript(broker.bootstrap, topic, group, **options)
    await asyncio.to_thread(java.start)
    try:
        out["java"] = await scenario(lambda cmd: asyncio.to_thread(java.call, cmd), topic)
        await asyncio.to_thread(java.close)
        out["java_callbacks"] = java.callbacks
    finally:
        await asyncio.to_thread(java.close)
    topic, group = await _fresh(broker, new_topic, values)
    lite = await LiteScript(broker.bootstrap, topic, group, **options).start()
    try:
        out["lite"] = await scenario(lite.call, topic)
        await lite.close()
        out["lite_callbacks"] = lite.callbacks
    finally:
        await lite.close()
    return out


async def _script(kind: str, bootstrap: str, topic: str, group: str, **options: Any) -> Any:
    """A started Java (``kind == "java"``) or lite member script: ``(member, call, close)``,
    ``call(cmd)`` and ``close()`` awaitable for both."""
    if kind == "java":
        j = java_oracle.ShareApiScript(bootstrap, topic, group, **options)
        await asyncio.to_thread(j.start)
        return (
            j,
            lambda cmd: asyncio.to_thread(j.call, cmd),
            lambda: asyncio.to_thread(j.close),
        )
    lite = await LiteScript(bootstrap, topic, group, **options).start()
    return lite, lite.call, lite.close


def _values(reply: dict[str, Any]) -> list[tuple[bytes, int]]:
    assert reply["error"] is None, reply
    return [(r["value"], r["delivery_count"]) for r in reply["records"]]


@pytest.mark.parametrize("reject", [True, False], ids=["rejected", "left-released"])
async def test_undeserializable_record_rejected_by_offset_as_java(broker, new_topic, reject):
    """Explicit mode, values ok0, bad1, ok2 (the deserializer fails on bad1). Java 4.4: the
    poll raises RecordDeserializationException for offset 1 (records before it come first);
    ``acknowledge(topic, 0, 0, ACCEPT)`` (a good record) raises IllegalStateException;
    ``acknowledge(topic, 0, 1, REJECT)`` is accepted and the record never comes back; not
    acknowledged, it is released and comes back with delivery_count 2. Ours the same (before:
    the deserializer's own ValueError, and the record always released)."""
    await need_java_share_groups(broker)

    async def scenario(call, topic):
        seen: list[tuple[bytes, int]] = []
        errors: list[dict[str, Any]] = []
        ack_good = None
        deadline = time.monotonic() + 60
        while len(errors) < (1 if reject else 2) or b"ok2" not in [v for v, _ in seen]:
            assert time.monotonic() < deadline, (seen, errors)
            reply = await call("poll-until 3000")
            if reply["error"] is not None:
                err = reply["error"]
                errors.append({k: err.get(k) for k in ("class", "partition", "offset")})
                if ack_good is None:
                    ack_good = (await call(f"ack {topic} 0 0 ACCEPT"))["error"]["class"]
                if reject:
                    assert (await call(f"ack {topic} 0 {err['offset']} REJECT"))["error"] is None
                continue
            for i, rec in enumerate(reply["records"]):
                seen.append((rec["value"], rec["delivery_count"]))
                assert (await call(f"ack-record {i} ACCEPT"))["error"] is None
        if reject:  # nothing more comes: the rejected record is archived
            await produce_values(broker.bootstrap, topic, [b"sentinel"])
            assert _values(await call("poll-until 20000")) == [(b"sentinel", 1)]
            assert (await call("ack-record 0 ACCEPT"))["error"] is None
        commit = await call("commit-sync")
        return {"seen": sorted(seen), "errors": errors, "ack_good": ack_good, "commit": commit}

    got = await _both(
        broker,
        new_topic,
        [b"ok0", b"bad1", b"ok2"],
        scenario,
        config={"share.acknowledgement.mode": "explicit"},
        fail_prefix="bad",
    )
    java, lite = got["java"], got["lite"]
    assert java["errors"][0] == {
        "class": "RecordDeserializationException",
        "partition": 0,
        "offset": 1,
    }
    assert java["ack_good"] == "IllegalStateException"
    assert lite["errors"] == java["errors"], got
    assert lite["ack_good"] == java["ack_good"]
    assert lite["seen"] == java["seen"], got
    assert all(e is None for e in lite["commit"]["results"].values()), got


async def test_commit_async_reports_to_the_callback_as_java(broker, new_topic):
    """Explicit mode: accept a, release b, ``commit_async()``. Java 4.4: the call does not
    wait; the callback later gets the partition's offsets [0, 1] without error and b comes
    back with delivery_count 2. Ours the same (before: no commit_async)."""
    await need_java_share_groups(broker)

    async def scenario(call, topic):
        first = _values(await call("poll-until 20000"))
        assert (await call("ack-record 0 ACCEPT"))["error"] is None
        assert (await call("ack-record 1 RELEASE"))["error"] is None
        started = time.monotonic()
        assert (await call("commit-async"))["error"] is None
        took = time.monotonic() - started
        again = _values(await call("poll-until 20000"))
        assert (await call("ack-record 0 ACCEPT"))["error"] is None
        await call("commit-sync")
        return {"first": first, "again": again, "took": took}

    got = await _both(
        broker, new_topic, [b"a", b"b"], scenario, config={"share.acknowledgement.mode": "explicit"}
    )
    java, lite = got["java"], got["lite"]
    assert java["first"] == [(b"a", 1), (b"b", 1)] and java["again"] == [(b"b", 2)], got
    assert (lite["first"], lite["again"]) == (java["first"], java["again"]), got

    # the first callback: the acknowledgements of a and b, both done
    for callbacks in (got["java_callbacks"], got["lite_callbacks"]):
        first = callbacks[0]
        assert list(first["offsets"].values()) == [[0, 1]] and first["error"] is None, got


async def test_record_limit_holds_exactly_max_poll_records_as_java(broker, new_topic):
    """Implicit mode, ``share.acquire.mode=record_limit``, ``max.poll.records=3``, 10 records:
    a member polls once and stops polling; a second member of the group gets the 7 others.
    Java 4.4: 3 then 7 (nothing fetched ahead). Ours the same, under the new name (with
    ``strict_max_poll_records=True`` and implicit-mode prefetch it was already 3 then 7 on
    Apache Kafka 4.4: the broker holds the prefetch back; the client no longer sends it)."""
    await need_java_share_groups(broker)
    config = {"share.acquire.mode": "record_limit", "max.poll.records": "3"}
    counts = {}
    for kind in ("java", "lite"):
        topic, group = await _fresh(broker, new_topic, [b"%d" % i for i in range(10)])
        members: list[Any] = []
        for _ in range(2):
            if kind == "java":
                m = java_oracle.ShareApiScript(broker.bootstrap, topic, group, config=config)
                await asyncio.to_thread(m.start)
                members.append((m, lambda cmd, m=m: asyncio.to_thread(m.call, cmd)))
            else:
                m = await LiteScript(broker.bootstrap, topic, group, config=config).start()
                members.append((m, m.call))
        try:
            (_, first), (_, second) = members
            held = _values(await first("poll-until 30000"))
            await first("sleep 1000")  # the first member's prefetch, if any, would land now
            rest: list[tuple[bytes, int]] = []
            deadline = time.monotonic() + 30
            while len(held) + len(rest) < 10 and time.monotonic() < deadline:
                rest += _values(await second("poll-until 2000"))
            counts[kind] = (len(held), len(rest))
        finally:
            for m, _ in members:
                if kind == "java":
                    await asyncio.to_thread(m.close)
                else:
                    await m.close()
    assert counts["java"] == (3, 7), counts
    assert counts["lite"] == counts["java"], counts


async def test_renew_hands_the_record_out_again_as_java(broker, new_topic):
    """Explicit mode: a RENEW, b ACCEPT, then poll. Java 4.4: the poll does not raise (a
    renewed record counts as acknowledged), a later poll hands a out again with
    delivery_count 1, and its ACCEPT then succeeds; the callback reports offsets 0 and 1
    without error. Ours the same (before: the renewed record stayed with the application,
    never handed out again, and had to be acknowledged through the old record object)."""
    await need_java_share_groups(broker)

    async def scenario(call, topic):
        first = _values(await call("poll-until 20000"))
        assert (await call("ack-record 0 RENEW"))["error"] is None
        assert (await call("ack-record 1 ACCEPT"))["error"] is None
        again = _values(await call("poll-until 20000"))
        accepted = (await call("ack-record 0 ACCEPT"))["error"]
        commit = await call("commit-sync")
        return {"first": first, "again": again, "accepted": accepted, "commit": commit}

    got = await _both(
        broker, new_topic, [b"a", b"b"], scenario, config={"share.acknowledgement.mode": "explicit"}
    )
    java, lite = got["java"], got["lite"]
    assert java["first"] == [(b"a", 1), (b"b", 1)] and java["again"] == [(b"a", 1)], got
    assert java["accepted"] is None
    assert (lite["first"], lite["again"], lite["accepted"]) == (
        java["first"],
        java["again"],
        java["accepted"],
    ), got
    assert all(e is None for e in lite["commit"]["results"].values()), got
    for callbacks in (got["java_callbacks"], got["lite_callbacks"]):
        acked = sorted(o for c in callbacks for offs in c["offsets"].values() for o in offs)
        assert set(acked) == {0, 1} and all(c["error"] is None for c in callbacks), got


async def test_max_poll_interval_leaves_and_rejoins_as_java(broker, new_topic):
    """``max.poll.interval.ms=4000``: a member polls once, then does not poll for 12 s. Java
    4.4: it leaves the group (the group's description has no member) within a few seconds
    of the interval, and its next poll joins again and gets the records produced meanwhile.
    Ours the same (before: no max poll interval, the member stayed in the group)."""
    await need_java_share_groups(broker)
    config = {"max.poll.interval.ms": "4000"}
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()

    async def scenario(kind: str) -> dict[str, Any]:
        topic, group = await _fresh(broker, new_topic, [b"first"])
        _, call, close = await _script(kind, broker.bootstrap, topic, group, config=config)
        try:
            assert _values(await call("poll-until 30000")) == [(b"first", 1)]

            async def members(group: str = group) -> int:
                return len((await admin.describe_share_groups([group]))[group].members)

            assert await members() == 1
            idle_since = time.monotonic()
            sleeping = asyncio.ensure_future(call("sleep 12000"))
            left_after = None
            while not sleeping.done():
                if left_after is None and await members() == 0:
                    left_after = time.monotonic() - idle_since
                await asyncio.sleep(0.25)
            await sleeping
            await produce_values(broker.bootstrap, topic, [b"later"])
            again: list[tuple[bytes, int]] = []
            deadline = time.monotonic() + 30
            while b"later" not in [v for v, _ in again] and time.monotonic() < deadline:
                again += _values(await call("poll-until 2000"))
            return {"left_after": left_after, "again": again, "members": await members()}
        finally:
            await close()

    try:
        # Java's member and ours side by side (their own topics and groups): one 12 s idle
        # for both instead of one after the other
        kinds = ("java", "lite")
        runs = [asyncio.ensure_future(scenario(kind)) for kind in kinds]
        try:
            outcome = dict(zip(kinds, await asyncio.gather(*runs), strict=True))
        finally:  # one failed: the other stops too (and closes its member) before the admin
            for run in runs:
                run.cancel()
            await asyncio.gather(*runs, return_exceptions=True)
    finally:
        await admin.close()
    java, lite = outcome["java"], outcome["lite"]
    assert java["left_after"] is not None and 3.5 < java["left_after"] < 10, outcome
    assert lite["left_after"] is not None and 3.5 < lite["left_after"] < 10, outcome
    assert (b"later", 1) in java["again"] and java["members"] == 1, outcome
    assert (b"later", 1) in lite["again"] and lite["members"] == 1, outcome


async def test_renew_refused_by_a_broker_without_it(broker, new_topic):
    """A broker whose ShareFetch and ShareAcknowledge stop at v1 (no RENEW: KIP-1222 is v2;
    the fault proxy lowers what Apache Kafka 4.4 announces), explicit mode, a record renewed,
    then a poll. Java 4.4: ``acknowledge(record, RENEW)`` is accepted, the poll does not
    raise and does not hand the record out again, and the acknowledgement commit callback
    gets UnsupportedVersionException for its offset. Ours the same (before: the RENEW was
    sent on ShareAcknowledge v1, where the type does not exist)."""
    await need_java_share_groups(broker)
    config = {"share.acknowledgement.mode": "explicit"}
    outcome = {}
    async with FaultProxy(broker.bootstrap) as proxy:
        for api in (API.SHARE_FETCH, API.SHARE_ACKNOWLEDGE):
            proxy.add(
                Rule(API.API_VERSIONS, "cap_version", cap_api_key=api, max_version=1, times=-1)
            )
        for kind in ("java", "lite"):
            topic, group = await _fresh(broker, new_topic, [b"a"])
            j, call, close = await _script(kind, proxy.bootstrap, topic, group, config=config)
            try:
                polled = await call("poll-until 60000")
                if polled["error"] is not None or not polled["records"]:
                    outcome[kind] = {"first": polled}
                    if kind == "java":
                        outcome["java_stderr"] = j.stderr[-3000:]
                    continue
                first = _values(polled)
                renew = (await call("ack-record 0 RENEW"))["error"]
                if renew is not None:  # refused: the record still waits for its final type
                    assert (await call("ack-record 0 ACCEPT"))["error"] is None
                after = await call("poll-until 3000")
                if after["error"] is None and after["records"]:
                    await call("ack-record 0 ACCEPT")
                commit = await call("commit-sync")
                outcome[kind] = {
                    "first": first,
                    "renew": renew and renew["class"],
                    "after": after["error"] and after["error"]["class"],
                    "after_records": after.get("records"),
                    "commit": commit,
                }
            finally:
                await close()
            outcome[kind + "_callbacks"] = j.callbacks
    java, lite = outcome["java"], outcome["lite"]
    assert java["first"] == [(b"a", 1)] and java["renew"] is None, outcome
    assert java["after"] is None and java["after_records"] == [], outcome
    for kind in ("java", "lite"):
        assert [
            (list(c["offsets"].values()), c["error"]) for c in outcome[kind + "_callbacks"]
        ] == [
            ([[0]], "UnsupportedVersionError" if kind == "lite" else "UnsupportedVersionException")
        ], outcome
    assert {k: lite[k] for k in ("first", "renew", "after", "after_records")} == {
        k: java[k] for k in ("first", "renew", "after", "after_records")
    }, outcome


@pytest.mark.parametrize("code", [Errors.FencedMemberEpochError, Errors.UnknownMemberIdError])
async def test_a_fenced_member_joins_again_as_java(broker, new_topic, code):
    """Five records polled and committed, then one ShareGroupHeartbeat answered
    FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID (the fault proxy's doing) while the application
    goes on polling, then five more records produced. Java 4.4's member joins again and reads
    the five new records, each delivered once, and no poll or commit raises. Ours the same."""
    await need_java_share_groups(broker)
    heartbeat = m.ShareGroupHeartbeatRequest.API_KEY
    outcome: dict[str, Any] = {}
    async with FaultProxy(broker.bootstrap) as proxy:
        for kind in ("java", "lite"):
            topic, group = await _fresh(broker, new_topic, [b"a%d" % i for i in range(5)])
            _, call, close = await _script(kind, proxy.bootstrap, topic, group)
            try:
                first = _values(await call("poll-until 60000"))
                commit1 = (await call("commit-sync"))["results"]
                rule = proxy.add(Rule(heartbeat, "error", code.errno))
                # readiness (not asserted): the member's next heartbeat meets the fault
                deadline = time.monotonic() + 60
                polls = []
                while rule.hits < 1 and time.monotonic() < deadline:
                    polls.append(await call("poll 200"))
                assert rule.hits == 1, f"{kind}: no heartbeat within 60 s"
                await produce_values(broker.bootstrap, topic, [b"b%d" % i for i in range(5)])
                second: list[tuple[bytes, int]] = []
                deadline = time.monotonic() + 60
                while len(second) < 5 and time.monotonic() < deadline:
                    got = await call("poll-until 2000")
                    polls.append(got)
                    second += [(r["value"], r["delivery_count"]) for r in got.get("records", ())]
                outcome[kind] = {
                    "first": first,
                    "commit1": list(commit1.values()),
                    "errors": [p["error"] and p["error"]["class"] for p in polls if p["error"]],
                    "second": sorted(second),
                    "commit2": list((await call("commit-sync"))["results"].values()),
                }
            finally:
                await close()
    java, lite = outcome["java"], outcome["lite"]
    assert java["first"] == [(b"a%d" % i, 1) for i in range(5)], outcome
    assert java["second"] == [(b"b%d" % i, 1) for i in range(5)], outcome
    assert lite == java, outcome
