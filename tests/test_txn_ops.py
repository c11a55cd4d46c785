"""The sans-I/O halves of ops/transactions.py: ListTransactions and DescribeTransactions answers
parsed into results and per-item errors (the broker paths run in test_txn_cluster)."""

from __future__ import annotations

from aiokafka_lite import errors as Errors
from aiokafka_lite.ops import ItemError
from aiokafka_lite.ops.transactions import (
    ListedTransaction,
    TransactionDescription,
    _coordinator_error,
    list_transactions_request,
    parse_describe_transactions,
    parse_list_transactions,
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
