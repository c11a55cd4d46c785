"""The transaction admin operations (KIP-664, KIP-618, KIP-994, KIP-1152): what the transaction
coordinators and partition leaders know about transactional producers, and the two ways to end
a transaction from outside its producer.

* ListTransactions to every broker (each lists the transactional ids it coordinates), with
  filters by state, producer id, duration (KIP-994, v1) and id pattern (KIP-1152, v2);
* DescribeTransactions at the coordinator of each id;
* DescribeProducers at each partition leader: the producers with state there, and the first
  offset of the transaction each has open (a hanging transaction holds the last stable offset);
* WriteTxnMarkers at a partition leader: an ABORT marker for one producer's open transaction
  there (Java's ``Admin.abortTransaction``: the way out of a hanging transaction);
* InitProducerId at the coordinator of a transactional id, with no producer id/epoch (Java's
  ``Admin.fenceProducers``): the epoch is bumped, the open transaction aborted, and the producer
  holding the id is fenced on its next request.

Sans-I/O builders and parsers plus the coroutines that run them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiokafka_lite import errors as Errors
from aiokafka_lite.protocol import messages as m
from aiokafka_lite.structs import TopicPartition

from ._exec import ItemError, by_leader, coordinator_call, to_node

if TYPE_CHECKING:
    from aiokafka_lite.client import KafkaClient

__all__ = [
    "AbortTransactionSpec",
    "FencedProducer",
    "ListedTransaction",
    "ProducerState",
    "TransactionDescription",
    "abort_transaction",
    "describe_producers",
    "describe_transactions",
    "fence_producers",
    "list_transactions",
]


@dataclass(frozen=True)
class ListedTransaction:
    """One transactional id as its coordinator lists it."""

    transactional_id: str
    producer_id: int
    #: the coordinator's state name: ``Empty``, ``Ongoing``, ``PrepareCommit``,
    #: ``PrepareAbort``, ``CompleteCommit``, ``CompleteAbort``, ``Dead``, ``PrepareEpochFence``
    state: str
    coordinator: int


@dataclass(frozen=True)
class TransactionDescription:
    """One transactional id as its coordinator describes it."""

    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    #: when the open transaction began (-1 when none is open)
    start_time_ms: int
    #: the partitions in the open transaction
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class ProducerState:
    """One producer with state at a partition (DescribeProducers; Java's ``ProducerState``)."""

    producer_id: int
    producer_epoch: int
    #: the sequence number of its last batch there (-1: none)
    last_sequence: int
    #: the timestamp of its last batch there (-1: none)
    last_timestamp: int
    #: the epoch of the transaction coordinator that wrote its last marker there (None: none)
    coordinator_epoch: int | None
    #: the first offset of the transaction it has open there (None: no open transaction)
    current_txn_start_offset: int | None


@dataclass(frozen=True)
class AbortTransactionSpec:
    """What :func:`abort_transaction` aborts: the open transaction of ``producer_id`` at
    ``producer_epoch`` in ``topic_partition``, as :func:`describe_producers` shows it (its
    ``coordinator_epoch``; 0 when it shows none). Java's ``AbortTransactionSpec``."""

    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


@dataclass(frozen=True)
class FencedProducer:
    """A transactional id after :func:`fence_producers`: its producer id and the new epoch."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


def list_transactions_request(
    states: Iterable[str] = (),
    producer_ids: Iterable[int] = (),
    duration_filter_ms: int = -1,
    transactional_id_pattern: str | None = None,
) -> Any:
    """ListTransactions, optionally only ids in ``states`` / of ``producer_ids`` / open longer
    than ``duration_filter_ms`` (v1+) / matching the regular expression
    ``transactional_id_pattern`` (v2+)."""
    return m.ListTransactionsRequest(
        state_filters=list(states),
        producer_id_filters=list(producer_ids),
        duration_filter=duration_filter_ms,
        transactional_id_pattern=transactional_id_pattern,
    )


def list_transactions_version(duration_filter_ms: int, transactional_id_pattern: str | None) -> int:
    """The lowest ListTransactions version that carries the filters asked for."""
    if transactional_id_pattern is not None:
        return 2
    return 1 if duration_filter_ms >= 0 else 0


def parse_list_transactions(resp: Any, node_id: int) -> list[ListedTransaction] | ItemError:
    """The transactional ids ``node_id`` coordinates, or its error."""
    if resp.error_code:
        return ItemError(resp.error_code)
    return [
        ListedTransaction(t.transactional_id, t.producer_id, t.transaction_state, node_id)
        for t in resp.transaction_states
    ]


async def list_transactions(
    client: KafkaClient,
    *,
    states: Iterable[str] = (),
    producer_ids: Iterable[int] = (),
    duration_filter_ms: int = -1,
    transactional_id_pattern: str | None = None,
    timeout_ms: float | None = None,
) -> list[ListedTransaction]:
    """ListTransactions of every broker, sorted by transactional id; a broker's error (e.g.
    COORDINATOR_LOAD_IN_PROGRESS) is raised, and UnsupportedVersionError when a filter needs a
    version the brokers lack (duration: v1, Kafka 3.8; pattern: v2, Kafka 4.1)."""
    if not client.cluster.brokers():
        await client.force_metadata_update()
    need = list_transactions_version(duration_filter_ms, transactional_id_pattern)
    if need and not client.supports(m.ListTransactionsRequest, need):
        what = "a transactional id pattern" if need == 2 else "a duration filter"
        raise Errors.UnsupportedVersionError(
            f"ListTransactions with {what} needs v{need}, which the brokers do not support"
        )
    nodes = sorted(int(b.nodeId) for b in client.cluster.brokers())
    request = list_transactions_request(
        sorted(states), sorted(producer_ids), duration_filter_ms, transactional_id_pattern
    )
    answers = await asyncio.gather(
        *(
            to_node(client, request, node_id=n, timeout_ms=timeout_ms, what="ListTransactions")
            for n in nodes
        )
    )
    out: list[ListedTransaction] = []
    for node, resp in zip(nodes, answers, strict=True):
        parsed = parse_list_transactions(resp, node)
        if isinstance(parsed, ItemError):
            raise parsed.exception(f"ListTransactions on broker {node}")
        out.extend(parsed)
    return sorted(out, key=lambda t: t.transactional_id)


def describe_transactions_request(transactional_ids: Sequence[str]) -> Any:
    return m.DescribeTransactionsRequest(transactional_ids=list(transactional_ids))


def parse_describe_transactions(resp: Any) -> dict[str, TransactionDescription | ItemError]:
    """Each id's description, or its error (e.g. TRANSACTIONAL_ID_NOT_FOUND)."""
    out: dict[str, TransactionDescription | ItemError] = {}
    for st in resp.transaction_states:
        if st.error_code:
            out[st.transactional_id] = ItemError(st.error_code)
            continue
        out[st.transactional_id] = TransactionDescription(
            transactional_id=st.transactional_id,
            state=st.transaction_state,
            producer_id=st.producer_id,
            producer_epoch=st.producer_epoch,
            timeout_ms=st.transaction_timeout_ms,
            start_time_ms=st.transaction_start_time_ms,
            partitions=frozenset(
                TopicPartition(t.topic, p) for t in st.topics for p in t.partitions
            ),
        )
    return out


