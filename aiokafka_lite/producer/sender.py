"""The sender task: ships sealed batches, one ProduceRequest per leader node.

Loop: seal batches whose linger elapsed -> fail batches past ``delivery_timeout_ms`` -> drain the
head batch of every partition queue, grouped by leader, into one request per node (at most
``max_in_flight`` requests per node; one in-flight batch per partition unless idempotent) ->
sleep until woken (a batch sealed/opened, a response arrived) or the next linger/backoff deadline.

Each request runs in its own task; its response resolves batch futures, or puts batches back for
a retry (retriable errors, until the delivery timeout) after a metadata refresh.

Batches only go to a leader whose connection is already open (the Java client's ``ready()``):
otherwise a connect starts in the background and wakes the loop when it is done. Requests are
thus written in the order they were drained; had several requests waited for the same connect,
they could resume in any order, and an idempotent producer's sequences would reach the broker
out of order (which it may accept: the log would then be reordered).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite._signal import wake_future
from aiokafka_lite.hooks import HookSet, emit
from aiokafka_lite.producer.accumulator import Accumulator
from aiokafka_lite.producer.batch import ProducerBatch
from aiokafka_lite.producer.transaction import TransactionManager, TxnState
from aiokafka_lite.protocol import messages as m
from aiokafka_lite.records.batch_builder import restamp
from aiokafka_lite.structs import TopicPartition

__all__ = ["Sender"]

log = logging.getLogger(__name__)

_TopicData = m.ProduceRequest.TopicProduceData
_PartData = m.ProduceRequest.TopicProduceData.PartitionProduceData
_DUPLICATE_SEQUENCE = 46
_OUT_OF_ORDER = 45
_UNKNOWN_PRODUCER = 59
_EPOCH_REFUSED = (47, 90)  # INVALID_PRODUCER_EPOCH, PRODUCER_FENCED
#: REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND: the leader appended, replicas lagged
_APPENDED_UNACKED = (7, 20)
_IDLE_WAKE = 0.5  # seconds: housekeeping (delivery timeouts) even with nothing to do


class Sender:
    """Background task moving batches from the accumulator to the brokers."""

    def __init__(
        self,
        client: Any,
        acc: Accumulator,
        *,
        acks: int,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        max_in_flight: int,
        max_request_size: int,
        txn: TransactionManager | None,
        hooks: HookSet | None = None,
    ) -> None:
        self.client = client
        self.acc = acc
        self.acks = acks
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff = retry_backoff_ms / 1000
        self.max_in_flight = max(1, max_in_flight)
        self.max_request_size = max_request_size
        self.txn = txn
        self.idempotent = txn is not None
        self._node_in_flight: dict[int, int] = {}
        self._tp_in_flight: dict[TopicPartition, int] = {}
        self._requests: set[asyncio.Future[None]] = set()  # request tasks and send_nowait tokens
        #: node -> background connect started because a batch is ready for that node
        self._connects: dict[int, asyncio.Task[None]] = {}
        self._waiter: asyncio.Future[None] | None = None
        self._woken = False
        self._closing = False
        self._force_close = False
        self._bump_needed = False
        self._task: asyncio.Task[None] | None = None
        self._claimed: list[ProducerBatch] | None = None
        self._leader_unknown = False  # _sendable found a partition without a leader
        #: while the loop sleeps: when its timer fires (None: no timer, idle)
        self._sleep_until: float | None = None
        # batch hooks (see aiokafka_lite.hooks): one truth test per call site when none
        self._h_batch_sent = hooks.on_batch_sent if hooks is not None else ()
        self._h_acked = hooks.on_batch_acked if hooks is not None else ()
        self._h_failed = hooks.on_batch_failed if hooks is not None else ()
        acc.wakeup = self.wakeup
        acc.batch_opened = self.batch_opened
        acc.wake_sealed = self.wake_sealed
        acc.fail_hook = self._on_batch_failed
        acc.kick = self._kick
        #: linger 0 without transactions: a batch opened is drained at the end of the current
        #: event-loop turn (_drain_soon), from a callback rather than a loop wake-up
        self._drain_at_turn_end = acc.linger == 0 and (txn is None or not txn.transactional)
        self._drain_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name="aiokafka_lite-sender")
        self._task.add_done_callback(self._on_task_done)

    @property
    def sender_task(self) -> asyncio.Task[None] | None:
        """aiokafka compatibility name: the loop task, as aiokafka's ``Sender.sender_task``
        (None before ``start()``, done once stopped or crashed). kafkaesk reads it through
        ``producer._sender.sender_task`` before every publish to tell a healthy producer."""
        return self._task

    def _on_task_done(self, task: asyncio.Task[None]) -> None:
        """If the loop ever dies, fail every record instead of leaving futures hanging."""
        if task.cancelled() or task.exception() is None:
            if not self._closing:
                self._closing = True
                err: Errors.KafkaError = Errors.ProducerClosed("sender task stopped")
            else:
                return
        else:
            err = Errors.KafkaError(f"sender task crashed: {task.exception()!r}")
        self._closing = True
        self.acc.closed_error = err
        self.acc.abort_undrained(err)
        self.acc.pool.fail_waiters(err)

    def wakeup(self) -> None:
        """Make the loop run once more soon (cheap; called on batch open/seal)."""
        self._woken = True
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def wakeup_at(self, when: float) -> None:
        """The loop must run by ``when`` (monotonic): wake it unless it already will."""
        if self._waiter is None:
            self._woken = True  # running (or not started): it looks again before sleeping
            return
        until = self._sleep_until
        if until is None or when < until:
            self.wakeup()

    def batch_opened(self, batch: ProducerBatch) -> None:
        """A batch opened: the loop must look again by the end of its linger, unless its
        partition has a batch in flight (and only one may be): then the end of that request
        seals or times it (_drain_now). At linger 0 the drain runs at the end of the current
        event-loop turn (_drain_soon): every record appended in this turn (a burst of
        concurrent ``send_and_wait()`` calls) shares the batch, as on aiokafka, and a lone
        record is written one turn later, without waking the loop task."""
        if self.idempotent or batch.tp not in self._tp_in_flight:
            if not self._drain_at_turn_end:
                self.wakeup_at(batch.ready_at)
            elif not self._drain_scheduled:
                loop = self._loop
                if loop is None:  # not started: the loop runs first when it starts
                    return
                self._drain_scheduled = True
                loop.call_soon(self._drain_soon)

    def _drain_soon(self) -> None:
        """linger 0: the turn in which batches were opened has ended: seal and drain them."""
        self._drain_scheduled = False
        self._drain_direct()

    def wake_sealed(self, tp: TopicPartition) -> None:
        """A batch of ``tp`` was sealed. If ``tp`` has a batch in flight (and only one may be),
        the end of that request drains it (_next_batches): no loop turn needed."""
        if self.idempotent or tp not in self._tp_in_flight:
            self.wakeup()

    def abandon(self) -> None:
        """Stop at once without awaiting (the producer was garbage-collected unstopped): cancel
        every task; the sender task's done callback fails what is left with ProducerClosed."""
        task = self._task
        if task is None or task.get_loop().is_closed():
            return
        self._closing = self._force_close = True
        for t in (task, *self._requests, *self._connects.values()):
            t.cancel()

    async def close(self, timeout: float) -> None:
        """Send what is queued (up to ``timeout`` s), then fail what remains with
        ``ProducerClosed`` (requests in flight are abandoned: their records fail too) and
        stop."""
        self._closing = True
        self.wakeup()
        task = self._task
        if task is None:
            return
        try:
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout)
            except (asyncio.TimeoutError, Exception):
                pass
            self._force_close = True
            tasks = [t for t in (task, *self._requests, *self._connects.values()) if not t.done()]
            for t in tasks:
                t.cancel()
            if tasks:  # never raises the tasks' errors; our own cancellation propagates
                await asyncio.wait(tasks, timeout=5)
        finally:  # also when close() itself is cancelled: stop at once, fail what is left
            self._force_close = True
            for t in (task, *self._requests, *self._connects.values()):
                t.cancel()
            err = Errors.ProducerClosed("producer stopped before the record was delivered")
            self.acc.abort_undrained(err)
            for batch in list(self.acc.incomplete):
                self.acc.fail(batch, err)

    # ---- main loop -----------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        acc = self.acc
        while True:
            self._woken = False
            now = time.monotonic()
            nxt = None
            try:
                nxt = acc.seal_ready(now, self._sendable)
                acc.expire(now)
                if self.idempotent:
                    await self._prepare_idempotence()
                retry_at = self._drain(now)
            except Exception as exc:  # never let the loop die silently
                if _is_retriable(exc):  # e.g. InitProducerId while the broker is away
                    log.warning("sender: %r; retrying", exc)
                else:
                    log.exception("sender loop error")
                    self._fail_pending(exc)
                retry_at = now + self.retry_backoff
            if retry_at is not None and (nxt is None or retry_at < nxt):
                nxt = retry_at
            if self._closing and not acc.has_unsent() and not self._requests:
                return
            if self._woken:
                continue
            fut = self._waiter = loop.create_future()
            if nxt is None and not acc.has_unsent() and not self._closing:
                timer = None  # idle: a new batch or a response wakes us
                self._sleep_until = None
            else:
                t = time.monotonic()
                wait = _IDLE_WAKE if nxt is None else max(0.0, min(_IDLE_WAKE, nxt - t))
                self._sleep_until = t + wait
                timer = loop.call_later(wait, wake_future, fut)
            try:
                await fut
            finally:
                if timer is not None:
                    timer.cancel()
                self._waiter = None

    def _fail_pending(self, exc: BaseException) -> None:
        err = exc if isinstance(exc, Errors.KafkaError) else Errors.KafkaError(repr(exc))
        for dq in self.acc.pending.values():
            while dq:
                self.acc.fail(dq.popleft(), err)

    def _on_batch_failed(self, batch: ProducerBatch, exc: BaseException) -> None:
        """A failed batch that held sequence numbers leaves a gap: the epoch must change
        (at once for an idempotent producer, after the abort for a transactional one).
        Called by the accumulator once per failed batch (also for batches never sent)."""
        if self._h_failed:
            tp = batch.tp
            emit(self._h_failed, tp.topic, tp.partition, batch.count, _size(batch), exc)
        txn = self.txn
        if txn is None:
            return
        if txn.transactional:
            txn.set_error(exc)
            if batch.sequence >= 0:
                txn.needs_bump = True
        elif batch.sequence >= 0 and not self._closing:
            self._bump_needed = True

    async def _prepare_idempotence(self) -> None:
        txn = self.txn
        assert txn is not None
        if txn.state is TxnState.FATAL_ERROR:
            assert txn.error is not None
            self._fail_pending(txn.error)
            return
        if not txn.has_pid:
            await txn.init_producer_id()
        if self._bump_needed and not self._requests and not self._unresolved():
            await self._bump_epoch()
        if txn.transactional and txn.state in (
            TxnState.IN_TRANSACTION,
            TxnState.COMMITTING,
            TxnState.ABORTING,
        ):
            new = [tp for tp, dq in self.acc.pending.items() if dq and tp not in txn.partitions]
            if new:
                try:
                    await txn.add_partitions(new)
                except Errors.KafkaError as exc:
                    txn.set_error(exc)
                    for tp in new:
                        dq = self.acc.pending[tp]
                        while dq:
                            self.acc.fail(dq.popleft(), exc)

    def _unresolved(self) -> bool:
        """True while a batch that was sent (its outcome unknown) waits for a retry.

        Such a batch may be in the log already (its request timed out, or the connection
        dropped, after the broker got it): it must be retried under its own epoch and sequence,
        which the broker deduplicates, until it succeeds or expires. Re-stamped under a new
        epoch it would be written twice. So the epoch bump waits for these (as the Java client
        waits for a partition's unresolved sequences), and only they are sent meanwhile.
        """
        for dq in self.acc.pending.values():
            for batch in dq:
                if batch.maybe_written and batch.sequence >= 0:
                    return True
        return False

    async def _bump_epoch(self) -> None:
        """KIP-360: new epoch, sequences restart at 0; queued batches are re-stamped in order."""
        txn = self.txn
        assert txn is not None
        self._bump_needed = False
        await txn.bump_epoch()
        for tp, dq in self.acc.pending.items():
            for batch in dq:
                if batch.sequence >= 0:
                    self._stamp(batch, tp)

    def _stamp(self, batch: ProducerBatch, tp: TopicPartition) -> None:
        txn = self.txn
        assert txn is not None
        batch.sequence = txn.next_sequence(tp, batch.count)
        batch.producer_id = txn.producer_id
        batch.producer_epoch = txn.producer_epoch
        if batch.buffer is None:
            batch.builder.set_producer_state(txn.producer_id, txn.producer_epoch, batch.sequence)
            batch.build()
        else:
            restamp(batch.buffer, txn.producer_id, txn.producer_epoch, batch.sequence)  # type: ignore[arg-type]

    def _drain(self, now: float, claim: int | None = None) -> float | None:
        """Hand ready partition heads to per-node requests; return the next retry time.

        The batches for node ``claim`` are not given a new task but left in ``_claimed`` for
        the request task of that node that just finished (it sends them at once)."""
        acc = self.acc
        cluster = self.client.cluster
        txn = self.txn
        idempotent = self.idempotent
        if idempotent and (txn is None or not txn.has_pid):
            return None
        bumping = idempotent and self._bump_needed  # only retries go out (see _unresolved)
        by_node: dict[int, list[ProducerBatch]] = {}
        sizes: dict[int, int] = {}
        next_retry: float | None = None
        need_metadata = self._leader_unknown  # an open batch waits for its leader (_sendable)
        self._leader_unknown = False
        max_if = self.max_in_flight
        for tp, dq in acc.pending.items():
            if not dq:
                continue
            batch = dq[0]
            if batch.retry_at > now:
                if next_retry is None or batch.retry_at < next_retry:
                    next_retry = batch.retry_at
                continue
            if bumping and not batch.maybe_written:
                continue
            n_tp = self._tp_in_flight.get(tp, 0)
            if n_tp and (not idempotent or n_tp >= max_if or batch.attempts):
                continue
            if txn is not None and txn.transactional and tp not in txn.partitions:
                continue
            leader = cluster.leader_for_partition(tp)
            if leader is None or leader < 0:
                need_metadata = True
                continue
            if self._node_in_flight.get(leader, 0) >= max_if:
                continue
            if not self.client.is_connected(leader):
                self._connect(leader)
                continue
            try:
                if idempotent and batch.sequence < 0:
                    self._stamp(batch, tp)
                size = len(batch.build())
            except Exception as exc:  # encoding/compression failed: fail this batch only
                log.exception("cannot encode a batch for %s", tp)
                dq.popleft()
                err = (
                    exc
                    if isinstance(exc, Errors.KafkaError)
                    else Errors.KafkaError(f"cannot encode record batch: {exc!r}")
                )
                self.acc.fail(batch, err)
                continue
            lst = by_node.get(leader)
            if lst is None:
                by_node[leader] = [batch]
                sizes[leader] = size
            elif sizes[leader] + size <= self.max_request_size:
                lst.append(batch)
                sizes[leader] += size
            else:
                continue
            dq.popleft()
        if need_metadata:
            self.client.request_update()
            if next_retry is None or now + self.retry_backoff < next_retry:
                next_retry = now + self.retry_backoff
        loop = asyncio.get_running_loop()
        h_sent = self._h_batch_sent
        for node, batches in by_node.items():
            self._node_in_flight[node] = self._node_in_flight.get(node, 0) + 1
            for b in batches:
                b.in_flight = True
                b.attempts += 1
                self._tp_in_flight[b.tp] = self._tp_in_flight.get(b.tp, 0) + 1
                if h_sent:
                    emit(
                        h_sent,
                        b.tp.topic,
                        b.tp.partition,
                        b.count,
                        _size(b),
                        now - b.created,
                        b.attempts,
                    )
            if node == claim:
                self._claimed = batches
                continue
            if self.acks and self._request_nowait(node, batches):
                continue
            task = loop.create_task(self._produce(node, batches))
            self._requests.add(task)
            task.add_done_callback(self._requests.discard)
        return next_retry

    def _sendable(self, tp: TopicPartition) -> bool:
        """Can a batch of ``tp`` go into a request now? (The accumulator seals a ready batch
        only then: else it keeps filling.) Starts what it waits for: a connect to the leader,
        or a metadata refresh (by the next _drain) when the leader is unknown."""
        n_tp = self._tp_in_flight.get(tp, 0)
        if n_tp and (not self.idempotent or n_tp >= self.max_in_flight):
            return False  # the end of that request drains it
        leader = self.client.cluster.leader_for_partition(tp)
        if leader is None or leader < 0:
            self._leader_unknown = True
            return False
        if self._node_in_flight.get(leader, 0) >= self.max_in_flight:
            return False  # the end of one of the node's requests drains it
        if not self.client.is_connected(leader):
            self._connect(leader)  # wakes the loop when done
            return False
        return True

    def _connect(self, node: int) -> None:
        """Connect to ``node`` in the background (once at a time); wake the loop when done."""
        if node in self._connects or self._force_close:
            return
        task = asyncio.get_running_loop().create_task(self._connect_task(node))
        self._connects[node] = task

    async def _connect_task(self, node: int) -> None:
        try:
            if not await self.client.ready(node):
                self.client.request_update()  # the leader may have moved or died
        finally:
            self._connects.pop(node, None)
            self.wakeup()

    # ---- one request ---------------------------------------------------------------------

    async def _produce(self, node: int, batches: list[ProducerBatch] | None) -> None:
        """One task per node while it has work: each finished request hands the node's next
        ready batches to the same task, whose request is written before it yields (one
        event-loop hop less per request than a new task)."""
        while batches:
            await self._request(node, batches)
            batches = self._next_batches(node)

    def _next_batches(self, node: int) -> list[ProducerBatch] | None:
        """After a request to ``node`` finished: drain now (a slot freed up for queued
        batches); return the batches to send to ``node`` from this task."""
        if not (self.acc.has_unsent() or self._closing or self._bump_needed):
            return None
        self._claimed = None
        self._drain_direct(node)
        batches, self._claimed = self._claimed, None
        return batches

    def _drain_direct(self, claim: int | None = None) -> None:
        """Seal and drain from outside the loop when the loop is not needed for it."""
        txn = self.txn
        if (
            self._closing
            or self._bump_needed
            or self._task is None
            or (txn is not None and (txn.transactional or not txn.has_pid))
        ):
            self.wakeup()
            return
        try:
            self._drain_now(time.monotonic(), claim)
        except Exception:  # the loop will retry and report
            log.debug("direct drain failed", exc_info=True)
            self.wakeup()

    def _drain_now(self, now: float, claim: int | None = None) -> None:
        """Seal and drain outside the loop; the loop's timers (linger, retry backoff) are
        moved earlier when needed. Sealed batches of a partition with a batch in flight are
        drained when that request ends; those of a busy node when one of its requests ends."""
        acc = self.acc
        nxt = acc.seal_ready(now, self._sendable)
        retry = self._drain(now, claim)
        if nxt is not None:
            self.wakeup_at(nxt)
        if retry is not None:
            self.wakeup_at(retry)

    def _produce_request(self, batches: list[ProducerBatch]) -> Any:
        topics: dict[str, list[Any]] = {}
        for b in batches:
            lst = topics.get(b.tp.topic)
            if lst is None:
                lst = topics[b.tp.topic] = []
            lst.append(_PartData(index=b.tp.partition, records=b.buffer))
        txn = self.txn
        return m.ProduceRequest(
            transactional_id=txn.transactional_id if txn is not None else None,
            acks=self.acks,
            timeout_ms=self.request_timeout_ms,
            topic_data=[_TopicData(name=t, partition_data=p) for t, p in topics.items()],
        )

    def _request_nowait(self, node: int, batches: list[ProducerBatch]) -> bool:
        """Write the request for ``batches`` from here and handle its answer in the callback
        the connection calls when the response frame arrives: no task, and no event-loop turn
        between the response and the records' futures (send_and_wait: 4 -> 2 loop turns per
        call). False when the connection cannot take it now (then a request task sends it).

        A token future in ``_requests`` stands for the request, as a task would: close()
        waits for it and cancels it when forced (then the batches are failed there)."""
        token: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def done(resp: Any, exc: BaseException | None) -> None:
            self._requests.discard(token)
            if token.cancelled():  # close() gave up on it and failed its batches
                self._release(node, batches)
                return
            token.set_result(None)
            try:
                if exc is None:
                    self._on_response(batches, resp)
                elif isinstance(exc, Errors.KafkaError):
                    self._on_request_error(batches, exc, True)
                else:  # pragma: no cover - the connection only fails requests with KafkaError
                    self._on_request_error(batches, Errors.KafkaError(repr(exc)), True)
            finally:
                self._release(node, batches)
            if self.acc.has_unsent() or self._closing or self._bump_needed:
                self._drain_direct()

        try:
            if not self.client.send_nowait(node, self._produce_request(batches), done):
                return False
        except Exception:  # e.g. UnsupportedVersion: the request task reports it per batch
            return False
        self._requests.add(token)
        return True

    def _release(self, node: int, batches: list[ProducerBatch]) -> None:
        """A request of ``batches`` to ``node`` ended: free its in-flight slots."""
        self._node_in_flight[node] -= 1
        for b in batches:
            n = self._tp_in_flight.get(b.tp, 1) - 1
            if n:
                self._tp_in_flight[b.tp] = n
            else:
                self._tp_in_flight.pop(b.tp, None)

    async def _request(self, node: int, batches: list[ProducerBatch]) -> None:
        req = self._produce_request(batches)
        sent = False
        try:
            if not self.client.is_connected(node):
                # dropped since the drain: fail over to a retry (in sequence order) instead of
                # reconnecting here, where requests could pass each other (see module doc)
                raise Errors.KafkaConnectionError(f"connection to node {node} closed")
            sent = True
            if self.acks == 0:
                await self.client.send(node, req, expect_response=False)
                for b in batches:  # no answer comes: the futures resolve to None (as aiokafka)
                    if self._h_acked and not b.future.done():
                        self._acked(b, -1)
                    self.acc.complete(b, None, None, None)
                return
            resp = await self.client.send(node, req)
        except asyncio.CancelledError:
            err = Errors.ProducerClosed("producer stopped while the request was in flight")
            for b in batches:
                self.acc.fail(b, err)
            raise
        except Errors.KafkaError as exc:
            self._on_request_error(batches, exc, sent)
        except Exception as exc:  # bug or unexpected I/O failure: never drop records
            log.exception("produce request failed")
            self._on_request_error(batches, Errors.KafkaError(repr(exc)), sent)
        else:
            self._on_response(batches, resp)
        finally:
            self._release(node, batches)

    def _kick(self) -> bool:
        """Drain right away (from ``send()`` when a batch fills) instead of waking the sender
        loop first: one event-loop hop less before the next request. Returns True if a
        request was started."""
        before = len(self._requests)
        self._drain_direct()
        return len(self._requests) > before

    def _on_request_error(
        self, batches: list[ProducerBatch], exc: Errors.KafkaError, sent: bool = True
    ) -> None:
        """The request got no answer; ``sent``: it may have reached the broker."""
        if exc.retriable or isinstance(
            exc, (Errors.KafkaConnectionError, Errors.KafkaTimeoutError)
        ):
            self.client.request_update()
        now = time.monotonic()
        for b in batches:
            if sent:
                b.maybe_written = True
            self._retry_or_fail(b, exc, now)

    def _retry_or_fail(self, batch: ProducerBatch, exc: BaseException, now: float) -> None:
        retriable = getattr(exc, "retriable", False) or isinstance(
            exc, (Errors.KafkaConnectionError, Errors.KafkaTimeoutError)
        )
        if retriable and not self._force_close and now + self.retry_backoff < batch.deadline:
            self.acc.requeue(batch, now + self.retry_backoff)
        else:
            if self.txn is not None:
                self.txn.set_error(exc)
            self.acc.fail(batch, exc)

    def _on_response(self, batches: list[ProducerBatch], resp: Any) -> None:
        results: dict[tuple[str, int], Any] = {}
        for topic in resp.responses:
            for part in topic.partition_responses:
                results[(topic.name, part.index)] = part
        now = time.monotonic()
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
                if self._h_acked and not b.future.done():
                    self._acked(b, part.base_offset)
                self.acc.complete(
                    b, part.base_offset, part.log_append_time_ms, part.log_start_offset
                )
                continue
            err_cls = Errors.for_code(code)
            if err_cls is Errors.InvalidProducerEpoch:  # another producer took over the id:
                err_cls = Errors.ProducerFenced  # aiokafka's class for it
            exc = err_cls(part.error_message or f"producing to {b.tp.topic}-{b.tp.partition}")
            if code in _APPENDED_UNACKED:
                b.maybe_written = True
            if err_cls.invalid_metadata:
                refresh = True
            if self.idempotent and code in (_OUT_OF_ORDER, _UNKNOWN_PRODUCER):
                self._on_sequence_error(b, exc, now)
                continue
            txn = self.txn
            if code in _EPOCH_REFUSED and txn is not None and not txn.transactional:
                # a broker that refuses a locally bumped epoch (Tansu): go on under a new id
                txn.new_id_needed = True
                self._bump_needed = True
                if now + self.retry_backoff < b.deadline and not self._force_close:
                    self.acc.requeue(b, now + self.retry_backoff)
                else:
                    self.acc.fail(b, exc)
                continue
            self._retry_or_fail(b, exc, now)
        if refresh:
            self.client.request_update()

    def _acked(self, batch: ProducerBatch, base_offset: int) -> None:
        tp = batch.tp
        latency = time.monotonic() - batch.created
        emit(self._h_acked, tp.topic, tp.partition, batch.count, _size(batch), base_offset, latency)

    def _on_sequence_error(self, batch: ProducerBatch, exc: Errors.KafkaError, now: float) -> None:
        """OutOfOrderSequence/UnknownProducerId: retry behind an earlier retry, else bump (KIP-360)."""
        txn = self.txn
        assert txn is not None
        # a batch of the same partition with a lower sequence is still unresolved: this one is
        # not the partition's next sequence, so the error is the gap behind that one (e.g. its
        # request was lost); retry in sequence order, as the Java client does
        earlier = any(
            o.tp == batch.tp and 0 <= o.sequence < batch.sequence
            for o in self.acc.incomplete
            if o is not batch
        )
        if txn.transactional and not (earlier and isinstance(exc, Errors.OutOfOrderSequenceNumber)):
            txn.set_error(exc)  # inside a transaction the others make it abortable
            self.acc.fail(batch, exc)
            return
        if not earlier:
            self._bump_needed = True
        if now + self.retry_backoff < batch.deadline and not self._force_close:
            self.acc.requeue(batch, now + self.retry_backoff)
        else:
            self.acc.fail(batch, exc)


def _size(batch: ProducerBatch) -> int:
    """The batch's encoded size (its uncompressed estimate before it was built)."""
    if batch.buffer is not None:
        return len(batch.buffer)
    builder = batch.builder
    return int(builder.size_in_bytes()) if builder is not None else 0


def _is_retriable(exc: BaseException) -> bool:
    return bool(getattr(exc, "retriable", False)) or isinstance(
        exc, (Errors.KafkaConnectionError, Errors.KafkaTimeoutError)
    )
