"""Progress display for benchmark runs: a live ``rich`` bar when available, plain lines otherwise.

Everything goes to stderr so stdout keeps only results (tables, JSON).
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any, TextIO

__all__ = ["ProgressUI", "make_progress", "rich_available"]


def rich_available() -> bool:
    """True when the optional ``rich`` package can be imported."""
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


class ProgressUI:
    """Plain-text progress: one line when a run starts, a line every few seconds, one at the end."""

    def __init__(self, stream: TextIO | None = None, interval: float = 2.0) -> None:
        self.stream = stream or sys.stderr
        self.interval = interval
        self._runs: dict[int, tuple[str, int, float, float]] = {}
        self._next = 0

    def __enter__(self) -> ProgressUI:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def log(self, message: str) -> None:
        """Print one informational line."""
        print(message, file=self.stream, flush=True)

    def start(self, label: str, total: int) -> int:
        """Announce a run of ``total`` records; returns a handle for :meth:`update`/:meth:`finish`."""
        handle = self._next
        self._next += 1
        now = time.monotonic()
        self._runs[handle] = (label, total, now, now)
        self.log(f"{label}: started ({total:,} records)")
        return handle

    def update(self, handle: int, done: int) -> None:
        """Report ``done`` records so far (printed at most every ``interval`` seconds)."""
        label, total, started, last = self._runs[handle]
        now = time.monotonic()
        if now - last >= self.interval:
            self._runs[handle] = (label, total, started, now)
            pct = 100.0 * done / total if total else 100.0
            self.log(f"{label}: {done:,}/{total:,} ({pct:.0f}%)")

    def finish(self, handle: int, summary: str) -> None:
        """Close the run with a one-line summary."""
        label = self._runs.pop(handle)[0]
        self.log(f"{label}: {summary}")


class RichProgressUI(ProgressUI):
    """A live progress bar per run (rich)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(stream)
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.console = Console(file=self.stream)
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )
        self._starts: dict[int, float] = {}

    def __enter__(self) -> RichProgressUI:
        self.progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.progress.stop()

    def log(self, message: str) -> None:
        self.progress.console.print(message, markup=False, highlight=False)

    def start(self, label: str, total: int) -> int:
        task: Any = self.progress.add_task(label, total=total, rate="")
        self._starts[int(task)] = time.monotonic()
        return int(task)

    def update(self, handle: int, done: int) -> None:
        elapsed = time.monotonic() - self._starts[handle]
        rate = f"{done / elapsed:,.0f} rec/s" if elapsed > 0 and done else ""
        self.progress.update(handle, completed=done, rate=rate)  # type: ignore[arg-type]

    def finish(self, handle: int, summary: str) -> None:
        self.progress.update(handle, rate=summary)  # type: ignore[arg-type]
        task = next(t for t in self.progress.tasks if t.id == handle)
        if task.total is not None:
            self.progress.update(handle, completed=max(task.completed, 0))  # type: ignore[arg-type]
        self.progress.stop_task(handle)  # type: ignore[arg-type]


def make_progress(kind: str = "auto", stream: TextIO | None = None) -> ProgressUI:
    """``"rich"``, ``"plain"`` or ``"auto"`` (rich when installed and ``stream`` is a terminal)."""
    stream = stream or sys.stderr
    wanted = kind == "rich" or (kind == "auto" and stream.isatty())
    if wanted and rich_available():
        return RichProgressUI(stream)
    return ProgressUI(stream)
