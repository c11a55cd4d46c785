"""Batches and record handles: the per-batch state and the per-record future-likes.

:class:`ProducerBatch` is one record batch for one partition with ONE asyncio future;
:class:`RecordHandle` is a ``(batch, index, timestamp)`` tuple that resolves to the record's
:class:`RecordMetadata` from the batch result. The caller-filled batches of
``create_batch()``/``send_batch()`` are in :mod:`~aiokafka_lite.producer.user_batch`.
"""

from __future__ import annotations

import asyncio
import weakref
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import Context, copy_context
from itertools import repeat
from operator import itemgetter
from typing import Any, overload

from aiokafka_lite import errors as Errors
from aiokafka_lite.records.batch_builder import encoded_headers
from aiokafka_lite.structs import RecordMetadata, TopicPartition

__all__ = [
    "BATCH_TRANSITIONS",
    "ProducerBatch",
    "RecordHandle",
    "RecordHandles",
    "check_record_size",
    "estimate_record_size",
]

Headers = Sequence[tuple[str, bytes | None]]
_BATCH_OVERHEAD = 61  # record batch v2 header
_RECORD_OVERHEAD = 22  # worst-case varints + attributes per record


def estimate_record_size(key: bytes | None, value: bytes | None, headers: Headers | None) -> int:
    """Upper bound of one record's encoded size inside a batch (uncompressed)."""
    size = _RECORD_OVERHEAD + (len(key) if key is not None else 0)
    if value is not None:
        size += len(value)
    if headers:  # their exact encoded size, cached by content (see encoded_headers)
        size += len(encoded_headers(headers))
    return size


def check_record_size(key: Any, value: Any, headers: Any, max_request_size: int) -> None:
    """MessageSizeTooLargeError when one record in a batch of its own would exceed
    ``max_request_size`` (key and value serialized)."""
    size = estimate_record_size(key, value, headers) + _BATCH_OVERHEAD
    if size > max_request_size:
        raise Errors.MessageSizeTooLargeError(
            f"the record is {size} bytes when serialized, larger than "
            f"max_request_size={max_request_size}"
        )


# ---- the batch state machine -------------------------------------------------------------
# A batch's ``state`` changes only through ``Accumulator._to`` (producer/accumulator.py), which
# refuses any change this table does not list. DONE and FAILED are final: an outcome that
# arrives for a batch already final (the answer to a request close() gave up on) is ignored.

OPEN = "open"  #: accepting records (the partition's newest batch)
SEALED = "sealed"  #: closed for appends, queued in its partition's queue
IN_FLIGHT = "in_flight"  #: in a Produce request that has not ended
RETRY = "retry"  #: back in its queue (in sequence order) after a retriable failure
DONE = "done"  #: acknowledged (or written, with acks=0): its future has the offsets
FAILED = "failed"  #: its future has the error (non-retriable, expired, aborted, closed)

BATCH_TRANSITIONS: dict[str, frozenset[str]] = {
    OPEN: frozenset((SEALED, FAILED)),  # full, or ready to go now / expired, aborted
    SEALED: frozenset((IN_FLIGHT, FAILED)),  # drained into a request / expired, not encodable
    IN_FLIGHT: frozenset((DONE, RETRY, FAILED)),  # the request's outcome
    RETRY: frozenset((IN_FLIGHT, FAILED)),  # drained again / expired, aborted
    DONE: frozenset(),
    FAILED: frozenset(),
}
#: states of a batch not handed to a request yet (Accumulator.unsent counts them)
UNSENT = frozenset((OPEN, SEALED, RETRY))


def _closed_append(*_args: Any) -> None:
    """``ProducerBatch.append`` once the batch is sealed: no room (the caller opens another)."""
    return None


def _closed_append_values(_ts: int, _values: Any, start: int) -> int:
    """``ProducerBatch.append_values`` once the batch is sealed: nothing taken."""
    return start


