"""Wait until a condition holds, with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class PollSettings:
    timeout_s: float = 30.0
    interval_s: float = 0.5


def poll_until(
    check: Callable[[], T], done: Callable[[T], bool], settings: PollSettings
) -> tuple[bool, T]:
    """Call ``check`` until ``done(result)``; return (reached, last result)."""
    deadline = time.monotonic() + settings.timeout_s
    while True:
        result = check()
        if done(result) or time.monotonic() >= deadline:
            return done(result), result
        time.sleep(settings.interval_s)
