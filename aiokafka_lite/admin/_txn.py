"""Transaction administration methods of :class:`~aiokafka_lite.admin.AIOKafkaAdminClient`
(beyond aiokafka; Java's ``Admin.listTransactions``, ``describeTransactions``,
``describeProducers``, ``abortTransaction`` and ``fenceProducers``), built and parsed in
:mod:`aiokafka_lite.ops.transactions`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..ops import ItemError
from ..ops import transactions as txn_ops
from ..structs import TopicPartition

if TYPE_CHECKING:
    from ..client import KafkaClient

__all__ = ["TransactionAdmin"]


class TransactionAdmin:
    """The admin client's transaction methods (mixed into AIOKafkaAdminClient)."""

    _client: KafkaClient

    async def list_transactions(
        self,
        *,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_filter_ms: int = -1,
        transactional_id_pattern: str | None = None,
    ) -> list[txn_ops.ListedTransaction]:
        """Every transactional id the cluster's coordinators know, sorted by id; only those
        in ``states`` (``"Ongoing"``, ``"PrepareCommit"``, ``"CompleteAbort"`` ...), of
        ``producer_ids``, whose transaction has been open longer than ``duration_filter_ms``
        (KIP-994, Kafka 3.8+) or whose id matches the regular expression
        ``transactional_id_pattern`` (KIP-1152, Kafka 4.1+) when given; a filter the brokers
        cannot apply raises UnsupportedVersionError. Java's ``Admin.listTransactions``."""
        return await txn_ops.list_transactions(
            self._client,
            states=states,
            producer_ids=producer_ids,
            duration_filter_ms=duration_filter_ms,
            transactional_id_pattern=transactional_id_pattern,
        )

    async def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> dict[str, txn_ops.TransactionDescription]:
        """``{transactional_id: TransactionDescription}`` (state, producer id and epoch,
        timeout, start time, partitions of the open transaction) from each id's coordinator.
        An id's error (TransactionalIdNotFound ...) is raised. Java's
        ``Admin.describeTransactions``."""
        found = await txn_ops.describe_transactions(self._client, transactional_ids)
        out: dict[str, txn_ops.TransactionDescription] = {}
        for txid, d in found.items():
            if isinstance(d, ItemError):
                raise d.exception(f"DescribeTransactions of {txid!r}")
            out[txid] = d
        return out

    async def describe_producers(
        self, partitions: Iterable[TopicPartition], *, broker_id: int | None = None
    ) -> dict[TopicPartition, list[txn_ops.ProducerState]]:
        """``{partition: [ProducerState]}``: the idempotent and transactional producers with
        state at each partition's leader (or at ``broker_id``), with the first offset of the
        transaction each has open there. A partition's error is raised. Java's
        ``Admin.describeProducers``."""
        found = await txn_ops.describe_producers(self._client, partitions, broker_id=broker_id)
        out: dict[TopicPartition, list[txn_ops.ProducerState]] = {}
        for tp, states in found.items():
            if isinstance(states, ItemError):
                raise states.exception(f"DescribeProducers of {tp}")
            out[tp] = states
        return out

    async def abort_transaction(self, spec: txn_ops.AbortTransactionSpec) -> None:
        """Abort a producer's open transaction in one partition: an ABORT marker written by the
        partition's leader (WriteTxnMarkers; needs ClusterAction on the cluster). The way out
        of a hanging transaction whose coordinator no longer knows it; take producer id, epoch
        and coordinator epoch from :meth:`describe_producers`. Its error
        (InvalidProducerEpoch, TransactionCoordinatorFenced ...) is raised. Java's
        ``Admin.abortTransaction``."""
        err = await txn_ops.abort_transaction(self._client, spec)
        if err is not None:
            raise err.exception(f"WriteTxnMarkers (abort) at {spec.topic_partition}")

    async def fence_producers(
        self, transactional_ids: Iterable[str]
    ) -> dict[str, txn_ops.FencedProducer]:
        """Fence the producers holding ``transactional_ids``: each id's coordinator bumps its
        epoch (aborting the open transaction), so the old producer fails with ProducerFenced
        on its next request. ``{transactional_id: FencedProducer}`` (producer id, new epoch);
        the first error is raised. Java's ``Admin.fenceProducers``."""
        return await txn_ops.fence_producers(self._client, transactional_ids)
