"""Draw benchmark results with matplotlib (optional): throughput and latency side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["plot_reports", "PlotError"]


class PlotError(Exception):
    """matplotlib is missing or the picture could not be written."""


def plot_reports(reports: list[dict[str, Any]], path: str | Path) -> None:
    """One row per report: records/s bars (left) and p50/p95/p99 latency bars (right)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError(
            "--plot needs matplotlib: pip install 'aiokafka_lite[cli]' (or pip install matplotlib)"
        ) from None
    from .report import title

    fig, axes = plt.subplots(len(reports), 2, figsize=(13, 3.6 * len(reports)), squeeze=False)
    colors = {"aiokafka_lite": "#2b8a3e", "aiokafka": "#1c7ed6", "confluent": "#e8590c",
              "confluent-aio": "#f08c00",
              "kafka-python": "#868e96"}  # fmt: skip
    for (ax_tp, ax_lat), report in zip(axes, reports):
        summary = {c: r for c, r in report["summary"].items() if r["rounds"]}
        clients = list(summary)
        rates = [summary[c]["records_per_s"] or 0.0 for c in clients]
        bars = ax_tp.bar(clients, rates, color=[colors.get(c, "#495057") for c in clients])
        ax_tp.bar_label(bars, labels=[f"{r:,.0f}" for r in rates], fontsize=8)
        ax_tp.set_ylabel("records/s (median)")
        head = title(report).split(";")[0]
        if report.get("scenario"):
            head = f"[{report['scenario']}] {head}"
        ax_tp.set_title(head, fontsize=9)
        ax_tp.tick_params(axis="x", labelsize=8)
        has_latency = any(summary[c]["p50_ms"] is not None for c in clients)
        if has_latency:
            width = 0.25
            for i, pct in enumerate(("p50_ms", "p95_ms", "p99_ms")):
                xs = [j + (i - 1) * width for j in range(len(clients))]
                vals = [summary[c][pct] or 0.0 for c in clients]
                ax_lat.bar(xs, vals, width, label=pct.replace("_ms", ""))
            ax_lat.set_xticks(range(len(clients)), clients, fontsize=8)
            ax_lat.set_ylabel("latency ms (median of rounds)")
            ax_lat.set_yscale("log")
            ax_lat.legend(fontsize=8)
            ax_lat.set_title("latency (log scale)", fontsize=9)
        else:
            ax_lat.text(0.5, 0.5, "no latency for this benchmark", ha="center", va="center")
            ax_lat.set_axis_off()
    if reports:
        first = reports[0]
        fig.suptitle(
            f"aiokafka_lite benchmarks - broker {first['broker']['name']}, "
            f"{first['machine']['cores']} cores, Python {first['machine']['python']}",
            fontsize=10,
        )
    fig.tight_layout(rect=(0.0, 0.0, 1.0, 0.985 if len(reports) > 2 else 0.95))
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise PlotError(f"cannot write {path}: {exc}") from None
    finally:
        plt.close(fig)
