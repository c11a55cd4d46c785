"""The one supervision rule for every background task (no I/O, no Kafka protocol).

A background task (the consumer's fetcher, a group heartbeat, the producer's sender, the
metadata refresher, ...) handles the errors it expects: the ``KafkaError`` s its loop knows.
Anything else is a bug or a broken patch, and it must neither kill the task silently nor make
it spin. The rule:

* ``CancelledError`` always propagates (nothing here catches ``BaseException``);
* an unexpected exception is logged ONCE, with its traceback, by the task's own logger; the
  same error again (same type, message and raising line) while it persists is not logged
  again, except a one-line reminder with the count at most every ``REMIND_S`` seconds;
* it is surfaced to the application ONCE per episode: the component's next call (``getmany()``,
  ``getone()``, a send's future, a metadata wait) raises it, as a ``KafkaError`` whose
  ``__cause__`` is the original exception (aiokafka's consumer and sender also wrap such errors
  in a ``KafkaError``); a ``KafkaError`` no loop expected is raised as it is;
* the failed step is retried after an exponential back-off: ``retry_backoff_ms``, doubled at
  each consecutive failure up to ``MAX_BACKOFF_S``; a step that succeeds (``Guard.ok()``) ends
  the episode and starts the back-off over.

A component holds one :class:`Supervisor` (the pending error its application has not seen) and
one :class:`Guard` per background task (that task's back-off and log state).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from aiokafka_lite.errors import KafkaError

__all__ = ["MAX_BACKOFF_S", "REMIND_S", "Guard", "Supervisor", "unexpected"]

#: the back-off cap after repeated unexpected failures of one task (the Java client's
#: retry.backoff.max.ms is 1 s for retriable errors; a bug is not transient: longer)
MAX_BACKOFF_S = 5.0
#: a persisting error is mentioned again (one line, no traceback) at most this often
REMIND_S = 60.0


def _identity(exc: BaseException) -> tuple[object, ...]:
    """What makes two failures "the same error": type, message and the line that raised."""
    tb = exc.__traceback__
    site: tuple[str, int] | None = None
    while tb is not None:
        site = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return (type(exc), str(exc), site)


def unexpected(where: str, exc: Exception) -> KafkaError:
    """``exc`` as the application sees it: a ``KafkaError`` as it is, anything else wrapped in
    a ``KafkaError`` naming the task, with ``exc`` as its ``__cause__``."""
    if isinstance(exc, KafkaError):
        return exc
    err = KafkaError(f"Unexpected error in {where}: {exc!r}")
    err.__cause__ = exc
    return err


class Supervisor:
    """The unexpected errors of one component's background tasks, for its application."""

    __slots__ = ("owner", "pending", "on_error", "_log", "_backoff_s", "_cap_s")

    def __init__(
        self,
        owner: str,
        retry_backoff_ms: float,
        logger: logging.Logger,
        *,
        max_backoff_s: float = MAX_BACKOFF_S,
        on_error: Callable[[], None] | None = None,
    ) -> None:
        self.owner = owner
        #: the error the application has not seen yet (raised once by :meth:`raise_pending`)
        self.pending: KafkaError | None = None
        #: called when an error becomes pending (e.g. to wake a waiting getmany())
        self.on_error = on_error
        self._log = logger
        self._backoff_s = max(retry_backoff_ms / 1000, 0.001)
        self._cap_s = max(max_backoff_s, self._backoff_s)

    def guard(self, task: str, logger: logging.Logger | None = None) -> Guard:
        """The failure state of one background task of this component (logging to ``logger``,
        by default the component's)."""
        return Guard(self, task, logger or self._log)

    def take(self) -> KafkaError | None:
        """The pending error (once), or None."""
        exc, self.pending = self.pending, None
        return exc

    def raise_pending(self) -> None:
        """Raise the pending error, once."""
        if self.pending is not None:
            exc, self.pending = self.pending, None
            raise exc


class Guard:
    """One background task under the rule (see the module docstring)."""

    __slots__ = ("_sup", "_log", "name", "delay", "failures", "_key", "_repeats", "_reminded")

    def __init__(self, sup: Supervisor, name: str, logger: logging.Logger) -> None:
        self._sup = sup
        self._log = logger
        self.name = name
        #: the current back-off (0: not failing)
        self.delay = 0.0
        #: unexpected failures so far, all episodes (for introspection and tests)
        self.failures = 0
        self._key: tuple[object, ...] | None = None
        self._repeats = 0
        self._reminded = 0.0

    @property
    def failing(self) -> bool:
        """True from an unexpected failure until the next :meth:`ok`."""
        return self.delay > 0

    def failed(self, exc: Exception) -> float:
        """Record an unexpected exception of this task; return how long to back off (seconds)."""
        sup = self._sup
        self.failures += 1
        self.delay = min(self.delay * 2, sup._cap_s) if self.delay else sup._backoff_s
        key = _identity(exc)
        where = f"{sup.owner}: {self.name}"
        if key != self._key:
            self._key, self._repeats, self._reminded = key, 0, time.monotonic()
            self._log.error(
                "%s: unexpected error %r; retrying with back-off (from %.3g s up to %.3g s); "
                "logged once while it repeats",
                where,
                exc,
                self.delay,
                sup._cap_s,
                exc_info=exc,
            )
            if sup.pending is None:
                sup.pending = unexpected(where, exc)
                if sup.on_error is not None:
                    sup.on_error()
        else:
            self._repeats += 1
            now = time.monotonic()
            if now - self._reminded >= REMIND_S:
                self._reminded = now
                self._log.warning(
                    "%s: still failing with %r (%d times more); retrying every %.3g s",
                    where,
                    exc,
                    self._repeats,
                    self.delay,
                )
        return self.delay

    def ok(self) -> None:
        """The task made a step without an unexpected error: the episode (if any) is over."""
        if self.delay:
            self._log.info(
                "%s: %s recovered (after %d repeat(s) of the error)",
                self._sup.owner,
                self.name,
                self._repeats,
            )
            self.delay = 0.0
            self._key = None
            self._repeats = 0

    async def run(
        self,
        body: Callable[[], Awaitable[None]],
        after_error: Callable[[], None] | None = None,
    ) -> None:
        """Run ``body()`` (a task's loop); after an unexpected exception, call ``after_error()``
        (forget state the failed step may have left half-done), back off and run it again.
        Returns when ``body()`` returns. ``body`` calls :meth:`ok` after each step."""
        while True:
            try:
                await body()
                return
            except Exception as exc:  # not CancelledError (a BaseException): it propagates
                delay = self.failed(exc)
                if after_error is not None:
                    after_error()
                await asyncio.sleep(delay)
