"""The real-RM check of comparator-accuracy: verdicts, the shrunk mixes, which cases
are chosen, and one case run on the real mini YARN under two configurations."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rules.decision import Choice, DecisionRule
from yarn_adapt.bench import BenchOptions
from yarn_adapt.bench.comparator import (
    AccuracySettings,
    MixCase,
    Outcome,
    accuracy_settings,
    mix_cases,
    real_rm_cases,
    swim_source,
)
from yarn_adapt.bench.real_rm import (
    MINI_CONTAINER_MB,
    MINI_JOBS,
    MINI_MAX_CONTAINERS,
    MINI_MEDIAN_SLEEP_S,
    MINI_SLEEP_RANGE_S,
    MINI_WINDOW_S,
    REAL_NOISE,
    RealRmCase,
    RealRmResult,
    mini_apps,
    mini_cluster_spec,
    real_rm_figures,
    run_on_cluster_pair,
    scheduler_xml,
    verdict,
)
from yarn_adapt.bench.sim_fidelity.scenarios import FAIR_INCREMENT_PROPERTY, SleepApp
from yarn_adapt.errors import SettingsError
from yarn_adapt.minicluster import MiniCluster, MiniClusterError
from yarn_adapt.model import JobSpec, Resources, TaskSpec, TaskType, Workload
from yarn_adapt.tuning.paper import base_config, candidates, leaf_paths
from yarn_adapt.tuning.space import Scheduler, paper_space
from yarn_adapt.workload.bundled import FB_2009, bundled_trace
from yarn_adapt.yarn.confxml import parse_capacity_xml, parse_fair_xml


def test_verdicts_with_a_tie_band() -> None:
    assert verdict(10.0, 12.0, 0.05) == "best"
    assert verdict(12.0, 10.0, 0.05) == "other"
    assert verdict(10.0, 10.4, 0.05) == "tie"
    assert verdict(10.0, 10.6, 0.05) == "best"


def _result(real: tuple[float, float], sim: tuple[float, float]) -> RealRmResult:
    case = RealRmCase("m", "capacity", 6, _CAPACITY[0], _CAPACITY[1], "pick", 1.0, 2.0, ())
    return RealRmResult(case, real[0], real[1], sim[0], sim[1])


_CAPACITY = candidates(
    paper_space(Scheduler.CAPACITY, "root", leaf_paths(("q1", "q2"))),
    base_config(Scheduler.CAPACITY, ("q1", "q2")),
)


def test_a_mix_agrees_when_both_name_the_same_winner_or_the_real_rm_ties() -> None:
    assert _result((10.0, 12.0), (20.0, 25.0)).agrees
    assert _result((12.0, 10.0), (25.0, 20.0)).agrees  # both say the other one
    assert _result((10.0, 10.0 * (1 + REAL_NOISE / 2)), (20.0, 25.0)).agrees  # real tie
    disagree = _result((12.0, 10.0), (20.0, 25.0))
    assert not disagree.agrees and not disagree.agrees_full_truth
    assert not _result((10.0, 12.0), (20.0, 20.0)).agrees  # the sim ties, the RM does not
    figures = real_rm_figures([_result((10.0, 12.0), (20.0, 25.0)), disagree], wanted=8)
    assert figures["real_rm_agree"] == 1
    assert figures["real_rm_mixes"] == 2 and figures["real_rm_wanted"] == 8
    assert figures["real_rm_agree_full_truth"] == 1


def _job(index: int, submit: float, queue: str, tasks: int, duration: float) -> JobSpec:
    return JobSpec(
        id=f"j{index}",
        submit_s=submit,
        queue=queue,
        tasks=tuple(TaskSpec(TaskType.MAP, duration, Resources(2048, 1)) for _ in range(tasks)),
    )


def test_a_mix_shrinks_to_sleep_apps_in_its_own_queues() -> None:
    jobs = [
        _job(i, 100.0 * i, f"root.q{1 + i % 2}", tasks=1 + i, duration=60.0 * (1 + i))
        for i in range(MINI_JOBS + 3)
    ]
    apps = mini_apps(Workload(tuple(reversed(jobs)), source="mix"))
    assert len(apps) == MINI_JOBS
    assert [a.queue for a in apps] == [f"q{1 + i % 2}" for i in range(MINI_JOBS)]
    assert [a.containers for a in apps] == [min(1 + i, MINI_MAX_CONTAINERS) for i in range(8)]
    assert apps[0].offset_s == 0 and apps[-1].offset_s == MINI_WINDOW_S
    low, high = MINI_SLEEP_RANGE_S
    assert all(low <= a.sleep_s <= high for a in apps)
    sleeps = sorted(a.sleep_s for a in apps)
    assert sleeps[3] < MINI_MEDIAN_SLEEP_S < sleeps[4] or MINI_MEDIAN_SLEEP_S in sleeps
    assert all(a.container_mb == MINI_CONTAINER_MB for a in apps)
    with pytest.raises(MiniClusterError, match="fewer than 2 jobs"):
        mini_apps(Workload((jobs[0],), source="one"))


def test_the_mini_cluster_holds_the_case_containers() -> None:
    spec = mini_cluster_spec("fair", 6, "<allocations/>")
    assert spec.nm_memory_mb == 6 * MINI_CONTAINER_MB and spec.nm_vcores == 6
    assert spec.min_allocation_mb == MINI_CONTAINER_MB
    assert spec.yarn_site[FAIR_INCREMENT_PROPERTY] == str(MINI_CONTAINER_MB)
    assert mini_cluster_spec("capacity", 8, "x").yarn_site == {}


def test_candidates_render_to_xml_that_parses_back() -> None:
    for candidate in _CAPACITY:
        parsed = parse_capacity_xml(scheduler_xml(candidate.config)).config
        assert parsed == candidate.config
    fair = candidates(
        paper_space(Scheduler.FAIR, "root", leaf_paths(("q1", "q2"))),
        base_config(Scheduler.FAIR, ("q1", "q2")),
    )
    for candidate in fair[:3]:
        assert parse_fair_xml(scheduler_xml(candidate.config)).config == candidate.config


def test_real_rm_setting() -> None:
    quick = BenchOptions(quick=True)
    assert accuracy_settings(quick).real_rm == 0
    assert accuracy_settings(BenchOptions()).real_rm == 8
    assert accuracy_settings(replace(quick, extra={"real_rm": "3"})).real_rm == 3
    with pytest.raises(SettingsError, match="real_rm"):
        accuracy_settings(replace(quick, extra={"real_rm": "-1"}))


@pytest.fixture(scope="module")
def two_mix_cases() -> list[MixCase]:
    source = swim_source(bundled_trace(FB_2009), seed=1)
    settings = AccuracySettings(mixes=2, samples=2, truth_seeds=1)
    return [c for c in mix_cases(source, settings, (6,), 1) if c.setting.queue_count == 2]


def _outcome(case: MixCase, truth: list[float], pick: int) -> Outcome:
    n = len(truth)
    choice = Choice(pick, tuple(float(i) for i in range(n)), tuple(1.0 / n for _ in range(n)))
    shares = [0.0] * n
    shares[pick] = 1.0
    choice = replace(choice, win_share=tuple(shares))
    return Outcome(case, (tuple(truth),), choice, choice, DecisionRule.MOST_LIKELY_BEST, n, 0.0)


def test_cases_whose_pick_misses_come_first_and_ties_are_left_out(
    two_mix_cases: list[MixCase],
) -> None:
    capacity = [c for c in two_mix_cases if c.setting.scheduler is Scheduler.CAPACITY]
    first, second = capacity
    hit = _outcome(first, [30.0, 31.0, 40.0, 50.0, 60.0], pick=0)
    miss = _outcome(second, [30.0, 31.0, 40.0, 50.0, 60.0], pick=3)
    tied = _outcome(first, [30.0] * 5, pick=2)
    chosen = real_rm_cases([hit, tied, miss], count=8)
    assert [c.versus for c in chosen] == ["pick", "runner-up"]
    assert chosen[0].truth_other_s == 50.0 and chosen[0].truth_best_s == 30.0
    assert chosen[1].truth_other_s == 31.0  # the runner-up outside the tie band
    assert chosen[0].best.config != chosen[0].other.config
    assert all(c.scheduler == "capacity" and c.containers == 6 for c in chosen)
    assert {a.queue for c in chosen for a in c.apps} <= {"q1", "q2"}
    assert len(real_rm_cases([hit, tied, miss], count=1)) == 1


@pytest.mark.alone  # the RM's timings under two configurations
def test_one_case_on_the_real_rm_under_two_configurations(capacity_cluster: MiniCluster) -> None:
    """Queue q1 alone: a sixth of the cluster against five sixths decides
    how long its apps wait; both the RM and the simulator say so."""
    apps = (SleepApp(0.0, "q1", 3, 4.0, 512), SleepApp(1.0, "q1", 3, 4.0, 512))
    narrow = next(c for c in _CAPACITY if c.label.startswith("q1=16.67%"))
    wide = next(c for c in _CAPACITY if c.label.startswith("q1=83.33%"))
    case = RealRmCase("tiny", "capacity", 6, wide, narrow, "runner-up", 1.0, 2.0, apps)
    result = run_on_cluster_pair(capacity_cluster, case, seed=1)
    assert result.real_best_s > 4.0 and result.real_other_s > 4.0
    assert result.sim_best_s > 4.0 and result.sim_other_s > 4.0
    assert result.sim_verdict == "best"
    assert result.row()["agrees"] == result.agrees
