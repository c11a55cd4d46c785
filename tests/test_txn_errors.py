"""KIP-1050's error classes of transactions, beside the Java producer 4.4 on the same injected
errors: the fault proxy answers one Produce or EndTxn with an error code, and the application
sees of it what Java's sees (the error of ``send()``, of ``commit_transaction()``, of the abort
that follows a failed commit, and whether the next transaction commits):

* retriable: retried inside the client, every step succeeds;
* abortable: ``send()``/``commit_transaction()`` raise, the abort works, the next commits;
* application-recoverable and producer-fatal: the commit raises, so does every later call.

One JVM runs every case, one proxy (one rule) per case.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import java_oracle
import pytest
from faults import API, FaultProxy, Rule

from aiokafka_lite import errors as Errors
from aiokafka_lite.producer import AIOKafkaProducer

pytestmark = pytest.mark.integration

#: (API, error code, the class the Java client and ours put it in (KIP-1050))
CASES: list[tuple[int, int, Errors.TxnErrorClass]] = [
    (API.END_TXN, 51, Errors.TxnErrorClass.RETRIABLE),  # CONCURRENT_TRANSACTIONS
    (API.END_TXN, 15, Errors.TxnErrorClass.RETRIABLE),  # COORDINATOR_NOT_AVAILABLE
    (API.PRODUCE, 120, Errors.TxnErrorClass.ABORTABLE),  # TRANSACTION_ABORTABLE
    # (the broker committed: the abort that follows meets INVALID_TXN_STATE, producer-fatal)
    (API.END_TXN, 120, Errors.TxnErrorClass.ABORTABLE),
    (API.PRODUCE, 47, Errors.TxnErrorClass.ABORTABLE),  # INVALID_PRODUCER_EPOCH (a zombie)
    (API.END_TXN, 90, Errors.TxnErrorClass.APPLICATION_RECOVERABLE),  # PRODUCER_FENCED
    (API.END_TXN, 47, Errors.TxnErrorClass.APPLICATION_RECOVERABLE),  # as PRODUCER_FENCED
    (API.END_TXN, 48, Errors.TxnErrorClass.PRODUCER_FATAL),  # INVALID_TXN_STATE
    (API.END_TXN, 49, Errors.TxnErrorClass.APPLICATION_RECOVERABLE),  # INVALID_PRODUCER_ID_MAPPING
    (API.PRODUCE, 49, Errors.TxnErrorClass.APPLICATION_RECOVERABLE),
]
#: Java's names where ours differ
_JAVA_NAMES = {"InvalidPidMapping": "InvalidProducerIdMapping"}


def _name(cls_name: str | None) -> str | None:
    """Java's ``FooException`` and our ``Foo``/``FooError`` under one spelling; Java's
    ``KafkaException`` wrapping ``Foo`` (TxnOracle: ``KafkaException:Foo``) as ``Foo``."""
    if cls_name is None:
        return None
    name = cls_name.rpartition(":")[2].removesuffix("Exception").removesuffix("Error")
    return _JAVA_NAMES.get(name, name)


def _compare(ours: dict[str, Any], java: dict[str, str | None]) -> None:
    """Step by step, the same error. Java raises some (all later calls once the producer is in
    its fatal state, whatever ProducerFenced is not; a commit after an abortable error, at
    times) as a ``KafkaException`` wrapping the error: compared by the wrapped one. Ours raise
    the error itself, as aiokafka (the difference is in differences.md)."""
    assert ours.keys() == java.keys(), (ours, java)
    for step, exc in ours.items():
        assert _name(exc and type(exc).__name__) == _name(java[step]), (step, ours, java)


async def _call(steps: dict[str, Any], name: str, coro: Any) -> BaseException | None:
    try:
        await asyncio.wait_for(coro, 60)
    except Errors.KafkaError as exc:
        steps[name] = exc
        return exc
    steps[name] = None
    return None


async def _ours(bootstrap: str, topic: str, txid: str) -> dict[str, Any]:
    """The Java scenario ``steps`` (TxnOracle.java) with our producer: each step's exception."""
    steps: dict[str, Any] = {}
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txid)
    await p.start()
    try:
        await p.begin_transaction()

        async def send(value: bytes) -> None:
            await (await p.send(topic, value, partition=0))

        await _call(steps, "send", send(b"first"))
        if await _call(steps, "commit", p.commit_transaction()) is not None:
            await _call(steps, "abort", p.abort_transaction())

        async def next_txn() -> None:
            await p.begin_transaction()
            await send(b"next")
            await p.commit_transaction()

        await _call(steps, "next", next_txn())
    finally:
        await p.stop()
    return steps


def _rule(api: int, code: int) -> Rule:
    return Rule(api, "error", error_code=code)


async def test_error_classes_match_java(broker: Any, new_topic: Any) -> None:
    broker.skip_on("tansu", "noida", reason="the Java client is the reference on Apache Kafka only")
    reason = java_oracle.unavailable_reason()
    if reason:
        pytest.skip(reason)
    topic = await new_topic(partitions=1)
    async with contextlib.AsyncExitStack() as stack:
        proxies = [await stack.enter_async_context(FaultProxy(broker.bootstrap)) for _ in CASES]
        for proxy, (api, code, _) in zip(proxies, CASES, strict=True):
            proxy.add(_rule(api, code))
        lines = await asyncio.to_thread(
            java_oracle.txn_scenario,
            broker.bootstrap,
            topic,
            f"je-{uuid.uuid4().hex[:8]}",
            "steps",
            timeout=240,
            proxies=";".join(p.bootstrap for p in proxies),
        )
        java: list[dict[str, str | None]] = [{} for _ in CASES]
        for line in lines:
            java[line["case"]][line["step"]] = _name(line["error"])
        for i, (proxy, (api, code, klass)) in enumerate(zip(proxies, CASES, strict=True)):
            assert proxy.rules[0].hits == 1, (api, code, "Java's run met no injected error")
            rule = proxy.add(_rule(api, code))
            steps = await _ours(proxy.bootstrap, topic, f"le-{uuid.uuid4().hex[:8]}-{i}")
            assert rule.hits == 1, (api, code)
            _compare(steps, java[i])
            # the class our errors name is the one the steps show
            raised = steps["commit"]
            if klass is Errors.TxnErrorClass.RETRIABLE:
                assert raised is None, steps
            else:
                assert Errors.txn_error_class(raised) is klass, (api, code, raised)
