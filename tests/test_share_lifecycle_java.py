"""A share consumer's lifecycle and acknowledgement corners, side by side with Java's
``KafkaShareConsumer`` 4.4 on the same Apache Kafka 4.4 broker (issue #30).

The Java member is ``java_oracle.ShareScript`` (``ShareScript.java``), driven one command at a
time; each scenario runs on it and on an AIOKafkaShareConsumer, in two groups over the same
records, and the outcomes (what a later member gets back, with which ``delivery_count``; what
the acknowledgement callback heard; what a poll raised) must be equal, and what Java did.

* ``stop()`` after a poll (implicit and explicit mode, or ``async with`` left by an
  exception): what was not acknowledged comes back with ``delivery_count`` 2; a poll's records
  count as processed only once the next poll (or ``commit()``) ran.
* a consumer started before ``subscribe()``, and ``unsubscribe()`` then ``subscribe()``: polls
  meanwhile raise IllegalStateError, and records arrive once subscribed.
* a failed acknowledgement (its record's lock expired) is never raised from a poll: it goes to
  the acknowledgement callback, and the record comes back.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from java_oracle import ShareScript
from share_helpers import (
    EXPIRY_LOCK_MS,
    MIN_LOCK_MS,
    configure_group,
    need_java_share_groups,
    produce_values,
)

from aiokafka_lite import AcknowledgeType, AIOKafkaShareConsumer, TopicPartition
from aiokafka_lite import errors as Errors

pytestmark = pytest.mark.integration

N = 10


async def _group(broker: Any, prefix: str, **configs: str) -> str:
    group = f"{prefix}-{uuid.uuid4().hex[:8]}"
    await configure_group(
        broker.bootstrap,
        group,
        share_auto_offset_reset="earliest",
        **configs,
    )
    return group


def _java_records(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if "event" not in line]


def _java_poll_until(java: ShareScript, n: int, timeout: float = 60) -> list[dict[str, Any]]:
    """Poll the Java member until a poll returned records (at least ``n`` in all)."""
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        assert time.monotonic() < deadline, f"Java: {len(got)} records within {timeout} s"
        got += _java_records(java.do("poll 1000"))
    return got


def _java_acked(java: ShareScript) -> tuple[set[int], list[str]]:
    """The offsets Java's acknowledgement callback reported, and the errors it carried."""
    offsets: set[int] = set()
    errors: list[str] = []
    for e in java.events:
        if e["event"] == "ack_callback":
            for offs in e["offsets"].values():
                offsets.update(offs)
            if e["error"] is not None:
                errors.append(e["error"].split(":")[0])
    return offsets, errors


async def _lite_poll_until(consumer: AIOKafkaShareConsumer, n: int, timeout: float = 60) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        assert time.monotonic() < deadline, f"aiokafka_lite: {len(got)} records within {timeout} s"
        for recs in (await consumer.getmany(timeout_ms=1000)).values():
            got += recs
    return got


