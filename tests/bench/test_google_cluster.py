"""bench adaptive-latency's Google part (issue 14 item 6, AdaptiveConfig §4.5.2): a
multi-group cluster replaying the bundled Google 2011 part, statics against
``tuner.propose`` at group and cluster level. Small forms only (seconds)."""

from __future__ import annotations

import math
import statistics

import pytest

from yarn_adapt.bench import BenchOptions
from yarn_adapt.bench.adaptive import adaptive_latency_bench
from yarn_adapt.bench.google_cluster import (
    GoogleSettings,
    SchedulerResult,
    build_scenario,
    google_figures,
    static_configs,
    static_run,
    tuned_run,
)
from yarn_adapt.errors import SettingsError
from yarn_adapt.tuning.space import Scheduler
from yarn_adapt.workload.bundled import GOOGLE_2011, bundled_trace

KEYS = {
    "google_cluster_ratio",
    "google_cluster_ratio_geomean",
    "google_cluster_ratio_to_best_static",
    "google_unfinished",
    "google_rejected",
    "google_nodes",
    "google_jobs",
    "google_groups",
}


def test_quick_google_part_through_the_bench_tunes_and_reports_the_keys() -> None:
    # a Google directory as --trace runs only the Google part
    options = BenchOptions(
        quick=True, trace=bundled_trace(GOOGLE_2011), extra={"scheduler": "capacity"}
    )
    figures = adaptive_latency_bench(options).figures
    assert set(figures) >= KEYS
    assert "ratio_overall" not in figures  # the SWIM part did not run
    assert figures["google_groups"] == 3  # quick: 2 groups and the rest
    assert figures["google_jobs"] == 24
    assert figures["google_proposals_applied"] > 0
    assert figures["google_statics_kept"] + figures["google_statics_refused"] == 7
    row = figures["google_by_scheduler"]["capacity"]
    # every static's latency over the one tuned run: the mean ratio is mean static / tuned
    assert figures["google_cluster_ratio"] == pytest.approx(
        row["static_mean_s"] / row["adaptive_s"], rel=2e-3
    )
    assert figures["google_cluster_ratio_to_best_static"] == pytest.approx(
        row["static_best_s"] / row["adaptive_s"], rel=2e-3
    )


def test_ratio_comes_from_the_static_runs_and_the_tuned_run() -> None:
    settings = GoogleSettings(groups=1, max_jobs=12, schedulers=(Scheduler.FAIR,))
    scenario = build_scenario(bundled_trace(GOOGLE_2011), settings, seed=1)
    assert set(scenario.leaves) == {"root.g0", "root.g1"}
    assert math.isclose(sum(scenario.shares.values()), 1.0)
    statics = [
        (label, *static_run(scenario, config))
        for label, config, _ in static_configs(scenario, Scheduler.FAIR)[:3]
    ]
    tuned = tuned_run(scenario, Scheduler.FAIR, 120.0)
    assert tuned.proposals >= 1
    result = SchedulerResult(Scheduler.FAIR, tuple(statics), 0, tuned, 0.0)
    figures = google_figures(scenario, [result])
    expected = statistics.fmean(s / tuned.latency_s for _, s, _ in statics)
    assert figures["google_cluster_ratio"] == round(expected, 3)
    assert figures["google_unfinished"] == tuned.unfinished


def test_fixed_node_count_replicates_the_trace_with_fresh_ids() -> None:
    settings = GoogleSettings(groups=2, max_jobs=10, nodes=7, replicas=3)
    many = build_scenario(bundled_trace(GOOGLE_2011), settings, seed=1)
    assert len(many.cluster.nodes) == 7
    assert many.replicas == 3
    ids = [j.id for j in many.workload.jobs]
    assert len(ids) == 30 == len(set(ids))
    assert "replicated x3" in many.scaling


@pytest.mark.parametrize(
    "extra",
    [{"google_groups": "0"}, {"google_load": "x"}, {"scheduler": "fifo"}, {"part": "both2"}],
)
def test_bad_settings_are_refused_with_one_line(extra: dict[str, str]) -> None:
    with pytest.raises(SettingsError, match="adaptive-latency: --set"):
        if "part" in extra:
            adaptive_latency_bench(BenchOptions(quick=True, extra=extra))
        GoogleSettings.parse(extra, quick=True)


def test_a_google_directory_is_not_a_swim_trace() -> None:
    options = BenchOptions(quick=True, trace=bundled_trace(GOOGLE_2011), extra={"part": "swim"})
    with pytest.raises(SettingsError, match="a directory is a Google trace"):
        adaptive_latency_bench(options)
