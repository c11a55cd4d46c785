"""Small event-loop wake-up primitives shared by the producer's sender and the consumer's
fetcher (no I/O, no Kafka)."""

from __future__ import annotations

import asyncio

__all__ = ["Signal", "wake_future"]


class Signal:
    """A flag to wait on with a timeout, whose waiters resume on the loop turn after set(): one
    future and a timer per wait, as aiokafka's fetch waiters (asyncio.wait_for over
    Event.wait() makes a task per wait on Python 3.10/3.11, two loop turns more). Both hops of
    a record, fetch answer -> getone() and drained buffer -> next fetch request, take one turn:
    FastStream hands records to its workers sooner (its test_concurrent_consume counts those
    handed out before it stops the broker right after publishing)."""

    __slots__ = ("_flag", "_waiters")

    def __init__(self) -> None:
        self._flag = False
        self._waiters: set[asyncio.Future[None]] = set()

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        self._flag = True
        waiters, self._waiters = self._waiters, set()
        for fut in waiters:
            wake_future(fut)

    def clear(self) -> None:
        self._flag = False

    async def wait(self, timeout: float) -> None:
        """Return once set (at once if it is), or after ``timeout`` seconds."""
        if self._flag or timeout <= 0:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._waiters.add(fut)
        timer = loop.call_later(timeout, wake_future, fut)
        try:
            await fut
        finally:
            timer.cancel()
            self._waiters.discard(fut)


def wake_future(fut: asyncio.Future[None]) -> None:
    """Resolve ``fut`` with None unless it is done (a timer or a waker may come second)."""
    if not fut.done():
        fut.set_result(None)
