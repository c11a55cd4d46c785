"""Compatibility suites: aiokafka as the oracle; shared subprocess runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


def run_script(
    script: str, mode: str, scenario: str, bootstrap: str, prefix: str, timeout: float = 240
) -> dict[str, Any]:
    """Run ``tests/compat/SCRIPT MODE SCENARIO`` against ``bootstrap`` in a subprocess and
    return the JSON of its last line starting with ``prefix``."""
    env = dict(os.environ, COMPAT_BOOTSTRAP=bootstrap, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, str(HERE / script), mode, scenario],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
        timeout=timeout,
        check=False,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(prefix)]
    assert lines, f"{mode} {scenario}: no result (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
    result: dict[str, Any] = json.loads(lines[-1][len(prefix) :])
    return result