class ProducerBatch:
    """One record batch for one partition, plus its delivery state.

    ``append``/``append_values`` are the only way records go in (the builder's methods while
    the batch is open; once it is sealed they take nothing, so a caller holding a stale batch
    opens another). Every other field is written by the accumulator alone.
    """

    __slots__ = (
        "tp",
        "builder",
        "future",
        "reserved",
        "created",
        "ready_at",
        "deadline",
        "attempts",
        "maybe_written",
        "retry_at",
        "buffer",
        "sequence",
        "producer_id",
        "producer_epoch",
        "state",
        "sealed",
        "append",
        "append_values",
        "count",
        "first_ts",
        "user_batch",
        "handle_extra",
        "waiters",
        "loop",
    )

    def __init__(
        self,
        tp: TopicPartition,
        builder: Any,
        future: asyncio.Future[Any],
        reserved: int,
        now: float,
        linger: float,
        delivery_timeout: float,
    ) -> None:
        self.tp = tp
        self.builder = builder
        self.future = future
        self.reserved = reserved
        self.created = now
        self.ready_at = now + linger
        self.deadline = now + delivery_timeout
        self.attempts = 0
        #: a request carrying it ended without a definite answer (timeout, dropped connection,
        #: or the broker's own REQUEST_TIMED_OUT): it may be in the log already
        self.maybe_written = False
        self.retry_at = 0.0
        self.buffer: bytearray | bytes | None = None
        self.sequence = -1
        self.producer_id = -1
        self.producer_epoch = -1
        self.state = OPEN
        self.sealed = False  # state is not OPEN (one slot read on send()'s fast path)
        if builder is not None:
            self.append: Callable[..., int | None] = builder.append
            self.append_values: Callable[[int, Any, int], int] = builder.append_values
        else:
            self.append = _closed_append
            self.append_values = _closed_append_values
        self.count = 0
        self.first_ts = 0
        self.user_batch = False
        self.handle_extra: Any = None
        self.waiters: list[asyncio.Future[None]] | None = None
        self.loop = future.get_loop()  # RecordHandle.get_loop: a slot read, no method call

    def build(self) -> bytearray | bytes:
        """Encode (and compress) once; later calls return the same bytes."""
        buf = self.buffer
        if buf is None:
            buf = self.buffer = self.builder.build()
            self.builder = None
        return buf

    def __repr__(self) -> str:
        tp = self.tp
        return f"<ProducerBatch {tp.topic}-{tp.partition} {self.state} n={self.count} seq={self.sequence}>"


def _wake_waiters(batch: ProducerBatch) -> None:
    waiters = batch.waiters
    if waiters is not None:
        batch.waiters = None
        for w in waiters:
            if not w.done():
                w.set_result(None)


