"""A sink: the producer's stream to one leader broker.

The sender keeps one :class:`Sink` per leader node and gives each the partition queues that
node leads (moving a queue to another sink when its leader changes). :meth:`Sink.drain` is the
only place a Produce request is built and written: it takes the head batch of each of its
queues that may go now, up to ``max_request_size``, into ONE request, and writes it from the
call that drained it (``send_nowait``: the response completes the batches from the
connection's read callback ``buffer_updated``, no task in between), or, when the connection
has no free slot or acks=0, from one task that awaits the send. The outcome goes back to the partition queues
(complete, retry in sequence order, fail), then the sender drains again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Protocol

from aiokafka_lite import errors as Errors
from aiokafka_lite._timeouts import loop_time
from aiokafka_lite.errors import retry_action
from aiokafka_lite.hooks import emit
from aiokafka_lite.producer.accumulator import PartitionQueue
from aiokafka_lite.producer.batch import ProducerBatch
from aiokafka_lite.protocol import messages as m
from aiokafka_lite.structs import TopicPartition

__all__ = ["Sink", "SinkHost", "batch_size"]

log = logging.getLogger(__name__)

_NO_TOPIC_ID = uuid.UUID(int=0)
_TopicData = m.ProduceRequest.TopicProduceData
_PartData = m.ProduceRequest.TopicProduceData.PartitionProduceData
_DUPLICATE_SEQUENCE = 46
_OUT_OF_ORDER = 45
_UNKNOWN_PRODUCER = 59
_EPOCH_REFUSED = (47, 90)  # INVALID_PRODUCER_EPOCH, PRODUCER_FENCED
#: REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND: the leader appended, replicas lagged
_APPENDED_UNACKED = (7, 20)


class SinkHost(Protocol):
    """What a sink needs from the sender that owns it (the sender is the one implementation;
    the sink never imports it): the settings, the shared accumulator, client and producer
    identity, the closing flags, the registry of requests in flight, and two actions."""

    acc: Any  # the Accumulator: batch state changes (take, complete, retry, fail)
    client: Any
    txn: Any  # the TransactionManager, or None
    acks: int
    broker_timeout_ms: int  # written into each Produce request
    retry_backoff: float  # seconds
    max_in_flight: int
    max_request_size: int
    idempotent: bool
    hook_sent: tuple[Any, ...]  # on_batch_sent hooks
    hook_acked: tuple[Any, ...]  # on_batch_acked hooks

    @property
    def bumping(self) -> bool:
        """An idempotent producer's epoch bump is pending."""

    @property
    def closing(self) -> bool:
        """``close()`` began: drain what is left, then stop."""

    @property
    def force_close(self) -> bool:
        """``close()`` gave up: no more retries, no new connects."""

    def track(self, request: asyncio.Future[None]) -> None:
        """Register a request in flight (a task, or a send_nowait token): ``close()`` waits
        for it, and cancels it when forced."""

    def untrack(self, request: asyncio.Future[None]) -> None:
        """The request ended."""

    def connect(self, node: int) -> None:
        """Connect to ``node`` in the background; wake the sender when done."""

    def drain_now(self) -> None:
        """Seal and drain again (a request ended)."""

    def unexpected_request(self, exc: Exception) -> Errors.KafkaError:
        """A Produce request failed with an unexpected exception (the supervision rule):
        logged once, the sender backs off; the error its batches fail with."""

    def request_ok(self) -> None:
        """A Produce request was answered (an episode of unexpected errors ended)."""


