"""The cooperative sticky assignor (pure, broker-free): stickiness, balance, the two-phase
moves of KIP-429, the subscription encoding Java's assignor reads, and properties over random
groups (every round disjoint; once the follow-up rebalances settle, covering and balanced)."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite.consumer.assignors import (
    COOPERATIVE,
    EAGER,
    ConsumerProtocolMemberMetadata,
    CooperativeStickyAssignor,
    RangePartitionAssignor,
    decode_subscription,
    encode_subscription,
    rebalance_protocol,
    resolve_assignors,
)

TP = tuple[str, int]


class Cluster:
    def __init__(self, topics: dict[str, int]) -> None:
        self.sizes = topics

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        n = self.sizes.get(topic)
        return set(range(n)) if n is not None else None


def sub(topics: list[str], owned: set[TP], generation: int) -> ConsumerProtocolMemberMetadata:
    """A member's subscription as it travels: encoded, then decoded by the leader."""
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(owned):
        by_topic.setdefault(t, []).append(p)
    meta = ConsumerProtocolMemberMetadata(
        2, topics, struct.pack(">i", generation), sorted(by_topic.items()), generation
    )
    return decode_subscription(encode_subscription(meta))


def run(
    topics: dict[str, list[str]], owned: dict[str, set[TP]], generation: int, cluster: Cluster
) -> dict[str, set[TP]]:
    members = {m: sub(topics[m], owned.get(m, set()), generation) for m in topics}
    result = CooperativeStickyAssignor().assign(cluster, members)
    return {m: {(t, p) for t, ps in a.assignment for p in ps} for m, a in result.items()}


def settle(
    topics: dict[str, list[str]], owned: dict[str, set[TP]], cluster: Cluster
) -> tuple[dict[str, set[TP]], list[dict[str, set[TP]]]]:
    """Rebalance as cooperative members do (each keeps what it is given and revokes the rest;
    a revocation makes a follow-up rebalance) until nothing is revoked; every round returned."""
    rounds = []
    generation = 1
    current = {m: set(owned.get(m, set())) for m in topics}
    for _ in range(5):
        result = run(topics, current, generation, cluster)
        rounds.append(result)
        revoked = any(current[m] - result[m] for m in topics)
        current = result
        generation += 1
        if not revoked:
            return current, rounds
    raise AssertionError(f"no stable assignment after 5 rebalances: {rounds}")


def all_partitions(cluster: Cluster, topics: set[str]) -> set[TP]:
    return {(t, p) for t in topics for p in range(cluster.sizes[t])}


def test_protocol_names_and_resolution() -> None:
    assert CooperativeStickyAssignor.name == "cooperative-sticky"  # Java's protocol name
    (a,) = resolve_assignors("cooperative-sticky")
    assert isinstance(a, CooperativeStickyAssignor)
    assert rebalance_protocol([CooperativeStickyAssignor()]) == COOPERATIVE
    # the rolling upgrade's first step offers both: the member stays eager (as Java's)
    both = resolve_assignors(["cooperative-sticky", "range"])
    assert rebalance_protocol(both) == EAGER
    assert rebalance_protocol([RangePartitionAssignor()]) == EAGER


def test_subscription_carries_owned_partitions_and_generation() -> None:
    a = CooperativeStickyAssignor()
    a.on_assignment(type("A", (), {"assignment": [("t", [0, 2])]})())
    a.on_generation_assignment(7)
    got = decode_subscription(encode_subscription(a.metadata(["t"])))
    assert got.version == 2
    assert got.owned_partitions == [("t", [0, 2])]
    assert got.generation_id == 7
    assert got.user_data == struct.pack(">i", 7)  # Java's assignor reads it from a v1 too


def test_first_assignment_is_balanced_and_complete() -> None:
    cluster = Cluster({"t": 6})
    result = run({"a": ["t"], "b": ["t"], "c": ["t"]}, {}, -1, cluster)
    assert sorted(len(v) for v in result.values()) == [2, 2, 2]
    assert set().union(*result.values()) == all_partitions(cluster, {"t"})


