"""Libraries built on aiokafka run unchanged on aiokafka_lite (through install_as_aiokafka()).

Each scenario of ``ecosystem_apps.py`` runs in a subprocess (install_as_aiokafka() must precede
the library's import; the rest of the suite keeps the real aiokafka as a reference client),
once on aiokafka_lite and, as the oracle, once on aiokafka itself, against the session's broker.
What a user of the library observes must be the same.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.compat import run_script

RESULT_PREFIX = "ECOSYSTEM-RESULT:"


def run(mode: str, scenario: str, bootstrap: str) -> dict[str, Any]:
    result = run_script("ecosystem_apps.py", mode, scenario, bootstrap, RESULT_PREFIX, 180)
    assert result.pop("aiokafka_is_lite") is (mode == "lite")
    return result


@pytest.mark.timeout(400)
def test_opentelemetry_instrumentation_spans_match_aiokafka(broker: Any) -> None:
    pytest.importorskip("opentelemetry.instrumentation.aiokafka")
    broker.skip_on("tansu", reason="aiokafka (the oracle) cannot decode Tansu's group answers")
    ours = run("lite", "otel", broker.bootstrap)
    theirs = run("real", "otel", broker.bootstrap)
    assert ours["values"] == theirs["values"] == ["v0", "v1", "v2"]
    assert ours["spans"] == theirs["spans"]
    kinds = [s["kind"] for s in ours["spans"]]
    assert kinds.count("SpanKind.PRODUCER") == 3 and "SpanKind.CONSUMER" in kinds
    producer_span = next(s for s in ours["spans"] if s["kind"] == "SpanKind.PRODUCER")
    assert producer_span["attributes"]["messaging.system"] == "kafka"
    assert producer_span["attributes"]["messaging.destination.name"] == "TOPIC"
    assert all(s["in_parent_trace"] for s in ours["spans"] if s["kind"] == "SpanKind.PRODUCER")
    # the context travelled in the record headers: per-record consumer spans continue the trace
    assert any(s["in_parent_trace"] for s in ours["spans"] if s["kind"] == "SpanKind.CONSUMER")


@pytest.mark.timeout(400)
def test_kstreams_stream_consumes_produces_and_commits(broker: Any) -> None:
    pytest.importorskip("kstreams")
    ours = run("lite", "kstreams", broker.bootstrap)
    assert ours["seen"] == [f"in-{i}" for i in range(4)]
    assert ours["out"] == [f"out-in-{i}" for i in range(4)] + ["warm-up"]
    assert ours["committed"] == 4


@pytest.mark.timeout(400)
def test_taskiq_task_kicked_right_after_startup_runs_once(broker: Any) -> None:
    pytest.importorskip("taskiq_aio_kafka")
    ours = run("lite", "taskiq", broker.bootstrap)
    assert ours["runs"] == [21]


@pytest.mark.timeout(400)
def test_ddtrace_spans_match_aiokafka(broker: Any) -> None:
    pytest.importorskip("ddtrace")
    broker.skip_on("tansu", reason="aiokafka (the oracle) cannot decode Tansu's group answers")
    ours = run("lite", "ddtrace", broker.bootstrap)
    theirs = run("real", "ddtrace", broker.bootstrap)
    assert ours["values"] == theirs["values"] == ["v0", "v1"]
    assert ours["spans"] == theirs["spans"]
    names = [s["name"] for s in ours["spans"]]
    assert names.count("kafka.produce") == 2 and "kafka.consume" in names
    for span in ours["spans"]:
        assert span["tags"]["component"] == "aiokafka" and span["error"] == 0
        assert span["tags"]["messaging.system"] == "kafka"
        assert span["has_cluster_id"]  # its Metadata request went through client.send()
    produce = [s for s in ours["spans"] if s["name"] == "kafka.produce"]
    assert [s["tags"]["kafka.message_key"] for s in produce] == ["k0", "k1"]
    assert all(s["tags"]["span.kind"] == "producer" for s in produce)
    consume = [s for s in ours["spans"] if s["name"] == "kafka.consume"]
    assert all(s["tags"]["kafka.group_id"] == "GROUP" for s in consume)
    # getone's span names its record's key and continues that record's producer trace
    # (context in the headers); getmany's names the partitions it returned
    getone = [s for s in consume if "kafka.message_key" in s["tags"]]
    assert len(getone) == 1 and getone[0]["tags"]["kafka.message_key"] == "k0"
    assert getone[0]["child_of_produce"]
    assert any("kafka.partitions.TOPIC" in s["tags"] for s in consume)
