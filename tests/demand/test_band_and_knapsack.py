"""The learner's band where the data are (no Lipschitz slack at repeated points,
the union bound over the nodes with data of their own) and the pruned SW knapsack
against the plain dynamic programme, on random and degenerate tables."""

from __future__ import annotations

import time
from statistics import NormalDist

import numpy as np
import pytest

from yarn_adapt.demand.learner import LearnerSettings, MonotoneLearner
from yarn_adapt.demand.solvers import (
    Box,
    knapsack,
    knapsack_reference,
    max_egalitarian_welfare,
    saturation,
    welfare_of,
)


def test_one_observation_is_one_interval_of_the_union_bound() -> None:
    learner = MonotoneLearner(LearnerSettings(x_max=10.0, lipschitz=1.0, confidence=0.9))
    learner.observe(3.0, 0.5, 0.1)
    # every node on its path holds the same single point: one distinct interval
    assert learner.tested_nodes() == 1
    z = NormalDist().inv_cdf(0.95)
    band = learner.band(np.array([2.0, 3.0, 4.0]))
    # At the point itself: the confidence term, plus at most the chord's slack within
    # the point's fine bin (L * step / 4, the chord of (x - x_i)+ over one bin).
    slack = 1.0 * (10.0 / learner.cells) / 4
    assert 0.5 + z * 0.1 - 1e-12 <= band.upper[1] <= 0.5 + z * 0.1 + slack
    assert 0.5 - z * 0.1 - slack <= band.lower[1] <= 0.5 - z * 0.1 + 1e-12
    assert band.upper[0] == pytest.approx(0.5 + z * 0.1)  # left: monotone, no slope
    assert band.upper[2] == pytest.approx(0.5 + z * 0.1 + 1.0)  # right: Lipschitz
    learner.observe(7.0, 0.6, 0.1)
    assert learner.tested_nodes() == 3  # each point, and the root holding both


def test_repeated_allocations_give_a_band_without_lipschitz_slack_there() -> None:
    # A throughput job at integer CPUs (load 1): the data sit exactly where the
    # policy asks. Its band there is the confidence term only, however steep L is.
    learner = MonotoneLearner(LearnerSettings(x_max=150.0, lipschitz=15.0))
    rng = np.random.default_rng(0)
    for _ in range(100):
        learner.observe(96.0, 430.0 + rng.normal(0.0, 12.0), 12.0)
    band = learner.band(np.array([96.0]))
    half = learner.quantile() * 12.0 / 10.0
    slack = 15.0 * (150.0 / learner.cells) / 4  # the chord within the point's bin
    assert 2 * half - 1e-9 <= float(band.upper[0] - band.lower[0]) <= 2 * (half + slack)
    assert slack < half / 2  # so the band there is the confidence term, not L's slope
    assert float(band.lower[0]) <= 430.0 <= float(band.upper[0])


def degenerate(kind: str, resources: int) -> np.ndarray:
    units = np.arange(resources + 1)[None, :]
    demands = {"equal": np.full((20, 1), 100.0), "long": np.full((20, 1), float(resources)),
               "varied": np.linspace(40, 160, 20)[:, None]}[kind]  # fmt: skip
    return np.minimum(1.0, units / demands)


def random_table(rng: np.random.Generator, jobs: int, resources: int) -> np.ndarray:
    increments = rng.exponential(1.0, (jobs, resources)) * (rng.random((jobs, resources)) < 0.4)
    table = np.concatenate([np.zeros((jobs, 1)), np.cumsum(increments, axis=1)], axis=1)
    return table / np.maximum(table[:, -1:], 1e-9) * rng.uniform(0.3, 1.0, (jobs, 1))


def _best(table: np.ndarray, resources: int, solver: object) -> float:
    box = Box.unbounded(len(table), resources)
    upper = np.minimum(saturation(table, box), box.upper)
    extra = solver(table, box.lower, upper, resources)  # type: ignore[operator]
    assert int(extra.sum()) <= resources and np.all(extra <= upper)
    return float(welfare_of(table, box.lower + extra).sum())


@pytest.mark.parametrize("seed", range(4))
def test_the_pruned_knapsack_is_exact_on_random_non_concave_tables(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(40):
        jobs, resources = int(rng.integers(2, 21)), int(rng.integers(5, 200))
        table = random_table(rng, jobs, resources)
        assert _best(table, resources, knapsack) == pytest.approx(
            _best(table, resources, knapsack_reference), abs=1e-9
        )


@pytest.mark.parametrize("kind", ["equal", "long", "varied"])
def test_ties_on_linear_stretches_are_exact_and_quick(kind: str) -> None:
    table = degenerate(kind, 1000)
    assert _best(table, 1000, knapsack) == pytest.approx(
        _best(table, 1000, knapsack_reference), abs=1e-9
    )
    began = time.process_time()
    knapsack(table, np.zeros(20, dtype=np.int64), np.full(20, 1000, dtype=np.int64), 1000)
    assert time.process_time() - began < 0.5  # plain programme: 20 x 1000 x 1000


def test_egalitarian_ties_go_to_the_second_tables_maximin() -> None:
    # Both allocations reach the first table's best minimum (0.5); the second table
    # says job 1 is the one that could still be poor.
    first = np.array([[0.0, 0.5, 0.5, 0.5], [0.0, 0.5, 0.5, 0.5]])
    second = np.array([[0.0, 0.4, 0.5, 0.6], [0.0, 0.1, 0.2, 0.3]])
    allocation = max_egalitarian_welfare(first, 3, then=second)
    assert allocation.tolist() == [1, 2]
    assert max_egalitarian_welfare(first, 3).sum() == 3
