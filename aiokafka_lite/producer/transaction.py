"""Producer id, epoch, sequence numbers and the transaction state machine.

One :class:`TransactionManager` serves both idempotent producers (no transactional id: it only
holds the producer id/epoch and per-partition sequences) and transactional ones (coordinator
requests: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn).

Coordinator requests run through the executor's
:func:`~aiokafka_lite.ops._exec.coordinator_call` (the client's coordinator cache, the one retry
classifier): retriable errors (coordinator moved or loading, concurrent transactions, lost
connections) are retried until ``max_block_ms``. The other errors are sorted by KIP-1050's
classes (:func:`~aiokafka_lite.errors.txn_error_class`, as the Java client 4.4): abortable ones
make the transaction ABORTABLE_ERROR, application-recoverable (``ProducerFenced``...) and
producer-fatal ones (``InvalidTxnState``...) FATAL_ERROR, and every later operation raises
them.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite.ops._exec import coordinator_call
from aiokafka_lite.protocol import messages as m
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

_NO_TOPIC_ID = uuid.UUID(int=0)

__all__ = ["TXN_TRANSITIONS", "Bump", "TransactionManager", "TxnState"]

log = logging.getLogger(__name__)

#: the KIP-1050 classes after which the producer cannot go on (Errors.txn_error_class)
_FATAL_CLASSES = frozenset(
    {Errors.TxnErrorClass.APPLICATION_RECOVERABLE, Errors.TxnErrorClass.PRODUCER_FATAL}
)


def _fatal(exc: BaseException) -> bool:
    """True for errors that end the producer (application-recoverable, producer-fatal), as
    the Java client 4.4 sorts them; the rest make a transaction abortable."""
    return Errors.txn_error_class(exc) in _FATAL_CLASSES


_MAX_EPOCH = 32767


class TxnState(enum.Enum):
    """The transaction state (``aiokafka.producer.transaction_manager.TransactionState`` under
    ``install_as_aiokafka()``, whose names for the two ending states are aliases here)."""

    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in_transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable_error"
    FATAL_ERROR = "fatal_error"
    COMMITTING_TRANSACTION = "committing"  # aiokafka's names: the same members
    ABORTING_TRANSACTION = "aborting"


#: the one table of transaction state changes (:meth:`TransactionManager._to` refuses the
#: rest). Every state may become FATAL_ERROR (never left); a non-fatal error in any live state
#: makes the transaction ABORTABLE_ERROR (also before the first one: InitProducerId failed).
TXN_TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.UNINITIALIZED: frozenset({TxnState.READY, TxnState.ABORTABLE_ERROR}),
    TxnState.READY: frozenset({TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR}),
    TxnState.IN_TRANSACTION: frozenset(
        {TxnState.COMMITTING, TxnState.ABORTING, TxnState.ABORTABLE_ERROR}
    ),
    TxnState.COMMITTING: frozenset({TxnState.READY, TxnState.ABORTING, TxnState.ABORTABLE_ERROR}),
    TxnState.ABORTING: frozenset({TxnState.READY, TxnState.ABORTABLE_ERROR}),
    # READY: InitProducerId after an error outside a transaction (idempotent bump, first id)
    TxnState.ABORTABLE_ERROR: frozenset(
        {TxnState.ABORTING, TxnState.READY, TxnState.ABORTABLE_ERROR}
    ),
    TxnState.FATAL_ERROR: frozenset(),
}


class Bump(enum.IntEnum):
    """What the producer identity needs before more batches get sequence numbers (KIP-360):
    the ONE record of a pending epoch bump, kept by the :class:`TransactionManager`."""

    NONE = 0
    #: a batch holding sequence numbers failed, or the broker lost the producer's sequences:
    #: next epoch, sequences from 0 (an idempotent producer at once, once nothing sent is
    #: unresolved; a transactional one after its abort)
    EPOCH = 1
    #: the broker refused a locally bumped epoch (Tansu): a new producer id instead
    NEW_ID = 2


class TransactionManager:
    """Producer identity plus, with a transactional id, the transaction protocol."""

    def __init__(
        self,
        client: Any,
        *,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        retry_backoff_ms: int,
        max_block_ms: int,
    ) -> None:
        self.client = client
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.max_block_ms = max_block_ms
        self.producer_id = -1
        self.producer_epoch = -1
        self.sequences: dict[TopicPartition, int] = {}
        #: partitions where a batch of this producer id was acknowledged, so the broker keeps
        #: its sequence state there. Until then one batch at a time goes to a partition: a
        #: broker with no state for the id accepts any first sequence, so a batch pipelined
        #: behind a refused first one (NOT_LEADER on a new topic) would land before it.
        self.confirmed: set[TopicPartition] = set()
        self.state = TxnState.UNINITIALIZED
        self.error: BaseException | None = None
        self.partitions: set[TopicPartition] = set()  # in the current transaction
        self.offsets_added = False
        self.bump = Bump.NONE  # a pending epoch bump (need_bump, bump_epoch)
        #: transactions V2 (KIP-890): chosen between transactions (:meth:`_choose_protocol`)
        self.tv2 = False
        self._init_lock = asyncio.Lock()

    # ---- identity and sequences ----------------------------------------------------------

    @property
    def transactional(self) -> bool:
        return self.transactional_id is not None

    @property
    def has_pid(self) -> bool:
        return self.producer_id >= 0

    def next_sequence(self, tp: TopicPartition, count: int) -> int:
        """Reserve ``count`` sequence numbers for a batch of ``tp``; return the first."""
        seq = self.sequences.get(tp, 0)
        self.sequences[tp] = (seq + count) & 0x7FFFFFFF
        return seq

    def need_bump(self, *, new_id: bool = False) -> None:
        """Record that the epoch must change before more sequence numbers are handed out
        (``new_id``: under a new producer id)."""
        self.bump = max(self.bump, Bump.NEW_ID if new_id else Bump.EPOCH)

    @property
    def bump_pending(self) -> bool:
        """True while an epoch bump is recorded and not yet done."""
        return self.bump is not Bump.NONE

    def _to(self, state: TxnState) -> None:
        """The one place the transaction state changes: refuses what ``TXN_TRANSITIONS``
        does not list (FATAL_ERROR is reachable from every state but itself)."""
        old = self.state
        if state is TxnState.FATAL_ERROR and old is not TxnState.FATAL_ERROR:
            self.state = state
            return
        if state not in TXN_TRANSITIONS[old]:
            raise Errors.IllegalStateError(
                f"transaction state {old.value} cannot become {state.value}"
            )
        self.state = state

    def committing(self) -> None:
        """``commit_transaction()`` began: IN_TRANSACTION -> COMMITTING."""
        self._to(TxnState.COMMITTING)

    def aborting(self) -> None:
        """``abort_transaction()`` began."""
        self._to(TxnState.ABORTING)

    def abortable(self) -> None:
        """The commit found a batch failed meanwhile (its error already recorded)."""
        self._to(TxnState.ABORTABLE_ERROR)

    def is_in_transaction(self) -> bool:
        return self.state is TxnState.IN_TRANSACTION

    def _choose_protocol(self) -> None:
        """Transactions V2 when the cluster finalized ``transaction.version`` >= 2 and the
        broker speaks EndTxn v5 (as the Java client decides, at InitProducerId and at each
        begin, never inside a transaction): partitions and groups then join implicitly
        (Produce v12, TxnOffsetCommit v5) and every EndTxn bumps the epoch."""
        client = self.client
        self.tv2 = (
            self.transactional
            and client.feature_level("transaction.version") >= 2
            and client.supports(m.EndTxnRequest.TXN_V2, 5)
        )

    def raise_if_fatal(self) -> None:
        if self.state is TxnState.FATAL_ERROR and self.error is not None:
            raise self.error

    def set_error(self, exc: BaseException) -> None:
        """Record an error from a produce/txn response: fatal or abortable (KIP-1050's class,
        :func:`~aiokafka_lite.errors.txn_error_class`)."""
        if _fatal(exc):
            if self.state is not TxnState.FATAL_ERROR:
                self._to(TxnState.FATAL_ERROR)
            self.error = exc
        elif self.transactional and self.state is not TxnState.FATAL_ERROR:
            self._to(TxnState.ABORTABLE_ERROR)
            self.error = exc

    async def init_producer_id(self, bump: bool = False) -> None:
        """InitProducerId (v3+). ``bump`` asks for the next epoch of the current id (KIP-360)."""
        async with self._init_lock:
            if self.has_pid and not bump:
                return
            self._choose_protocol()
            if not self.client.supports(m.InitProducerIdRequest, 3):
                raise Errors.IncompatibleBrokerVersion(
                    "idempotent/transactional producing needs InitProducerId v3 or newer, "
                    "which this broker does not support"
                )
            req = m.InitProducerIdRequest(
                transactional_id=self.transactional_id,
                transaction_timeout_ms=self.transaction_timeout_ms,
                producer_id=self.producer_id if bump else -1,
                producer_epoch=self.producer_epoch if bump else -1,
            )
            resp = await self._coordinator_request(req, lambda r: r.error_code)
            if resp.producer_id != self.producer_id:
                self.confirmed.clear()
            self.producer_id = resp.producer_id
            self.producer_epoch = resp.producer_epoch
            self.sequences.clear()
            if self.state in (TxnState.UNINITIALIZED, TxnState.ABORTABLE_ERROR, TxnState.ABORTING):
                self._to(TxnState.READY)
            log.debug("producer id %d epoch %d", self.producer_id, self.producer_epoch)

    async def bump_epoch(self) -> None:
        """Next epoch, sequences from 0 (KIP-360): after a batch with a sequence number failed.

        An idempotent producer bumps its epoch itself, as the Java client does (the broker would
        answer InitProducerId without a transactional id with a NEW producer id): the broker
        then fences requests of the old epoch still on their way (e.g. queued behind a request
        that timed out on a connection the client closed), where under a new producer id they
        would be appended after newer records. At the last epoch a new producer id is fetched.
        A transactional producer asks its coordinator for the bump. Brokers that refuse the
        bump (Tansu answers -1) get a plain InitProducerId instead.
        """
        new_id = self.bump is Bump.NEW_ID
        self.bump = Bump.NONE
        if (
            not self.transactional
            and not new_id
            and self.has_pid
            and self.producer_epoch < _MAX_EPOCH
        ):
            self.producer_epoch += 1
            self.sequences.clear()
            log.debug("producer id %d bumped to epoch %d", self.producer_id, self.producer_epoch)
            return
        if not self.transactional:
            self.producer_id = self.producer_epoch = -1
        try:
            await self.init_producer_id(bump=True)
        except Errors.KafkaError as exc:
            if _fatal(exc) or getattr(exc, "retriable", False):
                raise
            log.info("epoch bump refused (%r): requesting a new producer id", exc)
            self.producer_id = self.producer_epoch = -1
            await self.init_producer_id()

    # ---- transactions --------------------------------------------------------------------

    def begin(self) -> None:
        self.raise_if_fatal()
        if self.state is not TxnState.READY:
            raise Errors.IllegalOperation(f"cannot begin a transaction in state {self.state.value}")
        self._choose_protocol()
        self._to(TxnState.IN_TRANSACTION)
        self.partitions.clear()
        self.offsets_added = False
        self.error = None

    async def add_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """AddPartitionsToTxn for partitions about to receive their first batch (with
        transactions V2 no request: their first Produce v12 adds them)."""
        new = sorted(set(tps) - self.partitions)
        if not new:
            return
        if self.tv2:
            self.partitions.update(new)
            return
        by_topic: dict[str, list[int]] = {}
        for tp in new:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topics = [
            m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps)
            for t, ps in by_topic.items()
        ]
        req = m.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.producer_epoch,
            v3_and_below_topics=topics,
        )

        def first_error(resp: Any) -> int:
            if resp.error_code:
                return int(resp.error_code)
            results = list(resp.results_by_topic_v3_and_below)
            for tx in resp.results_by_transaction:
                results.extend(tx.topic_results)
            for topic in results:
                for part in topic.results_by_partition:
                    if part.partition_error_code:
                        return int(part.partition_error_code)
            return 0

        await self._coordinator_request(req, first_error)
        self.partitions.update(new)

    async def add_offsets(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int], group_id: str
    ) -> None:
        """AddOffsetsToTxn to the txn coordinator, then TxnOffsetCommit to the group coordinator
        (with transactions V2 only TxnOffsetCommit v5, which adds the group itself)."""
        if not self.tv2:
            req = m.AddOffsetsToTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                group_id=group_id,
            )
            await self._coordinator_request(req, lambda r: r.error_code)
        self.offsets_added = True
        by_topic: dict[str, list[Any]] = {}
        for tp, om in offsets.items():
            off, meta = (om, "") if isinstance(om, int) else (om.offset, om.metadata)
            by_topic.setdefault(tp.topic, []).append(
                m.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=off,
                    committed_leader_epoch=-1,
                    committed_metadata=meta,
                )
            )
        commit_cls = m.TxnOffsetCommitRequest.TXN_V2 if self.tv2 else m.TxnOffsetCommitRequest
        # v6 (KIP-1319) names topics by id, under transactions V2 when the metadata has them all
        topic_id = self.client.cluster.topic_id
        ids = {t: topic_id(t) for t in by_topic}
        if self.tv2 and all(i is not None and i.int for i in ids.values()):
            commit_cls = commit_cls.BY_ID
        else:
            ids = {}
        commit = commit_cls(
            transactional_id=self.transactional_id,
            group_id=group_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                    name=t, topic_id=ids.get(t) or _NO_TOPIC_ID, partitions=ps
                )
                for t, ps in by_topic.items()
            ],
        )

        def commit_error(resp: Any) -> int:
            for topic in resp.topics:
                for part in topic.partitions:
                    if part.error_code:
                        return int(part.error_code)
            return 0

        await self._coordinator_request(commit, commit_error, key=group_id, key_type=0)

    async def end(self, commit: bool) -> None:
        """EndTxn (skipped when nothing was added to the transaction). With transactions V2
        (EndTxn v5) the coordinator bumps the epoch (or, at the last epoch, hands out a new
        producer id): both are taken from its answer and sequences restart from 0, which
        also settles a pending bump (:attr:`bump`)."""
        if self.partitions or self.offsets_added:
            req_cls = m.EndTxnRequest.TXN_V2 if self.tv2 else m.EndTxnRequest
            req = req_cls(
                transactional_id=self.transactional_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                committed=commit,
            )
            resp = await self._coordinator_request(req, lambda r: r.error_code)
            if self.tv2 and resp.producer_id >= 0:
                if resp.producer_id != self.producer_id:
                    self.confirmed.clear()
                self.producer_id = resp.producer_id
                self.producer_epoch = resp.producer_epoch
                self.sequences.clear()
                self.bump = Bump.NONE
                log.debug("EndTxn: producer id %d epoch %d", self.producer_id, self.producer_epoch)
        self.partitions.clear()
        self.offsets_added = False
        self._to(TxnState.READY)
        self.error = None

    # ---- plumbing ------------------------------------------------------------------------

    async def _coordinator_request(
        self, req: Any, error_of: Any, *, key: str | None = None, key_type: int = 1
    ) -> Any:
        """Send to the transaction (or group) coordinator, retrying retriable errors until
        ``max_block_ms``; a fatal or abortable error is recorded (:meth:`set_error`) and raised."""
        if key is None:
            key = self.transactional_id  # None: idempotent only, any broker answers
        name = type(req).__name__

        def failure(code: int) -> BaseException:
            err_cls = Errors.for_code(code)
            if err_cls is Errors.InvalidProducerEpoch:  # fenced by a newer producer (as aiokafka)
                err_cls = Errors.ProducerFenced
            exc = err_cls(f"{name} failed")
            self.set_error(exc)
            return exc

        return await coordinator_call(
            self.client,
            key,
            key_type,
            req,
            error_of,
            timeout_ms=self.max_block_ms,
            backoff_ms=self.retry_backoff_ms,
            what=name,
            failure=failure,
        )
