"""``python -m aiokafka_lite`` = the ``aiokafka-lite`` command (see :mod:`aiokafka_lite.cli`)."""

from __future__ import annotations

import sys

from .cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
