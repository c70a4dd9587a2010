"""What the comparator samples (durations as the task-time model predicts them,
heartbeat phases) and how it decides over the samples (rules.uncertainty,
rules.decision, Comparator.choose)."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

import numpy as np
import pytest

from rules.comparator import Comparator
from rules.decision import DecisionRule, choose, win_shares
from rules.inputs import JobMix
from rules.uncertainty import (
    MAX_DISTINCT_TASKS,
    Phases,
    Uncertainty,
    heartbeat_phases,
    sample_mixes,
)
from tests.rules.factories import capacity, containers, job


def spread_mix(tasks: int = 10, spread: float = 0.5) -> JobMix:
    first = job("a1", "a", maps=tasks, seconds=20.0, reduces=2, reduce_seconds=8.0)
    return JobMix((replace(first, spreads=(spread, 0.0)),))


def durations(mix: JobMix, stage: int = 0) -> list[float]:
    return [g[1] for g in mix.jobs[0].stages[stage] for _ in range(g[0])]


def test_heartbeat_phases_are_uniform_over_the_interval_and_fixed_per_sample() -> None:
    drawn = Uncertainty(samples=4, seed=3)
    first = heartbeat_phases(50, 2.0, drawn, 0)
    assert first is not None and len(first) == 50
    assert all(0.0 <= p < 2.0 for p in first)
    assert first == heartbeat_phases(50, 2.0, drawn, 0)
    assert first != heartbeat_phases(50, 2.0, drawn, 1)
    assert heartbeat_phases(50, 2.0, Uncertainty(phases=Phases.EVEN), 0) is None


def test_the_point_estimate_spreads_a_stage_over_quantiles() -> None:
    mix = spread_mix(tasks=10, spread=0.5)
    (point,) = sample_mixes(mix, Uncertainty(bins=5))
    maps = durations(point)
    assert len(maps) == 10
    assert len(set(maps)) == 5
    # the quantiles are symmetric in logs: the geometric mean stays the typical task
    assert math.exp(statistics.fmean(math.log(d) for d in maps)) == pytest.approx(20.0)
    # interleaved: the first half of the stage holds short and long tasks alike
    assert min(maps[:5]) < 20.0 < max(maps[:5])
    assert durations(point, 1) == [8.0, 8.0]  # no spread: untouched
    # a bias shifts every task
    (shifted,) = sample_mixes(mix, Uncertainty(bias=math.log(2.0)))
    assert durations(shifted) == pytest.approx([2 * d for d in maps])


def test_a_mix_without_spread_or_bias_is_its_own_point_estimate() -> None:
    mix = JobMix((job("a1", "a", maps=3),))
    assert sample_mixes(mix, Uncertainty()) == [mix]


def test_a_mix_is_sampled_once_and_an_equal_new_mix_gets_its_own_samples() -> None:
    mix = spread_mix(tasks=10, spread=0.5)
    first = sample_mixes(mix, Uncertainty(bins=5))
    again = sample_mixes(mix, Uncertainty(bins=5))
    assert again == first and again[0] is first[0]  # the same sampled jobs: their plans too
    assert sample_mixes(mix, Uncertainty(bins=3))[0] != first[0]
    other = spread_mix(tasks=10, spread=0.5)  # equal, but another object
    fresh = sample_mixes(other, Uncertainty(bins=5))
    assert fresh == first and fresh[0] is not first[0]


def test_draws_share_a_stage_error_and_spread_each_task() -> None:
    mix = spread_mix(tasks=200, spread=0.3)
    draws = sample_mixes(mix, Uncertainty(sigma=0.0, samples=2, seed=1))
    assert draws == sample_mixes(mix, Uncertainty(sigma=0.0, samples=2, seed=1))
    logs = [math.log(d / 20.0) for d in durations(draws[0])]
    assert len(logs) == 200 and len(set(logs)) == MAX_DISTINCT_TASKS
    assert statistics.pstdev(logs) == pytest.approx(0.3, abs=0.1)
    # a stage error moves the whole stage: its two reduces keep their ratio 1
    stage_error = sample_mixes(mix, Uncertainty(sigma=1.0, samples=3, seed=2))
    reduces = [durations(d, 1) for d in stage_error]
    assert all(r[0] == r[1] for r in reduces)
    assert len({r[0] for r in reduces}) == 3


def test_most_likely_best_is_not_the_lowest_mean() -> None:
    # b is a little better in two samples of three, a much better in the third
    table = [[10.0, 10.0, 10.0], [9.0, 9.0, 30.0]]
    assert choose(table, DecisionRule.EXPECTED).index == 0
    assert choose(table, DecisionRule.MOST_LIKELY_BEST).index == 1


def test_tied_candidates_each_win() -> None:
    # three equivalent candidates must not split their wins against a lone rival
    table = [[5.0, 5.0, 5.0], [5.0, 5.0, 5.0], [5.0, 5.0, 5.0], [4.0, 9.0, 9.0]]
    shares = win_shares(np.asarray(table))
    assert shares[:3] == pytest.approx([2 / 3] * 3)
    assert choose(table).index == 0
    # every candidate starving a job in a sample: all tie there
    assert win_shares(np.asarray([[math.inf], [math.inf]])) == [1.0, 1.0]


def test_the_comparator_runs_every_candidate_on_the_same_samples() -> None:
    mix = JobMix(
        tuple(
            job(f"j{i}", "ab"[i % 2], maps=4, seconds=10.0 + i, submit=float(i)) for i in range(6)
        )
    )
    spread = JobMix(tuple(replace(j, spreads=(0.4, 0.0)) for j in mix.jobs))
    comparator = Comparator(spread, containers(8, 2), uncertainty=Uncertainty(0.2, 6, seed=5))
    same = capacity(("a", 50.0, 100.0), ("b", 50.0, 100.0))
    again = capacity(("a", 50.0, 100.0), ("b", 50.0, 100.0))
    other = capacity(("a", 20.0, 20.0), ("b", 80.0, 80.0))
    first = comparator.sample_latencies(same)
    assert len(first) == 6 and len(set(first)) > 1
    assert comparator.sample_latencies(again) == first
    choice = comparator.choose([same, other])
    assert choice.expected[0] == pytest.approx(statistics.fmean(first))
    assert choice.index in (0, 1) and sum(choice.win_share) >= 1.0
