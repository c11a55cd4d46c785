"""Benchmark runner for the asyncio clients: aiokafka_lite and aiokafka.

Both expose the same API (aiokafka_lite is a drop-in), so one code path measures both: whatever
the runner does costs the same for each, and only the library differs.
"""

from __future__ import annotations

import asyncio
import importlib
import struct
import time
from functools import partial
from typing import Any

from ._shared import HEADERS, STAMP_TAG, Progress, key_pool, value_pool
from .config import RunConfig

__all__ = ["run", "client_classes"]

_STAMP = struct.Struct(">4sQ")
_WARMUP = b"warmup"
#: send_and_wait runs start after this many unmeasured round trips (connection warm, caches hot)
_WARMUP_COUNT = 50


def client_classes(client: str) -> tuple[Any, Any, Any]:
    """(AIOKafkaProducer, AIOKafkaConsumer, TopicPartition) of ``client``."""
    if client == "aiokafka":
        import aiokafka

        return aiokafka.AIOKafkaProducer, aiokafka.AIOKafkaConsumer, aiokafka.TopicPartition
    lite = importlib.import_module("aiokafka_lite")
    producer = getattr(lite, "AIOKafkaProducer", None)
    consumer = getattr(lite, "AIOKafkaConsumer", None)
    if producer is None:
        producer = importlib.import_module("aiokafka_lite.producer").AIOKafkaProducer
    if consumer is None:
        consumer = importlib.import_module("aiokafka_lite.consumer").AIOKafkaConsumer
    from aiokafka_lite.structs import TopicPartition

    return producer, consumer, TopicPartition


def run(cfg: RunConfig, progress: Progress) -> dict[str, Any]:
    """Run ``cfg`` on a fresh event loop: the standard one, or uvloop's with ``cfg.loop``."""
    main = asyncio.wait_for(_run(cfg, progress), cfg.timeout_s)
    if cfg.loop == "uvloop":
        import uvloop

        runner_cls = getattr(asyncio, "Runner", None)
        if runner_cls is not None:  # Python 3.11+
            with runner_cls(loop_factory=uvloop.new_event_loop) as runner:
                result: dict[str, Any] = runner.run(main)
                return result
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    elif cfg.loop != "asyncio":
        raise ValueError(f"unknown event loop {cfg.loop!r}")
    return asyncio.run(main)


async def _run(cfg: RunConfig, progress: Progress) -> dict[str, Any]:
    if cfg.kind == "produce":
        return await _produce(cfg, progress)
    if cfg.kind == "consume":
        return await _consume(cfg, progress)
    if cfg.kind == "roundtrip":
        return await _roundtrip(cfg, progress)
    raise ValueError(f"unknown benchmark kind {cfg.kind!r}")


class _NoopHook:
    """A hook with a no-op method for every event (the produce-hooks scenario)."""


def _noop(*args: Any) -> None:
    return None


for _name in (
    "on_connect", "on_disconnect", "on_request_sent", "on_response", "on_send", "on_batch_sent",
    "on_batch_acked", "on_batch_failed", "on_fetch", "on_consume", "on_commit",
    "on_partitions_revoked", "on_partitions_assigned",
):  # fmt: skip
    setattr(_NoopHook, _name, staticmethod(_noop))


def _hook_args(cfg: RunConfig, cls: Any) -> dict[str, Any]:
    """The hook variants of aiokafka_lite (config.HOOK_VARIANTS)."""
    if cfg.client == "aiokafka_lite-nohooks":
        cls._with_metrics = False  # this worker process runs one client only
    elif cfg.client == "aiokafka_lite-noop":
        return {"hooks": [_NoopHook()]}
    return {}


def _producer(cfg: RunConfig) -> Any:
    producer_cls, _, _ = client_classes(cfg.client)
    return producer_cls(
        bootstrap_servers=cfg.bootstrap,
        acks=-1 if cfg.acks == -1 else cfg.acks,
        linger_ms=cfg.linger_ms,
        max_batch_size=cfg.batch_size,
        compression_type=cfg.compression,
        request_timeout_ms=30000,
        **_hook_args(cfg, producer_cls),
    )