class Sink:
    """The partition queues one leader node leads, and its requests in flight."""

    __slots__ = ("node", "sender", "queues", "in_flight")

    def __init__(self, node: int, sender: SinkHost) -> None:
        self.node = node
        self.sender = sender
        self.queues: dict[Any, PartitionQueue] = {}
        self.in_flight = 0  # Produce requests written and not ended

    def __repr__(self) -> str:
        return f"<Sink node={self.node} queues={len(self.queues)} in_flight={self.in_flight}>"

    # ---- the one drain -------------------------------------------------------------------

    def may_go(self, q: PartitionQueue, batch: ProducerBatch, now: float) -> bool:
        """THE rule for one partition: may ``batch`` (the head of ``q``, or its open batch,
        which the accumulator seals only if so) go into a request now? Not counting the node
        (a free request slot, an open connection: :meth:`node_ready`).

        Its backoff is over; during an epoch bump, only batches that may be in the log already
        (``maybe_written``) go; its partition has no batch in flight (idempotent: fewer than
        ``max_in_flight``, not a retry, and a batch of this producer id was acknowledged there
        before, see ``TransactionManager.confirmed``); in a transaction, its partition was
        added."""
        if batch.retry_at > now:
            return False
        s = self.sender
        if s.bumping and not batch.maybe_written:
            return False  # only retries go out (see Sender._unresolved)
        txn = s.txn
        n = q.in_flight
        if n and (
            txn is None or n >= s.max_in_flight or batch.attempts or q.tp not in txn.confirmed
        ):
            return False  # the end of that request drains it
        return txn is None or not txn.transactional or q.tp in txn.partitions

    def node_ready(self) -> bool:
        """The node has a free request slot and an open connection (else a connect starts in
        the background and wakes the sender: requests waiting on one connect could pass each
        other, and an idempotent producer's sequences would reach the broker out of order)."""
        s = self.sender
        if self.in_flight >= s.max_in_flight:
            return False  # the end of one of the node's requests drains it
        if not s.client.is_connected(self.node):
            s.connect(self.node)  # wakes the loop when done
            return False
        return True

    def drain(self, now: float) -> float | None:
        """Write one Produce request with the head batch of each queue that may go now
        (:meth:`may_go`, :meth:`node_ready`); return the earliest retry time of a head batch
        still backing off (or None)."""
        s = self.sender
        txn = s.txn
        idempotent = s.idempotent
        if idempotent and (txn is None or not txn.has_pid):
            return None
        if self.in_flight >= s.max_in_flight:
            return None  # the end of one of the node's requests drains it
        acc = s.acc
        connected: bool | None = None
        batches: list[ProducerBatch] = []
        size = 0
        next_retry: float | None = None
        for q in self.queues.values():
            dq = q.queued
            if not dq:
                continue
            batch = dq[0]
            if batch.retry_at > now:
                if next_retry is None or batch.retry_at < next_retry:
                    next_retry = batch.retry_at
                continue
            if not self.may_go(q, batch, now):
                continue
            tp = q.tp
            if connected is None:
                connected = self.node_ready()
            if not connected:
                break
            try:
                if idempotent and batch.sequence < 0:
                    assert txn is not None
                    seq = txn.next_sequence(tp, batch.count)
                    acc.stamp(batch, txn.producer_id, txn.producer_epoch, seq)
                bsize = len(batch.build())
            except Exception as exc:  # encoding/compression failed: fail this batch only
                log.exception("cannot encode a batch for %s", tp)
                err = (
                    exc
                    if isinstance(exc, Errors.KafkaError)
                    else Errors.KafkaError(f"cannot encode record batch: {exc!r}")
                )
                acc.fail_head(q, err)
                continue
            if batches and size + bsize > s.max_request_size:
                continue
            batches.append(acc.take(q))
            size += bsize
        if batches:
            self._write(batches, now)
        return next_retry

    def _write(self, batches: list[ProducerBatch], now: float) -> None:
        s = self.sender
        self.in_flight += 1
        h_sent = s.hook_sent
        topics: dict[str, list[Any]] = {}
        for b in batches:
            tp = b.tp
            if h_sent:
                emit(
                    h_sent,
                    tp.topic,
                    tp.partition,
                    b.count,
                    batch_size(b),
                    now - b.created,
                    b.attempts,
                )
            lst = topics.get(tp.topic)
            if lst is None:
                lst = topics[tp.topic] = []
            lst.append(_PartData(index=tp.partition, records=b.buffer))
        txn = s.txn
        # transactions V2: Produce v12, which adds a partition to the transaction itself
        req_cls = m.ProduceRequest.TXN_V2 if txn is not None and txn.tv2 else m.ProduceRequest
        # KIP-516: v13 names topics by id, when the metadata has every id (not under
        # transactions V1, which stop at v11)
        topic_id = s.client.cluster.topic_id
        ids = [topic_id(t) for t in topics]
        if (txn is None or txn.tv2) and all(i is not None and i.int for i in ids):
            req_cls = req_cls.BY_ID
        else:
            ids = [_NO_TOPIC_ID] * len(ids)
        req = req_cls(
            transactional_id=txn.transactional_id if txn is not None else None,
            acks=s.acks,
            timeout_ms=s.broker_timeout_ms,
            topic_data=[
                _TopicData(name=t, topic_id=i, partition_data=p)
                for (t, p), i in zip(topics.items(), ids)
            ],
        )
        if s.acks:
            # written from here; the answer is handled in the callback the connection calls
            # when the response frame arrives. A token future tracked by the sender stands
            # for the request, as a task would: close() waits for it, and cancels it when
            # forced (then the batches are failed there).
            token: asyncio.Future[None] = asyncio.get_running_loop().create_future()

            def done(resp: Any, exc: BaseException | None) -> None:
                s.untrack(token)
                if not token.cancelled():
                    token.set_result(None)
                    if exc is None:
                        s.request_ok()
                        _name_topics(req, resp)
                    self._ended(batches, resp, exc, True)
                self._request_ended()

            try:
                written = s.client.send_nowait(self.node, req, done)
            except Exception:  # e.g. UnsupportedVersion: the task below reports it per batch
                written = False
            if written:
                s.track(token)
                return
        task = asyncio.get_running_loop().create_task(self._send(req, batches))
        s.track(task)
        task.add_done_callback(s.untrack)

    async def _send(self, req: Any, batches: list[ProducerBatch]) -> None:
        """The request when the connection cannot take it at once, or acks=0 (no answer)."""
        s = self.sender
        client = s.client
        if not client.is_connected(self.node):
            # dropped since the drain: fail over to a retry (in sequence order) instead of
            # reconnecting here, where requests could pass each other
            exc = Errors.KafkaConnectionError(f"connection to node {self.node} closed")
            self._ended(batches, None, exc, False)
            self._request_ended()
            return
        try:
            if s.acks == 0:
                await client.send(self.node, req, expect_response=False)
                for b in batches:  # no answer comes: the futures resolve to None (as aiokafka)
                    if s.hook_acked and not b.future.done():
                        self._acked(b, -1)
                    s.acc.complete(b, None, None, None)
                return
            resp = await client.send(self.node, req)
        except asyncio.CancelledError:
            err = Errors.ProducerClosed("producer stopped while the request was in flight")
            for b in batches:
                s.acc.fail(b, err)
            raise
        except Exception as exc:
            if not isinstance(exc, Errors.KafkaError):  # bug or unexpected I/O failure:
                exc = s.unexpected_request(exc)  # logged once, the sender backs off
            self._ended(batches, None, exc, True)
        else:
            s.request_ok()
            _name_topics(req, resp)
            self._ended(batches, resp, None, True)
        finally:
            self._request_ended()

    def _request_ended(self) -> None:
        self.in_flight -= 1
        s = self.sender
        if s.acc.unsent or s.closing or s.bumping:
            s.drain_now()

    # ---- outcomes ------------------------------------------------------------------------

    def _ended(
        self, batches: list[ProducerBatch], resp: Any, exc: BaseException | None, sent: bool
    ) -> None:
        """A request ended: its response, or the error that ended it (``sent``: it may have
        reached the broker)."""
        if exc is None:
            self._on_response(batches, resp)
            return
        if not isinstance(exc, Errors.KafkaError):  # never drop records
            exc = Errors.KafkaError(repr(exc))
        s = self.sender
        if retry_action(exc).retriable:  # the connection broke, timed out, ...: ask again
            s.client.request_update()
        now = loop_time()
        for b in batches:
            if sent:
                s.acc.mark_maybe_written(b)
            self._retry_or_fail(b, exc, now)

    def _retry_or_fail(self, batch: ProducerBatch, exc: BaseException, now: float) -> None:
        s = self.sender
        if (
            retry_action(exc).retriable
            and not s.force_close
            and now + s.retry_backoff < batch.deadline
        ):
            s.acc.retry(batch, now + s.retry_backoff)
        else:
            if s.txn is not None:
                s.txn.set_error(exc)
            s.acc.fail(batch, exc)

    def _retry_or_fail_quietly(self, batch: ProducerBatch, exc: BaseException, now: float) -> None:
        """Retry (whatever the error) until the delivery timeout, else fail."""
        s = self.sender
        if now + s.retry_backoff < batch.deadline and not s.force_close:
            s.acc.retry(batch, now + s.retry_backoff)
        else:
            s.acc.fail(batch, exc)

    def _on_response(self, batches: list[ProducerBatch], resp: Any) -> None:
        s = self.sender
        acc = s.acc
        results: dict[tuple[str, int], Any] = {}
        hints: dict[TopicPartition, tuple[int, int]] = {}
        for topic in resp.responses:
            for part in topic.partition_responses:
                results[(topic.name, part.index)] = part
                leader = part.current_leader  # KIP-951 (v10+): set with NOT_LEADER_OR_FOLLOWER
                if (
                    part.error_code
                    and leader is not None
                    and leader.leader_id >= 0
                    and leader.leader_id != self.node  # (never "again here, at once")
                ):
                    hints[TopicPartition(topic.name, part.index)] = (
                        leader.leader_id,
                        leader.leader_epoch,
                    )
        # the new leaders at once, without a Metadata round trip: their batches go again now
        moved = s.client.apply_leaders(hints, resp.node_endpoints or ()) if hints else set()
        now = loop_time()
        refresh = False
        for b in batches:
            part = results.get((b.tp.topic, b.tp.partition))
            if part is None:
                self._retry_or_fail(
                    b, Errors.KafkaProtocolError(f"produce response has no result for {b.tp}"), now
                )
                continue
            code = part.error_code
            if code == 0 or code == _DUPLICATE_SEQUENCE:
                txn = s.txn
                if txn is not None and b.producer_id == txn.producer_id:
                    txn.confirmed.add(b.tp)
                if s.hook_acked and not b.future.done():
                    self._acked(b, part.base_offset)
                acc.complete(b, part.base_offset, part.log_append_time_ms, part.log_start_offset)
                continue
            # (INVALID_PRODUCER_EPOCH: InvalidProducerEpoch, a ProducerFenced as aiokafka raises,
            # abortable in a transaction as Java's)
            err_cls = Errors.for_code(code)
            exc = err_cls(part.error_message or f"producing to {b.tp.topic}-{b.tp.partition}")
            if code in _APPENDED_UNACKED:
                acc.mark_maybe_written(b)
            if b.tp in moved:
                if now < b.deadline and not s.force_close:
                    acc.retry(b, now)
                    continue
            elif err_cls.invalid_metadata:
                refresh = True
            if s.idempotent and code in (_OUT_OF_ORDER, _UNKNOWN_PRODUCER):
                self._on_sequence_error(b, exc, now)
                continue
            txn = s.txn
            if code in _EPOCH_REFUSED and txn is not None and not txn.transactional:
                # a broker that refuses a locally bumped epoch (Tansu): go on under a new id
                txn.need_bump(new_id=True)
                self._retry_or_fail_quietly(b, exc, now)
                continue
            self._retry_or_fail(b, exc, now)
        if refresh:
            s.client.request_update()

    def _acked(self, batch: ProducerBatch, base_offset: int) -> None:
        tp = batch.tp
        latency = loop_time() - batch.created
        emit(
            self.sender.hook_acked,
            tp.topic,
            tp.partition,
            batch.count,
            batch_size(batch),
            base_offset,
            latency,
        )

    def _on_sequence_error(self, batch: ProducerBatch, exc: Errors.KafkaError, now: float) -> None:
        """OutOfOrderSequence/UnknownProducerId: retry behind an earlier retry, else bump (KIP-360)."""
        s = self.sender
        txn = s.txn
        assert txn is not None
        # a batch of the same partition with a lower sequence is still unresolved: this one is
        # not the partition's next sequence, so the error is the gap behind that one (e.g. its
        # request was lost); retry in sequence order, as the Java client does
        earlier = any(
            o.tp == batch.tp and 0 <= o.sequence < batch.sequence
            for o in s.acc.incomplete
            if o is not batch
        )
        if txn.transactional and not (earlier and isinstance(exc, Errors.OutOfOrderSequenceNumber)):
            txn.set_error(exc)  # inside a transaction the others make it abortable
            s.acc.fail(batch, exc)
            return
        if not earlier:
            txn.need_bump()
        self._retry_or_fail_quietly(batch, exc, now)


def batch_size(batch: ProducerBatch) -> int:
    """The batch's encoded size (its uncompressed estimate before it was built)."""
    if batch.buffer is not None:
        return len(batch.buffer)
    builder = batch.builder
    return int(builder.size_in_bytes()) if builder is not None else 0


def _name_topics(req: Any, resp: Any) -> None:
    """A v13 answer names topics by id only (KIP-516): their names, from the request."""
    if resp is None or not resp.responses or resp.responses[0].name:
        return
    names = {t.topic_id: t.name for t in req.topic_data}
    for topic in resp.responses:
        topic.name = names.get(topic.topic_id, "")
