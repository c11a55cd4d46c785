"""The transaction state table and the pending epoch bump, without a broker: every change the
table lists is accepted, every other one is refused, FATAL_ERROR is never left, and a bump asked
for twice is one bump (a new producer id wins over a new epoch)."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from aiokafka_lite import errors as Errors
from aiokafka_lite.producer.transaction import TXN_TRANSITIONS, Bump, TransactionManager, TxnState

STATES = [s for s in TxnState if s.name not in ("COMMITTING_TRANSACTION", "ABORTING_TRANSACTION")]


def manager(state: TxnState, transactional: bool = True) -> TransactionManager:
    # the only client calls reached here: choosing the transaction protocol at begin()
    no_features = SimpleNamespace(feature_level=lambda name: 0, supports=lambda *a: False)
    txn = TransactionManager(
        no_features,
        transactional_id="t" if transactional else None,
        transaction_timeout_ms=60000,
        retry_backoff_ms=100,
        max_block_ms=1000,
    )
    txn.state = state
    return txn


@pytest.mark.parametrize(("old", "new"), list(itertools.product(STATES, STATES)))
def test_only_the_table_changes_the_state(old: TxnState, new: TxnState) -> None:
    txn = manager(old)
    allowed = new in TXN_TRANSITIONS[old] or (
        new is TxnState.FATAL_ERROR and old is not TxnState.FATAL_ERROR
    )
    if allowed:
        txn._to(new)
        assert txn.state is new
    else:
        with pytest.raises(Errors.IllegalStateError):
            txn._to(new)
        assert txn.state is old


def test_errors_move_the_state_through_the_table() -> None:
    txn = manager(TxnState.IN_TRANSACTION)
    txn.set_error(Errors.KafkaTimeoutError("late"))
    assert txn.state is TxnState.ABORTABLE_ERROR
    txn.set_error(Errors.ProducerFenced("fenced"))
    assert txn.state is TxnState.FATAL_ERROR
    txn.set_error(Errors.KafkaTimeoutError("after"))  # fatal stays, with its error
    assert txn.state is TxnState.FATAL_ERROR and isinstance(txn.error, Errors.ProducerFenced)
    with pytest.raises(Errors.ProducerFenced):
        txn.begin()
    # an idempotent producer has no transaction to abort: only fatal errors change it
    idem = manager(TxnState.READY, transactional=False)
    idem.set_error(Errors.KafkaTimeoutError("x"))
    assert idem.state is TxnState.READY


def test_the_facade_transitions_refuse_out_of_order_calls() -> None:
    txn = manager(TxnState.READY)
    with pytest.raises(Errors.IllegalStateError):
        txn.committing()  # not in a transaction
    txn.begin()
    txn.committing()
    txn.aborting()  # an abort may follow a commit that failed
    with pytest.raises(Errors.IllegalStateError):
        txn.committing()


def test_a_pending_bump_is_one_record() -> None:
    txn = manager(TxnState.READY, transactional=False)
    assert txn.bump is Bump.NONE and not txn.bump_pending
    txn.need_bump()
    txn.need_bump()
    assert txn.bump is Bump.EPOCH and txn.bump_pending
    txn.need_bump(new_id=True)
    txn.need_bump()  # a new producer id is not downgraded to a new epoch
    assert txn.bump is Bump.NEW_ID
