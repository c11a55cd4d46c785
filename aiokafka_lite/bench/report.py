"""Benchmark summary: a table (rich when available, aligned text otherwise), JSON and markdown."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TextIO

__all__ = ["summary_rows", "print_summary", "write_json", "markdown_table", "HEADERS"]

HEADERS = (
    "client", "records/s", "MB/s", "p50 ms", "p95 ms", "p99 ms", "max ms",
    "x aiokafka", "x confluent-aio", "x confluent", "CPU us/rec", "RSS MB", "rounds",
)  # fmt: skip


def _num(value: Any, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def summary_rows(report: dict[str, Any]) -> list[list[str]]:
    """One row of strings per client, in HEADERS order."""
    rows = []
    for client, row in report["summary"].items():
        name = client + (f" ({row['note']})" if row.get("note") else "")
        if row["rounds"] == 0:
            rows.append([name, "FAILED"] + ["-"] * (len(HEADERS) - 3) + ["0"])
            continue
        rows.append(
            [
                name,
                _num(row["records_per_s"], ",.0f"),
                _num(row["mb_per_s"], ".2f"),
                _num(row["p50_ms"], ".3f"),
                _num(row["p95_ms"], ".3f"),
                _num(row["p99_ms"], ".3f"),
                _num(row["max_ms"], ".2f"),
                _num(row.get("x_aiokafka"), ".2f"),
                _num(row.get("x_confluent_aio"), ".2f"),
                _num(row.get("x_confluent"), ".2f"),
                _num(row.get("cpu_us_per_record"), ".2f"),
                _num(row["rss_mb"], ".0f"),
                str(row["rounds"])
                + (f" ({len(row['failures'])} failed)" if row["failures"] else ""),
            ]
        )
    return rows


def title(report: dict[str, Any]) -> str:
    """``produce (send): 100,000 x 100 B, 1 partition ... on embedded tansu, 2 cores``."""
    cfg = report["config"]
    kind = report["kind"]
    if kind == "produce" or (kind == "consume" and cfg.get("api") in ("getmany", "iter", "arrow")):
        kind += f" ({cfg['api']}" + (", keys" if cfg.get("keys") else "")
        kind += (", headers" if cfg.get("headers") else "") + ")"
    machine = report["machine"]
    extra = f", window {cfg['concurrency']}" if report["kind"] == "roundtrip" else ""
    if cfg.get("loop", "asyncio") != "asyncio":
        extra += f", {cfg['loop']} loop (asyncio clients)"
    if report["kind"] == "produce" and cfg["concurrency"] > 1:
        extra = f", {cfg['concurrency']} tasks"
    return (
        f"{kind}: {cfg['records']:,} x {cfg['size']} B, {cfg['partitions']} partition(s), "
        f"codec {cfg['codec']}, acks {cfg['acks']}, linger {cfg['linger_ms']} ms{extra}; "
        f"median of {cfg['rounds']} round(s); broker {report['broker']['name']}; "
        f"{machine['cores']} cores ({machine['cpu']}), Python {machine['python']}"
        + (
            f", load {machine['loadavg_1m_at_start']:.1f} -> {machine['loadavg_1m']:.1f}"
            if machine.get("loadavg_1m") is not None
            and machine.get("loadavg_1m_at_start") is not None
            else ""
        )
    )


def print_summary(
    report: dict[str, Any], stream: TextIO | None = None, use_rich: bool = True
) -> None:
    """Print the summary table to ``stream`` (stdout by default)."""
    stream = stream or sys.stdout
    rows = summary_rows(report)
    if use_rich:
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:
            use_rich = False
    if use_rich:
        table = Table()
        for i, header in enumerate(HEADERS):
            table.add_column(header, justify="left" if i == 0 else "right")
        for row in rows:
            table.add_row(*row)
        console = Console(file=stream)
        console.print(title(report), markup=False, highlight=False, soft_wrap=True)
        console.print(table)
    else:
        print(title(report), file=stream)
        print(text_table(list(HEADERS), rows), file=stream)
    failures = [r["failed"] for r in report["runs"] if "failed" in r]
    for failure in failures:
        print(f"failed: {failure}", file=stream)
    stream.flush()


def text_table(headers: list[str], rows: list[list[str]]) -> str:
    """An aligned plain-text table (first column left-aligned, the rest right-aligned)."""
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]

    def fmt(cells: list[str]) -> str:
        return "  ".join(
            str(c).ljust(w) if i == 0 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    lines = [fmt(headers), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines)


def markdown_table(report: dict[str, Any]) -> str:
    """The summary as a GitHub markdown table (for benchmarks/README.md)."""
    lines = [
        "| " + " | ".join(HEADERS) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(HEADERS) - 1)) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in summary_rows(report)]
    return "\n".join(lines)


def write_json(reports: dict[str, Any] | list[dict[str, Any]], path: str | Path) -> None:
    """Write one report (or a list of reports) as indented JSON."""
    Path(path).write_text(json.dumps(reports, indent=2, sort_keys=False) + "\n")
