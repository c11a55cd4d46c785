"""What a benchmark worker process and its client runners (``run_*``) share: the record
pools, the headers, the round-trip stamp tag, the progress counter and the worker's output
prefixes. Below both, so a runner never imports the worker that picks it."""

from __future__ import annotations

import random

__all__ = [
    "HEADERS",
    "PREFIX_ERROR",
    "PREFIX_PROGRESS",
    "PREFIX_RESULT",
    "STAMP_TAG",
    "Progress",
    "key_pool",
    "value_pool",
]

PREFIX_PROGRESS = "@@P "
PREFIX_RESULT = "@@R "
PREFIX_ERROR = "@@E "
#: Roundtrip records start with this 4-byte tag, then an 8-byte perf_counter_ns stamp.
STAMP_TAG = b"RTB1"


class Progress:
    """Records done so far; runners bump ``done`` (a plain attribute: cheap on hot paths)."""

    def __init__(self) -> None:
        self.done = 0
        self.errors = 0
        self.first_error: str | None = None
        self.latencies: list[float] = []

    def error(self, exc: BaseException | str) -> None:
        """Count a failed record (first message kept for the report)."""
        self.errors += 1
        if self.first_error is None:
            self.first_error = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"


def value_pool(size: int, count: int = 256, seed: int = 7) -> list[bytes]:
    """``count`` distinct values of ``size`` bytes: hex text, so codecs compress them ~2:1."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        raw = rng.randbytes((size + 1) // 2).hex().encode()
        out.append(raw[:size])
    return out


def key_pool(count: int = 256) -> list[bytes]:
    """``count`` distinct 8-byte keys (``--keys`` runs cycle through them)."""
    return [b"key-%04d" % i for i in range(count)]


#: The headers of every record in ``--headers`` runs: two small headers, as tracing adds.
HEADERS: list[tuple[str, bytes]] = [("trace-id", b"0af7651916cd43dd"), ("source", b"bench")]
