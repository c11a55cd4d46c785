"""Small statistics helpers for the benchmark engine (no numpy needed)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["percentile", "latency_summary", "median_or_none", "RESULT_METRICS"]

#: Result keys that get a median across rounds (higher-is-better first, then latencies in ms).
RESULT_METRICS = (
    "records_per_s",
    "mb_per_s",
    "elapsed_s",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "max_ms",
    "rss_mb",
    "cpu_us_per_record",
    "cpu_pct",
)


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (0..100) of already sorted values, nearest-rank method."""
    if not sorted_values:
        raise ValueError("percentile of an empty sequence")
    if not 0.0 <= pct <= 100.0:
        raise ValueError(f"percentile must be within 0..100, got {pct}")
    rank = max(1, math.ceil(pct / 100.0 * len(sorted_values)))
    return float(sorted_values[rank - 1])


def latency_summary(latencies_s: Iterable[float]) -> dict[str, float | int | None]:
    """p50/p95/p99/max in milliseconds (None when there are no samples) and the sample count."""
    values = sorted(latencies_s)
    if not values:
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None, "max_ms": None, "samples": 0}
    return {
        "p50_ms": percentile(values, 50) * 1000.0,
        "p95_ms": percentile(values, 95) * 1000.0,
        "p99_ms": percentile(values, 99) * 1000.0,
        "max_ms": values[-1] * 1000.0,
        "samples": len(values),
    }


def median_or_none(values: Iterable[Any]) -> float | None:
    """Median of the non-None numbers in ``values``, or None when there are none."""
    nums = [float(v) for v in values if v is not None]
    return statistics.median(nums) if nums else None
