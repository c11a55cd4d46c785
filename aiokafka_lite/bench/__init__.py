"""Benchmark engine behind ``aiokafka-lite bench`` and ``python -m benchmarks``.

Runs aiokafka_lite, aiokafka, confluent-kafka and kafka-python through the same scenarios
(produce, consume, roundtrip) on the same broker, one child process per run, interleaved rounds,
medians and ratios. See :mod:`aiokafka_lite.bench.engine` for the method.
"""

from .config import CLIENTS, CONSUME_APIS, KINDS, PRODUCE_APIS, RunConfig, parse_clients
from .engine import BenchError, BenchOptions, run_benchmark
from .progress import make_progress
from .report import markdown_table, print_summary, write_json

__all__ = [
    "CLIENTS",
    "CONSUME_APIS",
    "KINDS",
    "PRODUCE_APIS",
    "BenchError",
    "BenchOptions",
    "RunConfig",
    "make_progress",
    "markdown_table",
    "parse_clients",
    "print_summary",
    "run_benchmark",
    "write_json",
]
