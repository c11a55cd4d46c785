"""Helpers shared by the command modules: errors, async running, tables, output."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Sequence
from typing import Any, TextIO, TypeVar

__all__ = [
    "CliError",
    "DEFAULT_BOOTSTRAP",
    "add_bootstrap",
    "run",
    "print_table",
    "silence_stdout",
    "parse_headers",
    "parse_acks",
]

T = TypeVar("T")

#: ``--bootstrap`` default: $KAFKA_BOOTSTRAP, else localhost:9092.
DEFAULT_BOOTSTRAP = "localhost:9092"


class CliError(Exception):
    """A user-facing failure: printed as one line, exit status ``code``."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def add_bootstrap(parser: argparse.ArgumentParser, *, timeout: float = 10.0) -> None:
    """``-b/--bootstrap`` and ``--timeout`` (seconds for each network step)."""
    parser.add_argument(
        "-b",
        "--bootstrap",
        default=os.environ.get("KAFKA_BOOTSTRAP", DEFAULT_BOOTSTRAP),
        type=bootstrap_servers,
        metavar="HOST:PORT[,...]",
        help="broker address(es) (default: $KAFKA_BOOTSTRAP or %(default)s)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=timeout,
        metavar="SECONDS",
        help="give up on the broker after this long (default: %(default)s)",
    )


def bootstrap_servers(text: str) -> str:
    """argparse type: ``host[:port][,host[:port]...]`` with numeric ports in 1..65535."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError("no broker address given")
    for part in parts:
        host, sep, port = part.rpartition(":")
        if not sep:
            continue  # a bare host: the default port
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise argparse.ArgumentTypeError(f"{part!r} is not host:port")
    return ",".join(parts)


def positive_int(text: str) -> int:
    """argparse type: an integer > 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return value


def parse_acks(text: str) -> int:
    """argparse type: ``0``, ``1``, ``-1`` or ``all``."""
    if text.strip().lower() == "all":
        return -1
    if text.strip() in ("0", "1", "-1"):
        return int(text)
    raise argparse.ArgumentTypeError(f"acks must be 0, 1, -1 or all, not {text!r}")


def parse_headers(text: str) -> list[tuple[str, bytes]]:
    """``k=v,k2=v2`` -> ``[("k", b"v"), ("k2", b"v2")]`` (a value may be empty, keys may not)."""
    out: list[tuple[str, bytes]] = []
    for part in text.split(","):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"header {part!r} is not key=value")
        out.append((key, value.encode()))
    return out


def run(coro: Awaitable[T], timeout: float | None = None) -> T:
    """Run a coroutine on a fresh event loop, with an overall deadline when ``timeout`` is set."""

    async def main() -> T:
        if timeout is None:
            return await coro
        try:
            return await asyncio.wait_for(coro, timeout)
        except asyncio.TimeoutError:
            raise CliError(f"timed out after {timeout:g} s") from None

    return asyncio.run(main())


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], stream: TextIO | None = None
) -> None:
    """An aligned text table (rich's table when installed and writing to a terminal)."""
    stream = stream or sys.stdout
    cells = [[("-" if c is None else str(c)) for c in row] for row in rows]
    if stream.isatty():
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:
            pass
        else:
            table = Table(*headers)
            for row in cells:
                table.add_row(*row)
            Console(file=stream).print(table)
            return
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    stream.write("\n".join(lines) + "\n")
    stream.flush()


def silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


#: ``--compression`` choices.
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
