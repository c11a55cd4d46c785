"""ListTransactions and DescribeTransactions (KIP-664): what the transaction coordinators know
about transactional ids, e.g. to find a hanging transaction (one left ``Ongoing`` or
``PrepareCommit`` by a producer that went away).

Sans-I/O builders and parsers plus the coroutines that run them: ListTransactions to every
broker (each lists the transactional ids it coordinates), DescribeTransactions to the
coordinator of each id.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiokafka_lite.protocol import messages as m
from aiokafka_lite.structs import TopicPartition

from ._exec import ItemError, coordinator_call, to_node

if TYPE_CHECKING:
    from aiokafka_lite.client import KafkaClient

__all__ = [
    "ListedTransaction",
    "TransactionDescription",
    "describe_transactions",
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


def list_transactions_request(states: Iterable[str] = (), producer_ids: Iterable[int] = ()) -> Any:
    """ListTransactions, optionally only ids in ``states`` / of ``producer_ids``."""
    return m.ListTransactionsRequest(
        state_filters=list(states), producer_id_filters=list(producer_ids)
    )


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
    timeout_ms: float | None = None,
) -> list[ListedTransaction]:
    """ListTransactions of every broker, sorted by transactional id; a broker's error (e.g.
    COORDINATOR_LOAD_IN_PROGRESS) is raised."""
    if not client.cluster.brokers():
        await client.force_metadata_update()
    nodes = sorted(int(b.nodeId) for b in client.cluster.brokers())
    request = list_transactions_request(sorted(states), sorted(producer_ids))
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