class RecordHandle(tuple):  # type: ignore[type-arg]
    """Future-like result of one record: awaiting it gives its :class:`RecordMetadata`.

    A plain ``(batch, index, timestamp)`` tuple (created in C, no per-record Future). It also
    implements the asyncio Future protocol (``done``, ``result``, ``add_done_callback``, ...), so
    ``asyncio.gather``/``wait``/``wait_for`` accept it as they accept a Future. Cancelling a
    handle only detaches this waiter; the record is still delivered.
    """

    __slots__ = ()
    _asyncio_future_blocking = False  # marks the class as future-like for asyncio.isfuture()
    #: read by asyncio.gather of a cancelled child (with _make_cancelled_error below): without
    #: them a gather over handles whose awaiting task is cancelled never finishes
    _cancel_message = None

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # aiokafka's send() returns an asyncio.Future and code checks for one (FastStream's
        # publish(no_confirm=True) contract): isinstance() consults __class__ after type(), so
        # isinstance(handle, asyncio.Future) holds. type(handle) is still RecordHandle.
        return asyncio.Future

    @property
    def _batch(self) -> ProducerBatch:
        return self[0]  # type: ignore[no-any-return]

    def __await__(self) -> Any:
        batch = self[0]
        if not batch.future.done():
            # Wait on a private future resolved together with the batch's (no extra loop hop):
            # cancelling the awaiting task then cancels only this waiter, never the batch.
            waiter = batch.future.get_loop().create_future()
            if batch.waiters is None:
                batch.waiters = [waiter]
            else:
                batch.waiters.append(waiter)
            yield from waiter.__await__()
        return self.result()

    # The methods below are what asyncio.gather/wait call on every handle (gather: get_loop,
    # add_done_callback, cancelled and exception twice, result). They inline the cancelled
    # check instead of calling a helper and build RecordMetadata with tuple.__new__ (the
    # NamedTuple's __new__ is a Python function): gather over 100k done handles went from
    # 2.91 to N.NN us per handle (micro benchmark, no broker; 24.5M -> N.NM profiled calls for
    # 7 x 100k handles).

    def _is_cancelled(self) -> bool:
        extra = self[0].handle_extra
        return extra is not None and self[1] in extra.cancelled

    def done(self) -> bool:
        """True once the record's batch was answered (or this handle was cancelled)."""
        batch = self[0]
        if batch.future.done():
            return True
        extra = batch.handle_extra
        return extra is not None and self[1] in extra.cancelled

    def cancelled(self) -> bool:
        """True when this handle was cancelled (the record itself may still be sent)."""
        extra = self[0].handle_extra
        return extra is not None and self[1] in extra.cancelled

    def result(self) -> RecordMetadata:
        """The record's :class:`RecordMetadata` (``None`` with ``acks=0``); raises the delivery
        error, ``CancelledError`` when cancelled, ``InvalidStateError`` when not done."""
        batch = self[0]
        extra = batch.handle_extra
        if extra is not None and self[1] in extra.cancelled:
            raise asyncio.CancelledError()
        base, append_time, log_start = batch.future.result()
        if base is None:  # acks=0: the broker tells nothing; aiokafka resolves to None
            return None  # type: ignore[return-value]
        tp = batch.tp
        offset = base + self[1] if base >= 0 else -1
        if append_time is not None and append_time >= 0:
            return _new_handle(
                RecordMetadata, (tp.topic, tp.partition, tp, offset, append_time, 1, log_start)
            )
        return _new_handle(
            RecordMetadata, (tp.topic, tp.partition, tp, offset, self[2], 0, log_start)
        )

    def exception(self) -> BaseException | None:
        """The delivery error, or ``None`` when the record was written (as ``Future.exception``)."""
        batch = self[0]
        extra = batch.handle_extra
        if extra is not None and self[1] in extra.cancelled:
            raise asyncio.CancelledError()
        return batch.future.exception()  # type: ignore[no-any-return]

    def get_loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the producer runs on."""
        return self[0].loop  # type: ignore[no-any-return]

    def _make_cancelled_error(self) -> asyncio.CancelledError:
        # asyncio's Future protocol beyond the public methods: gather (3.10-3.13) builds the
        # error of a cancelled child with it
        return asyncio.CancelledError()

    def cancel(self, msg: Any = None) -> bool:
        """Stop waiting for this record (as ``Future.cancel``); the record stays in its batch."""
        if self.done():
            return False
        self._extra().cancelled.add(self[1])
        self._run_callbacks(None)
        return True

    def _extra(self) -> _HandleExtra:
        batch = self[0]
        if batch.handle_extra is None:
            batch.handle_extra = _HandleExtra()
        return batch.handle_extra  # type: ignore[no-any-return]

    def add_done_callback(self, fn: Callable[[Any], None], *, context: Any = None) -> None:
        """Call ``fn(handle)`` once the record is acknowledged or failed (as ``Future``'s)."""
        batch = self[0]
        extra = batch.handle_extra
        if batch.future.done() or (extra is not None and self[1] in extra.cancelled):
            # already done: run with the other deferred callbacks of this loop turn (_defer)
            last = _last_deferred
            if last is None or last[0] is not batch.loop:
                last = _defer(batch.loop)
            # Three appends and no per-handle tuple; the context snapshot is shared with the
            # previous callback's when equal (a 1-tuple marks a snapshot: the drain runs each
            # callback in a fresh copy of it, so callbacks stay isolated as with call_soon).
            # Nothing per handle then outlives this call: the garbage collector, which was
            # half of gather's cost, has nothing new to track (micro benchmark, gather over
            # 100k done handles: 2.40 -> 1.77 us/handle without the tuple, -> 1.41 shared).
            pending = last[1]
            pending.append(fn)
            pending.append(self)
            if context is None:
                snap = _copy_context()
                own = last[2]
                if own is None or own[0] != snap:
                    own = last[2] = (snap,)
                pending.append(own)
            else:
                pending.append(context)
            return
        if extra is None:
            extra = batch.handle_extra = _HandleExtra()
        if not extra.hooked:  # one batch-future callback serves every handle of the batch
            extra.hooked = True
            batch.future.add_done_callback(extra.run_all)
        # the same flat layout and shared snapshot as above, per batch
        index = self[1]
        if index < extra.last_index:
            extra.ordered = False
        extra.last_index = index
        cbs = extra.callbacks
        cbs.append(fn)
        cbs.append(self)
        if context is None:
            snap = _copy_context()
            own = extra.snap
            if own is None or own[0] != snap:
                own = extra.snap = (snap,)
            cbs.append(own)
        else:
            cbs.append(context)

    def remove_done_callback(self, fn: Callable[[Any], None]) -> int:
        """Remove every registration of ``fn``; returns how many were removed."""
        extra = self[0].handle_extra
        if extra is None:
            return 0
        index = self[1]
        it = iter(extra.callbacks)
        calls = list(zip(it, it, it))
        keep = [c for c in calls if c[1][1] != index or c[0] != fn]
        extra.callbacks[:] = [x for c in keep for x in c]
        return len(calls) - len(keep)

    def _run_callbacks(self, _fut: Any) -> None:
        """The handle was cancelled: schedule its callbacks now (the batch's run later)."""
        extra = self[0].handle_extra
        if extra is None:
            return
        index = self[1]
        it = iter(extra.callbacks)
        calls = list(zip(it, it, it))
        mine = [c for c in calls if c[1][1] == index]
        if mine:
            extra.callbacks[:] = [x for c in calls if c[1][1] != index for x in c]
            loop = self.get_loop()
            for fn, _h, ctx in mine:
                loop.call_soon(fn, self, context=ctx[0].copy() if type(ctx) is tuple else ctx)

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<RecordHandle {self[0].tp} #{self[1]} {state}>"


class _HandleExtra:
    """Rarely used per-batch state of record handles: cancelled indexes and done callbacks."""

    __slots__ = ("cancelled", "callbacks", "hooked", "snap", "ordered", "last_index")

    def __init__(self) -> None:
        self.cancelled: set[int] = set()
        #: flat ``[fn, handle, context, fn, handle, context, ...]`` in the order added (see
        #: RecordHandle.add_done_callback: no tuple per handle); cancel and
        #: remove_done_callback, which are rare, scan it
        self.callbacks: list[Any] = []
        self.hooked = False
        self.snap: tuple[Context] | None = None  # the last shared context snapshot
        self.ordered = True  # callbacks were added in record order (no sort needed)
        self.last_index = -1

    def run_all(self, fut: asyncio.Future[Any]) -> None:
        """The batch is done: run every handle's callbacks, record by record (the order in which
        a batch's per-record futures would complete), each record's in the order added.

        This method is itself a done callback of the batch future, so it already runs in a
        loop turn of its own after the batch completed, as a Future's callbacks would: it
        calls each handle's callbacks right here, each in the context captured when it was
        added, instead of scheduling one more loop turn (a ``Handle`` object and an event-loop
        iteration) per record. With ``asyncio.gather`` over 100k handles that removes 100k
        ``call_soon`` calls: 0.9 s of a 5.5 s profile. An exception in a callback goes to the
        loop's exception handler and the other callbacks still run, as with ``call_soon``.
        """
        callbacks = self.callbacks
        self.callbacks = []
        self.snap = None
        it = iter(callbacks)
        calls: Iterable[_Call] = zip(it, it, it, _zeros)
        if not self.ordered:  # stable sort by record index
            calls = sorted([(f, h, c, h[1]) for f, h, c, _ in calls], key=_record_index)
        self.ordered = True
        self.last_index = -1
        _call_all(fut.get_loop(), calls)


#: (fn, handle, context or a 1-tuple holding a shared snapshot, record index or 0)
_Call = tuple[Callable[[Any], None], RecordHandle, Any, int]
_record_index = itemgetter(3)
#: per loop: done callbacks of already-done handles, run together by one scheduled _drain
_deferred: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[Any]] = (
    weakref.WeakKeyDictionary()
)