class _Heard:
    """An ``acknowledgement_callback`` that keeps what it was told."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[TopicPartition, Any], dict[TopicPartition, list[int]]]] = []

    def __call__(self, results: dict, offsets: dict) -> None:
        self.calls.append((dict(results), dict(offsets)))

    def acked(self) -> tuple[set[int], list[str]]:
        offsets: set[int] = set()
        errors: list[str] = []
        for results, offs in self.calls:
            for tp, exc in results.items():
                offsets.update(offs[tp])
                if exc is not None:
                    errors.append(type(exc).__name__)
        return offsets, errors


async def _what_comes_back(bootstrap: str, topic: str, group: str) -> list[tuple[int, int]]:
    """A new member's view: (offset, delivery_count) of every record before a sentinel
    produced now (the broker hands out the lowest available offsets first, so anything that
    came back is delivered no later than the sentinel)."""
    await produce_values(bootstrap, topic, [b"sentinel-" + group.encode()])
    got: list[tuple[int, int]] = []
    async with AIOKafkaShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group) as late:
        deadline = time.monotonic() + 60
        while True:
            assert time.monotonic() < deadline, f"no sentinel within 60 s ({got})"
            recs = [r for rs in (await late.getmany(timeout_ms=1000)).values() for r in rs]
            got += [(r.offset, r.delivery_count) for r in recs if not r.value.startswith(b"sent")]
            if any(r.value.startswith(b"sentinel-" + group.encode()) for r in recs):
                break
        await late.commit()
    return sorted(got)


#: scenario -> (mode, the acknowledgements made after the first poll, how it ends)
#: how it ends: "stop" (Java close()), "exception" (async with left by an exception; Java's
#: try-with-resources), "poll-stop" (one more poll, then stop)
_STOP_SCENARIOS = {
    "implicit-stop": ("implicit", (), "stop"),
    "implicit-exception": ("implicit", (), "exception"),
    "implicit-poll-stop": ("implicit", (), "poll-stop"),
    "explicit-partial-stop": ("explicit", ("ACCEPT", "ACCEPT", "RELEASE", "REJECT"), "stop"),
    "explicit-partial-exception": (
        "explicit",
        ("ACCEPT", "ACCEPT", "RELEASE", "REJECT"),
        "exception",
    ),
}

#: what Java 4.4 did (the test checks Java still does it: both sides must match it)
_JAVA_STOP_OUTCOME = {
    "implicit-stop": ([(o, 2) for o in range(N)], set()),
    "implicit-exception": ([(o, 2) for o in range(N)], set()),
    "implicit-poll-stop": ([], set(range(N))),
    "explicit-partial-stop": ([(2, 2)] + [(o, 2) for o in range(4, N)], {0, 1, 2, 3}),
    "explicit-partial-exception": ([(2, 2)] + [(o, 2) for o in range(4, N)], {0, 1, 2, 3}),
}


class _AppFailed(Exception):
    pass


def _java_stop_scenario(bootstrap: str, topic: str, group: str, scenario: str) -> set[int]:
    mode, acks, end = _STOP_SCENARIOS[scenario]
    with ShareScript(bootstrap, group, mode=mode, callback=True) as java:
        java.do(f"subscribe {topic}")
        got = _java_poll_until(java, 1)
        assert len(got) == N, got
        for record, kind in zip(got, acks):
            java.do(f"ack {record['offset']} {kind}")
        if end == "poll-stop":
            assert _java_records(java.do("poll 500")) == []
        java.do("close")  # "exception": try-with-resources closes the same way
        offsets, errors = _java_acked(java)
    assert errors == []
    return offsets


async def _lite_stop_scenario(bootstrap: str, topic: str, group: str, scenario: str) -> set[int]:
    mode, acks, end = _STOP_SCENARIOS[scenario]
    heard = _Heard()
    consumer = AIOKafkaShareConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        acknowledgement_mode=mode,
        acknowledgement_callback=heard,
    )
    try:
        async with consumer:
            got = await _lite_poll_until(consumer, 1)
            assert len(got) == N, got
            for record, kind in zip(got, acks):
                consumer.acknowledge(record, AcknowledgeType[kind])
            if end == "poll-stop":
                assert await consumer.getmany(timeout_ms=500) == {}
            if end == "exception":
                raise _AppFailed()
    except _AppFailed:
        pass
    offsets, errors = heard.acked()
    assert errors == []
    return offsets


@pytest.mark.parametrize("scenario", list(_STOP_SCENARIOS))
async def test_stop_after_a_poll_as_java(broker, new_topic, scenario):
    """Java's close() sends what was acknowledged and gives back the rest; so does stop().
    (Before: stop() accepted an implicit-mode poll's records, which never came back.)"""
    await need_java_share_groups(broker)
    topic = await new_topic(partitions=1)
    groups = [await _group(broker, f"stop-{who}") for who in ("java", "lite")]
    await produce_values(broker.bootstrap, topic, [b"%d" % i for i in range(N)])
    java_acked, lite_acked = await asyncio.gather(
        asyncio.to_thread(_java_stop_scenario, broker.bootstrap, topic, groups[0], scenario),
        _lite_stop_scenario(broker.bootstrap, topic, groups[1], scenario),
    )
    java_back, lite_back = await asyncio.gather(
        *(_what_comes_back(broker.bootstrap, topic, g) for g in groups)
    )
    assert (java_back, java_acked) == _JAVA_STOP_OUTCOME[scenario]
    assert (lite_back, lite_acked) == (java_back, java_acked)


def _java_outcome(lines: list[dict[str, Any]]) -> Any:
    errors = [e["error"].split(":")[0] for e in lines if e.get("event") == "error"]
    return errors[0] if errors else _java_records(lines)


async def test_subscribe_after_start_and_again_after_unsubscribe_as_java(broker, new_topic):
    """Started with no topics, a member neither heartbeats nor polls (IllegalStateError, as
    Java's IllegalStateException); subscribe() joins; unsubscribe() leaves (polls raise
    again) and subscribe() joins again. (Before: the first heartbeat, with no topics, was
    refused with INVALID_REQUEST and every later poll raised InvalidRequestError.)"""
    await need_java_share_groups(broker)
    topic = await new_topic(partitions=1)
    gj, gl = [await _group(broker, f"sub-{who}") for who in ("java", "lite")]
    await produce_values(broker.bootstrap, topic, [b"%d" % i for i in range(N)])
    java = ShareScript(broker.bootstrap, gj)
    lite = AIOKafkaShareConsumer(bootstrap_servers=broker.bootstrap, group_id=gl)
    java_seen: list[Any] = []
    lite_seen: list[Any] = []

    def java_phase(first: bool) -> None:
        java_seen.append(_java_outcome(java.do("poll 500")))
        java.do(f"subscribe {topic}")
        got = _java_poll_until(java, N)
        java_seen.append([(r["offset"], r["delivery_count"]) for r in got])
        assert java.do("commit")[-1]["results"] == {f"{topic}-0": None}
        java.do("unsubscribe")
        if not first:
            java_seen.append(_java_outcome(java.do("poll 500")))

    async def lite_poll_error() -> str:
        try:
            await lite.getmany(timeout_ms=500)
        except Errors.KafkaError as exc:
            return type(exc).__name__
        return "no error"

    async def lite_phase(first: bool) -> None:
        lite_seen.append(await lite_poll_error())
        lite.subscribe([topic])
        got = await _lite_poll_until(lite, N)
        lite_seen.append([(r.offset, r.delivery_count) for r in got])
        assert await lite.commit() == {TopicPartition(topic, 0): None}
        lite.unsubscribe()
        assert lite.assignment() == set()
        if not first:
            lite_seen.append(await lite_poll_error())

    await asyncio.to_thread(java.start)
    await lite.start()
    try:
        await asyncio.gather(asyncio.to_thread(java_phase, True), lite_phase(True))
        await produce_values(broker.bootstrap, topic, [b"%d" % i for i in range(N, 2 * N)])
        await asyncio.gather(asyncio.to_thread(java_phase, False), lite_phase(False))
    finally:
        await lite.stop()
        await asyncio.to_thread(java.stop)
    first, again = [(o, 1) for o in range(N)], [(o, 1) for o in range(N, 2 * N)]
    assert java_seen == [
        "IllegalStateException",
        first,
        "IllegalStateException",
        again,
        "IllegalStateException",
    ]
    assert lite_seen == [
        "IllegalStateError",
        first,
        "IllegalStateError",
        again,
        "IllegalStateError",
    ]


async def test_failed_acknowledgement_goes_to_the_callback_as_java(broker, new_topic):
    """Explicit mode, two records held past their lock, then accepted: the poll that sends the
    acknowledgements does not raise (Java's poll neither); the callback hears
    INVALID_RECORD_STATE for both offsets, and the records come back (delivery_count 2).
    (Before: the poll raised ShareAcknowledgementError when no callback was set.)"""
    await need_java_share_groups(broker)
    topic = await new_topic(partitions=1)
    lock = {"share_record_lock_duration_ms": str(EXPIRY_LOCK_MS)}
    gj, gl = [await _group(broker, f"ackfail-{who}", **lock) for who in ("java", "lite")]
    await produce_values(broker.bootstrap, topic, [b"a", b"b"])
    held_s = EXPIRY_LOCK_MS / 1000 + 2  # the scenario: the locks expire meanwhile

    def java_side() -> tuple[list[tuple[int, int]], list[Any]]:
        with ShareScript(broker.bootstrap, gj, mode="explicit", callback=True) as java:
            java.do(f"subscribe {topic}")
            got = _java_poll_until(java, 2)
            java.do(f"sleep {int(held_s * 1000)}")
            for r in got:
                java.do(f"ack {r['offset']} ACCEPT")
            again: list[dict[str, Any]] = []
            deadline = time.monotonic() + 30
            while len(again) < 2:
                assert time.monotonic() < deadline, again
                lines = java.do("poll 1000")
                assert not [e for e in lines if e.get("event") == "error"], lines
                again += _java_records(lines)
            for r in again:
                java.do(f"ack {r['offset']} ACCEPT")
            java.do("commit")
            java.do("close")
            calls = [
                (e["offsets"], e["error"] and e["error"].split(":")[0])
                for e in java.events
                if e["event"] == "ack_callback"
            ]
        return [(r["offset"], r["delivery_count"]) for r in again], calls

    async def lite_side() -> tuple[list[tuple[int, int]], _Heard]:
        heard = _Heard()
        async with AIOKafkaShareConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            group_id=gl,
            acknowledgement_mode="explicit",
            acknowledgement_callback=heard,
        ) as lite:
            got = await _lite_poll_until(lite, 2)
            await asyncio.sleep(held_s)
            for r in got:
                lite.acknowledge(r, AcknowledgeType.ACCEPT)
            again = await _lite_poll_until(lite, 2, 30)  # must not raise
            for r in again:
                lite.acknowledge(r, AcknowledgeType.ACCEPT)
            assert await lite.commit() == {TopicPartition(topic, 0): None}
        return [(r.offset, r.delivery_count) for r in again], heard

    (java_again, java_calls), (lite_again, heard) = await asyncio.gather(
        asyncio.to_thread(java_side), lite_side()
    )
    assert java_again == lite_again == [(0, 2), (1, 2)]
    part = f"{topic}-0"
    assert java_calls == [({part: [0, 1]}, "InvalidRecordStateException"), ({part: [0, 1]}, None)]
    lite_calls = [
        (
            {f"{tp.topic}-{tp.partition}": offs[tp] for tp in offs},
            next((type(e).__name__ for e in res.values() if e is not None), None),
        )
        for res, offs in heard.calls
    ]
    assert lite_calls == [({part: [0, 1]}, "InvalidRecordStateError"), ({part: [0, 1]}, None)]