def test_join_moves_in_two_phases_and_keeps_the_rest() -> None:
    cluster = Cluster({"t": 6})
    owned = {"a": {("t", 0), ("t", 1), ("t", 2)}, "b": {("t", 3), ("t", 4), ("t", 5)}}
    topics = {"a": ["t"], "b": ["t"], "c": ["t"]}
    first = run(topics, owned, 3, cluster)
    # phase 1: one partition taken from each old owner, given to nobody yet
    assert first["c"] == set()
    assert first["a"] < owned["a"] and len(first["a"]) == 2
    assert first["b"] < owned["b"] and len(first["b"]) == 2
    final, rounds = settle(topics, owned, cluster)
    assert len(rounds) == 2  # one follow-up rebalance, then stable
    # phase 2: the revoked partitions go to the new member; nothing else moved
    assert final["a"] == first["a"] and final["b"] == first["b"]
    assert final["c"] == (owned["a"] - first["a"]) | (owned["b"] - first["b"])


def test_leave_hands_over_without_revoking_anybody() -> None:
    cluster = Cluster({"t": 6})
    owned = {"a": {("t", 0), ("t", 1)}, "b": {("t", 2), ("t", 3)}}  # c (4, 5) left
    result = run({"a": ["t"], "b": ["t"]}, owned, 4, cluster)
    assert result["a"] >= owned["a"] and result["b"] >= owned["b"]
    assert result["a"] | result["b"] == all_partitions(cluster, {"t"})
    assert sorted(len(v) for v in result.values()) == [3, 3]


def test_stale_generation_loses_a_conflicting_claim() -> None:
    cluster = Cluster({"t": 2})
    members = {
        "old": sub(["t"], {("t", 0), ("t", 1)}, 2),  # a zombie that missed a rebalance
        "new": sub(["t"], {("t", 0)}, 5),
    }
    result = CooperativeStickyAssignor().assign(cluster, members)
    got = {m: {(t, p) for t, ps in a.assignment for p in ps} for m, a in result.items()}
    assert got["new"] == {("t", 0)}
    assert got["old"] == {("t", 1)}


members_st = st.lists(st.sets(st.sampled_from(["x", "y", "z"]), min_size=1), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(
    first=members_st,
    joiners=st.integers(0, 3),
    leavers=st.integers(0, 2),
    sizes=st.tuples(st.integers(1, 8), st.integers(0, 5), st.integers(1, 4)),
)
def test_properties(
    first: list[set[str]], joiners: int, leavers: int, sizes: tuple[int, int, int]
) -> None:
    cluster = Cluster(dict(zip(["x", "y", "z"], sizes)))
    topics = {f"m{i}": sorted(s) for i, s in enumerate(first)}
    owned, _ = settle(topics, {}, cluster)
    # membership changes: some leave, some join (subscribing to everything)
    for m in list(topics)[:leavers]:
        if len(topics) > 1:
            del topics[m]
            del owned[m]
    for j in range(joiners):
        topics[f"j{j}"] = ["x", "y", "z"]
    final, rounds = settle(topics, owned, cluster)
    before = owned
    for result in rounds:
        seen = [tp for tps in result.values() for tp in tps]
        assert len(seen) == len(set(seen)), "a partition assigned twice in one round"
        for m, tps in result.items():
            for tp in tps:  # never handed directly from one owner to another
                holders = [o for o, ptps in before.items() if tp in ptps]
                assert holders in ([], [m]), (tp, m, holders)
        before = {m: result[m] for m in topics}
    wanted = all_partitions(cluster, set().union(*map(set, topics.values())))
    assert set().union(*final.values()) == wanted
    for m, tps in final.items():
        assert all(t in topics[m] for t, _ in tps)
    if len({tuple(v) for v in topics.values()}) == 1:  # same subscriptions: within 1
        sizes_ = [len(v) for v in final.values()]
        assert max(sizes_) - min(sizes_) <= 1


def test_rebalance_protocol_of_assignors_declaring_protocols_as_a_method() -> None:
    """aiokafka's (kafka-python's) assignors declare ``supported_protocols`` as a method, and
    libraries pass the classes (taskiq-aio-kafka): such a member is eager, never a TypeError."""
    from aiokafka_lite.consumer.assignors import (
        CooperativeStickyAssignor,
        RangePartitionAssignor,
        rebalance_protocol,
    )

    class MethodStyle:
        name = "custom"

        def supported_protocols(self) -> list[str]:
            return ["eager", "cooperative"]

    assert rebalance_protocol([MethodStyle]) == "eager"  # the class: the method needs self
    assert rebalance_protocol([MethodStyle()]) == "cooperative"
    assert rebalance_protocol([CooperativeStickyAssignor]) == "cooperative"
    assert rebalance_protocol([CooperativeStickyAssignor, RangePartitionAssignor]) == "eager"
