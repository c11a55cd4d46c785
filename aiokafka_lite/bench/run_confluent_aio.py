"""Benchmark runner for confluent-kafka's asyncio API (``confluent_kafka.aio``).

``AIOProducer`` and ``AIOConsumer`` run librdkafka's calls on a thread pool and hand the results
to the event loop. They are written here the way their documentation recommends:

* ``await producer.produce(topic, value)`` returns a future that resolves when the record is
  delivered; the producer gathers records into batches of ``batch_size`` (1000) before it hands
  them to librdkafka, or after ``buffer_timeout`` (1 s) of inactivity, or on ``flush()``;
* ``await consumer.consume(num_messages, timeout)`` for throughput, ``await consumer.poll(t)``
  for one message at a time.

The latency pattern (``send_and_wait`` one record after another) is ``fut = await
produce(...)``, ``await flush()``, ``await fut``: delivery reports reach the futures only inside
``poll()``/``flush()`` (a lone record's future otherwise waits for the next batch), and a lone
record waits in the buffer for ``buffer_timeout`` (1 s) unless flushed. Headers are not accepted by ``AIOProducer`` in its batch mode; the
headers scenario reports that as the run's error.
"""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

from ._shared import STAMP_TAG, Progress, key_pool, value_pool
from .config import RunConfig
from .run_confluent import consumer_conf, producer_conf

__all__ = ["run"]

_STAMP = struct.Struct(">4sQ")
_WARMUP = b"warmup"
#: send_and_wait-style runs start after this many unmeasured round trips
_WARMUP_COUNT = 50
#: the ``lag`` consume API: records per take and the pause after each (a slow application)
LAG_TAKE = 500
LAG_PAUSE_S = 0.005


def run(cfg: RunConfig, progress: Progress) -> dict[str, Any]:
    """Run ``cfg`` with confluent-kafka's AIOProducer / AIOConsumer on a fresh event loop."""
    body = {"produce": _produce, "consume": _consume, "roundtrip": _roundtrip}.get(cfg.kind)
    if body is None:
        raise ValueError(f"unknown benchmark kind {cfg.kind!r}")
    result: dict[str, Any] = asyncio.run(asyncio.wait_for(body(cfg, progress), cfg.timeout_s))
    return result


def _producer(cfg: RunConfig) -> Any:
    from confluent_kafka.aio import AIOProducer

    return AIOProducer(producer_conf(cfg))


def _consumer(cfg: RunConfig) -> Any:
    from confluent_kafka.aio import AIOConsumer

    return AIOConsumer(consumer_conf(cfg))


async def _assign_all(cfg: RunConfig, consumer: Any) -> None:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    await consumer.assign(
        [TopicPartition(cfg.topic, p, OFFSET_BEGINNING) for p in range(cfg.partitions)]
    )


async def _delivered(producer: Any, value: bytes, topic: str) -> None:
    """One record, delivered: produce, flush (which also serves the delivery report), await."""
    fut = await producer.produce(topic, value)
    await producer.flush()
    await fut


async def _produce(cfg: RunConfig, progress: Progress) -> dict[str, Any]:
    if cfg.headers:
        raise NotImplementedError("confluent_kafka.aio.AIOProducer takes no headers (batch mode)")
    producer = _producer(cfg)
    try:
        for _ in range(_WARMUP_COUNT if cfg.api == "wait" else 1):
            await _delivered(producer, _WARMUP, cfg.topic)
        values = value_pool(cfg.size)
        topic = cfg.topic
        perf = time.perf_counter
        note = "no bulk API: produce() loop" if cfg.api in ("batch", "many", "arrow") else None
        started = perf()
        cpu0 = time.process_time()  # every thread of the process
        if cfg.api == "wait":
            lat = progress.latencies
            for i in range(cfg.records):
                t0 = perf()
                await _delivered(producer, values[i & 255], topic)
                lat.append(perf() - t0)
                progress.done = i + 1
        else:
            await _produce_loop(cfg, producer, values, progress)
        elapsed = perf() - started
        cpu_s = time.process_time() - cpu0
    finally:
        await producer.close()
    return {"records": cfg.records, "elapsed_s": elapsed, "cpu_s": cpu_s, "note": note}


