"""The producer's transaction calls: ``begin_transaction()``, ``commit_transaction()``,
``abort_transaction()``, ``send_offsets_to_transaction()`` and ``async with
producer.transaction():`` (:class:`TransactionContext`).

:class:`Transactions` is a part of :class:`~aiokafka_lite.producer.producer.AIOKafkaProducer`,
which delegates those calls to it. It drives the producer's
:class:`~aiokafka_lite.producer.transaction.TransactionManager` (the coordinator requests and
the transaction state), waits for the transaction's records through the accumulator, and
owns the task of the commit or abort last started.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import Any, Protocol

from aiokafka_lite import errors as Errors
from aiokafka_lite.producer.accumulator import Accumulator
from aiokafka_lite.producer.sender import Sender
from aiokafka_lite.producer.transaction import TransactionManager, TxnState
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

__all__ = ["TransactionCalls", "TransactionContext", "Transactions"]


class Transactions:
    """The transaction calls of one producer."""

    def __init__(
        self,
        txn: TransactionManager | None,
        acc: Accumulator,
        sender: Sender,
        *,
        delivery_timeout_ms: int,
    ) -> None:
        self._txn = txn
        self._acc = acc
        self._sender = sender
        self._delivery_timeout_ms = delivery_timeout_ms
        #: the commit or abort task last started (see _ending)
        self._txn_ending: asyncio.Future[None] | None = None

    def _transactional(self) -> TransactionManager:
        txn = self._txn
        if txn is None or not txn.transactional:
            raise Errors.IllegalOperation(
                "You need to configure transaction_id to use transactions"
            )
        txn.raise_if_fatal()
        return txn

    async def begin_transaction(self) -> None:
        """:meth:`AIOKafkaProducer.begin_transaction`."""
        txn = self._transactional()
        await asyncio.shield(txn.init_producer_id())
        txn.begin()

    async def commit_transaction(self) -> None:
        """:meth:`AIOKafkaProducer.commit_transaction`."""
        txn = self._transactional()
        if txn.state is TxnState.ABORTABLE_ERROR:
            assert txn.error is not None
            raise txn.error
        if txn.state is not TxnState.IN_TRANSACTION:
            raise Errors.IllegalOperation(f"cannot commit in state {txn.state.value}")
        txn.committing()
        self._sender.wakeup()
        await self._ending(self._commit(txn))

    async def _commit(self, txn: TransactionManager) -> None:
        try:
            await self._acc.flush(self._delivery_timeout_ms / 1000)
        except Exception as exc:
            txn.set_error(exc)
            raise
        if txn.state is not TxnState.COMMITTING:  # a batch failed meanwhile
            txn.raise_if_fatal()
            txn.abortable()
            raise txn.error or Errors.KafkaError("transaction failed; abort it")
        await txn.end(commit=True)

    async def abort_transaction(self) -> None:
        """:meth:`AIOKafkaProducer.abort_transaction`."""
        txn = self._transactional()
        if txn.state not in (
            TxnState.IN_TRANSACTION,
            TxnState.ABORTABLE_ERROR,
            TxnState.COMMITTING,
        ):
            raise Errors.IllegalOperation(f"cannot abort in state {txn.state.value}")
        txn.aborting()
        self._acc.abort_undrained(
            Errors.KafkaError("transaction aborted before the record was sent")
        )
        await self._ending(self._abort(txn))

    async def _abort(self, txn: TransactionManager) -> None:
        # wait for what is already in flight
        await self._acc.flush(self._delivery_timeout_ms / 1000)
        await txn.end(commit=False)
        if txn.bump_pending:  # a failed batch left a sequence gap: continue on a new epoch
            await txn.bump_epoch()

    async def _ending(self, work: Coroutine[Any, Any, None]) -> None:
        """Run a commit's or abort's ``work`` in a task of its own and wait for it: a
        cancelled caller gets CancelledError while the work goes on; its outcome is then in
        the transaction state (``shield`` marks the task's exception retrieved)."""
        task = self._txn_ending = asyncio.ensure_future(work)
        await asyncio.shield(task)

    async def wait_ending(self, timeout: float) -> None:
        """At ``stop()``: give a commit or abort whose caller stopped waiting up to
        ``timeout`` seconds to finish, then cancel it (the transaction stays open on the
        broker, which aborts it after ``transaction_timeout_ms``)."""
        task = self._txn_ending
        if task is not None and not task.done():
            await asyncio.wait([task], timeout=timeout)
            task.cancel()

    async def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int], group_id: str
    ) -> None:
        """Commit consumer offsets as part of the current transaction."""
        txn = self._transactional()
        if txn.state is not TxnState.IN_TRANSACTION:
            raise Errors.IllegalOperation("Not in the middle of a transaction")
        if not group_id or not isinstance(group_id, str):
            raise ValueError(group_id)
        await txn.add_offsets(offsets, group_id)


class TransactionCalls(Protocol):
    """What :class:`TransactionContext` drives: the producer's transaction calls."""

    async def begin_transaction(self) -> None: ...

    async def commit_transaction(self) -> None: ...

    async def abort_transaction(self) -> None: ...

    @property
    def _txn_manager(self) -> TransactionManager | None: ...


class TransactionContext:
    """Async context manager returned by :meth:`AIOKafkaProducer.transaction`."""

    def __init__(self, producer: TransactionCalls) -> None:
        self._producer = producer

    async def __aenter__(self) -> TransactionContext:
        await self._producer.begin_transaction()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            await self._producer.commit_transaction()
            return
        txn = self._producer._txn_manager
        if txn is not None and txn.state is TxnState.FATAL_ERROR:
            return
        await self._producer.abort_transaction()
