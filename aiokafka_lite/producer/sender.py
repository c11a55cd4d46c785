"""The sender: one :class:`~aiokafka_lite.producer.sink.Sink` per leader broker, and the loop
that keeps them going.

Each partition queue lives in the sink of its partition's leader (``_home``: when its first
batch opens, and again after every metadata update, which moves the queues whose leader
changed). ``Sink.drain`` is the only place a Produce request is built and written; the sender
calls it for every sink from ONE place, :meth:`Sender._drain_sinks`, reached from the loop and
from :meth:`Sender.drain_now` (a response arrived, a batch filled up, the turn in which a batch
opened at linger 0 ended).

Loop: seal batches whose linger elapsed -> fail batches past ``delivery_timeout_ms`` -> get a
producer id, bump its epoch (KIP-360), add new partitions to the transaction -> drain every
sink -> sleep until woken (a batch sealed/opened, a response arrived) or the next
linger/backoff deadline.

Batches only go to a leader whose connection is already open (the Java client's ``ready()``):
otherwise a connect starts in the background and wakes the loop when it is done. Requests are
thus written in the order they were drained; had several requests waited for the same connect,
they could resume in any order, and an idempotent producer's sequences would reach the broker
out of order (which it may accept: the log would then be reordered).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite._signal import wake_future
from aiokafka_lite._supervise import Supervisor, unexpected
from aiokafka_lite._timeouts import loop_time
from aiokafka_lite.errors import retry_action
from aiokafka_lite.hooks import HookSet, emit
from aiokafka_lite.producer.accumulator import Accumulator, PartitionQueue
from aiokafka_lite.producer.batch import ProducerBatch
from aiokafka_lite.producer.sink import Sink, batch_size
from aiokafka_lite.producer.transaction import TransactionManager, TxnState

__all__ = ["Sender"]

log = logging.getLogger(__name__)

_IDLE_WAKE = 0.5  # seconds: housekeeping (delivery timeouts) even with nothing to do


class Sender:
    """Background task moving batches from the partition queues to the brokers' sinks; the
    accumulator's :class:`~aiokafka_lite.producer.accumulator.QueueEvents`."""

    def __init__(
        self,
        client: Any,
        acc: Accumulator,
        *,
        acks: int,
        broker_timeout_ms: int,
        retry_backoff_ms: int,
        max_in_flight: int,
        max_request_size: int,
        txn: TransactionManager | None,
        hooks: HookSet | None = None,
    ) -> None:
        self.client = client
        self.acc = acc
        self.acks = acks
        #: the timeout written into each Produce request (``Timeouts.broker_ms``)
        self.broker_timeout_ms = broker_timeout_ms
        self.retry_backoff = retry_backoff_ms / 1000
        self.max_in_flight = max(1, max_in_flight)
        self.max_request_size = max_request_size
        self.txn = txn
        self.idempotent = txn is not None
        self._sinks: dict[int, Sink] = {}
        self._homeless: set[PartitionQueue] = set()  # queues whose leader is unknown
        self._requests: set[asyncio.Future[None]] = set()  # request tasks and send_nowait tokens
        #: node -> background connect started because a batch is ready for that node
        self._connects: dict[int, asyncio.Task[None]] = {}
        self._waiter: asyncio.Future[None] | None = None
        self._woken = False
        self.closing = False
        self.force_close = False
        self._task: asyncio.Task[None] | None = None
        self._leader_unknown = False  # _sendable found a partition without a leader
        #: while the loop sleeps: when its timer fires (None: no timer, idle)
        self._sleep_until: float | None = None
        # batch hooks (see aiokafka_lite.hooks): one truth test per call site when none
        self.hook_sent = hooks.on_batch_sent if hooks is not None else ()
        self.hook_acked = hooks.on_batch_acked if hooks is not None else ()
        self._h_failed = hooks.on_batch_failed if hooks is not None else ()
        acc.events = self
        #: linger 0 without transactions: a batch opened is drained at the end of the current
        #: event-loop turn (_drain_soon), from a callback rather than a loop wake-up
        self._drain_at_turn_end = acc.linger == 0 and (txn is None or not txn.transactional)
        self._drain_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        #: an unexpected exception of a step: logged once, the records queued then fail with
        #: it, the next step after an exponential back-off (no direct drains meanwhile)
        self._sup = Supervisor("producer", retry_backoff_ms, log)
        self._guard = self._sup.guard("sender")
        self._g_request = self._sup.guard("produce request")
        self._resume_at = 0.0  # backing off until then (loop time)

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the loop task; follow leader changes from now on."""
        loop = self._loop = asyncio.get_running_loop()
        self.client.cluster.add_listener(self._on_metadata)
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
            if not self.closing:
                self.closing = True
                err: Errors.KafkaError = Errors.ProducerClosed("sender task stopped")
            else:
                return
        else:
            err = Errors.KafkaError(f"sender task crashed: {task.exception()!r}")
        self.closing = True
        self.acc.close(err)
        self.acc.abort_undrained(err)

    def abandon(self) -> None:
        """Stop at once without awaiting (the producer was garbage-collected unstopped): cancel
        every task; the sender task's done callback fails what is left with ProducerClosed."""
        task = self._task
        if task is None or task.get_loop().is_closed():
            return
        self.closing = self.force_close = True
        for t in (task, *self._requests, *self._connects.values()):
            t.cancel()

    async def close(self, timeout: float) -> None:
        """Send what is queued (up to ``timeout`` s), then fail what remains with
        ``ProducerClosed`` (requests in flight are abandoned: their records fail too) and
        stop."""
        self.closing = True
        self.wakeup()
        task = self._task
        if task is None:
            return
        try:
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout)
            except (asyncio.TimeoutError, Exception):
                pass
            self.force_close = True
            tasks = [t for t in (task, *self._requests, *self._connects.values()) if not t.done()]
            for t in tasks:
                t.cancel()
            if tasks:  # never raises the tasks' errors; our own cancellation propagates
                await asyncio.wait(tasks, timeout=5)
        finally:  # also when close() itself is cancelled: stop at once, fail what is left
            self.force_close = True
            self.client.cluster.remove_listener(self._on_metadata)
            for t in (task, *self._requests, *self._connects.values()):
                t.cancel()
            err = Errors.ProducerClosed("producer stopped before the record was delivered")
            self.acc.abort_undrained(err)
            for batch in list(self.acc.incomplete):
                self.acc.fail(batch, err)

    def track(self, request: asyncio.Future[None]) -> None:
        """SinkHost: a sink's request in flight (a task or a send_nowait token)."""
        self._requests.add(request)

    def untrack(self, request: asyncio.Future[None]) -> None:
        """SinkHost: that request ended."""
        self._requests.discard(request)

    @property
    def bumping(self) -> bool:
        """An idempotent producer's epoch bump is pending (KIP-360): until it is done only
        batches that may be in the log already go out (a transactional producer bumps after
        its abort instead, :meth:`TransactionManager.bump_epoch`)."""
        txn = self.txn
        return txn is not None and not txn.transactional and txn.bump_pending

    # ---- waking --------------------------------------------------------------------------

    def wakeup(self) -> None:
        """Make the loop run once more soon (cheap)."""
        self._woken = True
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    wake = wakeup  # QueueEvents: an append waits for memory, or a flush began

    def wakeup_at(self, when: float) -> None:
        """The loop must run by ``when`` (loop time): wake it unless it already will."""
        if self._waiter is None:
            self._woken = True  # running (or not started): it looks again before sleeping
            return
        until = self._sleep_until
        if until is None or when < until:
            self.wakeup()

    def batch_opened(self, q: PartitionQueue) -> None:
        """QueueEvents: a batch opened in ``q``. The loop must look again by the end of its
        linger, unless its partition has a batch in flight (and only one may be): then the
        end of that request seals or times it. At linger 0 the drain runs at the end of the
        current event-loop turn (_drain_soon): every record appended in this turn (a burst
        of concurrent ``send_and_wait()`` calls) shares the batch, as on aiokafka, and a lone
        record is written one turn later, without waking the loop task."""
        if q.sink is None:
            self._home(q)
        if self.idempotent or not q.in_flight:
            if not self._drain_at_turn_end:
                batch = q.open
                if batch is not None:
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
        self.drain_now()

    def batch_sealed(self, q: PartitionQueue) -> None:
        """QueueEvents: a batch of ``q`` was sealed. If ``q`` has a batch in flight (and only
        one may be), the end of that request drains it: no loop turn needed."""
        if q.sink is None:  # a caller-built batch is the first of its partition
            self._home(q)
        if self.idempotent or not q.in_flight:
            self.wakeup()

    def batch_full(self) -> None:
        """QueueEvents: a batch filled up (in ``send()``): drain right away instead of waking
        the loop first, one event-loop hop less before the next request."""
        self.drain_now()

    def batch_failed(self, batch: ProducerBatch, exc: BaseException) -> None:
        """QueueEvents: a failed batch that held sequence numbers leaves a gap: the epoch must
        change (at once for an idempotent producer, after the abort for a transactional one).
        Called once per failed batch (also for batches never sent)."""
        if self._h_failed:
            tp = batch.tp
            emit(self._h_failed, tp.topic, tp.partition, batch.count, batch_size(batch), exc)
        txn = self.txn
        if txn is None:
            return
        if txn.transactional:
            txn.set_error(exc)
            if batch.sequence >= 0:
                txn.need_bump()  # done after the abort
        elif batch.sequence >= 0 and not self.closing:
            txn.need_bump()

    # ---- sinks ---------------------------------------------------------------------------

    def _home(self, q: PartitionQueue) -> None:
        """Put ``q`` into its leader's sink (moving it when the leader changed; into none
        while the leader is unknown)."""
        leader = self.client.cluster.leader_for_partition(q.tp)
        old = q.sink
        if old is not None:
            if old.node == leader:
                return
            del old.queues[q.tp]
            q.sink = None
        if leader is None or leader < 0:
            self._homeless.add(q)
            return
        sink = self._sinks.get(leader)
        if sink is None:
            sink = self._sinks[leader] = Sink(leader, self)
        sink.queues[q.tp] = q
        q.sink = sink
        self._homeless.discard(q)

    def _on_metadata(self, cluster: Any) -> None:
        """After every metadata update: move the queues whose leader changed."""
        moved = False
        for q in self.acc.queues.values():
            sink = q.sink
            leader = cluster.leader_for_partition(q.tp)
            if sink is None or sink.node != leader:
                self._home(q)
                moved = True
        if moved:
            self.wakeup()

    def _sendable(self, q: PartitionQueue, batch: ProducerBatch, now: float) -> bool:
        """May ``q``'s open ``batch`` go into a request now? The accumulator seals a ready
        batch only then (else it keeps filling): the sink's one rule (:meth:`Sink.may_go`,
        the same the drain applies to a sealed head) and a ready node. Starts what it waits
        for: a connect to the leader, or a metadata refresh (by the next _drain_sinks) when
        the leader is unknown."""
        sink: Sink | None = q.sink
        if sink is None:
            self._leader_unknown = True
            return False
        return sink.may_go(q, batch, now) and sink.node_ready()

    def _drain_sinks(self, now: float) -> float | None:
        """Drain every sink (each writes at most one request); return the next retry time."""
        next_retry: float | None = None
        for sink in tuple(self._sinks.values()):
            retry = sink.drain(now)
            if retry is not None and (next_retry is None or retry < next_retry):
                next_retry = retry
        need_metadata = self._leader_unknown  # an open batch waits for its leader (_sendable)
        self._leader_unknown = False
        if not need_metadata and self._homeless:
            need_metadata = any(q.queued for q in self._homeless)
        if need_metadata:
            self.client.request_update()
            if next_retry is None or now + self.retry_backoff < next_retry:
                next_retry = now + self.retry_backoff
        return next_retry

    def drain_now(self) -> None:
        """Seal and drain from outside the loop (a response arrived, a batch filled, a linger-0
        turn ended) when the loop is not needed for it; the loop's timers (linger, retry
        backoff) are moved earlier when needed."""
        txn = self.txn
        if self._resume_at > loop_time():  # backing off after an unexpected error:
            self.wakeup_at(self._resume_at)  # the loop drains after it
            return
        if (
            self.closing
            or self.bumping
            or self._task is None
            or (txn is not None and (txn.transactional or not txn.has_pid))
        ):
            self.wakeup()
            return
        try:
            now = loop_time()
            nxt = self.acc.seal_ready(now, self._sendable)
            retry = self._drain_sinks(now)
        except Exception as exc:  # the loop will retry and report
            if not isinstance(exc, Errors.KafkaError):
                self._unexpected(exc, now)
            else:
                log.debug("direct drain failed", exc_info=True)
            self.wakeup()
            return
        if nxt is not None:
            self.wakeup_at(nxt)
        if retry is not None:
            self.wakeup_at(retry)

    def connect(self, node: int) -> None:
        """Connect to ``node`` in the background (once at a time); wake the loop when done."""
        if node in self._connects or self.force_close:
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

    # ---- main loop -----------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        acc = self.acc
        while True:
            pause = self._resume_at - loop.time()
            if pause > 0:  # an unexpected error: wake-ups do not cut the back-off short
                await asyncio.sleep(pause)
            self._woken = False
            now = loop.time()
            nxt = None
            try:
                nxt = acc.seal_ready(now, self._sendable)
                acc.expire(now)
                if self.idempotent:
                    await self._prepare_idempotence()
                retry_at = self._drain_sinks(now)
                self._guard.ok()
            except Exception as exc:  # never let the loop die silently
                if not isinstance(exc, Errors.KafkaError):  # a bug: the supervision rule
                    self._unexpected(exc, now)
                    retry_at = self._resume_at
                else:
                    if retry_action(exc).retriable:  # e.g. InitProducerId, the broker away
                        log.warning("sender: %r; retrying", exc)
                    else:
                        log.exception("sender loop error")
                        self._fail_pending(exc)
                    retry_at = now + self.retry_backoff
            if retry_at is not None and (nxt is None or retry_at < nxt):
                nxt = retry_at
            if self.closing and not acc.unsent and not self._requests:
                return
            if self._woken:
                continue
            fut = self._waiter = loop.create_future()
            if nxt is None and not acc.unsent and not self.closing:
                timer = None  # idle: a new batch or a response wakes us
                self._sleep_until = None
            else:
                t = loop.time()
                wait = _IDLE_WAKE if nxt is None else max(0.0, min(_IDLE_WAKE, nxt - t))
                self._sleep_until = t + wait
                timer = loop.call_later(wait, wake_future, fut)
            try:
                await fut
            finally:
                if timer is not None:
                    timer.cancel()
                self._waiter = None

    def _unexpected(self, exc: Exception, now: float) -> None:
        """A step failed with an unexpected exception: logged once, the records queued now
        fail with it, no step before the back-off."""
        self._resume_at = now + self._guard.failed(exc)
        self._fail_pending(self._sup.take() or unexpected("producer: sender", exc))

    def unexpected_request(self, exc: Exception) -> Errors.KafkaError:
        """A Produce request failed with an unexpected exception (``Sink._send``): logged
        once, no drain before the back-off; the error its batches fail with."""
        self._resume_at = loop_time() + self._g_request.failed(exc)
        return self._sup.take() or unexpected("producer: produce request", exc)

    def request_ok(self) -> None:
        """A Produce request was answered: an episode of unexpected request errors ended."""
        self._g_request.ok()

    def _fail_pending(self, exc: BaseException) -> None:
        err = exc if isinstance(exc, Errors.KafkaError) else Errors.KafkaError(repr(exc))
        self.acc.fail_queued(err)

    # ---- idempotence and transactions ----------------------------------------------------

    async def _prepare_idempotence(self) -> None:
        txn = self.txn
        assert txn is not None
        if txn.state is TxnState.FATAL_ERROR:
            assert txn.error is not None
            self._fail_pending(txn.error)
            return
        if not txn.has_pid:
            await txn.init_producer_id()
        if self.bumping and not self._requests and not self._unresolved():
            await self._bump_epoch()
        if txn.transactional and txn.state in (
            TxnState.IN_TRANSACTION,
            TxnState.COMMITTING,
            TxnState.ABORTING,
        ):
            # a partition's batches go only once it is in the transaction (Sink.may_go), so
            # its open batch is not sealed before: add it as soon as it has one (as Java adds a
            # partition at its first send)
            new = [
                q
                for q in self.acc.queues.values()
                if (q.queued or q.open is not None) and q.tp not in txn.partitions
            ]
            if new:
                try:
                    await txn.add_partitions([q.tp for q in new])
                except Errors.KafkaError as exc:
                    txn.set_error(exc)
                    for q in new:
                        if q.open is not None:
                            self.acc.fail(q.open, exc)
                        self.acc.fail_queued(exc, q)
                else:
                    self._woken = True  # their batches may be sealed now: look again

    def _unresolved(self) -> bool:
        """True while a batch that was sent (its outcome unknown) waits for a retry.

        Such a batch may be in the log already (its request timed out, or the connection
        dropped, after the broker got it): it must be retried under its own epoch and sequence,
        which the broker deduplicates, until it succeeds or expires. Re-stamped under a new
        epoch it would be written twice. So the epoch bump waits for these (as the Java client
        waits for a partition's unresolved sequences), and only they are sent meanwhile.
        """
        for q in self.acc.queues.values():
            for batch in q.queued:
                if batch.maybe_written and batch.sequence >= 0:
                    return True
        return False

    async def _bump_epoch(self) -> None:
        """KIP-360: new epoch, sequences restart at 0; queued batches are re-stamped in order."""
        txn = self.txn
        assert txn is not None
        await txn.bump_epoch()
        self._woken = True  # open batches held back by the bump (Sink.may_go) may go now
        acc = self.acc
        for q in acc.queues.values():
            for batch in q.queued:
                if batch.sequence >= 0:
                    seq = txn.next_sequence(q.tp, batch.count)
                    acc.stamp(batch, txn.producer_id, txn.producer_epoch, seq)