#: (loop, its pending list in _deferred) of the last _defer: add_done_callback appends there
#: directly while the same loop defers again (one identity check instead of a
#: WeakKeyDictionary lookup per handle). Safe across threads: a loop's list is only appended
#: to and drained by the thread running that loop, and _drain clears this before draining.
#: Layout: [loop, pending list, last shared context snapshot (a 1-tuple) or None]. A loop
#: closed before its drain ran stays referenced here until another loop defers.
_last_deferred: list[Any] | None = None
_zeros = repeat(0)


def _defer(loop: asyncio.AbstractEventLoop) -> list[Any]:
    """The flat ``[fn, handle, context, ...]`` list of callbacks of already-done handles of
    ``loop``, run by one scheduled :func:`_drain` (as ``call_soon`` would run each): gather over
    100k handles of batches already acknowledged costs one ``call_soon`` instead of 100k (0.5 s
    of a 2 s profile of the send-then-gather pattern)."""
    global _last_deferred
    pending = _deferred.get(loop)
    if pending is None:
        pending = _deferred[loop] = []
        loop.call_soon(_drain, loop)
    last = _last_deferred = [loop, pending, None]  # None: no context snapshot yet
    return last


def _drain(loop: asyncio.AbstractEventLoop) -> None:
    global _last_deferred
    pending = _deferred.pop(loop, None)
    last = _last_deferred
    if last is not None and last[0] is loop:
        _last_deferred = None
    if pending:
        it = iter(pending)
        _call_all(loop, zip(it, it, it, _zeros))


