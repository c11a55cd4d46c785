"""Bounded memory accounting for the producer (the Java BufferPool's role, without pooling).

Python cannot hand out raw buffers usefully, so the pool only counts bytes: a batch reserves
``max(batch_size, record size)`` when it opens and gives it back when it completes. Waiters are
served strictly first-in first-out so a large request is not starved by small ones.
"""

from __future__ import annotations

import asyncio
from collections import deque

from aiokafka_lite.errors import KafkaTimeoutError, MessageSizeTooLargeError

__all__ = ["MemoryPool"]


class MemoryPool:
    """Byte budget shared by every open or in-flight batch of one producer."""

    __slots__ = ("total", "available", "_waiters")

    def __init__(self, total: int) -> None:
        if total <= 0:
            raise ValueError("buffer_memory must be positive")
        self.total = total
        self.available = total
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def used(self) -> int:
        """Bytes currently reserved."""
        return self.total - self.available

    @property
    def has_waiters(self) -> bool:
        """True while some ``send()`` is blocked on memory (batches should go out now)."""
        return bool(self._waiters)

    def try_acquire(self, size: int) -> bool:
        """Reserve ``size`` bytes without waiting; False if it would have to wait."""
        if not self._waiters and self.available >= size:
            self.available -= size
            return True
        return False

    async def acquire(self, size: int, timeout: float) -> None:
        """Reserve ``size`` bytes, waiting up to ``timeout`` seconds (KafkaTimeoutError after)."""
        if size > self.total:
            raise MessageSizeTooLargeError(
                f"a batch of {size} bytes cannot fit in buffer_memory={self.total}"
            )
        if self.try_acquire(size):
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, fut)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(fut, timeout)
        except BaseException as exc:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.release(size)  # granted in the same tick we gave up: hand it back
            else:
                try:
                    self._waiters.remove(entry)
                except ValueError:
                    pass
                self._wake()
            if isinstance(exc, asyncio.TimeoutError):
                raise KafkaTimeoutError(
                    f"failed to allocate {size} bytes of buffer memory within "
                    f"{timeout * 1000:.0f} ms (buffer_memory={self.total})"
                ) from None
            raise

    def release(self, size: int) -> None:
        """Return ``size`` reserved bytes and wake waiters that now fit."""
        self.available += size
        if self._waiters:
            self._wake()

    def fail_waiters(self, exc: BaseException) -> None:
        """Fail every blocked ``acquire`` (producer closing)."""
        while self._waiters:
            _, fut = self._waiters.popleft()
            if not fut.done():
                fut.set_exception(exc)

    def _wake(self) -> None:
        waiters = self._waiters
        while waiters:
            size, fut = waiters[0]
            if fut.done():
                waiters.popleft()
                continue
            if size > self.available:
                break
            waiters.popleft()
            self.available -= size
            fut.set_result(None)
