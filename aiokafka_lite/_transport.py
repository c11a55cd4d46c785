"""The asyncio side of a broker connection: in-flight slots, write coalescing, back-pressure,
the idle close, and the transport's protocol object.

:class:`FlowControl` is a base of :class:`~aiokafka_lite.conn.BrokerConnection` (the
connection's state lives there, declared below); :class:`Stream` hands the transport's events
to it; :class:`Callback` stands for the future of a ``send_nowait`` request.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from . import errors as Errors

__all__ = ["Callback", "FlowControl", "Stream"]

log = logging.getLogger("aiokafka_lite.conn")

#: frames below this size written in the same loop iteration are joined into one write()
_COALESCE_LIMIT = 16 * 1024


class FlowControl:
    """In-flight slots (``max_in_flight``), the write queue joined into one ``write()`` per
    loop iteration, waiting for the transport's buffer to drain (bounded by a deadline), and
    closing the connection after ``connections_max_idle_ms`` without a request."""

    host: str
    port: int
    max_in_flight: int
    connections_max_idle_ms: int | None
    last_activity: float
    _loop: asyncio.AbstractEventLoop | None
    _transport: Any
    _closed: bool
    _slots: int
    _slot_waiters: deque[asyncio.Future[None]]
    _wqueue: list[bytes | bytearray]
    _flush_scheduled: bool
    _write_paused: bool
    _drain_waiters: list[asyncio.Future[None]]
    _idle_handle: asyncio.TimerHandle | None

    def close(self, reason: BaseException | None = None) -> None:
        """Close the stream (the connection's own)."""
        raise NotImplementedError

    def _closed_error(self) -> Errors.KafkaConnectionError:
        raise NotImplementedError

    def _write(self, frame: bytes | bytearray) -> None:
        """Write a frame. Small frames sent while others are in flight are queued and go out
        together in one syscall at the end of the loop iteration; a lone request (the
        request/response case, e.g. ``send_and_wait``) is written at once."""
        self.last_activity = self._loop.time()  # type: ignore[union-attr]
        if len(frame) >= _COALESCE_LIMIT or (self._slots <= 1 and not self._wqueue):
            if self._wqueue:
                self._flush()
            self._transport.write(frame)
            return
        self._wqueue.append(frame)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)  # type: ignore[union-attr]

    def _flush(self) -> None:
        self._flush_scheduled = False
        queue = self._wqueue
        if not queue:
            return
        data = queue[0] if len(queue) == 1 else b"".join(queue)
        queue.clear()
        if not self._closed:
            self._transport.write(data)

    async def _drain(self, deadline: float) -> None:
        """Wait until the transport's write buffer is below its low-water mark (bounded)."""
        self._flush()
        if self._closed:
            raise self._closed_error()
        if not self._write_paused:
            return
        waiter: asyncio.Future[None] = self._loop.create_future()  # type: ignore[union-attr]
        self._drain_waiters.append(waiter)
        try:
            await asyncio.wait_for(
                waiter,
                max(deadline - self._loop.time(), 0.001),  # type: ignore[union-attr]
            )
        except asyncio.TimeoutError:
            err = Errors.KafkaTimeoutError(
                f"write to {self.host}:{self.port} blocked past the request deadline"
            )
            self.close(err)
            raise err from None
        finally:
            if waiter in self._drain_waiters:
                self._drain_waiters.remove(waiter)

    async def _wait_slot(self, deadline: float) -> None:
        waiter: asyncio.Future[None] = self._loop.create_future()  # type: ignore[union-attr]
        self._slot_waiters.append(waiter)
        try:
            await asyncio.wait_for(
                waiter,
                max(deadline - self._loop.time(), 0.001),  # type: ignore[union-attr]
            )
        except asyncio.TimeoutError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._release_slot()  # the slot was handed over just as the deadline hit
            raise Errors.KafkaTimeoutError(
                f"no in-flight slot on {self.host}:{self.port} before the request deadline "
                f"({self.max_in_flight} requests in flight)"
            ) from None
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._release_slot()
            raise
        finally:
            if not waiter.done():
                waiter.cancel()
            try:
                self._slot_waiters.remove(waiter)
            except ValueError:
                pass

    def _release_slot(self) -> None:
        """Give a freed in-flight slot to the oldest live waiter, else return it."""
        waiters = self._slot_waiters
        while waiters:
            w = waiters.popleft()
            if not w.done():
                w.set_result(None)  # the slot moves to the waiter: _slots unchanged
                return
        self._slots -= 1

    def _writing(self, paused: bool) -> None:
        self._write_paused = paused
        if not paused:
            waiters, self._drain_waiters = self._drain_waiters, []
            for w in waiters:
                if not w.done():
                    w.set_result(None)

    def _schedule_idle_check(self) -> None:
        if not self.connections_max_idle_ms or self._closed:
            return
        assert self._loop is not None
        self._idle_handle = self._loop.call_at(
            self.last_activity + self.connections_max_idle_ms / 1000, self._idle_check
        )

    def _idle_check(self) -> None:
        self._idle_handle = None
        if self._closed:
            return
        assert self._loop is not None
        if (
            self._slots == 0
            and not self._slot_waiters
            and (
                self._loop.time() - self.last_activity >= self.connections_max_idle_ms / 1000  # type: ignore[operator]
            )
        ):
            log.debug("closing idle connection %r", self)
            self.close(None)
            return
        if self._slots:
            self.last_activity = max(self.last_activity, self._loop.time())
        self._schedule_idle_check()


class Callback:
    """Stands for the future of a :meth:`~aiokafka_lite.conn.BrokerConnection.send_nowait` request: resolving it
    calls the caller's function at once."""

    __slots__ = ("_fn", "_done")

    def __init__(self, fn: Callable[[Any, BaseException | None], None]) -> None:
        self._fn = fn
        self._done = False

    def done(self) -> bool:
        return self._done

    def cancelled(self) -> bool:
        return False

    def set_result(self, result: Any) -> None:
        self._call(result, None)

    def set_exception(self, exc: BaseException) -> None:
        self._call(None, exc)

    def _call(self, result: Any, exc: BaseException | None) -> None:
        self._done = True
        try:
            self._fn(result, exc)
        except Exception:  # never let a caller's bug break the stream or close()
            log.exception("response callback %r failed", self._fn)


class Stream(asyncio.BufferedProtocol):
    """The transport's protocol: hands every event straight to its :class:`~aiokafka_lite.conn.BrokerConnection`.
    A buffered protocol: the transport reads into the session's buffers (``get_buffer``), a
    large response straight into one buffer of its size, instead of handing over a new
    ``bytes`` per read (asyncio's selector and TLS transports and uvloop all take it)."""

    __slots__ = ("get_buffer", "buffer_updated", "_conn")

    def __init__(self, conn: Any) -> None:  # its BrokerConnection
        self._conn = conn
        self.get_buffer = conn._get_buffer  # type: ignore[method-assign]
        self.buffer_updated = conn._buffer_updated  # type: ignore[method-assign]

    def connection_lost(self, exc: Exception | None) -> None:
        self._conn._connection_lost(exc)

    def eof_received(self) -> bool | None:
        return None  # the transport closes; connection_lost reports it

    def pause_writing(self) -> None:
        self._conn._writing(True)

    def resume_writing(self) -> None:
        self._conn._writing(False)
