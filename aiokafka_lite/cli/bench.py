"""``aiokafka-lite bench produce|consume|roundtrip``: the benchmark engine from the command line."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._common import (
    CODECS,
    CliError,
    bootstrap_servers,
    non_negative_int,
    parse_acks,
    positive_float,
    positive_int,
)

__all__ = ["register", "options_from_args"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``bench`` command group."""
    p = sub.add_parser(
        "bench",
        help="measure produce / consume / round-trip speed (optionally against other clients)",
        description="Benchmarks on a real broker: each run is a fresh process; with --compare the "
        "peers run in the same session on the same broker, in interleaved rounds, and the table "
        "shows medians and ratios. Without --bootstrap an embedded broker is started for the run.",
    )
    bsub = p.add_subparsers(dest="bench_cmd", metavar="KIND", required=True)
    for kind, text in (
        ("produce", "records/s and acknowledgement latency of a producer"),
        ("consume", "records/s reading a pre-filled topic from the beginning"),
        ("roundtrip", "produce-to-consume latency with a window of records in flight"),
    ):
        q = bsub.add_parser(kind, help=text, description=text)
        _add_options(q, kind)
        q.set_defaults(func=cmd_bench, bench_kind=kind)


def _add_options(p: argparse.ArgumentParser, kind: str) -> None:
    g = p.add_argument_group("workload")
    g.add_argument(
        "-n", "--records", type=positive_int, default=100_000, help="default: %(default)s"
    )
    g.add_argument(
        "-s",
        "--size",
        type=non_negative_int,
        default=100,
        help="value bytes (default: %(default)s)",
    )
    g.add_argument("-p", "--partitions", type=positive_int, default=1, help="default: %(default)s")
    g.add_argument("-z", "--codec", choices=CODECS, default="none", help="default: %(default)s")
    g.add_argument("--acks", type=parse_acks, default=1, help="0, 1 or all (default: %(default)s)")
    g.add_argument("--linger-ms", type=non_negative_int, default=None,
                   help="default: 0 for --api wait, else 5")  # fmt: skip
    g.add_argument(
        "--batch-size",
        type=positive_int,
        default=16384,
        help="producer batch bytes (default: %(default)s)",
    )
    g.add_argument("-c", "--concurrency", type=positive_int, default=None,
                   help="produce: concurrent sender tasks (default 1); roundtrip: records in flight "
                   "(default 100)")  # fmt: skip
    if kind == "produce":
        g.add_argument("--api", choices=("send", "gather", "wait", "batch", "many", "arrow"),
                       default="send",
                       help="send: pipelined send(), then flush(); gather: keep every send() "
                       "future, then gather them; wait: send_and_wait() each; batch: "
                       "create_batch/send_batch; many: send_many() 1000 at a time "
                       "(default: %(default)s)")  # fmt: skip
        g.add_argument("--keys", action="store_true", help="give every record a key")
        g.add_argument("--headers", action="store_true", help="give every record two headers")
    if kind == "consume":
        g.add_argument("--api", choices=("getmany", "iter", "arrow"), default="getmany",
                       help="getmany: getmany() in a loop; iter: async for, one record at a "
                       "time (default: %(default)s)")  # fmt: skip
    r = p.add_argument_group("run")
    r.add_argument("--compare", default=None, metavar="CLIENTS",
                   help="also run these clients, comma separated: aiokafka, confluent-aio, "
                   "confluent, kafka-python (or all)")  # fmt: skip
    r.add_argument("--rounds", type=positive_int, default=None,
                   help="rounds per client (default: 3 with --compare, else 1)")  # fmt: skip
    r.add_argument("-b", "--bootstrap", default=None, type=bootstrap_servers,
                   help="use this broker (default: start an embedded one)")  # fmt: skip
    r.add_argument("--broker-label", default="external", metavar="NAME",
                   help="how the report names the --bootstrap broker (default: %(default)s)")  # fmt: skip
    r.add_argument("--broker", choices=("tansu", "noida"), default="noida",
                   help="embedded broker kind (default: %(default)s; Tansu answers a waiting fetch only "
                   "at its max wait, which dominates roundtrip latency)")  # fmt: skip
    r.add_argument("--timeout", type=positive_float, default=300.0,
                   help="seconds allowed per run (default: %(default)s)")  # fmt: skip
    r.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio",
                   help="event loop of aiokafka_lite and aiokafka (default: %(default)s)")  # fmt: skip
    r.add_argument("--progress", choices=("auto", "rich", "plain", "none"), default="auto",
                   help="progress display on stderr (default: %(default)s)")  # fmt: skip
    o = p.add_argument_group("output")
    o.add_argument("--json", default=None, metavar="FILE", help="write the full results as JSON")
    o.add_argument(
        "--profile",
        default=None,
        metavar="DIR",
        help="run aiokafka_lite under cProfile (slower!) and write one .prof per run into DIR; "
        "prints the top functions by own time",
    )
    o.add_argument("--plot", default=None, metavar="FILE.png",
                   help="draw throughput and latency (needs matplotlib)")  # fmt: skip