#: per-id codes that mean "ask the (new) coordinator again": COORDINATOR_LOAD_IN_PROGRESS,
#: COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR; the others are the id's result
_RETRIED_CODES = frozenset({14, 15, 16})


def _coordinator_error(resp: Any) -> int:
    for st in resp.transaction_states:
        if st.error_code in _RETRIED_CODES:
            return int(st.error_code)
    return 0


async def describe_transactions(
    client: KafkaClient, transactional_ids: Iterable[str], *, timeout_ms: float | None = None
) -> dict[str, TransactionDescription | ItemError]:
    """DescribeTransactions at the coordinator of each id (coordinator moves and loading are
    retried until ``timeout_ms``); per-id errors come back as :class:`ItemError`."""
    ids = list(dict.fromkeys(transactional_ids))

    async def one(txid: str) -> dict[str, TransactionDescription | ItemError]:
        resp = await coordinator_call(
            client,
            txid,
            1,
            describe_transactions_request([txid]),
            _coordinator_error,
            timeout_ms=timeout_ms,
            what="DescribeTransactions",
        )
        return parse_describe_transactions(resp)

    out: dict[str, TransactionDescription | ItemError] = {}
    for part in await asyncio.gather(*(one(t) for t in ids)):
        out.update(part)
    return out


# ------------------------------------------------------------------------- DescribeProducers


def describe_producers_request(partitions: Iterable[TopicPartition]) -> Any:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return m.DescribeProducersRequest(
        topics=[
            m.DescribeProducersRequest.TopicRequest(name=t, partition_indexes=sorted(ps))
            for t, ps in sorted(by_topic.items())
        ]
    )


def parse_describe_producers(resp: Any) -> dict[TopicPartition, list[ProducerState] | ItemError]:
    """Each partition's producers (by producer id), or its error (NOT_LEADER_OR_FOLLOWER ...)."""
    out: dict[TopicPartition, list[ProducerState] | ItemError] = {}
    for t in resp.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if p.error_code:
                out[tp] = ItemError(p.error_code, p.error_message)
                continue
            out[tp] = sorted(
                (
                    ProducerState(
                        producer_id=s.producer_id,
                        producer_epoch=s.producer_epoch,
                        last_sequence=s.last_sequence,
                        last_timestamp=s.last_timestamp,
                        coordinator_epoch=None if s.coordinator_epoch < 0 else s.coordinator_epoch,
                        current_txn_start_offset=(
                            None if s.current_txn_start_offset < 0 else s.current_txn_start_offset
                        ),
                    )
                    for s in p.active_producers
                ),
                key=lambda s: s.producer_id,
            )
    return out


