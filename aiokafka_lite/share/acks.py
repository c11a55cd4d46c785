"""Acknowledgement types, the share consumer's record class and the acknowledgement book.

A record a share consumer hands out is *acquired* by this member (locked for
``share.record.lock.duration.ms``) until it is acknowledged. :class:`AckBook` keeps, per
partition, the records handed out and not yet acknowledged and the acknowledgements not yet
sent, and turns the latter into the wire's offset ranges (:class:`~aiokafka_lite.ops.share.AckBatch`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite.ops.share import AckBatch
from aiokafka_lite.structs import ConsumerRecord, TopicPartition

__all__ = [
    "AckBook",
    "AcknowledgeType",
    "ShareAcknowledgementError",
    "ShareConsumerRecord",
]


class AcknowledgeType(enum.IntEnum):
    """How a record of a share group was processed (the wire's acknowledge types).

    ACCEPT: done, never delivered again. RELEASE: give it back, it is delivered again (to any
    member) with ``delivery_count`` + 1. REJECT: unprocessable, never delivered again.
    RENEW: still working on it, extend its acquisition lock (brokers with ShareAcknowledge
    v2+); as in Java 4.4, it counts as acknowledged for the next poll and, once renewed, a
    later poll hands the record out again (same ``delivery_count``) to be acknowledged with
    one of the others."""

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


#: acquired offsets with no record (compacted away, transaction markers)
GAP = 0


class ShareConsumerRecord(ConsumerRecord[Any, Any]):
    """A :class:`~aiokafka_lite.structs.ConsumerRecord` of a share group, with its
    ``delivery_count``: 1 the first time it is delivered, +1 each time it comes back (released,
    or its lock expired)."""

    __slots__ = ("delivery_count",)

    delivery_count: int


class ShareAcknowledgementError(Errors.KafkaError):
    """Acknowledgements the broker refused or that could not be delivered (the warning a
    share consumer without ``acknowledgement_callback`` logs; never raised by a poll).

    ``results`` maps each partition to the error of its acknowledgements (None: accepted) and
    ``offsets`` to the offsets concerned, so no failed acknowledgement goes unreported."""

    def __init__(
        self,
        results: Mapping[TopicPartition, BaseException | None],
        offsets: Mapping[TopicPartition, list[int]],
    ) -> None:
        failed = {tp: exc for tp, exc in results.items() if exc is not None}
        super().__init__(
            "acknowledgements failed: "
            + ", ".join(f"{tp.topic}-{tp.partition}: {exc!r}" for tp, exc in failed.items())
        )
        self.results = dict(results)
        self.offsets = dict(offsets)


def to_batches(acks: Mapping[int, int]) -> list[AckBatch]:
    """``{offset: type}`` as ranges of consecutive offsets (one type per range when all agree)."""
    out: list[AckBatch] = []
    run: list[tuple[int, int]] = []
    for off in sorted(acks):
        if run and off != run[-1][0] + 1:
            out.append(_batch(run))
            run = []
        run.append((off, acks[off]))
    if run:
        out.append(_batch(run))
    return out


def _batch(run: list[tuple[int, int]]) -> AckBatch:
    types = {t for _, t in run}
    return AckBatch(
        run[0][0], run[-1][0], (run[0][1],) if len(types) == 1 else tuple(t for _, t in run)
    )


class AckBook:
    """Per partition: offsets handed out and unacknowledged, and acknowledgements to send."""

    def __init__(self) -> None:
        #: records handed out by the consumer, not yet acknowledged (offset -> delivery count)
        self.delivered: dict[TopicPartition, dict[int, int]] = {}
        #: acknowledgements waiting to be sent (offset -> type)
        self.pending: dict[TopicPartition, dict[int, int]] = {}
        #: records acknowledged RENEW, until the renewal is answered: then a later poll hands
        #: them out again (as Java 4.4's share consumer), to be acknowledged once more
        self.renewing: dict[tuple[TopicPartition, int], ShareConsumerRecord] = {}
        #: records the deserializer failed on since the latest poll: released unless
        #: acknowledged otherwise by offset (acknowledge_failed) before the next poll
        self.failed: set[tuple[TopicPartition, int]] = set()

    def handed_out(self, records: Iterable[ShareConsumerRecord]) -> None:
        """Remember ``records`` as delivered to the application."""
        delivered = self.delivered
        for r in records:
            delivered.setdefault(TopicPartition(r.topic, r.partition), {})[r.offset] = (
                r.delivery_count
            )

    def gap(self, tp: TopicPartition, offsets: Iterable[int]) -> None:
        """Acquired offsets without a record: acknowledged as gaps."""
        pend = self.pending.setdefault(tp, {})
        for off in offsets:
            pend[off] = GAP

    def acknowledge(
        self,
        tp: TopicPartition,
        offset: int,
        kind: AcknowledgeType,
        record: ShareConsumerRecord | None = None,
    ) -> None:
        """Record ``kind`` for a delivered record (IllegalStateError if it was not delivered
        by the latest poll, or is already acknowledged). RENEW keeps ``record`` until the
        renewal is answered (:meth:`renewal_answered`)."""
        delivered = self.delivered.get(tp)
        if delivered is None or offset not in delivered:
            raise Errors.IllegalStateError(
                f"{tp.topic}-{tp.partition} offset {offset} is not a record of the latest "
                "poll awaiting acknowledgement"
            )
        if kind is AcknowledgeType.RENEW:
            if record is None:
                raise Errors.IllegalArgumentError("RENEW needs the record")
            self.renewing[(tp, offset)] = record
        self.pending.setdefault(tp, {})[offset] = int(kind)
        del delivered[offset]
        if not delivered:
            del self.delivered[tp]

    def renewal_answered(
        self, tp: TopicPartition, offsets: Iterable[int], ok: bool
    ) -> list[ShareConsumerRecord]:
        """The records of ``offsets`` whose RENEW was answered: returned to be handed out
        again when ``ok``; forgotten when the renewal failed (their locks run out and the
        broker delivers them again)."""
        out = []
        for off in offsets:
            rec = self.renewing.pop((tp, off), None)
            if rec is not None and ok:
                out.append(rec)
        return out

    def fail(self, tp: TopicPartition, offset: int) -> None:
        """A record that could not be deserialized: released by default, until
        :meth:`acknowledge_failed` says otherwise."""
        self.pending.setdefault(tp, {})[offset] = int(AcknowledgeType.RELEASE)
        self.failed.add((tp, offset))

    def acknowledge_failed(self, tp: TopicPartition, offset: int, kind: AcknowledgeType) -> None:
        """Acknowledge a record the deserializer failed on since the latest poll, by offset
        (IllegalStateError for any other offset, as Java's ``acknowledge(topic, partition,
        offset, type)``)."""
        pend = self.pending.get(tp)
        if (tp, offset) not in self.failed or pend is None or offset not in pend:
            raise Errors.IllegalStateError(
                f"{tp.topic}-{tp.partition} offset {offset} cannot be acknowledged by offset: "
                "only a record whose deserialization failed since the latest poll can"
            )
        if kind is AcknowledgeType.RENEW:
            raise Errors.IllegalArgumentError(
                "a record that failed deserialization cannot be renewed"
            )
        pend[offset] = int(kind)

    def acknowledge_all(self, kind: AcknowledgeType) -> None:
        """Acknowledge every delivered record with ``kind`` (implicit mode, stop()); at stop()
        also the renewed records not handed out again."""
        for tp, offsets in self.delivered.items():
            pend = self.pending.setdefault(tp, {})
            for off in offsets:
                pend[off] = int(kind)
        self.delivered.clear()
        if kind is not AcknowledgeType.ACCEPT:
            for tp, off in self.renewing:
                self.pending.setdefault(tp, {})[off] = int(kind)
            self.renewing.clear()

    def drop_delivered(self) -> None:
        """Forget the delivered records not acknowledged, and the renewed ones not handed out
        again (stop(): the session's close gives them back to the group)."""
        self.delivered.clear()
        self.renewing.clear()

    def unacknowledged(self) -> int:
        """How many delivered records wait for an acknowledgement."""
        return sum(len(o) for o in self.delivered.values())

    def take(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, dict[int, int]]:
        """Remove and return the pending acknowledgements (of ``partitions`` if given)."""
        if partitions is None:
            out, self.pending = self.pending, {}
            return {tp: a for tp, a in out.items() if a}
        out = {}
        for tp in partitions:
            acks = self.pending.pop(tp, None)
            if acks:
                out[tp] = acks
        return out
