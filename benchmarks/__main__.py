"""``python -m benchmarks`` (``make bench``): the full comparison behind benchmarks/README.md.

Every scenario runs aiokafka_lite, aiokafka, confluent-kafka and kafka-python on ONE broker in ONE
session: interleaved rounds, one fresh process per run, medians of ``--rounds`` (>= 3 by default),
ratios against aiokafka and confluent-kafka. The engine is :mod:`aiokafka_lite.bench` (the same as
``aiokafka-lite bench ... --compare``); this script only picks the scenarios and writes

* ``benchmarks/results/latest.json``: every run of every scenario, machine and versions;
* ``benchmarks/results/latest.md``: the summary tables in markdown (pasted into the README);
* ``benchmarks/results/latest.png``: throughput and latency side by side, one row per scenario.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from aiokafka_lite.bench import (
    CLIENTS,
    BenchError,
    BenchOptions,
    make_progress,
    markdown_table,
    parse_clients,
    print_summary,
    run_benchmark,
    write_json,
)
from aiokafka_lite.bench.report import title

#: name -> (BenchOptions overrides, records in --quick mode)
SCENARIOS: dict[str, tuple[dict[str, Any], int]] = {
    "produce-send": (dict(kind="produce", api="send", records=200_000), 20_000),
    "produce-batch": (dict(kind="produce", api="batch", records=200_000), 20_000),
    "produce-many": (dict(kind="produce", api="many", records=200_000), 20_000),
    "produce-wait": (dict(kind="produce", api="wait", records=5_000), 500),
    "consume": (dict(kind="consume", records=200_000), 20_000),
    "roundtrip": (dict(kind="roundtrip", records=50_000, concurrency=100), 5_000),
    # 1 GiB through aiokafka_lite alone: its peak RSS against buffer_memory (32 MiB) + 50 MiB
    "produce-1gib": (
        dict(
            kind="produce",
            api="send",
            records=1 << 20,
            size=1024,
            clients=["aiokafka_lite"],
            rounds=1,
        ),
        1 << 17,
    ),
}

#: AIOKafkaProducer's default buffer_memory, in MiB (the memory target is relative to it)
BUFFER_MEMORY_MB = 32.0


def _row(reports: dict[str, dict[str, Any]], scenario: str, client: str = "aiokafka_lite") -> Any:
    report = reports.get(scenario)
    return report["summary"].get(client) if report else None


def targets(reports_list: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(target, measured, "met"/"NOT met"/"not run") for every target of issue 5."""
    reports = {r["scenario"]: r for r in reports_list}
    out: list[tuple[str, str, str]] = []

    def ratio(scenario: str, key: str, goal: float, text: str) -> None:
        row = _row(reports, scenario)
        value = row.get(key) if row else None
        if value is None:
            out.append((text, "-", "not run"))
        else:
            out.append((text, f"{value:.2f}x", "met" if value >= goal else "NOT met"))

    ratio("produce-send", "x_aiokafka", 3.0, "send() records/s >= 3x aiokafka")
    bulk = [
        (row["x_confluent"], name)
        for name in ("produce-batch", "produce-many")
        if (row := _row(reports, name)) and row.get("x_confluent") is not None
    ]
    if bulk:
        best, name = max(bulk)
        out.append(("bulk path records/s >= confluent-kafka produce", f"{best:.2f}x ({name})",
                    "met" if best >= 1.0 else "NOT met"))  # fmt: skip
    else:
        out.append(("bulk path records/s >= confluent-kafka produce", "-", "not run"))
    ratio("consume", "x_aiokafka", 1.0, "consume records/s >= 1x aiokafka")
    ratio("consume", "x_confluent", 3.0, "consume records/s >= 3x confluent-kafka")
    row = _row(reports, "produce-wait")
    for key, goal in (("p50_ms", 0.15), ("p99_ms", 0.5)):
        text = f"send_and_wait {key[:3]} <= {goal} ms"
        if not row or row.get(key) is None:
            out.append((text, "-", "not run"))
        else:
            out.append((text, f"{row[key]:.3f} ms", "met" if row[key] <= goal else "NOT met"))
    row = _row(reports, "produce-1gib")
    text = f"RSS producing 1 GiB <= buffer_memory + 50 MiB ({BUFFER_MEMORY_MB + 50:.0f} MiB)"
    if not row or row.get("rss_mb") is None:
        out.append((text, "-", "not run"))
    else:
        records = reports["produce-1gib"]["config"]["records"]
        size = reports["produce-1gib"]["config"]["size"]
        gib = records * size / (1 << 30)
        out.append((text, f"{row['rss_mb']:.0f} MiB peak ({gib:.2f} GiB sent)",
                    "met" if row["rss_mb"] <= BUFFER_MEMORY_MB + 50 else "NOT met"))  # fmt: skip
    return out


