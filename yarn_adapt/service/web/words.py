"""Values in words for people (pure): durations as ``1 m 12 s``, local time with its
zone, unset settings with the default that applies, short notes with the details
kept apart. The page uses these as Jinja filters; the API keeps numbers with units
in their field names (``_s``, ``_percent``, ``_epoch_s``)."""

from __future__ import annotations

import math
import time
from pathlib import PurePath

from yarn_adapt.durations import duration

__all__ = ["duration"]  # with the page's other filters below

SHORT_NOTE = 90
"""Notes longer than this show their first sentence; the rest is behind a click."""


def when(timestamp: float | None) -> str:
    """Local time with its zone: ``2025-03-01 14:03:07 CET``."""
    if timestamp is None or not math.isfinite(timestamp) or timestamp <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(timestamp))


def clock(timestamp: float | None) -> str:
    """Local time of day with its zone: ``14:03:07 CET``."""
    if timestamp is None or not math.isfinite(timestamp) or timestamp <= 0:
        return "-"
    return time.strftime("%H:%M:%S %Z", time.localtime(timestamp))


def unset(default: str) -> str:
    return f"(unset → default {default})"


def value_or_default(value: object, default: str) -> str:
    """A configured value as written, or what YARN uses when it is unset."""
    if value is None or value == "":
        return unset(default)
    return str(value)


def percent(value: float | None, digits: int = 1) -> str:
    """``12.5 %``; trailing zeros of the decimals dropped (``50 %``, ``100 %``)."""
    if value is None or not math.isfinite(value):
        return "-"
    text = f"{value:.{digits}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text} %"


def change_percent(improvement: float) -> str:
    """A relative latency reduction as a signed change: 0.25 -> ``-25 %``."""
    if not math.isfinite(improvement) or improvement == 0:
        return "±0 %"
    return f"{-improvement * 100:+.0f} %".replace("-", "−")


def short_note(note: str) -> tuple[str, str]:
    """A note's short form and the rest (empty when the note is short)."""
    text = " ".join(note.split())
    if len(text) <= SHORT_NOTE:
        return text, ""
    for stop in (": ", "; ", ". ", " ("):
        cut = text.find(stop)
        if 0 < cut <= SHORT_NOTE:
            return text[:cut], text
    return text[: SHORT_NOTE - 1].rstrip() + "…", text


def file_name(path: str) -> str:
    """A target's last part (``capacity-scheduler.xml``), the full path kept apart."""
    return PurePath(path).name or path


APPLIER_WORDS = {
    "file+RefreshCommand": "file, then yarn rmadmin -refreshQueues",
    "file+WaitForReload": "file, then the Fair Scheduler's reload",
    "file+simulated-refresh": "file, then the simulated RM's reload",
    "mutation": "the RM's scheduler-conf API",
}


def applier(name: str) -> str:
    return APPLIER_WORDS.get(name, name)
