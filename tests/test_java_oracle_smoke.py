"""Smoke tests of the Java oracle (tests/java_oracle.py) on its own: the Apache Kafka Java client
talking to itself through the wrapper, so that interop tests can trust what it reports.

Runs on the session's Apache Kafka broker (the ``apache`` kind, or ``external``); the embedded
brokers are skipped: the oracle's reference behaviour is the real broker's.
"""

from __future__ import annotations

import random
import time
import uuid

import java_oracle
import pytest
from java_oracle import GroupMember, consume, create_topic, partitions_for, produce


@pytest.fixture
def bootstrap(broker) -> str:
    """The broker under test ("host:port"); the Java oracle is built before the first test."""
    broker.skip_on("tansu", "noida", reason="the Java oracle is checked on Apache Kafka")
    reason = java_oracle.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    java_oracle.build()
    return str(broker.bootstrap)


def _topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"oracle-smoke-{uuid.uuid4().hex[:10]}"
    assert create_topic(bootstrap, name, partitions)
    return name


def test_round_trip_keeps_keys_values_headers_and_timestamps(bootstrap: str) -> None:
    topic = _topic(bootstrap, partitions=2)
    binary = bytes(range(256))
    # a set timestamp, but a current one: a record older than the broker's 7-day retention
    # is deleted by its next retention check
    stamp = int(time.time()) * 1000 + 123
    sent = [
        {"key": b"k1", "value": b"v1", "headers": [("h", b"\x00\xff"), ("empty", b"")]},
        {"key": None, "value": None, "partition": 1},  # null key and a tombstone value
        {"key": b"", "value": b"", "headers": [("none", None)], "partition": 0},
        {"key": binary, "value": binary * 40, "timestamp": stamp, "partition": 1},
        {"key": "unicode-é", "value": "snow ☃", "headers": [('hé"\\\n', "x")]},
    ]
    metadata = produce(bootstrap, topic, sent, linger_ms=5)
    assert len(metadata) == len(sent)
    assert metadata[1]["partition"] == 1 and metadata[2]["partition"] == 0
    assert metadata[3]["timestamp"] == stamp

    received = consume(bootstrap, topic, until_end=True, timeout_ms=20_000)
    by_position = {(r["partition"], r["offset"]): r for r in received}
    assert len(by_position) == len(sent)

    def as_bytes(data: bytes | str | None) -> bytes | None:
        return data.encode() if isinstance(data, str) else data

    for record, meta in zip(sent, metadata):
        got = by_position[(meta["partition"], meta["offset"])]
        assert got["topic"] == topic
        assert got["key"] == as_bytes(record["key"])
        assert got["value"] == as_bytes(record["value"])
        assert got["headers"] == [(n, as_bytes(v)) for n, v in record.get("headers", [])]
        assert got["timestamp"] == meta["timestamp"]
        assert got["timestamp_type"] == "CreateTime"


def test_every_compression_codec(bootstrap: str) -> None:
    topic = _topic(bootstrap)
    codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
    for codec in codecs:
        values = [f"{codec}-{i}-".encode() * 50 for i in range(3)]
        produce(bootstrap, topic, values, compression=codec, linger_ms=20)
    received = consume(bootstrap, topic, until_end=True, timeout_ms=20_000)
    assert [r["value"] for r in received] == [
        f"{codec}-{i}-".encode() * 50 for codec in codecs for i in range(3)
    ]


def test_aborted_transactions_are_hidden_from_read_committed(bootstrap: str) -> None:
    topic = _topic(bootstrap)
    txn_id = f"oracle-smoke-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, [b"c1", b"c2"], transactional_id=txn_id, txn="commit")
    aborted = produce(bootstrap, topic, [b"a1"], transactional_id=txn_id, txn="abort")
    produce(bootstrap, topic, [b"c3"], transactional_id=txn_id, txn="commit")

    committed = consume(
        bootstrap, topic, isolation="read_committed", until_end=True, timeout_ms=30_000
    )
    assert [r["value"] for r in committed] == [b"c1", b"c2", b"c3"]
    everything = consume(
        bootstrap, topic, isolation="read_uncommitted", until_end=True, timeout_ms=30_000
    )
    assert [r["value"] for r in everything] == [b"c1", b"c2", b"a1", b"c3"]
    # transaction markers take offsets too: c1, c2, marker, a1, marker, c3
    assert [r["offset"] for r in everything] == [0, 1, 3, 5]
    assert aborted[0]["offset"] == 3


def test_partition_for_keys_is_murmur2(bootstrap: str) -> None:
    from aiokafka_lite.producer.partitioner import default_partition

    topic = _topic(bootstrap, partitions=6)
    rng = random.Random(1234)
    keys = [b"", b"a", b"foobar", "ключ".encode()]
    keys += [rng.randbytes(rng.randrange(1, 40)) for _ in range(40)]
    produced = partitions_for(bootstrap, topic, keys)
    computed = partitions_for(bootstrap, topic, keys, method="compute")
    assert produced == computed
    assert produced == [default_partition(key, 6) for key in keys]
    assert len(set(produced)) > 1


def test_group_members_share_partitions_and_commit(bootstrap: str) -> None:
    topic = _topic(bootstrap, partitions=4)
    group = f"oracle-smoke-{uuid.uuid4().hex[:8]}"
    everything = {(topic, p) for p in range(4)}

    with GroupMember(bootstrap, topic, group, assignor="roundrobin") as first:
        assert first.wait_assigned() == everything
        with GroupMember(bootstrap, topic, group, assignor="roundrobin") as second:

            def balanced(_: GroupMember) -> bool:
                a, b = first.assigned(), second.assigned()
                return len(a) == 2 and len(b) == 2 and a | b == everything

            second.wait_for(balanced, timeout=60, what="2+2 assignment")
            values = [f"v{i}".encode() for i in range(20)]
            produce(bootstrap, topic, [(f"k{i}".encode(), v) for i, v in enumerate(values)])

            def read_all(_: GroupMember) -> bool:
                seen = {r["value"] for r in first.records + second.records}
                return seen >= set(values)

            second.wait_for(read_all, timeout=60, what="all 20 records")
            for member in (first, second):
                assert {(r["topic"], r["partition"]) for r in member.records} <= member.assigned()
        # the second member left: the first one gets everything back
        first.wait_for(lambda m: m.assigned() == everything, timeout=60, what="reassignment")
    assert first.events[-1]["event"] == "closed"

    # the members committed what they read: the group starts after those 20 records
    produce(bootstrap, topic, [(b"k-late", b"late")])
    late = consume(bootstrap, topic, group=group, until_end=True, commit=True, timeout_ms=30_000)
    assert [r["value"] for r in late] == [b"late"]
    again = consume(bootstrap, topic, group=group, until_end=True, timeout_ms=30_000)
    assert again == []
