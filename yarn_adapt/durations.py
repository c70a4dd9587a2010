"""Durations in words for people (pure): ``1 m 12 s``, ``2 h 5 m``, ``3 d 4 h``.

Everything a person reads -- the page, reasons stored with decisions and proposals,
the CLI's text, progress lines -- says a duration this way; JSON keeps seconds in
fields named ``..._s``. It lives here, apart from the web layer, because decision
code (the tuner's reasons) words its durations too.
"""

from __future__ import annotations

import math


def duration(seconds: float | None) -> str:
    """``1 m 12 s``, ``2 h 5 m``, ``3 d 4 h``, ``8.4 s``, ``0.35 s``; ``-`` when
    unknown, ``never`` when infinite."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "-" if seconds is None or math.isnan(seconds) or seconds < 0 else "never"
    if seconds < 0.01:
        return "0 s"
    if seconds < 10:
        return f"{seconds:.2g} s" if seconds < 1 else f"{seconds:.1f} s".replace(".0 s", " s")
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours >= 48:
        days, hours = divmod(hours, 24)
        return f"{days:,} d {hours} h" if hours else f"{days:,} d"
    if hours:
        return f"{hours} h {minutes} m" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} m {secs} s" if secs else f"{minutes} m"
    return f"{secs} s"
