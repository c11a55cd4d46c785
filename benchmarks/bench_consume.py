"""Consume benchmark: 200,000 records of 100 B from one partition with aiokafka_lite, aiokafka,
confluent-kafka and kafka-python.

A thin entry point over the shared engine (``aiokafka_lite.bench``), the same code as
``aiokafka-lite bench consume --compare``: one embedded broker, interleaved rounds, medians,
ratios. Extra arguments go to ``python -m benchmarks``::

    python benchmarks/bench_consume.py --rounds 5
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.argv = ["benchmarks", "--only", "consume", "--no-readme", *sys.argv[1:]]
    runpy.run_module("benchmarks", run_name="__main__")
