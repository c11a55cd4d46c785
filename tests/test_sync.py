"""aiokafka_lite.sync: coroutines and async iterators driven from synchronous code."""

from __future__ import annotations

import asyncio

import pytest

from aiokafka_lite import sync
from aiokafka_lite.errors import KafkaTimeoutError


async def _answer(x: int) -> int:
    await asyncio.sleep(0)
    return x * 2


def test_run_returns_result_and_closes_loop():
    loops = []

    async def body() -> int:
        loops.append(asyncio.get_running_loop())
        return await _answer(21)

    assert sync.run(body()) == 42
    assert sync.run(body) == 42  # a coroutine function works too
    assert loops[0] is not loops[1] and loops[0].is_closed() and loops[1].is_closed()


def test_run_propagates_errors_and_times_out():
    async def boom() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        sync.run(boom())
    with pytest.raises(KafkaTimeoutError):
        sync.run(asyncio.sleep(10), timeout=0.05)


def test_run_cancels_leftover_tasks():
    cancelled = []

    async def forever() -> None:
        try:
            await asyncio.sleep(100)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def body() -> str:
        asyncio.get_running_loop().create_task(forever())
        await asyncio.sleep(0)
        return "done"

    assert sync.run(body(), timeout=5) == "done"
    assert cancelled == [True]


def test_iterate_yields_items_and_closes_early():
    closed = []

    async def gen():
        try:
            for i in range(100):
                await asyncio.sleep(0)
                yield i
        finally:
            closed.append(True)

    assert list(sync.iterate(gen)) == list(range(100))
    it = sync.iterate(gen)
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    it.close()
    assert closed == [True, True]


def test_iterate_item_timeout():
    async def slow():
        yield 1
        await asyncio.sleep(10)
        yield 2

    it = sync.iterate(slow, item_timeout=0.05)
    assert next(it) == 1
    with pytest.raises(KafkaTimeoutError):
        next(it)


async def test_run_inside_a_running_loop_uses_a_worker_thread():
    # called from async code (a notebook, a web handler): must not try to nest loops
    assert sync.run(_answer(5), timeout=5) == 10
    assert list(sync.iterate(lambda: _agen(3))) == [0, 1, 2]


async def _agen(n: int):
    for i in range(n):
        await asyncio.sleep(0)
        yield i
