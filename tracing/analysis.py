"""One window of traces -> critical paths -> risk: the steps the service and the CLI run.

:func:`analyse` is pure (columns in, frozen snapshot out); :func:`analyse_window` adds
the one Redis read in front of it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tracing.fastpath import PathTable, critical_paths
from tracing.forest import Forest, build_forest
from tracing.model import RiskSnapshot
from tracing.risk import RiskSettings, assess_paths
from tracing.store import LoadedTraces, TraceStore, now_us


@dataclass(frozen=True)
class WindowAnalysis:
    loaded: LoadedTraces
    forest: Forest
    paths: PathTable
    risk: RiskSnapshot
    seconds: dict[str, float] = field(default_factory=dict)  # per step


def analyse(
    loaded: LoadedTraces, settings: RiskSettings, window_start_us: int, window_end_us: int
) -> WindowAnalysis:
    began = time.perf_counter()
    forest = build_forest(loaded.columns, loaded.names)
    built = time.perf_counter()
    paths = critical_paths(forest)
    walked = time.perf_counter()
    risk = assess_paths(paths, settings, window_start_us, window_end_us)
    done = time.perf_counter()
    seconds = {"forest": built - began, "critical_paths": walked - built, "risk": done - walked}
    return WindowAnalysis(loaded, forest, paths, risk, seconds)


def window_bounds(store: TraceStore, window_s: float, end_us: int | None) -> tuple[int, int]:
    """[end - window, end]; ``end_us`` None: the newest stored trace's end, or now when
    that is earlier (a span stamped in the future never moves the window there)."""
    if end_us is None:
        newest, now = store.newest_end_us(), now_us()
        end_us = now if newest is None else min(newest, now)
    return end_us - int(window_s * 1e6), end_us


def analyse_window(
    store: TraceStore, window_s: float, settings: RiskSettings, end_us: int | None = None
) -> WindowAnalysis:
    start_us, end_us = window_bounds(store, window_s, end_us)
    began = time.perf_counter()
    loaded = store.load(start_us, end_us)
    load_s = time.perf_counter() - began
    result = analyse(loaded, settings, start_us, end_us)
    result.seconds["load"] = load_s
    return result