async def _produce_loop(
    cfg: RunConfig, producer: Any, values: list[bytes], progress: Progress
) -> None:
    """``futs.append(await produce(...))`` per record, then flush and gather every future
    (``send``: only sampled futures are kept, the rest dropped; fire and forget + flush)."""
    produce = producer.produce
    topic = cfg.topic
    keys = key_pool() if cfg.keys else None
    keep_all = cfg.api != "send"
    stride = max(1, cfg.records // max(1, cfg.latency_samples))
    perf = time.perf_counter
    futs: list[Any] = []
    for i in range(cfg.records):
        if keys is not None:
            fut = await produce(topic, values[i & 255], key=keys[i & 255])
        else:
            fut = await produce(topic, values[i & 255])
        if keep_all:
            futs.append(fut)
        elif not i % stride:
            t0 = perf()
            fut.add_done_callback(lambda f, t0=t0: progress.latencies.append(perf() - t0))
            futs.append(fut)
        if not i & 1023:
            progress.done = i
    await producer.flush()
    await asyncio.gather(*futs)
    progress.done = cfg.records


async def _consume(cfg: RunConfig, progress: Progress) -> dict[str, Any]:
    consumer = _consumer(cfg)
    try:
        await _assign_all(cfg, consumer)
        count = 0
        nbytes = 0
        started = time.perf_counter()
        cpu0 = time.process_time()  # every thread of the process
        if cfg.api == "iter":  # one message per await, as `async for` hands out one record
            poll = consumer.poll
            while count < cfg.records:
                msg = await poll(1.0)
                if msg is None:
                    continue
                if msg.error() is not None:
                    raise RuntimeError(str(msg.error()))
                value = msg.value()
                if value is not None:
                    nbytes += len(value)
                count += 1
                if not count & 1023:
                    progress.done = count
        else:
            take = LAG_TAKE if cfg.api == "lag" else 1000
            consume = consumer.consume
            while count < cfg.records:
                for msg in await consume(num_messages=take, timeout=1.0):
                    if msg.error() is not None:
                        raise RuntimeError(str(msg.error()))
                    value = msg.value()
                    if value is not None:
                        nbytes += len(value)
                    count += 1
                progress.done = count
                if cfg.api == "lag":
                    await asyncio.sleep(LAG_PAUSE_S)
        elapsed = time.perf_counter() - started
        cpu_s = time.process_time() - cpu0
    finally:
        await consumer.close()
    return {"records": count, "bytes": nbytes, "elapsed_s": elapsed, "cpu_s": cpu_s}


async def _roundtrip(cfg: RunConfig, progress: Progress) -> dict[str, Any]:
    producer = _producer(cfg)
    consumer = _consumer(cfg)
    try:
        await _delivered(producer, _WARMUP, cfg.topic)
        await _assign_all(cfg, consumer)
        window = max(1, cfg.concurrency)
        pad = b"x" * max(0, cfg.size - _STAMP.size)
        room = asyncio.Event()
        received = 0
        lat = progress.latencies
        perf_ns = time.perf_counter_ns

        async def produce() -> None:
            pack = _STAMP.pack
            for i in range(cfg.records):
                while i - received >= window:
                    # records wait in AIOProducer's buffer until it is full or flushed: hand
                    # what is there to librdkafka before waiting for the consumer
                    await producer.flush()
                    room.clear()
                    await asyncio.wait_for(room.wait(), 30)
                await producer.produce(cfg.topic, pack(STAMP_TAG, perf_ns()) + pad)
            await producer.flush()

        started = time.perf_counter()
        cpu0 = time.process_time()  # every thread of the process
        sender = asyncio.create_task(produce())
        try:
            unpack = _STAMP.unpack_from
            while received < cfg.records:
                # consume(n, timeout) waits for n messages OR the timeout: for latency take what
                # is there now, else wait in poll(), which returns on the first record
                msgs = await consumer.consume(num_messages=1000, timeout=0)
                if not msgs:
                    msg = await consumer.poll(0.2)
                    msgs = [msg] if msg is not None else []
                now = perf_ns()
                for msg in msgs:
                    if msg.error() is not None:
                        continue
                    value = msg.value()
                    if value is None or value[:4] != STAMP_TAG:
                        continue
                    lat.append((now - unpack(value)[1]) / 1e9)
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
    finally:
        await consumer.close()
        await producer.close()
    return {"records": received, "elapsed_s": elapsed, "cpu_s": cpu_s}
