"""Real FastStream Kafka apps on aiokafka_lite through ``install_as_aiokafka()``.

Each scenario of ``faststream_apps.py`` runs in its own subprocess (install_as_aiokafka() must
precede FastStream's import, and the rest of the suite keeps the real aiokafka as a reference
client) against the session's broker; every message must arrive exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("faststream.kafka")

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
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
    env = dict(os.environ, COMPAT_BOOTSTRAP=bootstrap, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, str(HERE / "faststream_apps.py"), mode, scenario],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
        timeout=240,
        check=False,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_PREFIX)]
    assert lines, f"no result (exit {proc.returncode}); stderr tail:\n{proc.stderr[-4000:]}"
    result: dict[str, Any] = json.loads(lines[-1][len(RESULT_PREFIX) :])
    return result


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
