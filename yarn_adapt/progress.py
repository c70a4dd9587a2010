"""Progress of long work on stderr: ``yarn-adapt: demo round 3/20 · 6 s elapsed ·
ETA 34 s``. Standard output stays for results (a bench's last line is its JSON).

A command that does long work (a bench, ``propose``, ``demo``) makes a
:class:`Progress` and calls :meth:`Progress.advance`; code below the CLI (a bench's
inner loop) calls :func:`report` without knowing who listens. ``--quiet`` (the
group's option) turns every line off through :func:`configure`. Lines are at most
one a second, except the first and the last, so a fast loop does not flood the
terminal.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from yarn_adapt.durations import duration

MIN_GAP_S = 1.0


@dataclass
class _Config:
    enabled: bool = True
    stream: TextIO | None = None  # None: sys.stderr at the time of writing


_CONFIG = _Config()


def configure(*, enabled: bool, stream: TextIO | None = None) -> None:
    _CONFIG.enabled = enabled
    _CONFIG.stream = stream


def enabled() -> bool:
    return _CONFIG.enabled


@dataclass
class Progress:
    """``what`` names the unit of work (``demo round``, ``bench adaptive-latency``)."""

    what: str
    total: int | None = None
    clock: Callable[[], float] = time.monotonic
    started: float = field(default=0.0)
    _last_line: float = field(default=-1e9)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def advance(self, done: int, note: str = "") -> str | None:
        """Report ``done`` units finished; returns the line written, if any."""
        if not _CONFIG.enabled:
            return None
        now = self.clock()
        last = self.total is not None and done >= self.total
        if not last and done > 1 and now - self._last_line < MIN_GAP_S:
            return None
        self._last_line = now
        line = self.line(done, now, note)
        stream = _CONFIG.stream or sys.stderr
        stream.write(line + "\n")
        stream.flush()
        return line

    def line(self, done: int, now: float, note: str = "") -> str:
        elapsed = now - self.started
        count = f"{done}/{self.total}" if self.total else f"{done}"
        parts = [f"yarn-adapt: {self.what} {count}", f"{duration(elapsed)} elapsed"]
        if self.total and 0 < done < self.total:
            parts.append(f"ETA {duration(elapsed / done * (self.total - done))}")
        if note:
            parts.append(note)
        return " · ".join(parts)


_CURRENT: dict[str, Progress] = {}


def report(what: str, done: int, total: int | None = None, note: str = "") -> None:
    """Progress from code that does not own a :class:`Progress` (a bench's loop):
    one per ``what``, started at its first report."""
    progress = _CURRENT.get(what)
    if progress is None or (done <= 1 and progress.total != total):
        progress = _CURRENT[what] = Progress(what, total)
    progress.advance(done, note)
