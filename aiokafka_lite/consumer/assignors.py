"""Partition assignors for consumer groups: ``range``, ``roundrobin``, (eager) ``sticky`` and
``cooperative-sticky`` (KIP-429).

The group leader runs one assignor over every member's subscription and hands the result
back through SyncGroup.  The interface mirrors aiokafka's ``AbstractPartitionAssignor`` so
aiokafka-style assignor classes (class attributes / classmethods) work unchanged:

* ``name`` -- the protocol name advertised in JoinGroup (must match across the group);
* ``assign(cluster, members)`` -- ``members`` maps member id to an object with
  ``subscription`` (topics) and ``user_data``; returns member id -> object with
  ``assignment`` (``[(topic, [partition, ...]), ...]``), ``user_data`` and ``version``;
* ``metadata(topics)`` -- the subscription object this member advertises;
* ``on_assignment(assignment)`` / ``on_generation_assignment(generation)`` -- callbacks
  after SyncGroup (the sticky assignor remembers its assignment here);
* ``supported_protocols`` (optional, as Java's ``supportedProtocols()``) -- the rebalance
  protocols the assignor can run under: ``("eager",)`` when absent; a member rebalances
  cooperatively only when EVERY assignor it offers lists ``"cooperative"``.

``cluster`` only needs ``partitions_for_topic(topic) -> set[int] | None``.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from aiokafka_lite.errors import KafkaProtocolError
from aiokafka_lite.protocol import decode_data, encode_data
from aiokafka_lite.protocol import messages as m
from aiokafka_lite.structs import TopicPartition

#: rebalance protocol names (Java's ``ConsumerPartitionAssignor.RebalanceProtocol``)
EAGER = "eager"
COOPERATIVE = "cooperative"

__all__ = [
    "COOPERATIVE",
    "EAGER",
    "AbstractPartitionAssignor",
    "ConsumerProtocolMemberAssignment",
    "CooperativeStickyAssignor",
    "CooperativeStickyPartitionAssignor",
    "ConsumerProtocolMemberMetadata",
    "RangePartitionAssignor",
    "RoundRobinPartitionAssignor",
    "StickyPartitionAssignor",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "rebalance_protocol",
    "resolve_assignors",
]


class ConsumerProtocolMemberMetadata(NamedTuple):
    """A member's subscription as carried in JoinGroup (ConsumerProtocolSubscription)."""

    version: int
    subscription: list[str]
    user_data: bytes | None
    owned_partitions: list[tuple[str, list[int]]] = []
    generation_id: int = -1
    rack_id: str | None = None

    def with_owned(
        self, owned: list[tuple[str, list[int]]], generation_id: int
    ) -> ConsumerProtocolMemberMetadata:
        """This subscription carrying the member's owned partitions and generation (KIP-429),
        where its version has those fields (v1+); unchanged below."""
        if self.version < 1:
            return self
        return self._replace(owned_partitions=owned, generation_id=generation_id)


class ConsumerProtocolMemberAssignment(NamedTuple):
    """A member's assignment as carried in SyncGroup (ConsumerProtocolAssignment)."""

    version: int
    assignment: list[tuple[str, list[int]]]
    user_data: bytes | None

    def partitions(self) -> list[TopicPartition]:
        """The assignment as a flat list of TopicPartition."""
        return [TopicPartition(t, p) for t, parts in self.assignment for p in parts]


# -- consumer protocol encoding (JoinGroup metadata / SyncGroup assignment bytes) ----------


def encode_subscription(meta: Any) -> bytes:
    """ConsumerProtocolSubscription bytes for an assignor's metadata object (at the object's
    ``version``, 0 to 3: owned partitions from 1, the generation from 2, the rack from 3)."""
    owned = getattr(meta, "owned_partitions", None) or []
    obj = m.ConsumerProtocolSubscription(
        topics=list(meta.subscription),
        user_data=meta.user_data or None,
        owned_partitions=[
            m.ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=list(p))
            for t, p in owned
        ],
        generation_id=getattr(meta, "generation_id", -1),
        rack_id=getattr(meta, "rack_id", None),
    )
    return encode_data(obj, min(max(int(getattr(meta, "version", 0) or 0), 0), 3))


