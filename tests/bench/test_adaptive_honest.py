"""bench adaptive-latency's honest figure (issue 14 item 6): the static baselines are
the ones the tuner's own validity rule accepts, and the figures are computed from
the rows as documented."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

import pytest

from yarn_adapt.bench import BenchOptions
from yarn_adapt.bench.adaptive import (
    Statics,
    _skipped,
    scenarios,
    static_latency,
    swim_units,
    tuner_refuses,
)
from yarn_adapt.bench.adaptive_figures import Row, figures
from yarn_adapt.bench.adaptive_keys import SET_KEYS, Knobs
from yarn_adapt.bench.comparator import SETTINGS
from yarn_adapt.bench.paper_configs import static_settings
from yarn_adapt.errors import SettingsError
from yarn_adapt.tuning.apply import apply_setting
from yarn_adapt.tuning.paper import PaperCluster, base_config
from yarn_adapt.workload.bundled import FB_2009, bundled_trace


def test_the_tuner_refuses_exactly_the_statics_that_leave_jobs_unfinished() -> None:
    """Capacity, 2 queues held to their capacity on 8 containers: a queue held to
    one container is taken by its job's ApplicationMaster and starves; the tuner's
    rule must say so before any simulation, and keep every split the simulator
    finishes."""
    setting = next(s for s in SETTINGS if s.label == "capacity-2q")
    [scenario] = scenarios(bundled_trace(FB_2009), 0, (8,), load=0.3, settings=(setting,))
    base = base_config(setting.scheduler, setting.mapping.queues)
    cluster = PaperCluster(8).spec()
    verdicts = []
    for static in static_settings(setting, 8):
        _, unfinished = static_latency(scenario, apply_setting(base, static), cluster)
        verdicts.append((tuner_refuses(scenario, base, static, cluster), unfinished > 0))
    assert [refused for refused, _ in verdicts] == [starved for _, starved in verdicts]
    assert any(refused for refused, _ in verdicts) and not all(r for r, _ in verdicts)


def _row(label: str, minutes: int, adaptive: float, statics: list[float]) -> Row:
    ratios = [s / adaptive for s in statics]
    return Row(
        label, minutes, adaptive, statistics.fmean(statics), min(statics),
        statistics.fmean(ratios), statistics.geometric_mean(ratios), statistics.median(ratios),
        len(statics), 1, 0, 0, 1, 0.0,
    )  # fmt: skip


def test_figures_report_the_paper_mean_the_geomean_and_the_worst_scenario_against_its_best() -> (
    None
):
    rows = [
        _row("a", 2, 10.0, [40.0, 10.0]),  # ratios 4, 1: mean 2.5, geomean 2
        _row("b", 2, 20.0, [18.0, 72.0]),  # ratios 0.9, 3.6: best static wins by 10 %
        _skipped("c", Statics((), 0, 3, 12)),
    ]
    found = figures(rows, (2,))
    assert found["ratio_2min"] == pytest.approx((2.5 + 2.25) / 2, abs=1e-3)
    assert found["ratio_2min_geomean"] == pytest.approx(math.sqrt(2.0 * 1.8), abs=1e-3)
    assert found["min_vs_best_static"] == found["min_vs_best_static_2min"] == 0.9
    assert found["scenarios"] == 2 and found["scenarios_without_valid_static"] == ["c"]
    assert found["statics_kept"] == 4 and found["static_unfinished"] == 0


def test_the_forecast_setting_names_how_many_intervals_ahead() -> None:
    given = ("no", "yes", "3", "false", "0", "true")
    assert [SET_KEYS.read({"forecast": t})[Knobs.forecast] for t in given] == [0, 1, 3, 0, 0, 1]
    assert SET_KEYS.read({})[Knobs.forecast] == 0
    for bad in ("-1", "maybe", "21"):
        with pytest.raises(SettingsError, match=f"forecast={bad}: expected no, yes or 1-20"):
            SET_KEYS.read({"forecast": bad})


def test_the_hindsight_static_figures_average_the_scenarios_it_was_replayed_for() -> None:
    rows = [
        replace(_row("a", 2, 10.0, [40.0, 10.0]), hindsight_static_s=20.0),  # best 10: 0.5
        replace(_row("a", 8, 12.0, [40.0, 10.0]), hindsight_static_s=20.0),  # same scenario
        replace(_row("b", 2, 20.0, [18.0, 72.0]), hindsight_static_s=18.0),  # the best: 1.0
        _row("c", 2, 20.0, [18.0]),  # not replayed (NaN): left out
    ]
    found = figures(rows, (2, 8))
    assert found["hindsight_static_s"] == pytest.approx(19.0)
    assert found["hindsight_vs_best_static"] == pytest.approx(0.75)
    assert SET_KEYS.read({})[Knobs.hindsight] is False  # off until it measurably helps
    assert SET_KEYS.read({"hindsight": "yes"})[Knobs.hindsight] is True


def test_the_swim_part_runs_one_unit_per_setting_and_size_each_with_the_bench_options() -> None:
    """The units the worker processes run: the quick run's two 2-queue settings on 8
    containers, the default's every setting on 6 and 8; each carries the options."""
    quick = swim_units(BenchOptions(quick=True, seed=3, extra={"hindsight": "yes"}))
    assert [(u.setting.label, u.containers) for u in quick] == [
        ("capacity-2q", 8),
        ("fair-2q", 8),
    ]
    assert all(u.intervals == (2, 8) and u.hindsight and u.seed == 3 for u in quick)
    full = swim_units(BenchOptions(extra={"scheduler": "fair", "forecast": "2"}))
    assert {(u.setting.scheduler.value, u.containers) for u in full} == {
        ("fair", 6),
        ("fair", 8),
    }
    assert len(full) == 4 and all(u.forecast == 2 and u.intervals == (1, 2, 4, 8) for u in full)
    assert SET_KEYS.read({"workers": "1"})[Knobs.workers] == 1
    with pytest.raises(SettingsError, match="workers=0"):
        SET_KEYS.read({"workers": "0"})
