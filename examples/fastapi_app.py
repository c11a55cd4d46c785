"""FastAPI + aiokafka_lite: produce from request handlers, consume in a background task.

* One :class:`AIOKafkaProducer` is started in the app's lifespan and shared by every handler
  (a producer is safe to share between concurrent requests; starting one per request would pay
  a connection and metadata round trip each time).
* ``POST /events`` awaits ``send_and_wait`` and answers with the record's partition and offset,
  so a 201 means the broker has the record.
* A background task started in the lifespan consumes the topic and keeps the last N records in a
  deque; ``GET /events`` shows them.
* Shutdown (Ctrl-C / SIGTERM under uvicorn) cancels the consumer task, stops the consumer and
  then the producer, which flushes whatever is still buffered.

Run it::

    aiokafka-lite broker &                       # prints 127.0.0.1:PORT
    KAFKA_BOOTSTRAP=127.0.0.1:PORT uvicorn examples.fastapi_app:app
    curl -X POST localhost:8000/events -H 'content-type: application/json' -d '{"value": "hi"}'
    curl localhost:8000/events

Settings come from the environment: ``KAFKA_BOOTSTRAP`` (default localhost:9092), ``KAFKA_TOPIC``
(default ``events``), ``KEEP_LAST`` (default 100).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, HTTPException, Query, Request
from pydantic import BaseModel

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka_lite.errors import KafkaError

log = logging.getLogger("fastapi_app")


class EventIn(BaseModel):
    """Body of ``POST /events``."""

    value: str
    key: str | None = None


class EventOut(BaseModel):
    """Where the broker stored a record."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None


async def consume_forever(consumer: AIOKafkaConsumer, recent: deque[dict[str, Any]]) -> None:
    """Append every record to ``recent`` (a bounded deque) until cancelled."""
    while True:
        batches = await consumer.getmany(timeout_ms=1000)
        for records in batches.values():
            for record in records:
                recent.append(
                    {
                        "partition": record.partition,
                        "offset": record.offset,
                        "timestamp": record.timestamp,
                        "key": record.key.decode("utf-8", "replace") if record.key else None,
                        "value": (record.value or b"").decode("utf-8", "replace"),
                    }
                )


def create_app(
    bootstrap: str | None = None, topic: str | None = None, keep_last: int | None = None
) -> FastAPI:
    """Build the app; arguments override the environment (tests pass them)."""
    bootstrap = bootstrap or os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092")
    topic = topic or os.environ.get("KAFKA_TOPIC", "events")
    keep = keep_last or int(os.environ.get("KEEP_LAST", "100"))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest"
        )
        await producer.start()
        try:
            await consumer.start()
        except BaseException:
            await producer.stop()
            raise
        recent: deque[dict[str, Any]] = deque(maxlen=keep)
        task = asyncio.create_task(consume_forever(consumer, recent), name="consume-events")
        app.state.producer = producer
        app.state.recent = recent
        app.state.consumer_task = task
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await consumer.stop()
            await producer.stop()  # flushes buffered records first

    app = FastAPI(title="aiokafka_lite example", lifespan=lifespan)

    @app.post("/events", status_code=201, response_model=EventOut)
    async def publish(event: EventIn, request: Request) -> EventOut:
        producer: AIOKafkaProducer = request.app.state.producer
        try:
            md = await producer.send_and_wait(
                topic,
                event.value.encode(),
                key=event.key.encode() if event.key is not None else None,
            )
        except KafkaError as exc:
            log.warning("produce failed: %s", exc)
            raise HTTPException(status_code=503, detail=f"Kafka unavailable: {exc}") from exc
        return EventOut(
            topic=md.topic, partition=md.partition, offset=md.offset, timestamp=md.timestamp
        )

    @app.get("/events")
    async def recent_events(
        request: Request, limit: int = Query(20, ge=1, le=10_000)
    ) -> list[dict[str, Any]]:
        task: asyncio.Task[None] = request.app.state.consumer_task
        if task.done():  # the background consumer died: say so instead of serving stale data
            raise HTTPException(status_code=503, detail=f"consumer stopped: {task.exception()!r}")
        return list(request.app.state.recent)[-limit:]

    @app.get("/healthz")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


app = create_app()
