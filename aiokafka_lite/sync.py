"""Run aiokafka_lite's coroutine API from synchronous code (Spark tasks, scripts, notebooks).

Every call gets a **fresh event loop** that is closed before the call returns, so nothing
loop-bound (sockets, tasks, futures) outlives it or leaks into the next call. Create clients
*inside* the coroutine you pass, never outside::

    from aiokafka_lite import sync

    async def count(bootstrap: str) -> int:
        async with AIOKafkaProducer(bootstrap_servers=bootstrap) as producer:
            await producer.send_and_wait("t", b"v")
        return 1

    sync.run(count("127.0.0.1:9092"), timeout=30)

:func:`iterate` does the same for an async iterator, handing its items to a plain ``for`` loop
one at a time (a Spark ``read()`` that yields Arrow batches as they arrive, for instance).

When the calling thread already runs an event loop (Jupyter, an async web handler), the work is
moved to a private worker thread, because a thread cannot run two loops at once. Either way the
caller blocks until the result is ready or ``timeout`` (seconds) passes, which raises
:class:`~aiokafka_lite.errors.KafkaTimeoutError` after cancelling the coroutine.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, TypeVar

from aiokafka_lite.errors import KafkaTimeoutError

__all__ = ["EventLoopRunner", "iterate", "run"]

T = TypeVar("T")

#: How long closing a loop may take to cancel leftover tasks and flush async generators.
_CLOSE_TIMEOUT = 5.0


def _has_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class EventLoopRunner:
    """A private event loop, run step by step from synchronous code, closed by :meth:`close`.

    Steps run in the calling thread, or in one dedicated worker thread when the calling thread
    already has a running loop. Use it as a context manager; it is not thread-safe.
    """

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        if _has_running_loop():
            self._executor = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix="aiokafka_lite-sync"
            )
        self._closed = False

    def __enter__(self) -> EventLoopRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run_in_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        asyncio.set_event_loop(self._loop)
        try:
            return self._loop.run_until_complete(coro)
        finally:
            asyncio.set_event_loop(None)

    def call(self, aw: Awaitable[T], timeout: float | None = None) -> T:
        """Run ``aw`` to completion on this runner's loop and return its result.

        ``timeout`` (seconds) cancels it and raises ``KafkaTimeoutError`` when it passes.
        """
        if self._closed:
            raise RuntimeError("EventLoopRunner is closed")
        coro = _with_timeout(aw, timeout)
        if self._executor is None:
            return self._run_in_loop(coro)
        return self._executor.submit(self._run_in_loop, coro).result()

    def close(self) -> None:
        """Cancel what is still pending on the loop, finish async generators, close the loop."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._executor is None:
                self._run_in_loop(_drain_loop())
            else:
                self._executor.submit(self._run_in_loop, _drain_loop()).result()
        finally:
            self._loop.close()
            if self._executor is not None:
                self._executor.shutdown(wait=True)


async def _with_timeout(aw: Awaitable[T], timeout: float | None) -> T:
    if timeout is None:
        return await aw
    try:
        return await asyncio.wait_for(aw, timeout)
    except asyncio.TimeoutError as exc:
        raise KafkaTimeoutError(f"operation did not finish within {timeout:g} s") from exc


async def _drain_loop() -> None:
    """Cancel every other task of the running loop and wait (bounded) for them to finish."""
    loop = asyncio.get_running_loop()
    current = asyncio.current_task()
    pending = [t for t in asyncio.all_tasks(loop) if t is not current and not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending, timeout=_CLOSE_TIMEOUT)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(loop.shutdown_asyncgens(), _CLOSE_TIMEOUT)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(loop.shutdown_default_executor(), _CLOSE_TIMEOUT)


def run(aw: Awaitable[T] | Callable[[], Awaitable[T]], *, timeout: float | None = None) -> T:
    """Run a coroutine (or a zero-argument coroutine function) on a fresh event loop.

    Blocks until it finishes and returns its result; its exception propagates unchanged.
    ``timeout`` (seconds) cancels it and raises ``KafkaTimeoutError``. The loop is closed
    before returning, after cancelling any task the coroutine left behind.
    """
    with EventLoopRunner() as runner:
        target = aw() if callable(aw) else aw
        return runner.call(target, timeout)


def iterate(
    source: AsyncIterable[T] | Callable[[], AsyncIterable[T]],
    *,
    item_timeout: float | None = None,
) -> Iterator[T]:
    """Drive an async iterable on a fresh event loop and yield its items synchronously.

    ``source`` is an async iterable or a zero-argument function returning one (an async
    generator function, typically); it is created on the private loop. ``item_timeout``
    bounds the wait for each item (``KafkaTimeoutError``). Closing the returned generator
    early (``break``) closes the async iterator and the loop.
    """
    with EventLoopRunner() as runner:

        async def open_iter() -> AsyncIterator[T]:
            iterable = source() if callable(source) else source
            return aiter(iterable)

        it = runner.call(open_iter())
        try:
            while True:
                try:
                    item = runner.call(anext(it), item_timeout)
                except StopAsyncIteration:
                    return
                yield item
        finally:
            aclose = getattr(it, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    runner.call(aclose(), _CLOSE_TIMEOUT)
