"""Differential suite: every scenario in ``scenarios.py`` runs with the real aiokafka and with
aiokafka_lite installed as aiokafka (each in its own subprocess, on the session's broker); what a
user observes must be identical, unless the difference is listed in ``DOCUMENTED_DIFFERENCES``
(the README's "differences from aiokafka" table)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiokafka")

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
RESULT_PREFIX = "COMPAT-RESULT:"


def _scenario_names() -> list[str]:
    text = (HERE / "scenarios.py").read_text()
    import ast

    tree = ast.parse(text)
    return [
        n.name
        for n in tree.body
        if isinstance(n, ast.AsyncFunctionDef) and not n.name.startswith("_")
    ]


#: (scenario, observation path) -> why aiokafka_lite deliberately differs there.  Each entry is a
#: row of the README's "Differences from aiokafka" table; a difference at any other path fails.
DOCUMENTED_DIFFERENCES: dict[tuple[str, str], str] = {
    ("producer_fenced", "/p1_after_fence/raised"): (
        "a zombie's send() meets INVALID_PRODUCER_EPOCH: InvalidProducerEpoch, a ProducerFenced "
        "subclass, abortable as in the Java client 4.4 (KIP-1050; aiokafka: ProducerFenced)"
    ),
    ("producer_errors", "/no_value_no_key"): (
        "send() with neither key nor value sends a record with null key and value "
        "(aiokafka: AssertionError)"
    ),
    ("producer_errors", "/bad_partition"): (
        "send() to a partition the topic does not have: IllegalArgumentError "
        "(aiokafka: AssertionError)"
    ),
    ("consumer_subscribe_rules", "/assign_str"): (
        "assign() with something that is not a TopicPartition: TypeError (aiokafka: AttributeError)"
    ),
    ("consumer_stop_semantics", "/restart"): (
        "start() after stop(): IllegalStateError (aiokafka: AssertionError)"
    ),
    ("consumer_read_committed", "/nested_begin"): (
        "begin_transaction() inside a transaction / commit_transaction() outside one: "
        "IllegalOperation (aiokafka: AssertionError)"
    ),
    ("consumer_read_committed", "/commit_outside"): (
        "begin_transaction() inside a transaction / commit_transaction() outside one: "
        "IllegalOperation (aiokafka: AssertionError)"
    ),
    ("consumer_not_started", "/getmany"): (
        "getmany()/getone() before start(): IllegalStateError (aiokafka: AttributeError)"
    ),
    ("consumer_not_started", "/getone"): (
        "getmany()/getone() before start(): IllegalStateError (aiokafka: AttributeError)"
    ),
    ("consumer_getmany_partitions", "/getmany_unassigned"): (
        "getmany(tp) for a partition not assigned: IllegalStateError (aiokafka: {} forever)"
    ),
    ("consumer_argument_validation", "/bad_reset"): (
        "an invalid auto_offset_reset / isolation_level is refused by the constructor "
        "(ValueError; aiokafka accepts it and fails later)"
    ),
    ("consumer_argument_validation", "/bad_isolation"): (
        "an invalid auto_offset_reset / isolation_level is refused by the constructor "
        "(ValueError; aiokafka accepts it and fails later)"
    ),
}

#: scenario -> broker kinds where the scenario cannot run (the test broker lacks the feature)
BROKER_GAPS: dict[str, tuple[tuple[str, ...], str]] = {
    "consumer_read_committed": (("tansu",), "Tansu does not filter aborted records"),
    "consumer_offsets_for_times": (("tansu",), "Tansu answers ListOffsets by timestamp wrongly"),
    "consumer_rebalance_listener": (
        ("noida",),
        "the oracle (aiokafka) does not complete the two-member rebalance on noida in time",
    ),
    "producer_fenced": (("tansu", "noida"), "embedded brokers do not fence producers"),
    "transaction_send_offsets": (("tansu",), "Tansu transactions are partial"),
    "transaction_cancelled_calls": (("tansu",), "Tansu does not filter aborted records"),
    "transactions_public_api": (("tansu", "noida"), "embedded brokers do not fence producers"),
}


def _run_both(scenario: str, bootstrap: str) -> tuple[Any, Any, str]:
    env = dict(os.environ, COMPAT_BOOTSTRAP=bootstrap, PYTHONPATH=str(ROOT))
    procs = {
        mode: subprocess.Popen(
            [sys.executable, str(HERE / "runner.py"), mode, scenario],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=str(ROOT),
        )
        for mode in ("aiokafka", "lite")
    }
    results: dict[str, Any] = {}
    logs = []
    for mode, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        lines = [ln for ln in out.splitlines() if ln.startswith(RESULT_PREFIX)]
        results[mode] = json.loads(lines[-1][len(RESULT_PREFIX) :]) if lines else None
        logs.append(f"--- {mode} (exit {proc.returncode}) stderr tail:\n{err[-3000:]}")
    return results["aiokafka"], results["lite"], "\n".join(logs)


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(
                    f"{path}/{k}: aiokafka={a.get(k, '<missing>')!r} lite={b.get(k, '<missing>')!r}"
                )
            else:
                out.extend(_diff(a[k], b[k], f"{path}/{k}"))
        return out
    if a != b:
        return [f"{path or '/'}: aiokafka={a!r} lite={b!r}"]
    return []


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scenario", _scenario_names())
def test_differential(scenario: str, broker: Any) -> None:
    gap = BROKER_GAPS.get(scenario)
    if gap and broker.kind in gap[0]:
        pytest.skip(f"[{broker.kind}] {gap[1]}")
    theirs, ours, logs = _run_both(scenario, broker.bootstrap)
    assert theirs is not None, f"the aiokafka run printed no result\n{logs}"
    assert ours is not None, f"the aiokafka_lite run printed no result\n{logs}"
    diffs = [
        d
        for d in _diff(theirs, ours)
        if not any(
            d.startswith(path + "/") or d.startswith(path + ":")
            for (name, path) in DOCUMENTED_DIFFERENCES
            if name == scenario
        )
    ]
    assert not diffs, "\n".join(diffs) + "\n" + logs


def test_scenarios_are_async_functions() -> None:
    import scenarios  # noqa: F401  (imports the real aiokafka here: fine, nothing is installed)

    for name in _scenario_names():
        assert inspect.iscoroutinefunction(getattr(scenarios, name))