def _call_all(loop: asyncio.AbstractEventLoop, calls: Iterable[_Call]) -> None:
    """Run ``fn(handle)`` in its context for each call; a callback's exception goes to the
    loop's exception handler and the others still run, as with ``call_soon``."""
    for fn, handle, ctx, _index in calls:
        try:
            if type(ctx) is tuple:  # a shared snapshot (see add_done_callback): a fresh copy
                ctx[0].copy().run(fn, handle)
            else:
                ctx.run(fn, handle)
        except Exception as exc:
            loop.call_exception_handler(
                {
                    "message": f"Exception in callback {fn!r} of {handle!r}",
                    "exception": exc,
                    "future": handle,
                }
            )


_new_handle = tuple.__new__
_copy_context = copy_context


class RecordHandles(Sequence[RecordHandle]):
    """What ``send_many()`` returns: one :class:`RecordHandle` per record, in order, made when
    read (a bulk send of many records builds no per-record objects it does not need).

    A read-only sequence: ``len``, indexing (negative too), slicing (a list), iteration.
    """

    __slots__ = ("_runs", "_ends", "_len")

    def __init__(self) -> None:
        self._runs: list[tuple[ProducerBatch, int, int]] = []  # (batch, first index, ts)
        self._ends: list[int] = []  # cumulative record count at the end of each run
        self._len = 0

    def _add(self, batch: ProducerBatch, first: int, count: int, ts: int) -> None:
        self._runs.append((batch, first, ts))
        self._len += count
        self._ends.append(self._len)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, i: int) -> RecordHandle: ...

    @overload
    def __getitem__(self, i: slice) -> list[RecordHandle]: ...

    def __getitem__(self, i: int | slice) -> RecordHandle | list[RecordHandle]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._len))]
        n = self._len
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("record handle index out of range")
        r = bisect_right(self._ends, i)
        batch, first, ts = self._runs[r]
        start = self._ends[r - 1] if r else 0
        return RecordHandle((batch, first + i - start, ts))

    def __iter__(self) -> Iterator[RecordHandle]:
        start = 0
        for (batch, first, ts), end in zip(self._runs, self._ends):
            for idx in range(first, first + end - start):
                yield RecordHandle((batch, idx, ts))
            start = end

    def __repr__(self) -> str:
        return f"<RecordHandles {self._len} records in {len(self._runs)} batch runs>"
