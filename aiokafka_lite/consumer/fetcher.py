"""The fetcher: keeps per-partition buffers filled and hands records out in bulk.

One planner task wakes on every relevant change (assignment, seek, pause, a drained buffer,
a completed fetch, new metadata) and starts, for each leader node without a fetch in
flight, ONE FetchRequest covering every assigned, unpaused partition of that node that has
a known position and no buffered data (seed 03: never refetch a partition whose data is
still waiting).  A slow node or partition therefore never stalls the others, and the next
fetch for a partition starts as soon as its buffer is drained (prefetch).

Positions that are unknown or reset are looked up with ListOffsets (``auto_offset_reset``).
Errors: not-leader / unknown-partition style errors refresh metadata and retry; offset out of
range resets (or, with ``auto_offset_reset="none"``, is raised); anything else is stored on
the partition and raised to the caller of the next ``getmany``/``getone``. An unexpected
exception (not a ``KafkaError``) of the planner, a fetch or an offset reset follows the
supervision rule (``_supervise``): logged once, raised once by the next ``getmany``/``getone``,
the step retried after an exponential back-off (the failed fetch's partitions wait for it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite._signal import Signal
from aiokafka_lite._supervise import Supervisor
from aiokafka_lite._timeouts import loop_time
from aiokafka_lite.hooks import HookSet, emit
from aiokafka_lite.ops import offsets as offset_ops
from aiokafka_lite.ops.fetch import NO_TOPIC_ID, fetch_request
from aiokafka_lite.ops.fetch import max_version as fetch_max_version
from aiokafka_lite.records.reader import count_records
from aiokafka_lite.structs import TopicPartition

from .buffer import PartitionBuffer
from .subscription import EARLIEST, LATEST, SubscriptionState

__all__ = ["Fetcher", "EARLIEST", "LATEST"]

log = logging.getLogger(__name__)

READ_UNCOMMITTED = 0
#: how long buffered records of a partition hold back new fetches to its leader (aiokafka's
#: prefetch_backoff): see Fetcher._plan
PREFETCH_HOLD_S = 0.1
READ_COMMITTED = 1


class Fetcher:
    """Background fetching for one consumer (see module docstring)."""

    def __init__(
        self,
        client: Any,
        subscriptions: SubscriptionState,
        *,
        key_deserializer: Callable[[Any], Any] | None = None,
        value_deserializer: Callable[[Any], Any] | None = None,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 52428800,
        fetch_max_wait_ms: int = 500,
        max_partition_fetch_bytes: int = 1048576,
        check_crcs: bool = True,
        isolation_level: str = "read_uncommitted",
        retry_backoff_ms: int = 100,
        hooks: HookSet | None = None,
    ) -> None:
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError("isolation_level must be 'read_uncommitted' or 'read_committed'")
        self._client = client
        self._subs = subscriptions
        self._kd, self._vd = key_deserializer, value_deserializer
        self.deserializes = key_deserializer is not None or value_deserializer is not None
        self._min_bytes = fetch_min_bytes
        self._max_bytes = fetch_max_bytes
        self._max_wait_ms = fetch_max_wait_ms
        self._partition_max_bytes = max_partition_fetch_bytes
        self._check_crcs = check_crcs
        self._isolation = (
            READ_COMMITTED if isolation_level == "read_committed" else READ_UNCOMMITTED
        )
        self._backoff = retry_backoff_ms / 1000
        self._buffers: dict[TopicPartition, PartitionBuffer] = {}
        self._buffered_at: dict[TopicPartition, float] = {}  # when each buffer arrived
        self._inflight: dict[int, asyncio.Task[None]] = {}
        self._resetting: asyncio.Task[None] | None = None
        self._backoff_until: dict[TopicPartition, float] = {}
        #: the topic id each assigned partition's position belongs to (with its state object:
        #: a new assignment starts afresh); see _check_topic_ids
        self._ids: dict[TopicPartition, tuple[Any, Any]] = {}
        self._wake = Signal()  # the planner: look again
        self._data = Signal()  # getone()/getmany(): a buffer or an error may be available
        #: aiokafka's name: the next_record() calls waiting for data now (kafkaesk's tests check
        #: that a cancelled wait leaves none behind)
        self._fetch_waiters: set[asyncio.Task[Any]] = set()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        #: the consumer's unexpected background errors (the fetcher's tasks and the group's,
        #: which the consumer hands this supervisor), raised once by the next drain()
        self.supervisor = self._sup = Supervisor(
            "consumer", retry_backoff_ms, log, on_error=self._data.set
        )
        self._g_plan = self._sup.guard("fetch planner")
        self._g_fetch = self._sup.guard("fetch")
        self._g_reset = self._sup.guard("offset reset")
        self._h_fetch = hooks.on_fetch if hooks is not None else ()
        subscriptions.add_waker(self.wake)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Start the planner task."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="aiokafka_lite-fetcher")

    def abandon(self) -> None:
        """Cancel every task at once without awaiting (the consumer was garbage-collected
        unstopped)."""
        self._closed = True
        for t in (self._task, self._resetting, *self._inflight.values()):
            if t is not None and not t.get_loop().is_closed():
                t.cancel()

    async def close(self) -> None:
        """Stop fetching; drop buffered data (bounded: waits for nothing but cancellation)."""
        self._closed = True
        self._subs.remove_waker(self.wake)
        tasks = [t for t in (self._task, self._resetting, *self._inflight.values()) if t]
        for t in tasks:
            t.cancel()
        if tasks:  # never raises the tasks' errors; our own cancellation propagates
            await asyncio.wait(tasks, timeout=5)
        self._buffers.clear()
        self._buffered_at.clear()
        self._data.set()

    def wake(self) -> None:
        """Ask the planner to look again (called on subscription changes); also wakes a
        waiting getmany() so it sees new errors and pause/resume at once."""
        self._wake.set()
        self._data.set()

    # -- handing out records ---------------------------------------------------------------
    def drain_one(self) -> Any:
        """``drain((), 1)``'s common case for `async for`: the next record of the partition
        whose turn it is, when nothing needs drain()'s bookkeeping (no error, the buffer is
        current and not at the end of its decoded records); else None: call drain()."""
        buffers = self._buffers
        if not buffers or self._subs.errors or self._sup.pending is not None:
            return None
        for tp, buf in buffers.items():  # the first one, as drain() would take it
            st = self._subs.assignment.get(tp)
            if st is None or st.paused or st.position != buf.position:
                return None
            rec = buf.take_one()
            if rec is None:
                return None
            st.position = buf.position
            return rec
        return None

    def drain(
        self, partitions: Collection[TopicPartition], max_records: int, arrow: bool | None = None
    ) -> dict[TopicPartition, Any]:
        """Up to ``max_records`` buffered records (of ``partitions`` if given; ``arrow`` not None:
        ColumnBuffers, with headers if True); raises the first pending partition error once."""
        subs = self._subs.assignment
        if self._subs.errors or self._sup.pending is not None:
            self._raise_pending(partitions, subs)
        out: dict[TopicPartition, list[Any]] = {}
        if not self._buffers:
            self._data.clear()
            return out
        n = max_records
        buffers = self._buffers
        refetch = False
        for tp in list(buffers):
            if partitions and tp not in partitions:
                continue
            buf = buffers[tp]
            st = subs.get(tp)
            if st is None or st.position != buf.position:  # unassigned or seeked: stale data
                del buffers[tp]
                refetch = True
                continue
            if st.paused:
                continue
            try:
                recs: Any = buf.take(n) if arrow is None else buf.take_arrow(n, arrow)
            except Exception as exc:
                # a record that cannot be decoded (KafkaError) or deserialized (the user's
                # exception): the position stays AT it, nothing after it is skipped
                if out:
                    break  # hand out what was taken first; the buffer raises again next call
                del buffers[tp]
                if isinstance(exc, Errors.KafkaError):  # corrupt data: refetched next poll
                    self._wake.set()
                else:  # a deserializer error: the record is deserialized again by the next
                    buffers[tp] = buf  # poll (after the other partitions' records), as aiokafka
                raise
            st.position = buf.position
            if buf.exhausted:
                del buffers[tp]
                refetch = True
                if buf.position == buf.start:  # data, but no complete batch at the position
                    self._subs.set_error(
                        st,
                        Errors.RecordTooLargeError(
                            f"{tp}: the record batch at offset {buf.start} does not fit in "
                            f"max_partition_fetch_bytes={self._partition_max_bytes}; raise it"
                        ),
                    )
                    self._data.set()
            else:  # it stays first: as aiokafka and the Java client, one partition's fetched
                # records are handed out before the next one's (buffers in arrival order); an
                # application that keeps taking from it keeps its leader's hold (_plan) alive
                self._buffered_at[tp] = loop_time()
            if recs:
                out[tp] = recs
                n -= len(recs)
                if n <= 0:
                    break
        if refetch:
            self._wake.set()
        if not out:
            self._data.clear()
        return out

    def _raise_pending(
        self, partitions: Collection[TopicPartition], subs: Mapping[TopicPartition, Any]
    ) -> None:
        self._sup.raise_pending()
        left = False
        for tp, st in subs.items():
            if st.error is not None:
                if partitions and tp not in partitions:
                    left = True
                    continue
                exc, st.error = st.error, None
                raise exc
        self._subs.errors = left

    async def wait_for_data(self, timeout: float) -> None:
        """Wait until a buffer or an error may be available, at most ``timeout`` seconds."""
        await self._data.wait(timeout)

    async def next_record(self, partitions: Collection[TopicPartition]) -> Any:
        """aiokafka's ``Fetcher.next_record``: the next record of ``partitions`` (of every
        assigned partition when empty), waiting as long as it takes. The consumer's ``getone()``
        is this plus its group's poll and the consume hooks."""
        task = asyncio.current_task()
        if task is not None:
            self._fetch_waiters.add(task)
        try:
            tps = set(partitions)
            while True:
                recs = self.drain(tps, 1)
                if recs:
                    return next(iter(recs.values()))[0]
                if self._closed:
                    raise Errors.ConsumerStoppedError("consumer is stopped")
                await self.wait_for_data(1.0)
        finally:
            if task is not None:
                self._fetch_waiters.discard(task)

    def buffered_partitions(self) -> set[TopicPartition]:
        """Partitions with data waiting (for tests and introspection)."""
        return set(self._buffers)

    # -- planner ---------------------------------------------------------------------------
    async def _run(self) -> None:
        guard = self._g_plan
        while not self._closed:
            self._wake.clear()
            try:
                delay = self._plan()
            except Exception as exc:  # a bug: surfaced once, retried with back-off
                delay = guard.failed(exc)
                self._data.set()
                await asyncio.sleep(delay)
                continue
            guard.ok()
            if delay is None:
                delay = 1.0
            await self._wake.wait(delay)

    def _plan(self) -> float | None:
        """Start what can be started; return how long to sleep at most."""
        subs = self._subs
        if subs.pending_resets() and (self._resetting is None or self._resetting.done()):
            self._resetting = asyncio.create_task(self._reset_positions())
        cluster = self._client.cluster
        self._check_topic_ids(cluster)
        now = loop_time()
        by_node: dict[int, dict[TopicPartition, int]] = {}
        need_metadata = False
        sleep: float | None = None
        # As aiokafka's: no new fetch to a node while records of a partition it leads wait
        # for the application, for at most PREFETCH_HOLD_S after they arrived or after the
        # application last took some of them with drain() (a busy machine can take longer than
        # the hold to drain one buffer of a backlog, a few records at a time). A fetch for
        # the node's other partitions, at their log end, long-polls for fetch_max_wait_ms,
        # and the partition being drained could not be fetched again before it returns (a
        # slow consumer of a backlog stalled 0.5 s per buffer near the end of it).
        held: dict[int, float] = {}
        for tp in self._buffers:
            ends = self._buffered_at.get(tp, 0.0) + PREFETCH_HOLD_S
            if ends > now:
                leader = cluster.leader_for_partition(tp)
                if leader is not None and leader >= 0 and ends > held.get(leader, 0.0):
                    held[leader] = ends
        for tp in subs.fetchable():
            if tp in self._buffers:
                continue
            until = self._backoff_until.get(tp)
            if until is not None:
                if until > now:
                    sleep = min(sleep or until - now, until - now)
                    continue
                del self._backoff_until[tp]
            leader = cluster.leader_for_partition(tp)
            if leader is None or leader < 0:
                need_metadata = True
                continue
            if leader in self._inflight:
                continue
            hold = held.get(leader)
            if hold is not None:
                sleep = min(sleep or hold - now, hold - now)
                continue
            by_node.setdefault(leader, {})[tp] = subs.assignment[tp].position  # type: ignore[assignment]
        for node, positions in by_node.items():
            task = asyncio.create_task(self._fetch(node, positions))
            self._inflight[node] = task
        if need_metadata:
            self._client.request_update()
            sleep = min(sleep, self._backoff) if sleep is not None else self._backoff
        return sleep

    def _check_topic_ids(self, cluster: Any) -> None:
        """KIP-516: a partition's position is an offset in the log of one topic id. When the
        metadata gives its topic a new id (deleted and re-created under the same name), that
        position means nothing in the new log: it is reset (``auto_offset_reset``; with "none"
        the next poll raises InconsistentTopicIdError), its buffered records dropped. The Java
        client 4.4 keeps the position and reads the new topic from it (tests/test_topic_ids.py).
        """
        ids = self._ids
        subs = self._subs
        assignment = subs.assignment
        for tp in [tp for tp in ids if tp not in assignment]:
            del ids[tp]
        for tp, st in assignment.items():
            tid = cluster.topic_id(tp.topic)
            if tid is None or tid == NO_TOPIC_ID:
                continue  # deleted, or no ids (an embedded broker): keep what was known
            seen = ids.get(tp)
            if seen is None or seen[0] is not st:
                ids[tp] = (st, tid)
                continue
            if seen[1] == tid:
                continue
            ids[tp] = (st, tid)
            self._buffers.pop(tp, None)
            if st.position is None and st.reset is not None:
                continue  # a reset is under way: it asks the new topic
            log.warning(
                "%s was re-created (topic id %s -> %s): position %s belongs to the old topic",
                tp,
                seen[1],
                tid,
                st.position,
            )
            if subs.default_reset is None:
                subs.set_error(
                    st,
                    Errors.InconsistentTopicIdError(
                        f"{tp} was deleted and re-created (topic id {seen[1]} -> {tid}): "
                        f"position {st.position} belongs to the old topic; seek to go on"
                    ),
                )
                st.position = None
                self._data.set()
            else:
                subs.request_reset(tp)

    def _backoff_partition(self, tp: TopicPartition, delay: float | None = None) -> None:
        self._backoff_until[tp] = loop_time() + (self._backoff if delay is None else delay)

    # -- one fetch -------------------------------------------------------------------------
    def _fetch_request(self, positions: Mapping[TopicPartition, int]) -> Any:
        cluster = self._client.cluster
        topics = {tp.topic for tp in positions}
        return fetch_request(
            positions,
            max_wait_ms=self._max_wait_ms,
            min_bytes=self._min_bytes,
            max_bytes=self._max_bytes,
            partition_max_bytes=self._partition_max_bytes,
            isolation_level=self._isolation,
            topic_ids={t: cluster.topic_id(t) for t in topics},
        )

    async def _fetch(self, node: int, positions: dict[TopicPartition, int]) -> None:
        try:
            request = self._fetch_request(positions)
            timeout = self._client.timeouts.client_wait_ms(self._max_wait_ms)  # a long poll
            cap = fetch_max_version(request)
            try:
                response = await self._client.send(
                    node,
                    request,
                    timeout_ms=timeout,
                    **({} if cap is None else {"max_version": cap}),
                )
            except (
                Errors.KafkaConnectionError,
                Errors.KafkaTimeoutError,
                Errors.NodeNotReadyError,
            ) as exc:
                log.debug("fetch from node %s failed: %r", node, exc)
                self._client.request_update()
                for tp in positions:
                    self._backoff_partition(tp)
                return
            self._handle_response(
                response, positions, {t.topic: t.topic_id for t in request.topics}, node
            )
            self._g_fetch.ok()
        except Errors.KafkaError as exc:  # CancelledError (a BaseException) propagates
            log.warning("fetch from node %s failed: %r", node, exc)
            for tp in positions:
                st = self._subs.assignment.get(tp)
                if st is not None:
                    self._subs.set_error(st, exc)
                    break
            for tp in positions:
                self._backoff_partition(tp)
            self._data.set()
        except Exception as exc:  # a bug: surfaced once; these partitions wait the back-off
            delay = self._g_fetch.failed(exc)
            for tp in positions:
                self._backoff_partition(tp, delay)
            self._data.set()
        finally:
            self._inflight.pop(node, None)
            self._wake.set()

    def _handle_response(
        self,
        response: Any,
        positions: Mapping[TopicPartition, int],
        sent_ids: Mapping[str, Any] | None = None,
        node: int | None = None,
    ) -> None:
        """``sent_ids``: topic name -> the id the request named it by (a v13+ answer names
        topics by id only)."""
        if response.error_code:
            raise Errors.for_code(response.error_code)("fetch request failed")
        subs = self._subs
        got_data = False
        now_ms = int(time.time() * 1000)  # wall clock: last_poll_timestamp(), not a deadline
        h_fetch = self._h_fetch
        sent = sent_ids or {}
        names = {i: t for t, i in sent.items() if i != NO_TOPIC_ID}
        ids = self._ids
        hints: dict[TopicPartition, tuple[int, int]] = {}
        for topic_resp in response.responses:
            topic = topic_resp.topic or names.get(topic_resp.topic_id)
            if topic is None:
                continue  # an id this fetch did not ask for
            tid = sent.get(topic, NO_TOPIC_ID)
            for pd in topic_resp.partitions:
                tp = TopicPartition(topic, pd.partition_index)
                offset = positions.get(tp)
                st = subs.assignment.get(tp)
                if offset is None or st is None or st.position != offset:
                    continue  # no longer assigned, or the position moved meanwhile
                seen = ids.get(tp)
                if tid != NO_TOPIC_ID and seen is not None and seen[1] != tid:
                    continue  # another topic of that name than the position's (re-created)
                err = pd.error_code
                if err == 0:
                    st.highwater = pd.high_watermark
                    st.last_poll_ms = now_ms
                    if pd.last_stable_offset >= 0:
                        st.lso = pd.last_stable_offset
                    if pd.log_start_offset >= 0:
                        st.log_start = pd.log_start_offset
                    data = pd.records
                    if h_fetch:
                        emit(
                            h_fetch,
                            topic,
                            tp.partition,
                            count_records(data, offset),
                            len(data) if data is not None else 0,
                            pd.high_watermark,
                            pd.high_watermark - offset,
                        )
                    if data is None or len(data) == 0:
                        continue
                    aborted = None
                    if self._isolation == READ_COMMITTED:
                        aborted = [
                            (a.producer_id, a.first_offset) for a in (pd.aborted_transactions or ())
                        ]
                    self._buffered_at[tp] = loop_time()
                    self._buffers[tp] = PartitionBuffer(
                        tp,
                        data,
                        offset,
                        check_crcs=self._check_crcs,
                        aborted=aborted,
                        last_stable_offset=st.lso,
                        key_deserializer=self._kd,
                        value_deserializer=self._vd,
                    )
                    got_data = True
                elif err == Errors.OffsetOutOfRangeError.errno:
                    if subs.default_reset is None:
                        subs.set_error(st, Errors.OffsetOutOfRangeError({tp: offset}))
                        got_data = True
                    else:
                        log.info("offset %s out of range for %s: resetting", offset, tp)
                        subs.request_reset(tp)
                else:
                    exc_cls = Errors.for_code(err)
                    leader = pd.current_leader  # KIP-951 (v12+; endpoints v16+)
                    if (
                        leader is not None
                        and leader.leader_id >= 0
                        and leader.leader_id != node  # (never "again here, at once")
                        and exc_cls.invalid_metadata
                    ):
                        hints[tp] = (leader.leader_id, leader.leader_epoch)
                    elif (
                        exc_cls.invalid_metadata
                        or exc_cls.retriable
                        or err == Errors.UnknownTopicOrPartitionError.errno
                    ):
                        log.debug("fetch %s: %s, refreshing metadata", tp, exc_cls.__name__)
                        self._client.request_update()
                        self._backoff_partition(tp)
                    else:
                        subs.set_error(st, exc_cls(f"fetch failed for {tp}"))
                        got_data = True
        if hints:  # the new leaders at once, no Metadata round trip; the planner fetches
            moved = self._client.apply_leaders(hints, response.node_endpoints or ())
            for tp in hints.keys() - moved:  # an older answer, or an unknown node: look up
                self._client.request_update()
                self._backoff_partition(tp)
        if got_data:
            self._data.set()

    # -- offsets lookup --------------------------------------------------------------------
    async def _reset_positions(self) -> None:
        pending = dict(self._subs.pending_resets())
        if not pending:
            return
        try:
            found = await self.list_offsets(pending, timeout_ms=self._client.timeouts.retry_ms)
        except Errors.KafkaError as exc:  # CancelledError (a BaseException) propagates
            log.warning("offset reset failed: %r", exc)
            await asyncio.sleep(self._backoff)
            return
        except Exception as exc:  # a bug: surfaced once, the next reset waits the back-off
            delay = self._g_reset.failed(exc)
            self._data.set()
            await asyncio.sleep(delay)
            return
        finally:
            self._wake.set()
        self._g_reset.ok()
        for tp, ts in pending.items():
            st = self._subs.assignment.get(tp)
            if st is None or st.reset != ts or tp not in found:
                continue
            offset = found[tp][0]
            st.reset = None
            st.position = offset if offset >= 0 else None
        self._subs.changed()

    async def list_offsets(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: float
    ) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets for each partition (timestamp, or EARLIEST -2 / LATEST -1) at its
        leader, retrying leader errors until ``timeout_ms``; returns tp -> (offset, timestamp)
        with offset -1 when no record matches a timestamp."""
        try:
            found = await offset_ops.list_offsets(
                self._client, timestamps, isolation_level=self._isolation, timeout_ms=timeout_ms
            )
        except Errors.UnknownTopicOrPartitionError as exc:
            # a partition that fresh metadata does not have: aiokafka's consumer reports it as
            # KafkaTimeoutError (it waits for it first); the admin keeps the precise class
            raise Errors.KafkaTimeoutError(str(exc)) from exc
        return {tp: (v.offset, v.timestamp) for tp, v in found.items()}