async def test_acknowledgements_go_at_every_poll_as_java(broker, new_topic):
    """Nine records, one record batch each; aiokafka_lite takes them one at a time
    (``getone()``) over fetches of three (``max_poll_records=3``; implicit mode prefetches the
    next three when the buffer runs dry), 3.4 s of work each, against a 15 s lock. Each poll
    sends the previous record's acceptance (with the fetch, or a ShareAcknowledge while
    records are buffered), so every record is accepted 3.4 to 13.6 s after it was acquired:
    no acknowledgement fails and nothing comes back. Java, one record a poll
    (``max.poll.records=1``), does the same. (Before: the acceptance of each fetch's last
    record waited until the next fetch's three were handed out: 17 s, its lock had expired.)

    A record's lock runs from its acquisition, not from its hand-out: records waiting in the
    buffer longer than the lock expire whatever the acknowledgement timing, so the fetches are
    kept small enough here (``max_poll_records``) for the work to fit."""
    await need_java_share_groups(broker)
    topic = await new_topic(partitions=1)
    lock = {"share_record_lock_duration_ms": str(MIN_LOCK_MS)}
    gj, gl = [await _group(broker, f"every-{who}", **lock) for who in ("java", "lite")]
    n, work_s = 9, 3.4
    await produce_values(broker.bootstrap, topic, [b"%d" % i for i in range(n)])

    def java_side() -> tuple[list[tuple[int, int]], set[int], list[str]]:
        with ShareScript(
            broker.bootstrap, gj, mode="implicit", max_poll_records=1, callback=True
        ) as java:
            java.do(f"subscribe {topic}")
            got = _java_poll_until(java, 1)
            while len(got) < n:
                java.do(f"sleep {int(work_s * 1000)}")
                got += _java_records(java.do("poll 1000"))
            java.do(f"sleep {int(work_s * 1000)}")
            java.do("commit")
            java.do("close")
            acked, errors = _java_acked(java)
        return [(r["offset"], r["delivery_count"]) for r in got], acked, errors

    async def lite_side() -> tuple[list[tuple[int, int]], set[int], list[str]]:
        heard = _Heard()
        got = []
        async with AIOKafkaShareConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            group_id=gl,
            max_poll_records=3,
            acknowledgement_callback=heard,
        ) as lite:
            while len(got) < n:
                got.append(await asyncio.wait_for(lite.getone(), 60))
                await asyncio.sleep(work_s)  # the application's work on it
            await lite.commit()
        acked, errors = heard.acked()
        return [(r.offset, r.delivery_count) for r in got], acked, errors

    java, lite = await asyncio.gather(asyncio.to_thread(java_side), lite_side())
    java_back, lite_back = await asyncio.gather(
        *(_what_comes_back(broker.bootstrap, topic, g) for g in (gj, gl))
    )
    expected = ([(o, 1) for o in range(n)], set(range(n)), [])
    assert java == expected
    assert lite == expected
    assert java_back == lite_back == []
