"""The ``aiokafka-lite`` command line (also ``python -m aiokafka_lite``).

One module per command group; each has ``register(subparsers)`` that adds its parser and sets
``func``. :func:`main` turns every expected failure (bad arguments, unreachable broker, Kafka
errors, timeouts, Ctrl-C, closed stdout) into a one-line message and an exit status, never a
traceback (set ``AIOKAFKA_LITE_DEBUG=1`` to see one).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from .. import __version__
from ._common import CliError, silence_stdout

__all__ = ["main", "build_parser", "CliError"]


def build_parser() -> argparse.ArgumentParser:
    """The complete argument parser."""
    from . import bench, broker, consume, demo, groups, produce, share, topics

    parser = argparse.ArgumentParser(
        prog="aiokafka-lite",
        description="aiokafka_lite command line: embedded broker, topics, groups, produce, "
        "consume, benchmarks.",
    )
    parser.add_argument("--version", action="version", version=f"aiokafka-lite {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (broker, topics, groups, share, produce, consume, bench, demo):
        module.register(sub)
    return parser


def _message(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    detail = text[0] if text else ""
    name = type(exc).__name__
    if not detail:
        return name
    return detail if name in detail else f"{name}: {detail}"


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: sys.argv[1:]), run the command, return the exit status."""
    from .. import errors as Errors

    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["demo"]:  # everything after "demo" belongs to the demo's own parser
        argv = ["demo", "--", *argv[1:]]
    args = parser.parse_args(argv)  # exits with status 2 and a usage line on bad arguments
    debug = bool(os.environ.get("AIOKAFKA_LITE_DEBUG"))
    try:
        return int(args.func(args))
    except CliError as exc:
        print(f"aiokafka-lite: error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("aiokafka-lite: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        silence_stdout()
        return 0
    except (Errors.KafkaError, asyncio.TimeoutError, OSError) as exc:
        if debug:
            raise
        if isinstance(exc, asyncio.TimeoutError):
            print("aiokafka-lite: error: timed out (see --timeout)", file=sys.stderr)
        else:
            print(f"aiokafka-lite: error: {_message(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug: still one line unless debugging
        if debug:
            raise
        print(
            f"aiokafka-lite: internal error: {_message(exc)} (AIOKAFKA_LITE_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return 70
