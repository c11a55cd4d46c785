"""Cluster metadata cache (no I/O): brokers, controller, topics, partitions, leaders.

:class:`ClusterMetadata` holds one immutable *snapshot*; :meth:`ClusterMetadata.update_metadata`
builds a new snapshot from a MetadataResponse and swaps it in with one assignment, so a reader
never sees half an update. Listeners run after each successful update.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import for_code
from .structs import BrokerMetadata, PartitionMetadata, TopicPartition

__all__ = ["ClusterMetadata"]

log = logging.getLogger(__name__)

_TOPIC_AUTHORIZATION_FAILED = 29
_INVALID_TOPIC = 17

Listener = Callable[["ClusterMetadata"], Any]


@dataclass(frozen=True)
class _Snapshot:
    brokers: dict[int, BrokerMetadata] = field(default_factory=dict)
    partitions: dict[str, dict[int, PartitionMetadata]] = field(default_factory=dict)
    topic_errors: dict[str, int] = field(default_factory=dict)
    topic_ids: dict[str, Any] = field(default_factory=dict)
    internal: frozenset[str] = frozenset()
    unauthorized: frozenset[str] = frozenset()
    by_broker: dict[int, frozenset[TopicPartition]] = field(default_factory=dict)
    cluster_id: str | None = None
    controller_id: int = -1


class ClusterMetadata:
    """A snapshot cache of cluster metadata, updated by :class:`~aiokafka_lite.client.KafkaClient`.

    Method names follow aiokafka's ``ClusterMetadata``.
    """

    def __init__(self) -> None:
        self._snap = _Snapshot()
        self._coordinators: dict[int, BrokerMetadata] = {}
        self._listeners: list[Listener] = []
        #: number of successful updates so far (0 before the first one)
        self.version = 0

    # ---------------------------------------------------------------- brokers

    def brokers(self) -> set[BrokerMetadata]:
        """All brokers in the latest metadata."""
        return set(self._snap.brokers.values())

    @property
    def _brokers(self) -> dict[int, BrokerMetadata]:
        """aiokafka's name: the brokers of the latest metadata by node id (a copy)."""
        return dict(self._snap.brokers)

    def broker_metadata(self, node_id: int) -> BrokerMetadata | None:
        """The broker with ``node_id`` (also coordinators learnt via FindCoordinator)."""
        b = self._snap.brokers.get(node_id)
        return b if b is not None else self._coordinators.get(node_id)

    def add_coordinator(self, node_id: int, host: str, port: int, rack: str | None = None) -> None:
        """Remember a coordinator's address (it may be absent from the brokers list)."""
        self._coordinators[node_id] = BrokerMetadata(node_id, host, port, rack)

    @property
    def controller(self) -> BrokerMetadata | None:
        """The controller broker, when known (aiokafka returns BrokerMetadata here too)."""
        return self._snap.brokers.get(self._snap.controller_id)

    @property
    def controller_id(self) -> int:
        """The controller's node id, or -1."""
        return self._snap.controller_id

    @property
    def cluster_id(self) -> str | None:
        """The cluster id reported by the brokers (None on very old brokers)."""
        return self._snap.cluster_id

    # ----------------------------------------------------------------- topics

    def topics(self, exclude_internal_topics: bool = True) -> set[str]:
        """Names of topics with partition metadata (internal topics excluded by default)."""
        names = set(self._snap.partitions)
        if exclude_internal_topics:
            names -= self._snap.internal
        return names

    @property
    def internal_topics(self) -> frozenset[str]:
        """Topics the broker flags as internal (``__consumer_offsets`` ...)."""
        return self._snap.internal

    @property
    def unauthorized_topics(self) -> frozenset[str]:
        """Topics answered with TOPIC_AUTHORIZATION_FAILED in the latest update."""
        return self._snap.unauthorized

    def topic_error(self, topic: str) -> int:
        """The topic-level error code of the latest update (0 when fine or not asked for)."""
        return self._snap.topic_errors.get(topic, 0)

    def topic_id(self, topic: str) -> Any:
        """The topic's uuid (zero uuid on brokers that do not report ids), or None if unknown."""
        return self._snap.topic_ids.get(topic)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """All partition ids of ``topic``, or None if the topic is unknown."""
        parts = self._snap.partitions.get(topic)
        return None if parts is None else set(parts)

    def available_partitions_for_topic(self, topic: str) -> set[int] | None:
        """Partition ids of ``topic`` that have a leader, or None if the topic is unknown."""
        parts = self._snap.partitions.get(topic)
        if parts is None:
            return None
        return {p for p, meta in parts.items() if meta.leader >= 0}

    def leader_for_partition(self, partition: TopicPartition) -> int | None:
        """Leader node id of ``partition``: None if unknown, -1 if it currently has no leader."""
        parts = self._snap.partitions.get(partition.topic)
        if parts is None:
            return None
        meta = parts.get(partition.partition)
        return None if meta is None else meta.leader

    def partition_metadata(self, partition: TopicPartition) -> PartitionMetadata | None:
        """Full metadata of one partition (leader, replicas, isr, leader epoch ...)."""
        parts = self._snap.partitions.get(partition.topic)
        return None if parts is None else parts.get(partition.partition)

    def partitions_for_broker(self, node_id: int) -> set[TopicPartition] | None:
        """Partitions led by ``node_id`` (None when it leads none)."""
        tps = self._snap.by_broker.get(node_id)
        return None if tps is None else set(tps)

    # -------------------------------------------------------------- listeners

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(cluster)`` after every successful update."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop calling ``listener`` (no error if it was not registered)."""
        try:
            self._listeners.remove(listener)
        except ValueError:
            pass

    # ----------------------------------------------------------------- update

    def update_metadata(self, metadata: Any) -> None:
        """Replace the snapshot with the content of a decoded MetadataResponse."""
        brokers = {
            b.node_id: BrokerMetadata(b.node_id, b.host, b.port, b.rack) for b in metadata.brokers
        }
        partitions: dict[str, dict[int, PartitionMetadata]] = {}
        topic_errors: dict[str, int] = {}
        topic_ids: dict[str, Any] = {}
        internal: set[str] = set()
        unauthorized: set[str] = set()
        for t in metadata.topics:
            name = t.name
            if name is None:  # v12+ may answer by id only for unknown ids
                continue
            if t.error_code:
                topic_errors[name] = t.error_code
                if t.error_code == _TOPIC_AUTHORIZATION_FAILED:
                    unauthorized.add(name)
            if t.is_internal:
                internal.add(name)
            topic_ids[name] = t.topic_id
            if not t.partitions:
                continue
            parts: dict[int, PartitionMetadata] = {}
            for p in t.partitions:
                meta = PartitionMetadata(
                    name,
                    p.partition_index,
                    p.leader_id,
                    list(p.replica_nodes),
                    list(p.isr_nodes),
                    for_code(p.error_code)() if p.error_code else None,
                    p.leader_epoch,
                    list(p.offline_replicas),
                )
                parts[p.partition_index] = meta
            partitions[name] = parts
        controller_id = metadata.controller_id
        if controller_id is None:
            controller_id = -1
        self._install(
            _Snapshot(
                brokers=brokers,
                partitions=partitions,
                topic_errors=topic_errors,
                topic_ids=topic_ids,
                internal=frozenset(internal),
                unauthorized=frozenset(unauthorized),
                by_broker=_by_broker(partitions),
                cluster_id=metadata.cluster_id,
                controller_id=controller_id,
            )
        )

    def apply_leaders(
        self,
        leaders: Mapping[TopicPartition, tuple[int, int]],
        endpoints: Iterable[BrokerMetadata] = (),
    ) -> set[TopicPartition]:
        """KIP-951: the new leaders (id, epoch) that a NOT_LEADER_OR_FOLLOWER answer named,
        with the endpoints of nodes it named. A partition moves only when the epoch given is
        newer than the cached one (an older answer changes nothing); a node missing from the
        brokers (or at a new address) is added. Listeners run when anything moved; returns
        the partitions whose leader is now the one given (moved, or already there)."""
        snap = self._snap
        brokers = dict(snap.brokers)
        for b in endpoints:
            if brokers.get(int(b.nodeId)) != b:
                brokers[int(b.nodeId)] = b
        parts = snap.partitions
        changed: dict[str, dict[int, PartitionMetadata]] = {}
        current: set[TopicPartition] = set()
        for tp, (leader, epoch) in leaders.items():
            meta = parts.get(tp.topic, {}).get(tp.partition)
            if meta is None or leader < 0 or leader not in brokers:
                continue
            if meta.leader_epoch is not None and meta.leader_epoch >= epoch:
                if meta.leader == leader:
                    current.add(tp)
                continue
            changed.setdefault(tp.topic, dict(parts[tp.topic]))[tp.partition] = meta._replace(
                leader=leader, leader_epoch=epoch, error=None
            )
            current.add(tp)
        if not changed and brokers == snap.brokers:
            return current
        new_parts = {**parts, **changed}
        self._install(
            replace(snap, brokers=brokers, partitions=new_parts, by_broker=_by_broker(new_parts))
        )
        return current

    def forget(self) -> None:
        """Rebootstrap (KIP-899): no broker, no partition known any more; listeners run."""
        self._install(_Snapshot())

    def with_partitions(self, partitions: Iterable[PartitionMetadata]) -> None:
        """Add or replace partitions in place (tests and manual seeding)."""
        snap = self._snap
        new_parts = {t: dict(p) for t, p in snap.partitions.items()}
        for meta in partitions:
            new_parts.setdefault(meta.topic, {})[meta.partition] = meta
        self._snap = replace(snap, partitions=new_parts, by_broker=_by_broker(new_parts))

    def _install(self, snap: _Snapshot) -> None:
        """Make ``snap`` the current view, count a new version and tell the listeners."""
        self._snap = snap
        self.version += 1
        for listener in list(self._listeners):
            try:
                listener(self)
            except Exception:  # a listener bug must not break metadata updates
                log.exception("cluster metadata listener %r failed", listener)

    def __repr__(self) -> str:
        s = self._snap
        return (
            f"ClusterMetadata(brokers={len(s.brokers)}, topics={len(s.partitions)}, "
            f"controller={s.controller_id}, version={self.version})"
        )


def _by_broker(
    partitions: Mapping[str, Mapping[int, PartitionMetadata]],
) -> dict[int, frozenset[TopicPartition]]:
    """The partitions each node leads."""
    led: dict[int, set[TopicPartition]] = {}
    for topic, parts in partitions.items():
        for p, meta in parts.items():
            if meta.leader >= 0:
                led.setdefault(meta.leader, set()).add(TopicPartition(topic, p))
    return {k: frozenset(v) for k, v in led.items()}
