"""Benchmark runner for kafka-python (pure Python, threads; its sender runs in a background thread)."""

from __future__ import annotations

import struct
import threading
import time
from typing import Any

from ._shared import HEADERS, STAMP_TAG, Progress, key_pool, value_pool
from .config import RunConfig

__all__ = ["run"]

_STAMP = struct.Struct(">4sQ")


def _producer(cfg: RunConfig) -> Any:
    from kafka import KafkaProducer

    return KafkaProducer(
        bootstrap_servers=cfg.bootstrap,
        acks="all" if cfg.acks == -1 else cfg.acks,
        linger_ms=cfg.linger_ms,
        batch_size=cfg.batch_size,
        compression_type=cfg.compression,
        request_timeout_ms=30000,
        max_block_ms=30000,
    )


def _consumer(cfg: RunConfig) -> Any:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=cfg.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100 if cfg.kind == "roundtrip" else 500,
        request_timeout_ms=30000,
    )
    tps = [TopicPartition(cfg.topic, p) for p in range(cfg.partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    return consumer


def run(cfg: RunConfig, progress: Progress) -> dict[str, Any]:
    """Run ``cfg`` with kafka-python."""
    if cfg.kind == "produce":
        return _produce(cfg, progress)
    if cfg.kind == "consume":
        return _consume(cfg, progress)
    if cfg.kind == "roundtrip":
        return _roundtrip(cfg, progress)
    raise ValueError(f"unknown benchmark kind {cfg.kind!r}")


def _produce(cfg: RunConfig, progress: Progress) -> dict[str, Any]:
    producer = _producer(cfg)
    try:
        for _ in range(50 if cfg.api == "wait" else 1):
            producer.send(cfg.topic, b"warmup").get(timeout=30)
        values = value_pool(cfg.size)
        topic = cfg.topic
        perf = time.perf_counter
        note = None
        started = perf()
        cpu0 = time.process_time()  # every thread of the process
        if cfg.api == "wait":
            lat = progress.latencies
            for i in range(cfg.records):
                t0 = perf()
                producer.send(topic, values[i & 255]).get(timeout=30)
                lat.append(perf() - t0)
                progress.done = i + 1
        elif cfg.api == "gather":  # keep every future, flush, then get() each outcome
            keys = key_pool() if cfg.keys else None
            headers = HEADERS if cfg.headers else None
            send = producer.send
            futs = []
            for i in range(cfg.records):
                key = keys[i & 255] if keys is not None else None
                futs.append(send(topic, values[i & 255], key=key, headers=headers))
                if not i & 1023:
                    progress.done = i
            producer.flush(timeout=cfg.timeout_s)
            for fut in futs:
                fut.get(timeout=30)
        else:
            if cfg.api in ("batch", "many", "arrow"):
                note = "no bulk API: send() loop"
            stride = max(1, cfg.records // max(1, cfg.latency_samples))
            send = producer.send
            fut = None
            for i in range(cfg.records):
                if i % stride:
                    fut = send(topic, values[i & 255])
                else:
                    t0 = perf()
                    fut = send(topic, values[i & 255])
                    fut.add_callback(lambda _md, t0=t0: progress.latencies.append(perf() - t0))
                    fut.add_errback(progress.error)
                    progress.done = i
            producer.flush(timeout=cfg.timeout_s)
            if fut is not None:
                fut.get(timeout=30)
        elapsed = perf() - started
        cpu_s = time.process_time() - cpu0
    finally:
        producer.close(timeout=5)
    return {"records": cfg.records, "elapsed_s": elapsed, "cpu_s": cpu_s, "note": note}


def _consume(cfg: RunConfig, progress: Progress) -> dict[str, Any]:
    consumer = _consumer(cfg)
    try:
        count = 0
        nbytes = 0
        deadline = time.monotonic() + cfg.timeout_s
        started = time.perf_counter()
        cpu0 = time.process_time()  # every thread of the process
        if cfg.api == "iter":  # the consumer's own iterator, one record at a time
            for record in consumer:
                value = record.value
                if value is not None:
                    nbytes += len(value)
                count += 1
                if not count & 1023:
                    progress.done = count
                if count >= cfg.records or time.monotonic() > deadline:
                    break
        while count < cfg.records:
            for records in consumer.poll(timeout_ms=1000).values():
                for record in records:
                    value = record.value
                    if value is not None:
                        nbytes += len(value)
                count += len(records)
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
    producer.send(cfg.topic, b"warmup").get(timeout=30)
    consumer = _consumer(cfg)
    window = max(1, cfg.concurrency)
    pad = b"x" * max(0, cfg.size - _STAMP.size)
    state = {"received": 0}
    room = threading.Condition()
    failure: list[BaseException] = []
    lat = progress.latencies
    stop = threading.Event()

    def consume() -> None:
        try:
            unpack = _STAMP.unpack_from
            while state["received"] < cfg.records and not stop.is_set():
                polled = consumer.poll(timeout_ms=200)
                now = time.perf_counter_ns()
                got = 0
                for records in polled.values():
                    for record in records:
                        value = record.value
                        if value is None or value[:4] != STAMP_TAG:
                            continue
                        lat.append((now - unpack(value)[1]) / 1e9)
                        got += 1
                if got:
                    with room:
                        state["received"] += got
                        room.notify()
                progress.done = state["received"]
        except BaseException as exc:
            failure.append(exc)
            with room:
                room.notify()

    thread = threading.Thread(target=consume, daemon=True)
    deadline = time.monotonic() + cfg.timeout_s
    started = time.perf_counter()
    cpu0 = time.process_time()  # every thread of the process
    thread.start()
    try:
        pack = _STAMP.pack
        perf_ns = time.perf_counter_ns
        for i in range(cfg.records):
            if i - state["received"] >= window:
                with room:
                    while i - state["received"] >= window:
                        if failure or time.monotonic() > deadline:
                            raise TimeoutError("roundtrip stalled")
                        room.wait(0.5)
            producer.send(cfg.topic, pack(STAMP_TAG, perf_ns()) + pad)
        producer.flush(timeout=30)
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
        producer.close(timeout=5)
    return {"records": state["received"], "elapsed_s": elapsed, "cpu_s": cpu_s}
