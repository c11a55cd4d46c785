"""The sans-I/O halves of ops/transactions.py: ListTransactions, DescribeTransactions,
DescribeProducers and WriteTxnMarkers answers parsed into results and per-item errors (the
broker paths run in test_txn_cluster and test_txn_admin)."""

from __future__ import annotations

from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite.ops import ItemError
from aiokafka_lite.ops.transactions import (
    AbortTransactionSpec,
    ListedTransaction,
    ProducerState,
    TransactionDescription,
    _coordinator_error,
    abort_marker_request,
    list_transactions_request,
    list_transactions_version,
    parse_describe_producers,
    parse_describe_transactions,
    parse_list_transactions,
    parse_write_txn_markers,
)
from aiokafka_lite.protocol import messages as m
from aiokafka_lite.structs import TopicPartition

Resp = m.DescribeTransactionsResponse


def test_list_transactions_request_filters() -> None:
    req = list_transactions_request(["Ongoing"], [7])
    assert req.state_filters == ["Ongoing"] and req.producer_id_filters == [7]


def test_parse_list_transactions() -> None:
    state = m.ListTransactionsResponse.TransactionState(
        transactional_id="t", producer_id=5, transaction_state="Ongoing"
    )
    resp = m.ListTransactionsResponse(error_code=0, transaction_states=[state])
    assert parse_list_transactions(resp, 2) == [ListedTransaction("t", 5, "Ongoing", 2)]
    failed = parse_list_transactions(m.ListTransactionsResponse(error_code=14), 2)
    assert isinstance(failed, ItemError)
    assert isinstance(failed.exception("x"), Errors.CoordinatorLoadInProgressError)


def test_parse_describe_transactions() -> None:
    topic = Resp.TransactionState.TopicData(topic="a", partitions=[0, 2])
    ok = Resp.TransactionState(
        error_code=0,
        transactional_id="t",
        transaction_state="Ongoing",
        transaction_timeout_ms=60000,
        transaction_start_time_ms=123,
        producer_id=5,
        producer_epoch=3,
        topics=[topic],
    )
    missing = Resp.TransactionState(error_code=105, transactional_id="u")
    parsed = parse_describe_transactions(Resp(transaction_states=[ok, missing]))
    assert parsed["t"] == TransactionDescription(
        "t",
        "Ongoing",
        5,
        3,
        60000,
        123,
        frozenset({TopicPartition("a", 0), TopicPartition("a", 2)}),
    )
    assert isinstance(parsed["u"], ItemError)
    # a per-id TRANSACTIONAL_ID_NOT_FOUND is a result, a moved coordinator is asked again
    assert _coordinator_error(Resp(transaction_states=[missing])) == 0
    moved = Resp.TransactionState(error_code=16, transactional_id="t")
    assert _coordinator_error(Resp(transaction_states=[moved])) == 16


def test_list_transactions_version_per_filter() -> None:
    """The lowest version that carries each filter: duration v1 (KIP-994), pattern v2
    (KIP-1152); list_transactions refuses a filter the brokers cannot apply."""
    assert list_transactions_version(-1, None) == 0
    assert list_transactions_version(0, None) == 1
    assert list_transactions_version(-1, "^a") == 2
    req = list_transactions_request((), (), 5000, "^a")
    assert (req.duration_filter, req.transactional_id_pattern) == (5000, "^a")


def test_parse_describe_producers_absent_values() -> None:
    """-1 coordinator epoch / transaction start offset (none) become None, as Java's empty
    Optionals; a partition's error stays the partition's result."""
    P = m.DescribeProducersResponse.TopicResponse.PartitionResponse
    state = P.ProducerState(
        producer_id=9,
        producer_epoch=1,
        last_sequence=4,
        last_timestamp=77,
        coordinator_epoch=-1,
        current_txn_start_offset=12,
    )
    resp = m.DescribeProducersResponse(
        topics=[
            m.DescribeProducersResponse.TopicResponse(
                name="t",
                partitions=[
                    P(partition_index=0, error_code=0, active_producers=[state]),
                    P(partition_index=1, error_code=6, error_message="moved", active_producers=[]),
                ],
            )
        ]
    )
    got = parse_describe_producers(resp)
    assert got[TopicPartition("t", 0)] == [ProducerState(9, 1, 4, 77, None, 12)]
    err = got[TopicPartition("t", 1)]
    assert isinstance(err, ItemError)
    assert isinstance(err.exception("x"), Errors.NotLeaderForPartitionError)


def test_abort_marker_round_trip() -> None:
    """The abort marker names one partition, ABORT (false); the answer's entries of other
    producers are not this abort's."""
    spec = AbortTransactionSpec(TopicPartition("t", 3), 9, 2, 5)
    req = abort_marker_request(spec)
    (marker,) = req.markers
    assert (marker.producer_id, marker.producer_epoch, marker.coordinator_epoch) == (9, 2, 5)
    assert marker.transaction_result is False
    assert [(t.name, t.partition_indexes) for t in marker.topics] == [("t", [3])]
    R = m.WriteTxnMarkersResponse.WritableTxnMarkerResult

    def result(pid: int, code: int) -> Any:
        part = R.WritableTxnMarkerTopicResult.WritableTxnMarkerPartitionResult(
            partition_index=3, error_code=code
        )
        return R(
            producer_id=pid, topics=[R.WritableTxnMarkerTopicResult(name="t", partitions=[part])]
        )

    resp = m.WriteTxnMarkersResponse(markers=[result(8, 47), result(9, 0)])
    assert parse_write_txn_markers(resp, 9) == {TopicPartition("t", 3): None}
    assert parse_write_txn_markers(resp, 8) == {TopicPartition("t", 3): ItemError(47)}