async def describe_producers(
    client: KafkaClient,
    partitions: Iterable[TopicPartition],
    *,
    broker_id: int | None = None,
    timeout_ms: float | None = None,
) -> dict[TopicPartition, list[ProducerState] | ItemError]:
    """DescribeProducers at each partition's leader (leader moves retried until ``timeout_ms``),
    or at ``broker_id`` only (a follower's view; its errors are the partitions' results)."""
    tps = [TopicPartition(*tp) for tp in dict.fromkeys(partitions)]
    if broker_id is not None:
        resp = await to_node(
            client,
            describe_producers_request(tps),
            node_id=broker_id,
            timeout_ms=timeout_ms,
            what="DescribeProducers",
        )
        found = parse_describe_producers(resp)
        return {
            tp: found.get(tp, ItemError(Errors.UnknownTopicOrPartitionError.errno)) for tp in tps
        }
    return await by_leader(
        client,
        dict.fromkeys(tps),
        lambda items: describe_producers_request(items),
        parse_describe_producers,
        timeout_ms=timeout_ms,
        what="DescribeProducers",
    )


# -------------------------------------------------------------- WriteTxnMarkers (abort)


def abort_marker_request(spec: AbortTransactionSpec) -> Any:
    """WriteTxnMarkers with one ABORT marker for ``spec``'s producer in its partition."""
    tp = spec.topic_partition
    return m.WriteTxnMarkersRequest(
        markers=[
            m.WriteTxnMarkersRequest.WritableTxnMarker(
                producer_id=spec.producer_id,
                producer_epoch=spec.producer_epoch,
                transaction_result=False,
                topics=[
                    m.WriteTxnMarkersRequest.WritableTxnMarkerTopic(
                        name=tp.topic, partition_indexes=[tp.partition]
                    )
                ],
                coordinator_epoch=spec.coordinator_epoch,
            )
        ]
    )


def parse_write_txn_markers(resp: Any, producer_id: int) -> dict[TopicPartition, ItemError | None]:
    """Each partition's result for ``producer_id``'s marker: None (written) or its error."""
    out: dict[TopicPartition, ItemError | None] = {}
    for marker in resp.markers:
        if marker.producer_id != producer_id:
            continue
        for t in marker.topics:
            for p in t.partitions:
                out[TopicPartition(t.name, p.partition_index)] = (
                    ItemError(p.error_code) if p.error_code else None
                )
    return out


async def abort_transaction(
    client: KafkaClient, spec: AbortTransactionSpec, *, timeout_ms: float | None = None
) -> ItemError | None:
    """Write the ABORT marker of ``spec`` at its partition's leader (leader moves retried until
    ``timeout_ms``); None, or the partition's error (INVALID_PRODUCER_EPOCH,
    TRANSACTION_COORDINATOR_FENCED, CLUSTER_AUTHORIZATION_FAILED ...)."""
    tp = TopicPartition(*spec.topic_partition)
    res = await by_leader(
        client,
        {tp: spec},
        lambda _items: abort_marker_request(spec),
        lambda resp: parse_write_txn_markers(resp, spec.producer_id),
        timeout_ms=timeout_ms,
        what="WriteTxnMarkers",
    )
    return res[tp]


# ------------------------------------------------------------------ InitProducerId (fence)


def fence_request(transactional_id: str, transaction_timeout_ms: int) -> Any:
    """InitProducerId for ``transactional_id`` with no producer id/epoch: the coordinator bumps
    the epoch (aborting an open transaction), which fences the producer holding the id.
    ``transaction_timeout_ms`` only bounds the coordinator's own append (Java sends the admin's
    request timeout)."""
    return m.InitProducerIdRequest(
        transactional_id=transactional_id,
        transaction_timeout_ms=transaction_timeout_ms,
        producer_id=-1,
        producer_epoch=-1,
    )


def parse_fence(resp: Any, transactional_id: str) -> FencedProducer:
    return FencedProducer(transactional_id, resp.producer_id, resp.producer_epoch)


async def fence_producers(
    client: KafkaClient, transactional_ids: Iterable[str], *, timeout_ms: float | None = None
) -> dict[str, FencedProducer]:
    """Fence the producers of ``transactional_ids`` (InitProducerId at each id's coordinator;
    coordinator moves, loading and CONCURRENT_TRANSACTIONS retried until ``timeout_ms``). The
    first error of an id is raised."""
    ids = list(dict.fromkeys(transactional_ids))
    txn_timeout = int(client.timeouts.request_ms)

    async def one(txid: str) -> FencedProducer:
        resp = await coordinator_call(
            client,
            txid,
            1,
            fence_request(txid, txn_timeout),
            lambda r: int(r.error_code),
            timeout_ms=timeout_ms,
            what=f"InitProducerId (fence) of {txid!r}",
        )
        return parse_fence(resp, txid)

    return {f.transactional_id: f for f in await asyncio.gather(*(one(t) for t in ids))}
