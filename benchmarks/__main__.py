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
from aiokafka_lite.launchers.apache import apache_available

#: the issue-12 producer settings: acks=1, linger_ms=5, max_batch_size=65536, 100-byte records,
#: one partition
_P = dict(kind="produce", acks=1, linger_ms=5, batch_size=65536, size=100, partitions=1)

#: name -> (BenchOptions overrides, records in --quick mode)
SCENARIOS: dict[str, tuple[dict[str, Any], int]] = {
    "produce-gather": (dict(_P, api="gather", records=200_000), 20_000),
    # fire and forget: a latency sample is a done callback, so only 1000 records carry one
    "produce-send": (dict(_P, api="send", records=200_000, latency_samples=1000), 20_000),
    "produce-keyed": (dict(_P, api="gather", keys=True, records=200_000), 20_000),
    "produce-headers": (dict(_P, api="gather", headers=True, records=200_000), 20_000),
    "produce-many": (dict(_P, api="many", records=200_000), 20_000),
    # hooks overhead (issue 15): aiokafka_lite without any hook, as is (the built-in metrics
    # hook) and with one more no-op hook on every event (on_send per record included)
    "produce-hooks": (
        dict(
            _P,
            api="gather",
            records=200_000,
            clients=["aiokafka_lite-nohooks", "aiokafka_lite", "aiokafka_lite-noop"],
        ),
        20_000,
    ),
    "produce-batch": (dict(kind="produce", api="batch", records=200_000), 20_000),
    "produce-wait": (dict(kind="produce", api="wait", records=5_000), 500),
    # the Arrow API (issue 33): send_arrow() tables of 10,000 rows; getmany_arrow()
    "produce-arrow": (dict(_P, api="arrow", records=200_000), 20_000),
    "consume-getmany": (dict(kind="consume", api="getmany", records=200_000), 20_000),
    "consume-iter": (dict(kind="consume", api="iter", records=200_000), 20_000),
    "consume-arrow": (dict(kind="consume", api="arrow", records=200_000), 20_000),
    "roundtrip": (dict(kind="roundtrip", records=50_000, concurrency=100), 5_000),
    # a slow application over a 100 MiB backlog in 4 partitions: peak RSS against the fetch
    # limits (the asyncio clients; see LAG_TARGET_MB)
    "consume-lag": (
        dict(
            kind="consume",
            api="lag",
            records=100_000,
            size=1024,
            partitions=4,
            clients=["aiokafka_lite", "aiokafka"],
            rounds=1,
        ),
        20_000,
    ),
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

#: What each peer runs in a scenario (its idiomatic equivalent); printed under each table.
NOTES: dict[str, str] = {
    "produce-gather": "aiokafka_lite and aiokafka: `futs.append(await producer.send(topic, v))` "
    "per record, then `await asyncio.gather(*futs)`; confluent-aio: `futs.append(await "
    "producer.produce(topic, v))`, `await flush()`, then gather; confluent-kafka: "
    "`produce(topic, v, "
    "on_delivery=cb)` per record (the callback checks each outcome) + `poll(0)` every 128, then "
    "`flush()`; kafka-python: `futs.append(producer.send(topic, v))`, `flush()`, then "
    "`f.get()` for each.",
    "produce-send": "fire and forget: `await producer.send(topic, v)` (handle dropped), then "
    "`flush()`; confluent-aio: `await produce()` (future dropped), then `await flush()`; "
    "confluent-kafka: `produce()` + `poll(0)` every 128, then `flush()`; "
    "kafka-python: `send()`, then `flush()`.",
    "produce-keyed": "as produce-gather, every record with an 8-byte key (256 distinct).",
    "produce-headers": "as produce-gather, every record with two headers (`trace-id`, `source`); "
    "confluent-aio's AIOProducer takes no headers (its row fails with NotImplementedError).",
    "produce-many": "aiokafka_lite: `send_many(topic, values)` 1000 values per call; the peers "
    "have no bulk API and run their send loop (confluent-kafka: `produce()` loop).",
    "produce-hooks": "as produce-gather, aiokafka_lite alone: `aiokafka_lite-nohooks` without "
    "any hook, `aiokafka_lite` as shipped (its built-in metrics hook), `aiokafka_lite-noop` with "
    "one more hook whose methods, `on_send` per record included, do nothing.",
    "produce-batch": "aiokafka_lite and aiokafka: `create_batch()` + `send_batch()`; the others "
    "run their send loop.",
    "produce-wait": "`await send_and_wait()` one after another, linger 0; confluent-aio: "
    "`fut = await produce()`, `await flush()`, `await fut` (a lone record otherwise waits for "
    "its 1 s buffer timeout, and delivery reports are served only in poll()/flush()); "
    "confluent-kafka: "
    "`produce()` + `flush()`; kafka-python: `send().get()`.",
    "consume-getmany": "manual assignment, `await getmany(timeout_ms=1000)` in a loop; "
    "confluent-aio: `await consume(1000, 1.0)`; confluent-kafka: `consume(1000, 1.0)`; "
    "kafka-python: `poll(timeout_ms=1000)`.",
    "consume-iter": "manual assignment, `async for record in consumer`; confluent-aio: "
    "`await poll(1.0)` one message at a time; confluent-kafka: "
    "`poll(1.0)` one message at a time; kafka-python: `for record in consumer`.",
    "produce-arrow": "aiokafka_lite: `send_arrow(topic, table)` with tables of 10,000 rows (a "
    "value column), then flush(); the peers have no Arrow API and run their "
    "send loop (as produce-send).",
    "consume-arrow": "aiokafka_lite: `await getmany_arrow(timeout_ms=1000, max_records=10000)` "
    "in a loop (a table costs ~0.15 ms of pyarrow calls whatever its size), the "
    "value bytes summed by pyarrow.compute; the peers run their getmany equivalent (as "
    "consume-getmany).",
    "roundtrip": "one producer and one consumer in one process, at most 100 records in flight.",
    "consume-lag": "aiokafka_lite and aiokafka, manual assignment of 4 partitions holding "
    "100 MiB: `getmany(max_records=500)`, then `asyncio.sleep(0.005)`, until every record was "
    "read; the RSS column is the point (default fetch limits: 1 MiB per partition).",
    "produce-1gib": "aiokafka_lite alone: 1 GiB of 1 KiB records, fire and forget + flush.",
}

#: scenarios that need a broker honouring the Fetch size limits: run on Apache Kafka (from the
#: Maven jars) when the session's broker is an embedded one and Java/Maven are available
NEEDS_FETCH_LIMITS = frozenset({"consume-lag"})

#: AIOKafkaProducer's default buffer_memory, in MiB (the memory target is relative to it)
BUFFER_MEMORY_MB = 32.0
#: the slow consumer's RSS bound: the same 50 MiB of interpreter and client as the producer
#: target, plus the fetch limit (4 partitions x max_partition_fetch_bytes 1 MiB) twice: the
#: raw response being decoded and the records made from it
LAG_TARGET_MB = 50 + 2 * 4 * 1.0


def _row(reports: dict[str, dict[str, Any]], scenario: str, client: str = "aiokafka_lite") -> Any:
    report = reports.get(scenario)
    return report["summary"].get(client) if report else None


def targets(reports_list: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(target, measured, "met"/"NOT met"/"not run") for every target of issue 12."""
    reports = {r["scenario"]: r for r in reports_list}
    out: list[tuple[str, str, str]] = []

    def ratio(scenario: str, key: str, goal: float, text: str) -> None:
        row = _row(reports, scenario)
        value = row.get(key) if row else None
        if value is None:
            out.append((text, "-", "not run"))
            return
        measured = f"{value:.2f}x"
        # the same ratio in CPU time per record: steadier than records/s on a shared machine
        peer = _row(reports, scenario, key[2:].replace("_", "-"))
        mine_cpu = row.get("cpu_us_per_record")
        peer_cpu = peer.get("cpu_us_per_record") if peer else None
        if mine_cpu and peer_cpu:
            measured += f" (CPU per record: {peer_cpu / mine_cpu:.2f}x)"
        out.append((text, measured, "met" if value >= goal else "NOT met"))

    ratio("produce-gather", "x_aiokafka", 3.0, "send()+gather records/s >= 3x aiokafka")
    ratio("produce-send", "x_aiokafka", 3.0, "send() fire-and-forget records/s >= 3x aiokafka")
    ratio("produce-keyed", "x_aiokafka", 3.0, "keyed send()+gather records/s >= 3x aiokafka")
    ratio("produce-headers", "x_aiokafka", 3.0, "send()+gather with headers >= 3x aiokafka")
    ratio("produce-many", "x_confluent", 1.0, "send_many records/s >= 1x confluent produce()")
    ratio("consume-getmany", "x_aiokafka", 1.5, "getmany records/s >= 1.5x aiokafka")
    ratio("consume-iter", "x_aiokafka", 1.5, "async for records/s >= 1.5x aiokafka")
    # issue 24: the asyncio peer users weigh against aiokafka
    ratio("consume-getmany", "x_confluent_aio", 1.0, "getmany >= confluent-aio consume(1000)")
    ratio("consume-iter", "x_confluent_aio", 1.0, "async for >= confluent-aio poll()")
    row = _row(reports, "produce-wait")
    for client, name in (("confluent", "confluent-kafka's"), ("confluent-aio", "confluent-aio's")):
        peer = _row(reports, "produce-wait", client)
        for key in ("p50_ms", "p99_ms"):
            text = f"send_and_wait {key[:3]} <= {name}"
            if not row or row.get(key) is None or not peer or peer.get(key) is None:
                out.append((text, "-", "not run"))
            else:
                out.append((text, f"{row[key]:.3f} ms vs {peer[key]:.3f} ms",
                            "met" if row[key] <= peer[key] else "NOT met"))  # fmt: skip
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
    row = _row(reports, "consume-lag")
    cfg = reports["consume-lag"]["config"] if "consume-lag" in reports else {}
    backlog = cfg.get("records", 100_000) * cfg.get("size", 1024) / (1 << 20)
    text = f"RSS of a slow consumer over a {backlog:.0f} MiB backlog <= {LAG_TARGET_MB:.0f} MiB"
    if not row or row.get("rss_mb") is None:
        out.append((text, "-", "not run"))
    else:
        peer = _row(reports, "consume-lag", "aiokafka")
        vs = f" (aiokafka {peer['rss_mb']:.0f} MiB)" if peer and peer.get("rss_mb") else ""
        out.append((text, f"{row['rss_mb']:.0f} MiB peak{vs}",
                    "met" if row["rss_mb"] <= LAG_TARGET_MB else "NOT met"))  # fmt: skip
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
        "--only",
        default=",".join(SCENARIOS),
        help="comma list of: " + ", ".join(SCENARIOS) + ", rebalance (on its own: "
        "benchmarks/bench_rebalance.py), spark (on its own: benchmarks/bench_spark.py: Spark "
        "reads and writes against Spark's kafka format, on Apache Kafka)",
    )
    p.add_argument("--clients", default=",".join(CLIENTS), help="default: %(default)s")
    p.add_argument("--rounds", type=int, default=3, help="default: %(default)s")
    p.add_argument(
        "--broker",
        choices=("tansu", "noida", "apache"),
        default="noida",
        help="default: %(default)s (apache: Apache Kafka from Maven jars, `make jars`; the "
        "embedded brokers ignore the fetch size limits, so consume-lag means most there)",
    )
    p.add_argument(
        "-b", "--bootstrap", default=None, help="use this broker instead of an embedded one"
    )
    p.add_argument("--quick", action="store_true", help="10x fewer records (a smoke run)")
    p.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="event loop of the asyncio clients (uvloop: the `uvloop` extra); default: %(default)s",
    )
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
    if "rebalance" in names:  # its own module: groups of members, on Apache Kafka only
        from benchmarks import bench_rebalance

        names.remove("rebalance")
        extra = ["--rounds", str(args.rounds)]
        extra += ["--bootstrap", args.bootstrap] if args.bootstrap else []
        status = bench_rebalance.run(extra)
        if status or not names:
            return status
    if "spark" in names:  # its own module: a Spark session beside Spark's own connector
        from benchmarks import bench_spark

        names.remove("spark")
        extra = ["--rounds", str(args.rounds)]
        extra += ["--bootstrap", args.bootstrap] if args.bootstrap else []
        bench_spark.main(extra)
        if not names:
            return 0
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
    limits_broker: Any = None  # Apache Kafka for NEEDS_FETCH_LIMITS scenarios, started on demand
    bootstrap = args.bootstrap
    if bootstrap is None:
        if args.broker == "apache":
            from aiokafka_lite.launchers.apache import ApacheKafka

            broker = ApacheKafka().start()
        else:
            from aiokafka_lite.launchers.embedded import EmbeddedBroker

            broker = EmbeddedBroker(args.broker).start()
        bootstrap = broker.bootstrap
    broker_name = (
        "external"
        if broker is None
        else f"Apache Kafka {broker.version}"
        if args.broker == "apache"
        else f"embedded {args.broker}"
    )
    try:
        for name in names:
            overrides, quick = SCENARIOS[name]
            settings: dict[str, Any] = {
                "clients": clients,
                "rounds": args.rounds,
                "loop": args.loop,
                **overrides,
            }
            where, where_name = bootstrap, broker_name
            if name in NEEDS_FETCH_LIMITS and args.bootstrap is None and args.broker != "apache":
                # the embedded brokers ignore the fetch size limits: measure on Apache Kafka
                if limits_broker is None and apache_available() is None:
                    from aiokafka_lite.launchers.apache import ApacheKafka

                    limits_broker = ApacheKafka().start()
                if limits_broker is not None:
                    where = limits_broker.bootstrap
                    where_name = f"Apache Kafka {limits_broker.version}"
            opts = BenchOptions(bootstrap=where, **settings)
            if args.quick:
                opts.records = quick
            with make_progress() as ui:
                report = run_benchmark(opts, ui)
            report["scenario"] = name
            report["broker"]["name"] = where_name
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
        if limits_broker is not None:
            limits_broker.stop()
    print("\ntargets (issue 12):")
    for t, m, ok in targets(reports):
        print(f"  {ok:8s} {t}: {m}")
    write_json(reports, out / "latest.json")
    day = time.strftime("%Y-%m-%d", time.gmtime())
    versions = ", ".join(f"{k} {v}" for k, v in reports[0]["versions"].items()) if reports else ""
    lines = [f"Results of `python -m benchmarks` on {day}; {versions}.", ""]
    goals = targets(reports)
    lines += ["### targets (issue 12)", "", "| target | measured | |", "|---|---:|---|"]
    lines += [f"| {t} | {m} | {ok} |" for t, m, ok in goals]
    lines += [""]
    for report in reports:
        name = report["scenario"]
        lines += [f"### {name}", "", title(report), "", markdown_table(report), ""]
        if name in NOTES:
            lines += [f"What runs: {NOTES[name]}", ""]
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
