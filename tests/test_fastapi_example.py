"""examples/fastapi_app.py driven through FastAPI's TestClient against a real broker."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "fastapi_app.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("fastapi_app_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _wait_for(client: TestClient, last: str, timeout: float = 15.0) -> list[dict]:
    """The recent events once the one whose value is ``last`` was consumed (or the timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        resp = client.get("/events", params={"limit": 100})
        assert resp.status_code == 200, resp.text
        events = resp.json()
        if any(e["value"] == last for e in events) or time.monotonic() > deadline:
            return events
        time.sleep(0.05)


async def test_fastapi_example_round_trip(kafka_bootstrap, new_topic):
    topic = await new_topic(partitions=2)
    module = _load_example()
    app = module.create_app(bootstrap=kafka_bootstrap, topic=topic, keep_last=3)
    with TestClient(app) as client:
        producer = app.state.producer
        offsets = []
        for i in range(5):
            resp = client.post("/events", json={"value": f"event-{i}", "key": "same-key"})
            assert resp.status_code == 201, resp.text
            body = resp.json()
            assert body["topic"] == topic
            offsets.append((body["partition"], body["offset"]))
        # one key -> one partition, consecutive offsets
        assert len({p for p, _ in offsets}) == 1
        assert [o for _, o in offsets] == list(range(offsets[0][1], offsets[0][1] + 5))

        events = _wait_for(client, "event-4")
        # only the last 3 are kept, in order
        assert [e["value"] for e in events] == ["event-2", "event-3", "event-4"]
        assert all(e["key"] == "same-key" for e in events)
        assert client.get("/events", params={"limit": 1}).json()[0]["value"] == "event-4"

        assert client.post("/events", json={"key": "k"}).status_code == 422  # no value
        assert client.get("/healthz").json() == {"status": "ok"}
        task = app.state.consumer_task
    # graceful shutdown: the consumer task ended by cancellation, the producer is closed
    assert task.done() and task.cancelled()
    assert producer._closed is True
