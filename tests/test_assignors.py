"""Partition assignors (pure): range, roundrobin, sticky; the consumer-protocol encoding;
agreement with aiokafka's own range/roundrobin assignors; aiokafka-style classes accepted."""

from __future__ import annotations

import random
from typing import Any

import pytest
from aiokafka.coordinator.assignors.range import RangePartitionAssignor as PeerRange
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as PeerRoundRobin
from aiokafka.coordinator.assignors.sticky.sticky_assignor import (
    StickyPartitionAssignor as PeerSticky,
)
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment as PeerAssignment
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata as PeerMetadata

from aiokafka_lite.consumer.assignors import (
    ConsumerProtocolMemberMetadata,
    RangePartitionAssignor,
    RoundRobinPartitionAssignor,
    StickyPartitionAssignor,
    decode_assignment,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_sticky_user_data,
    encode_subscription,
    resolve_assignors,
)
from aiokafka_lite.errors import KafkaProtocolError


class Cluster:
    def __init__(self, topics: dict[str, int]) -> None:
        self.sizes = topics

    def topics(self) -> set[str]:
        return set(self.sizes)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        n = self.sizes.get(topic)
        return set(range(n)) if n is not None else None


def meta(*topics: str, user_data: bytes | None = b"") -> ConsumerProtocolMemberMetadata:
    return ConsumerProtocolMemberMetadata(0, list(topics), user_data)


def flat(result: dict[str, Any]) -> dict[str, set[tuple[str, int]]]:
    return {m: {(t, p) for t, ps in a.assignment for p in ps} for m, a in result.items()}


def check_complete(result: dict[str, Any], cluster: Cluster, members: dict[str, Any]) -> None:
    owned = flat(result)
    seen: list[tuple[str, int]] = [tp for tps in owned.values() for tp in tps]
    assert len(seen) == len(set(seen)), "a partition assigned twice"
    wanted = {
        (t, p)
        for md in members.values()
        for t in md.subscription
        for p in range(cluster.sizes.get(t, 0))
    }
    assert set(seen) == wanted
    for m, tps in owned.items():
        assert all(t in members[m].subscription for t, _ in tps)


def test_range() -> None:
    cluster = Cluster({"a": 5, "b": 2})
    members = {"m1": meta("a", "b"), "m2": meta("a", "b"), "m3": meta("a")}
    out = flat(RangePartitionAssignor().assign(cluster, members))
    assert out == {
        "m1": {("a", 0), ("a", 1), ("b", 0)},
        "m2": {("a", 2), ("a", 3), ("b", 1)},
        "m3": {("a", 4)},
    }


def test_roundrobin_skips_unsubscribed_members() -> None:
    cluster = Cluster({"a": 3, "b": 3})
    members = {"m1": meta("a"), "m2": meta("a", "b"), "m3": meta("b")}
    result = RoundRobinPartitionAssignor().assign(cluster, members)
    check_complete(result, cluster, members)
    out = flat(result)
    assert out["m1"] <= {("a", p) for p in range(3)} and out["m3"] <= {("b", p) for p in range(3)}
    assert out["m1"] == {("a", 0), ("a", 2)} and out["m3"] == {
        ("b", 1)
    }  # the classic dealing order


@pytest.mark.parametrize("seed", range(20))
def test_same_result_as_aiokafka(seed: int) -> None:
    rnd = random.Random(seed)
    topics = {f"t{i}": rnd.randint(1, 7) for i in range(rnd.randint(1, 4))}
    cluster = Cluster(topics)
    members = {
        f"member-{i:02d}": meta(*rnd.sample(sorted(topics), rnd.randint(1, len(topics))))
        for i in range(rnd.randint(1, 6))
    }
    peer_members = {m: PeerMetadata(0, md.subscription, b"") for m, md in members.items()}
    for ours, peer in (
        (RangePartitionAssignor(), PeerRange),
        (RoundRobinPartitionAssignor(), PeerRoundRobin),
    ):
        mine = ours.assign(cluster, members)
        check_complete(mine, cluster, members)
        theirs = peer.assign(cluster, peer_members)  # type: ignore[arg-type]
        assert flat(mine) == {
            m: {(t, p) for t, ps in a.assignment for p in ps} for m, a in theirs.items()
        }


