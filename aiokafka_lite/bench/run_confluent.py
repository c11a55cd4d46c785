"""Benchmark runner for confluent-kafka (librdkafka behind a thin Python layer).

Its Python API is synchronous: delivery callbacks run inside ``poll()``/``flush()``, and the
roundtrip consumer runs in a thread (librdkafka releases the GIL while it waits).
"""

from __future__ import annotations

import struct
import threading
import time
from typing import Any

from ._shared import HEADERS, STAMP_TAG, Progress, key_pool, value_pool
from .config import RunConfig

__all__ = ["run"]

_STAMP = struct.Struct(">4sQ")


def producer_conf(cfg: RunConfig) -> dict[str, Any]:
    """librdkafka producer settings of a run (the synchronous and the asyncio API alike)."""
    return {
        "bootstrap.servers": cfg.bootstrap,
        "acks": str(cfg.acks),
        "linger.ms": cfg.linger_ms,
        "batch.size": cfg.batch_size,
        "compression.type": cfg.codec,
        "enable.idempotence": False,
        "message.timeout.ms": 60000,
        "socket.timeout.ms": 30000,
    }


def consumer_conf(cfg: RunConfig) -> dict[str, Any]:
    """librdkafka consumer settings of a run (a fresh group, manual assignment from 0)."""
    return {
        "bootstrap.servers": cfg.bootstrap,
        "group.id": f"aiokafka-lite-bench-{time.time_ns()}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100 if cfg.kind == "roundtrip" else 500,
        "socket.timeout.ms": 30000,
    }


def _producer(cfg: RunConfig) -> Any:
    from confluent_kafka import Producer

    return Producer(producer_conf(cfg))


def _consumer(cfg: RunConfig) -> Any:
    from confluent_kafka import Consumer

    return Consumer(consumer_conf(cfg))


def _assign_all(cfg: RunConfig, consumer: Any) -> None:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer.assign([TopicPartition(cfg.topic, p, OFFSET_BEGINNING) for p in range(cfg.partitions)])


def _warmup(cfg: RunConfig, producer: Any) -> None:
    errors: list[Any] = []
    producer.produce(cfg.topic, b"warmup", on_delivery=lambda err, msg: errors.append(err))
    if producer.flush(30) != 0:
        raise TimeoutError("warm-up record not delivered within 30 s")
    if errors and errors[0] is not None:
        raise RuntimeError(f"warm-up record failed: {errors[0]}")


def run(cfg: RunConfig, progress: Progress) -> dict[str, Any]:
    """Run ``cfg`` with confluent-kafka."""
    if cfg.kind == "produce":
        return _produce(cfg, progress)
    if cfg.kind == "consume":
        return _consume(cfg, progress)
    if cfg.kind == "roundtrip":
        return _roundtrip(cfg, progress)
    raise ValueError(f"unknown benchmark kind {cfg.kind!r}")


