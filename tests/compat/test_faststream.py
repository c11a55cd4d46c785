"""Real FastStream Kafka apps on aiokafka_lite through ``install_as_aiokafka()``.

Each scenario of ``faststream_apps.py`` runs in its own subprocess (install_as_aiokafka() must
precede FastStream's import, and the rest of the suite keeps the real aiokafka as a reference
client) against the session's broker; every message must arrive exactly once.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.compat import run_script

pytest.importorskip("faststream.kafka")

RESULT_PREFIX = "FASTSTREAM-RESULT:"

SCENARIOS = [
    "pub_sub",
    "request_reply",
    "batch_subscriber",
    "max_workers_group",
    "two_apps_one_group",
    "manual_partitions",
    "rebalance_listener",
    "pattern_subscriber",
    "manual_ack",
    "test_client_with_real",
    "fastapi_router",
    "publish_batch_nack_ping",
    "max_workers_ack_between_partitions",
    "graceful_shutdown_redelivers",
]

#: scenario -> (broker kinds, reason) where the test broker cannot run it
BROKER_GAPS: dict[str, tuple[tuple[str, ...], str]] = {}


def run_app(scenario: str, bootstrap: str, mode: str = "lite") -> dict[str, Any]:
    return run_script("faststream_apps.py", mode, scenario, bootstrap, RESULT_PREFIX)


def _exactly_once(result: dict[str, Any]) -> None:
    assert result["missing"] == [], result
    assert result["duplicates"] == [], result
    assert result["unexpected"] == [], result


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_faststream_app(scenario: str, broker: Any) -> None:
    gap = BROKER_GAPS.get(scenario)
    if gap and broker.kind in gap[0]:
        pytest.skip(f"[{broker.kind}] {gap[1]}")
    result = run_app(scenario, broker.bootstrap)
    assert result.pop("real_aiokafka_modules") == []
    if scenario == "manual_ack":
        _exactly_once(result["first"])
        _exactly_once(result["second"])  # resumed after the last ack: nothing re-delivered
        return
    _exactly_once(result)
    if scenario == "batch_subscriber":
        assert result["max_batch_at_most_7"]
    if scenario == "two_apps_one_group":
        assert result["both_apps_consumed"]
    if scenario == "manual_partitions":
        assert result["partitions"] == [1]
    if scenario == "max_workers_ack_between_partitions":
        assert result["several_consumers"]
    if scenario == "publish_batch_nack_ping":
        assert result["ping"]
        assert result["batch_partition_ok"]
        assert result["nacked"] == ["b3"]
        assert result["no_confirm_futures"] == [True, True, 0, 0]
    if scenario == "rebalance_listener":
        assert result["assigned_events"] == [["assigned", 2]]
