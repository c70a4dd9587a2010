"""The SW and EW solvers against exhaustive enumeration and the paper's
evolutionary algorithm."""

from __future__ import annotations

import numpy as np
import pytest

from yarn_adapt.demand.curves import load_arrivals
from yarn_adapt.demand.environment import build_environment
from yarn_adapt.demand.policies import utility_table
from yarn_adapt.demand.solvers import (
    Box,
    evolutionary_search,
    exhaustive_best,
    max_egalitarian_welfare,
    max_social_welfare,
    welfare_of,
)
from yarn_adapt.workload.bundled import TWITTER, bundled_trace


def random_table(rng: np.random.Generator, jobs: int, resources: int) -> np.ndarray:
    """Non-decreasing utilities of every shape: steps, S-curves, plateaus, flat."""
    increments = rng.exponential(1.0, (jobs, resources)) * (rng.random((jobs, resources)) < 0.4)
    table = np.concatenate([np.zeros((jobs, 1)), np.cumsum(increments, axis=1)], axis=1)
    return table / np.maximum(table[:, -1:], 1e-9) * rng.uniform(0.3, 1.0, (jobs, 1))


@pytest.mark.parametrize("seed", range(12))
def test_both_solvers_are_exact_on_small_problems(seed: int) -> None:
    rng = np.random.default_rng(seed)
    jobs, resources = int(rng.integers(2, 5)), int(rng.integers(4, 13))
    table = random_table(rng, jobs, resources)
    _, best_sum = exhaustive_best(lambda a: float(welfare_of(table, a).sum()), jobs, resources)
    _, best_min = exhaustive_best(lambda a: float(welfare_of(table, a).min()), jobs, resources)
    social = max_social_welfare(table, resources)
    egalitarian = max_egalitarian_welfare(table, resources)
    assert social.sum() == resources == egalitarian.sum()
    assert welfare_of(table, social).sum() == pytest.approx(best_sum, abs=1e-5)
    assert welfare_of(table, egalitarian).min() == pytest.approx(best_min, abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_box_constraints_are_kept_and_optimal_within_them(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    jobs, resources = 3, 12
    table = random_table(rng, jobs, resources)
    box = Box.around(np.array([4, 4, 4]), 2, resources)
    inside = lambda a: bool(np.all(a >= box.lower) and np.all(a <= box.upper))  # noqa: E731
    best_sum = max(
        float(welfare_of(table, a).sum())
        for a in (np.array(x) for x in np.ndindex(13, 13, 13))
        if a.sum() <= resources and inside(a)
    )
    best_min = max(
        float(welfare_of(table, a).min())
        for a in (np.array(x) for x in np.ndindex(13, 13, 13))
        if a.sum() <= resources and inside(a)
    )
    for solver, best, score in (
        (max_social_welfare, best_sum, np.sum),
        (max_egalitarian_welfare, best_min, np.min),
    ):
        got = solver(table, resources, box)
        assert inside(got) and got.sum() <= resources
        assert float(score(welfare_of(table, got))) == pytest.approx(best, abs=1e-5)


def test_20_jobs_on_1000_cpus_beat_the_evolutionary_reference() -> None:
    env = build_environment(load_arrivals(bundled_trace(TWITTER)), rounds=4)
    forecasts = env.forecasts()
    rng = np.random.default_rng(0)
    for r in (3,):
        table = utility_table(env.curves(), env.tenants, forecasts[:, r], 1000, "estimate")
        for solver, score in ((max_social_welfare, np.mean), (max_egalitarian_welfare, np.min)):
            mine = float(score(welfare_of(table, solver(table, 1000))))
            _, reference = evolutionary_search(
                lambda a, t=table, s=score: float(s(welfare_of(t, a))), 20, 1000, 1000, rng
            )
            assert mine >= reference - 1e-6


def test_an_infeasible_box_is_refused() -> None:
    table = np.zeros((2, 11))
    with pytest.raises(ValueError, match="infeasible"):
        max_social_welfare(table, 10, Box(np.array([6, 6]), np.array([10, 10])))