def _produce(cfg: RunConfig, progress: Progress) -> dict[str, Any]:
    producer = _producer(cfg)
    for _ in range(50 if cfg.api == "wait" else 1):
        _warmup(cfg, producer)
    values = value_pool(cfg.size)
    topic = cfg.topic
    perf = time.perf_counter
    deadline = time.monotonic() + cfg.timeout_s
    note = None

    def sampled(t0: float) -> Any:
        def done(err: Any, msg: Any) -> None:
            if err is not None:
                progress.error(str(err))
            else:
                progress.latencies.append(perf() - t0)

        return done

    started = perf()
    cpu0 = time.process_time()  # every thread of the process
    if cfg.api == "wait":  # the synchronous equivalent of send_and_wait: produce, then flush
        lat = progress.latencies
        for i in range(cfg.records):
            t0 = perf()
            producer.produce(topic, values[i & 255])
            if producer.flush(30) != 0:
                raise TimeoutError("record not delivered within 30 s")
            lat.append(perf() - t0)
            progress.done = i + 1
    elif cfg.api == "gather":  # one delivery callback per record stands for its future
        _produce_each_reported(cfg, producer, values, progress, deadline)
    else:
        if cfg.api in ("batch", "many", "arrow"):
            note = "no bulk API: produce() loop"
        stride = max(1, cfg.records // max(1, cfg.latency_samples))
        produce = producer.produce
        poll = producer.poll
        for i in range(cfg.records):
            value = values[i & 255]
            while True:
                try:
                    if i % stride:
                        produce(topic, value)
                    else:
                        produce(topic, value, on_delivery=sampled(perf()))
                        progress.done = i
                    break
                except BufferError:  # local queue full: serve delivery reports, then retry
                    poll(0.005)
                    if time.monotonic() > deadline:
                        raise TimeoutError("producer queue stayed full") from None
            if not i & 127:
                poll(0)
        remaining = producer.flush(max(1.0, deadline - time.monotonic()))
        if remaining:
            raise TimeoutError(f"{remaining} records not delivered in time")
    elapsed = perf() - started
    cpu_s = time.process_time() - cpu0
    return {"records": cfg.records, "elapsed_s": elapsed, "cpu_s": cpu_s, "note": note}


def _produce_each_reported(
    cfg: RunConfig, producer: Any, values: list[bytes], progress: Progress, deadline: float
) -> None:
    """confluent-kafka's form of the gather pattern: ``produce(..., on_delivery=cb)`` for every
    record (the callback checks each outcome, as gathering the futures does), then ``flush()``."""
    topic = cfg.topic
    keys = key_pool() if cfg.keys else None
    headers = HEADERS if cfg.headers else None
    produce = producer.produce
    poll = producer.poll
    failed: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(err)

    for i in range(cfg.records):
        kwargs: dict[str, Any] = {"on_delivery": delivered}
        if keys is not None:
            kwargs["key"] = keys[i & 255]
        if headers is not None:
            kwargs["headers"] = headers
        while True:
            try:
                produce(topic, values[i & 255], **kwargs)
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                poll(0.005)
                if time.monotonic() > deadline:
                    raise TimeoutError("producer queue stayed full") from None
        if not i & 127:
            poll(0)
            progress.done = i
    remaining = producer.flush(max(1.0, deadline - time.monotonic()))
    if remaining:
        raise TimeoutError(f"{remaining} records not delivered in time")
    for err in failed:
        progress.error(str(err))


def _consume(cfg: RunConfig, progress: Progress) -> dict[str, Any]:
    consumer = _consumer(cfg)
    try:
        _assign_all(cfg, consumer)
        count = 0
        nbytes = 0
        deadline = time.monotonic() + cfg.timeout_s
        started = time.perf_counter()
        cpu0 = time.process_time()  # every thread of the process
        while cfg.api == "iter" and count < cfg.records:  # one message per poll()
            msg = consumer.poll(1.0)
            if msg is not None:
                if msg.error() is not None:
                    if msg.error().code() == -191:  # _PARTITION_EOF (only if enabled)
                        continue
                    raise RuntimeError(str(msg.error()))
                value = msg.value()
                if value is not None:
                    nbytes += len(value)
                count += 1
                if not count & 1023:
                    progress.done = count
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {count} of {cfg.records} records in time")
        while count < cfg.records:
            for msg in consumer.consume(num_messages=1000, timeout=1.0):
                if msg.error() is not None:
                    if msg.error().code() == -191:  # _PARTITION_EOF (only if enabled)
                        continue
                    raise RuntimeError(str(msg.error()))
                value = msg.value()
                if value is not None:
                    nbytes += len(value)
                count += 1
            progress.done = count
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {count} of {cfg.records} records in time")
        elapsed = time.perf_counter() - started
        cpu_s = time.process_time() - cpu0
    finally:
        consumer.close()
    return {"records": count, "bytes": nbytes, "elapsed_s": elapsed, "cpu_s": cpu_s}


def _roundtrip(cfg: RunConfig, progress: Progress) -> dict[str, Any]:
    producer = _producer(cfg)
    _warmup(cfg, producer)
    consumer = _consumer(cfg)
    _assign_all(cfg, consumer)
    window = max(1, cfg.concurrency)
    pad = b"x" * max(0, cfg.size - _STAMP.size)
    state = {"received": 0}
    failure: list[BaseException] = []
    lat = progress.latencies
    stop = threading.Event()

    def consume() -> None:
        try:
            unpack = _STAMP.unpack_from
            while state["received"] < cfg.records and not stop.is_set():
                # consume(n, timeout) waits until n messages OR the timeout: for latency take
                # what is there now, else block in poll() which returns on the first record
                msgs = consumer.consume(num_messages=1000, timeout=0)
                if not msgs:
                    msg = consumer.poll(0.2)
                    msgs = [msg] if msg is not None else []
                now = time.perf_counter_ns()
                for msg in msgs:
                    if msg.error() is not None:
                        continue
                    value = msg.value()
                    if value is None or value[:4] != STAMP_TAG:
                        continue
                    lat.append((now - unpack(value)[1]) / 1e9)
                    state["received"] += 1
                progress.done = state["received"]
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=consume, daemon=True)
    deadline = time.monotonic() + cfg.timeout_s
    started = time.perf_counter()
    cpu0 = time.process_time()  # every thread of the process
    thread.start()
    try:
        pack = _STAMP.pack
        perf_ns = time.perf_counter_ns
        for i in range(cfg.records):
            while i - state["received"] >= window:
                producer.poll(0.0005)
                if failure or time.monotonic() > deadline:
                    raise TimeoutError("roundtrip stalled") from (failure[0] if failure else None)
            producer.produce(cfg.topic, pack(STAMP_TAG, perf_ns()) + pad)
            producer.poll(0)
        producer.flush(30)
        thread.join(max(1.0, deadline - time.monotonic()))
        if thread.is_alive():
            raise TimeoutError(f"received {state['received']} of {cfg.records} records in time")
        if failure:
            raise failure[0]
        elapsed = time.perf_counter() - started
        cpu_s = time.process_time() - cpu0
    finally:
        stop.set()
        thread.join(5)
        consumer.close()
    return {"records": state["received"], "elapsed_s": elapsed, "cpu_s": cpu_s}