@pytest.mark.parametrize("seed", range(20))
def test_sticky_balanced_and_sticky(seed: int) -> None:
    rnd = random.Random(seed)
    topics = {f"t{i}": rnd.randint(1, 8) for i in range(rnd.randint(1, 3))}
    cluster = Cluster(topics)
    names = [f"m{i}" for i in range(rnd.randint(2, 5))]
    assignors = {n: StickyPartitionAssignor() for n in names}
    all_topics = sorted(topics)
    generation = 1

    def run(current: list[str]) -> dict[str, set[tuple[str, int]]]:
        nonlocal generation
        members = {n: assignors[n].metadata(all_topics) for n in current}
        members = {n: decode_subscription(encode_subscription(md)) for n, md in members.items()}
        result = StickyPartitionAssignor().assign(cluster, members)
        check_complete(result, cluster, members)
        for n, a in result.items():
            a = decode_assignment(encode_assignment(a))
            assignors[n].on_assignment(a)
            assignors[n].on_generation_assignment(generation)
        generation += 1
        out = flat(result)
        sizes = [len(v) for v in out.values()]
        assert max(sizes) - min(sizes) <= 1, out  # identical subscriptions: balanced
        return out

    before = run(names)
    leaving = names[-1]
    after = run(names[:-1])
    for n in names[:-1]:  # survivors keep everything they had
        assert before[n] <= after[n]
    moved = sum(len(after[n] - before[n]) for n in names[:-1])
    assert moved == len(before[leaving])
    again = run(names[:-1])
    assert again == after  # nothing changes when nothing changed


def test_sticky_user_data_round_trip_and_interop_with_aiokafka() -> None:
    data = encode_sticky_user_data([("a", [0, 2]), ("b", [1])], 7)
    assert decode_sticky_user_data(data) == ([("a", [0, 2]), ("b", [1])], 7)
    with pytest.raises(KafkaProtocolError):
        decode_sticky_user_data(data[:-7])
    # aiokafka's sticky assignor reads our user data and we read its
    PeerSticky.member_assignment = {}
    PeerSticky.generation = -1
    cluster = Cluster({"a": 4, "b": 2})
    ours = StickyPartitionAssignor()
    ours.on_assignment(
        decode_assignment(
            encode_assignment(PeerAssignment(0, [("a", [0, 1, 2]), ("b", [0, 1])], b""))
        )
    )
    ours.on_generation_assignment(3)
    members = {"lite": ours.metadata(["a", "b"]), "peer": PeerSticky.metadata(["a", "b"])}
    result = PeerSticky.assign(
        cluster, {m: PeerMetadata(0, md.subscription, md.user_data) for m, md in members.items()}
    )
    owned = {m: {(t, p) for t, ps in a.assignment for p in ps} for m, a in result.items()}
    assert len(owned["lite"]) == 3 and owned["lite"] <= {
        ("a", 0),
        ("a", 1),
        ("a", 2),
        ("b", 0),
        ("b", 1),
    }


def test_protocol_encoding_round_trip() -> None:
    md = ConsumerProtocolMemberMetadata(0, ["x", "y"], b"ud")
    back = decode_subscription(encode_subscription(md))
    assert (back.subscription, back.user_data) == (["x", "y"], b"ud")
    # aiokafka decodes our bytes and we decode its bytes
    peer = PeerMetadata.decode(encode_subscription(md))
    assert peer.subscription == ["x", "y"] and peer.user_data == b"ud"
    back = decode_subscription(PeerMetadata(0, ["z"], b"").encode())
    assert back.subscription == ["z"]
    a = decode_assignment(PeerAssignment(0, [("x", [1, 0])], b"").encode())
    assert a.assignment == [("x", [1, 0])]
    assert PeerAssignment.decode(encode_assignment(a)).assignment == [("x", [1, 0])]
    assert decode_assignment(b"").assignment == []
    with pytest.raises(KafkaProtocolError):
        decode_subscription(b"\x00")


def test_resolve_assignors() -> None:
    names = [a.name for a in resolve_assignors(("range", "roundrobin", "sticky"))]
    assert names == ["range", "roundrobin", "sticky"]
    assert resolve_assignors("sticky")[0].name == "sticky"
    assert resolve_assignors((RoundRobinPartitionAssignor,))[0].name == "roundrobin"
    assert resolve_assignors((PeerRange,))[0] is PeerRange  # aiokafka-style class used as is
    with pytest.raises(ValueError):
        resolve_assignors("nope")
    with pytest.raises(ValueError):
        resolve_assignors(())
