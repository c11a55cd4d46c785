"""``aiokafka-lite demo``: the walk-through in :mod:`aiokafka_lite.demo`."""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``demo`` command (its own options are passed through to aiokafka_lite.demo)."""
    p = sub.add_parser(
        "demo",
        help="start an embedded broker and show the client at work",
        description="Runs aiokafka_lite.demo; options after 'demo' go to it (see demo --help).",
        add_help=False,
    )
    p.add_argument("demo_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    """Delegate to aiokafka_lite.demo.main."""
    from .. import demo

    rest = list(args.demo_args)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    return int(demo.main(rest))