DEFAULT_OUT = Path(__file__).resolve().parent / "results"
README = Path(__file__).resolve().parent / "README.md"
START, END = "<!-- results:start -->", "<!-- results:end -->"


def update_readme(path: Path, results_md: str) -> bool:
    """Replace the text between the results markers of ``path``; False when there are none."""
    try:
        text = path.read_text()
    except OSError:
        return False
    if START not in text or END not in text:
        return False
    head, rest = text.split(START, 1)
    _old, tail = rest.split(END, 1)
    body = results_md.replace("### ", "#### ") + "\n![benchmark results](results/latest.png)\n"
    path.write_text(f"{head}{START}\n{body}\n{END}{tail}")
    return True


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    p.add_argument(
        "--only", default=",".join(SCENARIOS), help="comma list of: " + ", ".join(SCENARIOS)
    )
    p.add_argument("--clients", default=",".join(CLIENTS), help="default: %(default)s")
    p.add_argument("--rounds", type=int, default=3, help="default: %(default)s")
    p.add_argument(
        "--broker", choices=("tansu", "noida"), default="noida", help="default: %(default)s"
    )
    p.add_argument(
        "-b", "--bootstrap", default=None, help="use this broker instead of an embedded one"
    )
    p.add_argument("--quick", action="store_true", help="10x fewer records (a smoke run)")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="default: %(default)s")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    p.add_argument(
        "--no-readme",
        action="store_true",
        help="do not refresh the results section of benchmarks/README.md "
        "(only refreshed when --out is the default directory)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the selected scenarios on one broker; print and write the results."""
    args = _parse(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    try:
        clients = parse_clients(args.clients)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    reports: list[dict[str, Any]] = []
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from aiokafka_lite._embedded import EmbeddedBroker

        broker = EmbeddedBroker(args.broker).start()
        bootstrap = broker.bootstrap
    broker_name = f"embedded {args.broker}" if broker is not None else "external"
    try:
        for name in names:
            overrides, quick = SCENARIOS[name]
            settings: dict[str, Any] = {"clients": clients, "rounds": args.rounds, **overrides}
            opts = BenchOptions(bootstrap=bootstrap, **settings)
            if args.quick:
                opts.records = quick
            with make_progress() as ui:
                report = run_benchmark(opts, ui)
            report["scenario"] = name
            report["broker"]["name"] = broker_name
            reports.append(report)
            print_summary(report, sys.stdout, use_rich=sys.stdout.isatty())
    except BenchError as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if broker is not None:
            broker.stop()
    print("\ntargets (issue 5):")
    for t, m, ok in targets(reports):
        print(f"  {ok:8s} {t}: {m}")
    write_json(reports, out / "latest.json")
    day = time.strftime("%Y-%m-%d", time.gmtime())
    versions = ", ".join(f"{k} {v}" for k, v in reports[0]["versions"].items()) if reports else ""
    lines = [f"Results of `python -m benchmarks` on {day}; {versions}.", ""]
    goals = targets(reports)
    lines += ["### targets (issue 5)", "", "| target | measured | |", "|---|---:|---|"]
    lines += [f"| {t} | {m} | {ok} |" for t, m, ok in goals]
    lines += [""]
    for report in reports:
        lines += [f"### {report['scenario']}", "", title(report), "", markdown_table(report), ""]
    (out / "latest.md").write_text("\n".join(lines))
    print(f"wrote {out / 'latest.json'} and {out / 'latest.md'}", file=sys.stderr)
    official = not args.no_readme and out.resolve() == DEFAULT_OUT.resolve()
    if official and update_readme(README, "\n".join(lines)):
        print(f"refreshed the results in {README}", file=sys.stderr)
    if not args.no_plot:
        try:
            from aiokafka_lite.bench.plot import PlotError, plot_reports

            plot_reports(reports, out / "latest.png")
            print(f"wrote {out / 'latest.png'}", file=sys.stderr)
        except PlotError as exc:
            print(f"no plot: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