def decode_subscription(data: bytes) -> ConsumerProtocolMemberMetadata:
    """Decode a member's ConsumerProtocolSubscription (any version)."""
    obj, version = decode_data(m.ConsumerProtocolSubscription, bytes(data))
    owned = [(tp.topic, list(tp.partitions)) for tp in (obj.owned_partitions or ())]
    ud = bytes(obj.user_data) if obj.user_data is not None else None
    return ConsumerProtocolMemberMetadata(
        version, list(obj.topics), ud, owned, obj.generation_id, obj.rack_id
    )


def encode_assignment(assignment: Any) -> bytes:
    """ConsumerProtocolAssignment bytes (version 0) for an assignor's result object."""
    obj = m.ConsumerProtocolAssignment(
        assigned_partitions=[
            m.ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=list(p))
            for t, p in assignment.assignment
        ],
        user_data=assignment.user_data or None,
    )
    return encode_data(obj, 0)


def decode_assignment(data: bytes) -> ConsumerProtocolMemberAssignment:
    """Decode a ConsumerProtocolAssignment (empty bytes = nothing assigned)."""
    if not data:
        return ConsumerProtocolMemberAssignment(0, [], None)
    obj, version = decode_data(m.ConsumerProtocolAssignment, bytes(data))
    parts = [(tp.topic, list(tp.partitions)) for tp in obj.assigned_partitions]
    ud = bytes(obj.user_data) if obj.user_data is not None else None
    return ConsumerProtocolMemberAssignment(version, parts, ud)


