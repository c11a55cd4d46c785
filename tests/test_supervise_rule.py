"""The supervision rule itself (``aiokafka_lite._supervise``, no broker): what one guard logs,
surfaces and waits after each unexpected failure. ``tests/test_supervise.py`` checks every
background task against a real broker."""

from __future__ import annotations

import asyncio
import itertools
import logging

import pytest

from aiokafka_lite import _supervise
from aiokafka_lite import errors as Errors
from aiokafka_lite._supervise import MAX_BACKOFF_S, Supervisor

log = logging.getLogger("test_supervise_rule")


def _boom(n: int = 0) -> TypeError:
    try:
        raise TypeError(f"boom {n}")
    except TypeError as exc:
        return exc


def test_logged_once_surfaced_once_backoff_doubles_to_the_cap(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=log.name)
    sup = Supervisor("consumer", 100, log)
    guard = sup.guard("fetch")
    delays = [guard.failed(_boom()) for _ in range(10)]
    assert delays[:6] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2]
    assert delays[6:] == [MAX_BACKOFF_S] * 4
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1 and errors[0].exc_info is not None
    exc = sup.take()
    assert isinstance(exc, Errors.KafkaError) and isinstance(exc.__cause__, TypeError)
    assert "consumer: fetch" in str(exc)
    assert sup.take() is None  # once
    sup.raise_pending()  # nothing pending: no raise


def test_a_new_episode_after_ok_is_logged_and_surfaced_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=log.name)
    sup = Supervisor("producer", 50, log)
    guard = sup.guard("sender")
    guard.failed(_boom())
    guard.failed(_boom())
    with pytest.raises(Errors.KafkaError):
        sup.raise_pending()
    guard.ok()
    assert not guard.failing
    assert [r.levelname for r in caplog.records] == ["ERROR", "INFO"]  # failed, recovered
    assert guard.failed(_boom()) == 0.05  # the back-off starts over
    assert sup.pending is not None
    assert [r.levelname for r in caplog.records] == ["ERROR", "INFO", "ERROR"]


def test_a_different_error_is_logged_a_kafka_error_is_raised_as_it_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=log.name)
    sup = Supervisor("c", 100, log)
    guard = sup.guard("t")
    guard.failed(_boom(1))
    guard.failed(_boom(2))  # another message: logged
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 2
    sup.take()
    other = sup.guard("u")
    kafka = Errors.IllegalStateError("not expected by this loop")
    other.failed(kafka)
    assert sup.take() is kafka


def test_a_persisting_error_is_reminded_without_traceback(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger=log.name)
    monkeypatch.setattr(_supervise, "REMIND_S", 0.0)
    guard = Supervisor("c", 100, log).guard("t")
    guard.failed(_boom())
    guard.failed(_boom())
    warn = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warn) == 1 and warn[0].exc_info is None and "1 times more" in warn[0].getMessage()


async def test_run_restarts_the_body_after_its_backoff_and_cancellation_propagates() -> None:
    sup = Supervisor("c", 10, log)
    guard = sup.guard("loop")
    starts: list[float] = []
    forgotten: list[int] = []
    loop = asyncio.get_running_loop()

    async def body() -> None:
        starts.append(loop.time())
        if len(starts) < 4:
            raise TypeError("bug")
        guard.ok()
        await asyncio.sleep(3600)

    task = asyncio.create_task(guard.run(body, lambda: forgotten.append(1)))
    for _ in range(200):
        if len(starts) == 4:
            break
        await asyncio.sleep(0.01)
    assert len(starts) == 4 and len(forgotten) == 3
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert all(g >= w * 0.9 for g, w in zip(gaps, (0.01, 0.02, 0.04))), gaps
    assert not guard.failing
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
