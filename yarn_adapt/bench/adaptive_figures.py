"""``bench adaptive-latency``'s SWIM figures: one :class:`Row` per scenario and
tuning interval (the tuned run beside the scenario's kept statics), and
:func:`figures`, the JSON keys made from them (docs/benchmarks.md)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from yarn_adapt.service.proposers.intervals import log_ratio_spread


@dataclass(frozen=True)
class Row:
    scenario: str
    interval_min: int
    adaptive_s: float
    static_mean_s: float
    static_best_s: float
    ratio: float
    geomean_ratio: float
    median_ratio: float
    statics: int
    statics_refused: int
    static_unfinished: int
    unfinished: int
    changes: int
    wall_s: float
    errors: tuple[float, ...] = ()
    ranges: tuple[int, int] = (0, 0)
    calibrated: tuple[int, int] = (0, 0)
    log_ratios: tuple[float, ...] = ()
    hindsight_static_s: float = math.nan

    @property
    def vs_best_static(self) -> float:
        return self.static_best_s / self.adaptive_s


def figures(rows: Sequence[Row], intervals: Sequence[int]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    skipped = sorted(r.scenario for r in rows if r.statics == 0)
    rows = [r for r in rows if r.statics > 0]
    for minutes in intervals:
        mine = [r for r in rows if r.interval_min == minutes]
        if not mine:
            continue
        found[f"ratio_{minutes}min"] = round(statistics.fmean(r.ratio for r in mine), 3)
        found[f"ratio_{minutes}min_geomean"] = round(
            statistics.geometric_mean(r.geomean_ratio for r in mine), 3
        )
        found[f"ratio_to_best_static_{minutes}min"] = round(
            statistics.fmean(r.vs_best_static for r in mine), 3
        )
        found[f"min_vs_best_static_{minutes}min"] = round(min(r.vs_best_static for r in mine), 3)
        found[f"median_ratio_{minutes}min"] = round(
            statistics.median(r.median_ratio for r in mine), 3
        )
        found[f"unfinished_{minutes}min"] = sum(r.unfinished for r in mine)
        errors = [e for r in mine for e in r.errors]
        if errors:
            found[f"prediction_error_median_{minutes}min"] = round(statistics.median(errors), 3)
    headline = 2 if any(r.interval_min == 2 for r in rows) else min(intervals)
    if f"min_vs_best_static_{headline}min" in found:
        found["min_vs_best_static"] = found[f"min_vs_best_static_{headline}min"]
    # None with the forecast (--set forecast=yes): see adaptive_latency
    found["prediction_error_median"] = found.get(f"prediction_error_median_{headline}min")
    once = {r.scenario: r for r in rows}.values()  # statics are per scenario, not interval
    found["statics_kept"] = sum(r.statics for r in once)
    found["statics_refused"] = sum(r.statics_refused for r in once)
    found["static_unfinished"] = sum(r.static_unfinished for r in once)
    found["scenarios"] = len(once)
    found["scenarios_without_valid_static"] = skipped
    held, checked = sum(r.ranges[0] for r in rows), sum(r.ranges[1] for r in rows)
    found["interval_coverage"] = round(held / checked, 3) if checked else None
    found["ranges_checked"] = checked
    held, calibrated = sum(r.calibrated[0] for r in rows), sum(r.calibrated[1] for r in rows)
    found["interval_coverage_calibrated"] = round(held / calibrated, 3) if calibrated else None
    found["ranges_calibrated"] = calibrated
    found.update(log_ratio_spread(r.log_ratios for r in rows))
    found["ratio_overall"] = round(statistics.fmean(r.ratio for r in rows), 3) if rows else None
    found["hindsight_static_s"] = _mean_known(r.hindsight_static_s for r in once)
    found["hindsight_vs_best_static"] = _mean_known(
        r.static_best_s / r.hindsight_static_s for r in once
    )
    return found


def _mean_known(values: Iterable[float]) -> float | None:
    """The mean of the finite ``values``, to 3 places (None when none is)."""
    known = [v for v in values if math.isfinite(v)]
    return round(statistics.fmean(known), 3) if known else None