def _group(tps: Iterable[tuple[str, int]]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in tps:
        by_topic[topic].append(partition)
    return [(t, sorted(by_topic[t])) for t in sorted(by_topic)]


def _topic_partitions(cluster: Any, topic: str) -> list[int]:
    parts = cluster.partitions_for_topic(topic)
    return sorted(parts) if parts else []


class AbstractPartitionAssignor:
    """Base class of the built-in assignors (aiokafka-compatible method names)."""

    name = "abstract"
    version = 0

    def assign(
        self, cluster: Any, members: Mapping[str, Any]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        """Compute the assignment of every member (run by the group leader only)."""
        raise NotImplementedError

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        """The subscription this member advertises in JoinGroup."""
        return ConsumerProtocolMemberMetadata(self.version, sorted(topics), b"")

    def on_assignment(self, assignment: Any) -> None:
        """Called with this member's assignment after each SyncGroup."""

    def on_generation_assignment(self, generation: int) -> None:
        """Called with the new generation id after each SyncGroup."""

    def _result(
        self, members: Iterable[str], tps: Mapping[str, Iterable[tuple[str, int]]]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        return {
            m: ConsumerProtocolMemberAssignment(self.version, _group(tps.get(m, ())), b"")
            for m in members
        }


class RangePartitionAssignor(AbstractPartitionAssignor):
    """Per topic, consecutive ranges of partitions to the sorted subscribed members."""

    name = "range"

    def assign(
        self, cluster: Any, members: Mapping[str, Any]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        """Per topic, consecutive ranges of its partitions to the sorted members."""
        by_topic: dict[str, list[str]] = defaultdict(list)
        for member_id, meta in members.items():
            for topic in set(meta.subscription):
                by_topic[topic].append(member_id)
        out: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for topic, subs in by_topic.items():
            parts = _topic_partitions(cluster, topic)
            subs.sort()
            share, extra = divmod(len(parts), len(subs))
            start = 0
            for i, member_id in enumerate(subs):
                n = share + (1 if i < extra else 0)
                out[member_id].extend((topic, p) for p in parts[start : start + n])
                start += n
        return self._result(members, out)


class RoundRobinPartitionAssignor(AbstractPartitionAssignor):
    """All partitions sorted by (topic, partition), dealt in turn to sorted members,
    skipping members not subscribed to a partition's topic."""

    name = "roundrobin"

    def assign(
        self, cluster: Any, members: Mapping[str, Any]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        """Deal the sorted partitions to the sorted subscribed members in turn."""
        subs = {m: set(meta.subscription) for m, meta in members.items()}
        order = sorted(subs)
        topics = sorted(set().union(*subs.values())) if subs else []
        out: dict[str, list[tuple[str, int]]] = defaultdict(list)
        i = 0
        n = len(order)
        for topic in topics:
            for p in _topic_partitions(cluster, topic):
                for _ in range(n):  # next member (cyclically) subscribed to this topic
                    member_id = order[i % n]
                    i += 1
                    if topic in subs[member_id]:
                        out[member_id].append((topic, p))
                        break
        return self._result(members, out)


# Sticky user data (same layout as the Java StickyAssignor's, version 1):
#   previous_assignment: int32 count, then (int16-length topic, int32 count, int32 partitions...)
#   generation: int32
def encode_sticky_user_data(
    assignment: Sequence[tuple[str, Sequence[int]]], generation: int
) -> bytes:
    """Encode a member's previous assignment and generation for the sticky assignor."""
    out = [struct.pack(">i", len(assignment))]
    for topic, parts in assignment:
        raw = topic.encode()
        out.append(struct.pack(f">h{len(raw)}si{len(parts)}i", len(raw), raw, len(parts), *parts))
    out.append(struct.pack(">i", generation))
    return b"".join(out)


def decode_sticky_user_data(data: bytes) -> tuple[list[tuple[str, list[int]]], int]:
    """Decode sticky user data; generation is -1 when absent (version 0 layout)."""
    view = memoryview(data)
    pos = 0

    def take(n: int) -> memoryview:
        nonlocal pos
        if n < 0 or pos + n > len(view):
            raise KafkaProtocolError("truncated sticky assignor user data")
        chunk = view[pos : pos + n]
        pos += n
        return chunk

    (count,) = struct.unpack(">i", take(4))
    if count < 0 or count > len(view):
        raise KafkaProtocolError("bad topic count in sticky assignor user data")
    result: list[tuple[str, list[int]]] = []
    for _ in range(count):
        (tlen,) = struct.unpack(">h", take(2))
        topic = bytes(take(tlen)).decode("utf-8", "replace")
        (pcount,) = struct.unpack(">i", take(4))
        if pcount < 0:
            raise KafkaProtocolError("bad partition count in sticky assignor user data")
        result.append((topic, list(struct.unpack(f">{pcount}i", take(4 * pcount)))))
    generation = struct.unpack(">i", take(4))[0] if len(view) - pos >= 4 else -1
    return result, generation


_TP = tuple[str, int]


def _sticky(
    cluster: Any, members: Mapping[str, Any], previous: Any
) -> tuple[dict[str, set[_TP]], dict[_TP, str]]:
    """The sticky assignment of ``members``: every partition a member owned (``previous(meta)``
    gives ``(owned, generation)``) stays with it (on conflicts the highest generation wins),
    the rest goes to the least loaded eligible member, then the load is balanced by moving as
    few partitions as possible.  Returns (member -> partitions, partition -> previous owner)."""
    subs = {m: set(meta.subscription) for m, meta in members.items()}
    all_tps = (
        {(t, p) for t in set().union(*subs.values()) for p in _topic_partitions(cluster, t)}
        if subs
        else set()
    )
    # 1. previous owners; on conflicts the highest generation wins
    claims: dict[_TP, tuple[int, str]] = {}
    for member_id, meta in sorted(members.items()):
        owned, generation = previous(meta)
        for topic, parts in owned:
            for p in parts:
                tp = (topic, p)
                if tp not in all_tps or topic not in subs[member_id]:
                    continue
                if tp not in claims or claims[tp][0] < generation:
                    claims[tp] = (generation, member_id)
    current: dict[str, set[_TP]] = {m: set() for m in subs}
    for tp, (_, member_id) in claims.items():
        current[member_id].add(tp)
    # 2. hand out the unowned partitions, fewest-loaded eligible member first
    for tp in sorted(all_tps - claims.keys()):
        eligible = [m for m in subs if tp[0] in subs[m]]
        best = min(eligible, key=lambda m: (len(current[m]), m))
        current[best].add(tp)
    # 3. balance: move from the most to a less loaded eligible member while it helps
    _balance(current, subs)
    return current, {tp: member_id for tp, (_, member_id) in claims.items()}


def _balance(current: dict[str, set[_TP]], subs: Mapping[str, set[str]]) -> None:
    moved = True
    limit = 10 * (sum(len(v) for v in current.values()) + 1)
    while moved and limit > 0:
        moved = False
        for src in sorted(current, key=lambda m: (-len(current[m]), m)):
            for tp in sorted(current[src]):
                dests = [
                    m
                    for m in current
                    if tp[0] in subs[m] and len(current[m]) + 1 < len(current[src])
                ]
                if dests:
                    dst = min(dests, key=lambda m: (len(current[m]), m))
                    current[src].discard(tp)
                    current[dst].add(tp)
                    moved = True
                    limit -= 1
                    break
            if moved:
                break


class StickyPartitionAssignor(AbstractPartitionAssignor):
    """Eager sticky assignor: balanced like round robin, but keeps as many partitions as
    possible where they were in the previous generation (read from each member's user data,
    or its owned partitions)."""

    name = "sticky"

    def __init__(self) -> None:
        self._owned: list[tuple[str, list[int]]] = []
        self._generation = -1

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        """Subscription with the partitions last assigned and the generation as user data."""
        user_data = encode_sticky_user_data(self._owned, self._generation)
        return ConsumerProtocolMemberMetadata(self.version, sorted(topics), user_data)

    def on_assignment(self, assignment: Any) -> None:
        """Remember the assignment (the user data of the next subscription)."""
        self._owned = [(t, list(p)) for t, p in assignment.assignment]

    def on_generation_assignment(self, generation: int) -> None:
        """Remember the generation the assignment belongs to."""
        self._generation = generation

    def assign(
        self, cluster: Any, members: Mapping[str, Any]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        """Balanced assignment that keeps each partition with its previous owner where possible."""
        current, _ = _sticky(cluster, members, self._previous)
        return self._result(members, current)

    @staticmethod
    def _previous(meta: Any) -> tuple[list[tuple[str, list[int]]], int]:
        data = getattr(meta, "user_data", None)
        if data:
            try:
                return decode_sticky_user_data(bytes(data))
            except KafkaProtocolError:
                pass
        owned = getattr(meta, "owned_partitions", None) or []
        return [(t, list(p)) for t, p in owned], getattr(meta, "generation_id", -1)


class CooperativeStickyAssignor(AbstractPartitionAssignor):
    """The cooperative sticky assignor (KIP-429, protocol name ``"cooperative-sticky"`` as
    Java's ``CooperativeStickyAssignor``, which it interoperates with in one group).

    The assignment is the sticky one (each member keeps what it owns, as reported in its
    subscription's owned partitions and generation; the rest is balanced), with the
    cooperative rule: a partition that moves from one member to another is NOT given to the
    new owner in this rebalance, only taken from the old one.  The old owner revokes it and
    rejoins at once; in that follow-up rebalance the partition is unowned and goes to the
    member that needs it.  Members running it rebalance cooperatively (only the moved
    partitions stop being consumed) when every assignor they offer supports it.
    """

    name = "cooperative-sticky"
    version = 2  # ConsumerProtocolSubscription v2: owned partitions and generation
    supported_protocols: tuple[str, ...] = (COOPERATIVE, EAGER)

    def __init__(self) -> None:
        self._owned: list[tuple[str, list[int]]] = []
        self._generation = -1

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        """Subscription with the partitions this assignor last saw assigned (the group member
        replaces them with what it really owns) and the generation, also as 4 bytes of user
        data (how Java's assignor reads it from a v1 subscription)."""
        return ConsumerProtocolMemberMetadata(
            self.version,
            sorted(topics),
            struct.pack(">i", self._generation),
            [(t, list(p)) for t, p in self._owned],
            self._generation,
        )

    def on_assignment(self, assignment: Any) -> None:
        """Remember the assignment (the owned partitions of the next subscription)."""
        self._owned = [(t, list(p)) for t, p in assignment.assignment]

    def on_generation_assignment(self, generation: int) -> None:
        """Remember the generation the assignment belongs to."""
        self._generation = generation

    def assign(
        self, cluster: Any, members: Mapping[str, Any]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        """Sticky assignment minus every partition that changes owner (see the class doc)."""
        current, previous_owner = _sticky(cluster, members, self._previous)
        for member_id, tps in current.items():
            tps -= {tp for tp in tps if previous_owner.get(tp, member_id) != member_id}
        return self._result(members, current)

    @staticmethod
    def _previous(meta: Any) -> tuple[list[tuple[str, list[int]]], int]:
        owned = getattr(meta, "owned_partitions", None) or []
        generation = getattr(meta, "generation_id", -1)
        if generation is None or generation < 0:
            data = getattr(meta, "user_data", None)
            generation = struct.unpack(">i", bytes(data))[0] if data and len(data) == 4 else -1
        return [(t, list(p)) for t, p in owned], generation


#: the same class under the naming pattern of aiokafka's assignors
CooperativeStickyPartitionAssignor = CooperativeStickyAssignor


def rebalance_protocol(assignors: Iterable[Any]) -> str:
    """The protocol a member offering ``assignors`` rebalances with (Java's rule): cooperative
    when every one of them supports it, else eager (the first step of the rolling upgrade
    offers ``cooperative-sticky`` beside an eager assignor: still eager)."""
    items = list(assignors)
    if items and all(COOPERATIVE in _protocols(a) for a in items):
        return COOPERATIVE
    return EAGER


def _protocols(assignor: Any) -> tuple[str, ...]:
    """The rebalance protocols an assignor declares (``supported_protocols``, a sequence or a
    method returning one, as in kafka-python's assignors); eager when it declares none that
    can be read (libraries pass aiokafka's assignor classes, whose method needs an instance)."""
    declared = getattr(assignor, "supported_protocols", None)
    if callable(declared):
        try:
            declared = declared()
        except TypeError:
            return (EAGER,)
    if isinstance(declared, str) or declared is None:
        return (declared,) if declared else (EAGER,)
    try:
        return tuple(declared)
    except TypeError:
        return (EAGER,)


_BY_NAME: dict[str, type[AbstractPartitionAssignor]] = {
    "range": RangePartitionAssignor,
    "roundrobin": RoundRobinPartitionAssignor,
    "sticky": StickyPartitionAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}


def resolve_assignors(strategy: Any) -> list[Any]:
    """Turn ``partition_assignment_strategy`` (a name, a class, an instance or a sequence of
    them) into a list of assignor objects, one per consumer (fresh instances of our classes;
    aiokafka-style classes with classmethods are used as they are)."""
    items = (
        [strategy]
        if isinstance(strategy, (str, type)) or hasattr(strategy, "assign")
        else list(strategy)
    )
    out: list[Any] = []
    for item in items:
        if isinstance(item, str):
            try:
                out.append(_BY_NAME[item]())
            except KeyError:
                raise ValueError(f"unknown partition assignment strategy {item!r}") from None
        elif isinstance(item, type) and issubclass(item, AbstractPartitionAssignor):
            out.append(item())
        elif hasattr(item, "assign") and hasattr(item, "name"):
            out.append(item)
        else:
            raise ValueError(f"not a partition assignor: {item!r}")
    if not out:
        raise ValueError("partition_assignment_strategy must name at least one assignor")
    return out