def options_from_args(args: argparse.Namespace) -> Any:
    """BenchOptions from parsed arguments (CliError for bad client names)."""
    from ..bench import BenchOptions, parse_clients

    clients = ["aiokafka_lite"]
    if args.compare:
        spec = (
            "aiokafka,confluent-aio,confluent,kafka-python"
            if args.compare.strip() == "all"
            else args.compare
        )
        try:
            clients += [c for c in parse_clients(spec) if c != "aiokafka_lite"]
        except ValueError as exc:
            raise CliError(str(exc), 2) from None
    rounds = args.rounds or (3 if len(clients) > 1 else 1)
    return BenchOptions(
        kind=args.bench_kind,
        clients=clients,
        records=args.records,
        size=args.size,
        partitions=args.partitions,
        codec=args.codec,
        acks=args.acks,
        linger_ms=args.linger_ms,
        batch_size=args.batch_size,
        concurrency=args.concurrency,
        api=getattr(args, "api", "send"),
        keys=getattr(args, "keys", False),
        headers=getattr(args, "headers", False),
        rounds=rounds,
        bootstrap=args.bootstrap,
        broker_label=args.broker_label,
        broker_kind=args.broker,
        timeout_s=args.timeout,
        profile_dir=args.profile,
        loop=args.loop,
    )


def cmd_bench(args: argparse.Namespace) -> int:
    """Run, print the table, write --json / --plot."""
    import io

    from ..bench import BenchError, make_progress, print_summary, run_benchmark, write_json

    opts = options_from_args(args)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise CliError("--plot needs matplotlib: pip install 'aiokafka_lite[cli]'", 2) from None
    ui = (
        make_progress("plain", io.StringIO())
        if args.progress == "none"
        else make_progress(args.progress)
    )
    try:
        with ui:
            report = run_benchmark(opts, ui)
    except BenchError as exc:
        raise CliError(str(exc)) from None
    print_summary(report, sys.stdout, use_rich=sys.stdout.isatty())
    if args.json:
        try:
            write_json(report, args.json)
        except OSError as exc:
            raise CliError(f"cannot write {args.json}: {exc.strerror}") from None
        print(f"results written to {args.json}", file=sys.stderr)
    if args.plot:
        from ..bench.plot import PlotError, plot_reports

        try:
            plot_reports([report], args.plot)
        except PlotError as exc:
            raise CliError(str(exc)) from None
        print(f"plot written to {args.plot}", file=sys.stderr)
    profiles = [r["profile"] for r in report["runs"] if r.get("profile")]
    if profiles:
        import pstats

        print(f"\nprofile of {profiles[0]} (own time; all runs in {args.profile}):")
        pstats.Stats(profiles[0], stream=sys.stdout).sort_stats("tottime").print_stats(15)
    failed = sum(1 for r in report["runs"] if "failed" in r)
    return 1 if failed else 0