def _consumer(cfg: RunConfig) -> Any:
    _, consumer_cls, _ = client_classes(cfg.client)
    return consumer_cls(
        bootstrap_servers=cfg.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=30000,
        fetch_max_wait_ms=100 if cfg.kind == "roundtrip" else 500,
        **_hook_args(cfg, consumer_cls),
    )


async def _assign_all(cfg: RunConfig, consumer: Any) -> None:
    _, _, tp_cls = client_classes(cfg.client)
    tps = [tp_cls(cfg.topic, p) for p in range(cfg.partitions)]
    consumer.assign(tps)
    await consumer.seek_to_beginning(*tps)


def _record_latency(progress: Progress, started: float, fut: Any) -> None:
    if fut.cancelled():
        progress.error("cancelled")
    elif fut.exception() is not None:
        progress.error(fut.exception())
    else:
        progress.latencies.append(time.perf_counter() - started)


async def _produce(cfg: RunConfig, progress: Progress) -> dict[str, Any]:
    producer = _producer(cfg)
    await producer.start()
    try:
        # connection, metadata and the first batch are set up outside the measurement
        for _ in range(_WARMUP_COUNT if cfg.api == "wait" else 1):
            await producer.send_and_wait(cfg.topic, _WARMUP)
        values = value_pool(cfg.size)
        if cfg.api == "arrow":  # imported before the measurement
            import pyarrow  # type: ignore[import-untyped]  # noqa: F401
            import pyarrow.compute  # type: ignore[import-untyped]  # noqa: F401
        workers = max(1, cfg.concurrency)
        shares = [cfg.records // workers + (i < cfg.records % workers) for i in range(workers)]
        note = None
        if cfg.api == "many" and not hasattr(producer, "send_many"):
            note = "no send_many: send() loop"
        if cfg.api == "arrow" and not hasattr(producer, "send_arrow"):
            note = "no send_arrow: send() loop"
        body = {"send": _send_loop, "gather": _gather_loop, "wait": _wait_loop,
                "batch": _batch_loop,
                "many": _many_loop if note is None else _send_loop,
                "arrow": _arrow_loop if note is None else _send_loop}[cfg.api]  # fmt: skip
        inputs: list[Any] = [values] * workers
        if body is _arrow_loop:
            inputs = [_arrow_tables(values, share) for share in shares]
        started = time.perf_counter()
        cpu0 = time.process_time()  # every thread of the process
        lasts = await asyncio.gather(
            *(body(cfg, producer, inp, share, progress) for inp, share in zip(inputs, shares))
        )
        await producer.flush()
        for last in lasts:  # after flush() every send has its outcome
            if last is not None:
                if not last.done():
                    raise RuntimeError("a record is still pending after flush()")
                if last.exception() is not None:
                    raise last.exception()
        elapsed = time.perf_counter() - started
        cpu_s = time.process_time() - cpu0
    finally:
        await producer.stop()
    return {"records": cfg.records, "elapsed_s": elapsed, "cpu_s": cpu_s, "note": note}


#: records per send_many() call in the ``many`` benchmark
MANY_CHUNK = 1000


async def _many_loop(
    cfg: RunConfig, producer: Any, values: list[bytes], count: int, progress: Progress
) -> Any:
    topic = cfg.topic
    perf = time.perf_counter
    chunks = [
        [values[i & 255] for i in range(start, min(start + MANY_CHUNK, count))]
        for start in range(0, count, MANY_CHUNK)
    ]  # built before timing would be fairer, but other loops also index values per record
    last = None
    for chunk in chunks:
        t0 = perf()
        handles = await producer.send_many(topic, chunk)
        last = handles[-1]
        last.add_done_callback(partial(_record_latency, progress, t0))
        progress.done += len(chunk)
    return last


#: rows per send_arrow() table in the ``arrow`` benchmark
ARROW_CHUNK = 10_000


def _arrow_tables(values: list[bytes], count: int) -> list[Any]:
    """The ``arrow`` benchmark's tables of ``ARROW_CHUNK`` rows (built before the measurement:
    the row is about the client's cost, not the application's table building)."""
    import pyarrow as pa

    return [
        pa.table(
            {
                "value": pa.array(
                    [values[i & 255] for i in range(start, min(start + ARROW_CHUNK, count))]
                )
            }
        )
        for start in range(0, count, ARROW_CHUNK)
    ]


async def _arrow_loop(
    cfg: RunConfig, producer: Any, tables: list[Any], count: int, progress: Progress
) -> Any:
    topic = cfg.topic
    perf = time.perf_counter
    last = None
    for table in tables:
        t0 = perf()
        handles = await producer.send_arrow(topic, table)
        last = handles[-1]
        last.add_done_callback(partial(_record_latency, progress, t0))
        progress.done += table.num_rows
    return last


async def _send_loop(
    cfg: RunConfig, producer: Any, values: list[bytes], count: int, progress: Progress
) -> Any:
    stride = max(1, cfg.records // max(1, cfg.latency_samples))
    send = producer.send
    topic = cfg.topic
    perf = time.perf_counter
    fut = None
    for i in range(count):
        if i % stride:
            fut = await send(topic, values[i & 255])
        else:
            t0 = perf()
            fut = await send(topic, values[i & 255])
            fut.add_done_callback(partial(_record_latency, progress, t0))
            progress.done += stride
    return fut


async def _gather_loop(
    cfg: RunConfig, producer: Any, values: list[bytes], count: int, progress: Progress
) -> Any:
    """The common application pattern: keep every record's future, then gather them all.

    No per-record latency is sampled (a done callback per sample would change the pattern);
    the table's latency columns stay empty for this API.
    """
    send = producer.send
    topic = cfg.topic
    keys = key_pool() if cfg.keys else None
    headers = HEADERS if cfg.headers else None
    futs: list[Any] = []
    append = futs.append
    step = 1000
    for start in range(0, count, step):
        stop = min(count, start + step)
        if keys is None and headers is None:
            for i in range(start, stop):
                append(await send(topic, values[i & 255]))
        else:
            for i in range(start, stop):
                key = keys[i & 255] if keys is not None else None
                append(await send(topic, values[i & 255], key=key, headers=headers))
        progress.done = stop
    await asyncio.gather(*futs)
    return futs[-1] if futs else None


async def _wait_loop(
    cfg: RunConfig, producer: Any, values: list[bytes], count: int, progress: Progress
) -> Any:
    send_and_wait = producer.send_and_wait
    topic = cfg.topic
    perf = time.perf_counter
    lat = progress.latencies
    for i in range(count):
        t0 = perf()
        await send_and_wait(topic, values[i & 255])
        lat.append(perf() - t0)
        progress.done += 1
    return None


async def _batch_loop(
    cfg: RunConfig, producer: Any, values: list[bytes], count: int, progress: Progress
) -> Any:
    topic = cfg.topic
    perf = time.perf_counter
    sent = 0
    partition = 0
    fut = None
    while sent < count:
        batch = producer.create_batch()
        start = sent
        while sent < count:
            if batch.append(key=None, value=values[sent & 255], timestamp=None) is None:
                break
            sent += 1
        if sent == start:
            raise RuntimeError(f"a {cfg.size}-byte record does not fit in an empty batch")
        t0 = perf()
        fut = await producer.send_batch(batch, topic, partition=partition)
        fut.add_done_callback(partial(_record_latency, progress, t0))
        partition = (partition + 1) % cfg.partitions
        progress.done += sent - start
    return fut


#: the ``lag`` consume API: records per getmany() and the pause after each (a slow application)
LAG_TAKE = 500
LAG_PAUSE_S = 0.005


async def _consume(cfg: RunConfig, progress: Progress) -> dict[str, Any]:
    consumer = _consumer(cfg)
    await consumer.start()
    try:
        await _assign_all(cfg, consumer)
        if cfg.api == "arrow":  # imported before the measurement
            import pyarrow.compute as pc
        count = 0
        nbytes = 0
        note = None
        started = time.perf_counter()
        cpu0 = time.process_time()  # every thread of the process
        if cfg.api == "iter":
            target = cfg.records
            async for record in consumer:
                value = record.value
                if value is not None:
                    nbytes += len(value)
                count += 1
                if not count & 1023:
                    progress.done = count
                if count >= target:
                    break
        elif cfg.api == "lag":  # a slow application: small takes and a pause after each
            while count < cfg.records:
                batches = await consumer.getmany(timeout_ms=1000, max_records=LAG_TAKE)
                for records in batches.values():
                    for record in records:
                        value = record.value
                        if value is not None:
                            nbytes += len(value)
                    count += len(records)
                progress.done = count
                await asyncio.sleep(LAG_PAUSE_S)
        elif cfg.api == "arrow" and hasattr(consumer, "getmany_arrow"):
            while count < cfg.records:
                table = await consumer.getmany_arrow(timeout_ms=1000, max_records=ARROW_CHUNK)
                if table.num_rows:
                    nbytes += pc.sum(pc.binary_length(table.column("value"))).as_py() or 0
                    count += table.num_rows
                progress.done = count
        else:
            if cfg.api == "arrow":
                note = "no getmany_arrow: getmany() loop"
            while count < cfg.records:
                batches = await consumer.getmany(timeout_ms=1000)
                for records in batches.values():
                    for record in records:
                        value = record.value
                        if value is not None:
                            nbytes += len(value)
                    count += len(records)
                progress.done = count
        elapsed = time.perf_counter() - started
        cpu_s = time.process_time() - cpu0
    finally:
        await consumer.stop()
    return {"records": count, "bytes": nbytes, "elapsed_s": elapsed, "cpu_s": cpu_s, "note": note}


async def _roundtrip(cfg: RunConfig, progress: Progress) -> dict[str, Any]:
    producer = _producer(cfg)
    consumer = _consumer(cfg)
    await producer.start()
    try:
        await producer.send_and_wait(cfg.topic, _WARMUP)
        await consumer.start()
        try:
            await _assign_all(cfg, consumer)
            return await _roundtrip_measure(cfg, producer, consumer, progress)
        finally:
            await consumer.stop()
    finally:
        await producer.stop()


async def _roundtrip_measure(
    cfg: RunConfig, producer: Any, consumer: Any, progress: Progress
) -> dict[str, Any]:
    window = max(1, cfg.concurrency)
    pad = b"x" * max(0, cfg.size - _STAMP.size)
    room = asyncio.Event()
    received = 0
    lat = progress.latencies
    perf_ns = time.perf_counter_ns

    async def produce() -> None:
        send = producer.send
        topic = cfg.topic
        pack = _STAMP.pack
        for i in range(cfg.records):
            while i - received >= window:
                room.clear()
                await asyncio.wait_for(room.wait(), 30)
            await send(topic, pack(STAMP_TAG, perf_ns()) + pad)
        await producer.flush()

    started = time.perf_counter()
    cpu0 = time.process_time()  # every thread of the process
    sender = asyncio.create_task(produce())
    try:
        while received < cfg.records:
            batches = await consumer.getmany(timeout_ms=1000)
            now = perf_ns()
            for records in batches.values():
                for record in records:
                    value = record.value
                    if value is None or value[:4] != STAMP_TAG:
                        continue
                    lat.append((now - _STAMP.unpack_from(value)[1]) / 1e9)
                    received += 1
            progress.done = received
            room.set()
            if sender.done() and sender.exception() is not None:
                break
        elapsed = time.perf_counter() - started
        cpu_s = time.process_time() - cpu0
        await sender
    finally:
        if not sender.done():
            sender.cancel()
    return {"records": received, "elapsed_s": elapsed, "cpu_s": cpu_s}
