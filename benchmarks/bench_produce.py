"""Produce benchmark: aiokafka_lite against aiokafka, confluent-kafka and kafka-python.

A thin entry point over the shared engine (``aiokafka_lite.bench``), the same code as
``aiokafka-lite bench produce --compare``; every produce scenario (``send()`` loop, bulk
``send_many``, ``create_batch``/``send_batch``, ``send_and_wait`` latency) on one embedded broker,
interleaved rounds, medians, ratios. Extra arguments go to ``python -m benchmarks``::

    python benchmarks/bench_produce.py --rounds 5 --broker tansu
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.argv = [
        "benchmarks",
        "--only",
        "produce-send,produce-many,produce-batch,produce-wait",
        "--no-readme",
        *sys.argv[1:],
    ]
    runpy.run_module("benchmarks", run_name="__main__")
