"""KIP-368 re-authentication of an open connection: the timer, the exchange, the hold.

:class:`Reauthenticator` belongs to one :class:`~aiokafka_lite.conn.BrokerConnection` (which it
never imports: it is handed the connection as a :class:`Shell`). After each login with a session
lifetime, :meth:`Reauthenticator.schedule` sets a timer (85-95% of the lifetime, at least 1 s
before its end); when it fires, the mechanism's preparation (a fresh token, a new Kerberos
context) runs while traffic goes on, then the connection's ``_held`` becomes a list and every
request the connection issues is appended to it (with its waiter and deadline) while
SaslHandshake and SaslAuthenticate go out past the hold; after the last answer the held requests
are issued in order and the next timer is set. Requests in flight before are answered as usual:
the broker answers in order and reads the handshake after them. A failure closes the connection
with that error.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any, Protocol

from . import errors as Errors
from ._sasl import SaslSettings, exchange, prepare

__all__ = ["Reauthenticator", "Shell"]

log = logging.getLogger(__name__)

#: a held request: (request, class, version, waiter or None for expect_response=False, deadline)
Held = tuple[Any, Any, int, Any, float]


class Shell(Protocol):
    """What re-authentication needs of its connection."""

    answer_timeout_ms: int
    last_activity: float
    sasl: SaslSettings
    _held: list[Held] | None

    @property
    def closed(self) -> bool: ...

    def close(self, reason: BaseException | None = None) -> None: ...

    def _loop_time(self) -> float: ...

    async def _sasl_send(self, request: Any, deadline: float) -> Any: ...

    def _issue(
        self, request: Any, cls: Any, version: int, waiter: Any, deadline: float
    ) -> None: ...

    def _release_slot(self) -> None: ...

    def _closed_error(self) -> Errors.KafkaConnectionError: ...


class Reauthenticator:
    """The re-authentication timer, task and hold of one connection."""

    __slots__ = ("_conn", "count", "_handle", "_task")

    def __init__(self, conn: Shell) -> None:
        self._conn = conn
        #: completed re-authentications
        self.count = 0
        self._handle: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None

    def schedule(self, lifetime_ms: int, auth_start: float) -> None:
        """Re-authenticate before a session of ``lifetime_ms`` (granted by an exchange that
        began at ``auth_start``) ends: at a random point between 85% and 95% of it, as the Java
        client, and at least 1 s before its end (a long poll written just before may hold the
        broker's reading of our next request that long), but no sooner than 1 s after the
        exchange began (the broker refuses re-authentications less than 1 s apart)."""
        if lifetime_ms <= 0 or self._conn.closed:
            return
        lifetime = lifetime_ms / 1000
        delay = lifetime * random.uniform(0.85, 0.95)
        delay = max(min(delay, lifetime - 1.0), min(lifetime * 0.5, delay), 1.0)
        self._handle = asyncio.get_running_loop().call_at(auth_start + delay, self._start)

    def _start(self) -> None:
        self._handle = None
        if not self._conn.closed:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        """KIP-368 on the connection's stream. A failure closes the connection with that error
        (the client reconnects, and a refused credential then surfaces as on any connect)."""
        conn = self._conn
        deadline = conn._loop_time() + conn.answer_timeout_ms / 1000
        try:
            ex = await prepare(conn.sasl, deadline)
            if conn.closed:
                return
            idle_since = conn.last_activity  # re-authenticating is not activity (idle close)
            started = conn._loop_time()
            conn._held = []
            lifetime_ms = await exchange(conn._sasl_send, ex, deadline)
        except Errors.KafkaError as exc:
            log.warning("re-authentication of %r failed: %s", conn, exc)
            conn.close(exc)
            return
        except Exception as exc:  # a bug; never leave the stream half re-authenticated
            log.exception("re-authentication of %r failed", conn)
            conn.close(Errors.KafkaConnectionError(f"re-authentication failed: {exc!r}"))
            return
        finally:
            if self._task is asyncio.current_task():
                self._task = None
        if self._conn.closed:  # closed while the last answer was being handed to us
            return
        conn.last_activity = idle_since
        self.count += 1
        log.debug("re-authenticated %r in %.1f ms", conn, (conn._loop_time() - started) * 1000)
        self._release()
        self.schedule(lifetime_ms, started)

    def _release(self) -> None:
        """Issue the requests held during the exchange, in the order they were made."""
        conn = self._conn
        held, conn._held = conn._held, None
        for request, cls, version, waiter, deadline in held or ():
            if conn.closed:
                if waiter is not None and not waiter.done():
                    waiter.set_exception(conn._closed_error())
                continue
            if waiter is None:  # expect_response=False: no slot, nothing to fail
                conn._issue(request, cls, version, None, deadline)
                continue
            if waiter.done():  # its caller stopped waiting (cancelled)
                conn._release_slot()
                continue
            try:
                conn._issue(request, cls, version, waiter, deadline)
            except Exception as exc:  # it could not be encoded: that request fails alone
                conn._release_slot()
                waiter.set_exception(exc)

    def close(self) -> None:
        """The connection closed: fail the held requests, stop the timer and the task."""
        conn = self._conn
        held, conn._held = conn._held, None
        for _req, _cls, _v, waiter, _deadline in held or ():
            if waiter is not None and not waiter.done():
                waiter.set_exception(conn._closed_error())
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
