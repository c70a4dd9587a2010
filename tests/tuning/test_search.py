"""Group-level search: Proposition 3.1's counts, RRS's probability guarantee on known
functions, memoisation, exhaustive search, and the automatic choice between them."""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yarn_adapt.tuning.search import (
    COARSE_POINTS,
    Grid,
    Point,
    RRSSettings,
    coarse_strides,
    exhaustive_search,
    recursive_random_search,
    refine_search,
    search,
)
from yarn_adapt.tuning.space import Scheduler, paper_space

RUNS = 300


def bowl(centre: Sequence[int]) -> RecordingObjective:
    """A separable quadratic with its minimum 0 at ``centre``."""
    c = np.asarray(centre, dtype=float)
    return RecordingObjective(lambda points: ((np.asarray(points, float) - c) ** 2).sum(axis=1))


def table(values: np.ndarray) -> RecordingObjective:
    """An arbitrary function given by its value at every grid point."""
    return RecordingObjective(lambda points: values[tuple(np.asarray(points).T)])


class RecordingObjective:
    """Wraps a vectorised function; remembers every point it was asked about."""

    def __init__(self, fn: Callable[[Any], np.ndarray]) -> None:
        self.fn = fn
        self.asked: list[Point] = []

    def __call__(self, points: Sequence[Point]) -> Sequence[float]:
        self.asked.extend(points)
        return [float(v) for v in self.fn(points)]


def strictly_better(values: np.ndarray, found: float) -> int:
    """How many grid points beat ``found``: its rank in the whole space."""
    return int((values < found).sum())


def all_values(grid: Grid, objective: RecordingObjective) -> np.ndarray:
    """The objective at every grid point (vectorised; not recorded as asked)."""
    shape = [d.size for d in grid.dimensions]
    every_point = np.indices(shape).reshape(len(shape), -1).T
    return np.asarray(objective.fn(every_point))


def success_floor(probability: float, runs: int = RUNS) -> float:
    """The stated probability less four standard errors of a binomial share."""
    return probability - 4 * math.sqrt(probability * (1 - probability) / runs)


# --------------------------------------------------------------------------- Proposition 3.1


@pytest.mark.parametrize(
    ("coarse_levels", "paper_samples"),
    [(5, 83), (10, 175), (15, 267), (27, 488)],  # §4.5.1: Capacity 2/4 queues, Fair 2/4
)
def test_proposition_counts_match_the_papers_figures(
    coarse_levels: int, paper_samples: int
) -> None:
    rrs = RRSSettings.for_levels(coarse_levels)  # p = 0.99, gt = g0 / 10, gamma = 0.5
    assert rrs.iterations == 4
    assert round(rrs.proposition_samples) == paper_samples
    assert rrs.planned_samples == 4 * math.ceil(rrs.exact_samples_per_iteration)


def test_papers_example_takes_122_samples_per_iteration_and_four_iterations() -> None:
    rrs = RRSSettings()  # Fair, 2 parameters: g = g0 = 1/27, gt = 1/270, p = 0.99, gamma 0.5
    assert rrs.exact_samples_per_iteration == pytest.approx(122.02, abs=0.01)
    assert (rrs.samples_per_iteration, rrs.iterations) == (123, 4)
    assert round(rrs.proposition_samples) == 488


@pytest.mark.parametrize(
    ("initial", "final", "scale", "iterations"),
    [
        (1 / 27, 1 / 270, 0.5, 4),
        (0.1, 0.1, 0.5, 1),
        (1 / 8, 1 / 64, 0.5, 4),  # an exact power: log_0.5(1/8) = 3
        (0.5, 0.25, 0.5, 2),
        (0.2, 0.02, 0.25, 2),
    ],
)
def test_iterations_stop_at_the_last_granularity_not_finer_than_required(
    initial: float, final: float, scale: float, iterations: int
) -> None:
    rrs = RRSSettings(initial_granularity=initial, final_granularity=final, scale=scale)
    assert rrs.iterations == iterations
    assert initial * scale ** (iterations - 1) >= final * (1 - 1e-9)
    assert initial * scale**iterations < final


@pytest.mark.parametrize(
    "bad",
    [
        {"confidence": 1.0},
        {"confidence": 0.0},
        {"initial_granularity": 0.01, "final_granularity": 0.1},
        {"initial_granularity": 1.0},
        {"scale": 1.0},
        {"scale": 0.0},
    ],
)
def test_settings_refuse_meaningless_values(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RRSSettings(**bad)


def test_a_large_space_takes_exactly_the_planned_samples_each_evaluated_once() -> None:
    grid = Grid.of(200, 200)  # the last region (1/8 of 40,000 points) still exceeds 123
    objective = bowl((17, 150))
    found = recursive_random_search(grid, objective, RRSSettings(), np.random.default_rng(3))
    assert found.samples == RRSSettings().planned_samples == 492
    assert len(objective.asked) == len(set(objective.asked)) == found.evaluations
    assert found.evaluations <= found.samples


def test_points_repeated_across_iterations_are_not_evaluated_again() -> None:
    grid = Grid.of(30, 3, categorical=[1])  # 90 points: later regions are enumerated
    objective = bowl((4, 1))
    found = recursive_random_search(grid, objective, RRSSettings(), np.random.default_rng(0))
    assert len(objective.asked) == len(set(objective.asked)) == found.evaluations
    assert found.evaluations <= 90 < found.samples


def test_the_same_seed_gives_the_same_search_and_another_seed_another() -> None:
    grid = Grid.of(60, 60)
    runs = [(seed, bowl((10, 40))) for seed in (5, 5, 6)]  # two identical seeds, one different
    for seed, objective in runs:
        recursive_random_search(grid, objective, RRSSettings(), np.random.default_rng(seed))
    assert runs[0][1].asked == runs[1][1].asked
    assert runs[0][1].asked != runs[2][1].asked


# --------------------------------------------------------------------------- probability


@pytest.mark.parametrize(
    ("shape", "categorical"),
    [((90, 3), [1]), ((27, 9), []), ((20, 20, 20, 20), []), ((10, 10, 10, 10, 3), [4])],
)
def test_rrs_reaches_the_required_granularity_on_separable_quadratics(
    shape: tuple[int, ...], categorical: list[int]
) -> None:
    """With p = 0.99 the found point is among the best ``gt`` share of the whole space
    (the optimum itself when that share is one point)."""
    grid = Grid.of(*shape, categorical=categorical)
    rrs = RRSSettings()
    allowed = max(1, math.floor(rrs.final_granularity * math.prod(shape)))
    centres = np.random.default_rng(99)
    hits = 0
    for seed in range(RUNS // 3):
        objective = bowl([int(centres.integers(d)) for d in shape])
        values = all_values(grid, objective)
        found = recursive_random_search(grid, objective, rrs, np.random.default_rng(seed))
        hits += strictly_better(values, found.value) < allowed
    assert hits / (RUNS // 3) >= success_floor(rrs.confidence, RUNS // 3)


@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.99])
def test_the_first_iteration_lands_in_the_best_share_with_the_stated_probability(
    confidence: float,
) -> None:
    """RRS's guarantee on a function without any structure (independent random values
    on a 27 x 9 grid): ``n = ln(1-p)/ln(1-g)`` samples hit the best ``g = 1/27`` share
    (9 of 243 points) with probability at least ``p``."""
    grid = Grid.of(27, 9)
    one_iteration = RRSSettings(
        confidence=confidence, initial_granularity=1 / 27, final_granularity=1 / 27
    )
    functions = np.random.default_rng(7)
    hits = 0
    for seed in range(RUNS):
        values = functions.random((27, 9))
        found = recursive_random_search(
            grid, table(values), one_iteration, np.random.default_rng(seed)
        )
        hits += strictly_better(values, found.value) < 9
    assert hits / RUNS >= success_floor(confidence)


def test_a_needle_is_found_with_the_stated_probability() -> None:
    """A 27 x 9 grid, flat except one point; granularity one point (1/243), p = 0.5."""
    grid = Grid.of(27, 9)
    rrs = RRSSettings(confidence=0.5, initial_granularity=1 / 243, final_granularity=1 / 243)
    assert rrs.samples_per_iteration < 243  # really sampled, not enumerated
    needles = np.random.default_rng(11)
    hits = 0
    for seed in range(RUNS):
        values = np.ones((27, 9))
        needle = (int(needles.integers(27)), int(needles.integers(9)))
        values[needle] = 0.0
        found = recursive_random_search(grid, table(values), rrs, np.random.default_rng(seed))
        hits += found.point == needle
    assert hits / RUNS >= success_floor(0.5)


def test_with_enough_confidence_the_needle_is_always_found() -> None:
    grid = Grid.of(27, 9)
    rrs = RRSSettings(confidence=0.99, initial_granularity=1 / 243, final_granularity=1 / 243)
    values = np.ones((27, 9))
    values[13, 2] = -1.0
    found = recursive_random_search(grid, table(values), rrs, np.random.default_rng(0))
    assert found.point == (13, 2)
    assert found.evaluations == 243  # n = 1,117 > 243: the region is enumerated


# --------------------------------------------------------------------------- exhaustive


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    seed=st.integers(0, 2**16),
)
def test_exhaustive_search_is_brute_force(shape: list[int], seed: int) -> None:
    values = np.random.default_rng(seed).integers(0, 5, size=shape).astype(float)
    objective = table(values)
    found = exhaustive_search(Grid.of(*shape), objective)
    first_minimum = np.unravel_index(int(np.argmin(values)), values.shape)
    assert found.point == tuple(int(i) for i in first_minimum)
    assert found.value == values.min()
    assert found.evaluations == values.size == len(set(objective.asked))


@pytest.mark.parametrize(
    ("shape", "strategy"),
    [
        ((27, 9), "exhaustive"),  # 243 points <= 492 planned samples
        ((90, 3), "exhaustive"),  # 270 <= 492
        ((200, 3), "rrs"),  # 600 > 492
        ((20, 20, 20), "rrs"),
    ],
)
def test_auto_enumerates_when_that_is_no_dearer_than_rrs(
    shape: tuple[int, ...], strategy: str
) -> None:
    found = search(Grid.of(*shape), bowl([0] * len(shape)), RRSSettings(), np.random.default_rng(0))
    assert found.strategy == strategy


@pytest.mark.parametrize(
    ("scheduler", "queues"),
    [(Scheduler.CAPACITY, 2), (Scheduler.FAIR, 2), (Scheduler.CAPACITY, 4), (Scheduler.FAIR, 4)],
)
def test_the_papers_spaces_are_searchable(scheduler: Scheduler, queues: int) -> None:
    space = paper_space(scheduler, "root", [f"root.q{i}" for i in range(1, queues + 1)])
    scores = {
        point: float(zlib.crc32(space.decode(point).describe().encode()) % 97)
        for point in space.points()
    }
    found = search(
        space, lambda points: [scores[p] for p in points], RRSSettings(), np.random.default_rng(0)
    )
    assert found.value == min(scores.values())
    assert found.evaluations == space.size


def test_points_sharing_a_key_are_evaluated_once() -> None:
    grid = Grid.of(12, 3, categorical=[1])
    objective = bowl((5, 0))

    def key(point: Point) -> tuple[int, int]:
        return (point[0], min(point[1], 1))  # levels 1 and 2 of the policy score alike

    found = search(grid, objective, RRSSettings(), np.random.default_rng(0), "exhaustive", key)
    assert found.evaluations == 24 == len(objective.asked)
    assert {p[1] for p in objective.asked} == {0, 1}
    assert found.point == (5, 0)


# --------------------------------------------------------------------------- coarse-to-fine


def test_coarse_strides_leave_at_least_the_coarse_points_on_fine_ordered_dimensions() -> None:
    strides = coarse_strides((50, 100, 7, 3, 50), (True, True, True, True, False))
    assert strides == (8, 16, 1, 1, 1)
    for size, stride in zip((50, 100), strides[:2], strict=True):
        assert len(range(0, size, stride)) >= COARSE_POINTS
        assert len(range(0, size, stride * 2)) < COARSE_POINTS + 1


@pytest.mark.parametrize("centre", [0, 13, 27, 49])
@pytest.mark.parametrize("policy", [0, 2])
def test_refine_finds_a_bowls_minimum_with_a_fraction_of_the_grid(centre: int, policy: int) -> None:
    grid = Grid.of(50, 3, categorical=[1])
    objective = bowl((centre, policy))
    found = search(grid, objective, RRSSettings(), np.random.default_rng(0), "refine")
    assert found.strategy == "refine"
    assert found.point == (centre, policy) and found.value == 0.0
    assert found.evaluations == len(set(objective.asked)) <= 150 // 3


def test_refine_stops_on_a_flat_space_at_the_lattice_middle() -> None:
    """Early stopping: a coarse lattice that scores alike everywhere is not refined.
    The coarse stage takes a categorical dimension on its own: its 3 values at the
    lattice's middle (32; the lattice is every 8th of the 50 and the last), then the
    7 other lattice values under the first of them -- 10 points, not 8 x 3."""
    objective = RecordingObjective(lambda points: np.zeros(len(points)))
    found = refine_search(Grid.of(50, 3, categorical=[1]), objective, RRSSettings())
    assert found is not None
    assert found.point == (32, 0)
    assert found.evaluations == len(set(objective.asked)) == 3 + 7
    assert {p[0] for p in objective.asked} == {0, 8, 16, 24, 32, 40, 48, 49}
    assert {p[1] for p in objective.asked if p[0] != 32} == {0}
    assert found.worst == found.value == 0.0


def test_refine_tries_the_categorical_values_again_where_it_ends() -> None:
    """Category 0 wins at the lattice's middle and leads the search to 40; there
    category 2 is better, and the pattern search goes on under it to its own
    minimum, 44."""

    def latency(points: Sequence[tuple[int, ...]]) -> list[float]:
        found = []
        for x, category in points:
            if category == 0:
                found.append(1.0 + abs(x - 40) / 100)
            elif category == 1:
                found.append(5.0)
            else:
                found.append(2.0 if x < 36 else 0.5 + abs(x - 44) / 100)
        return found

    found = refine_search(
        Grid.of(50, 3, categorical=[1]), RecordingObjective(latency), RRSSettings()
    )
    assert found is not None
    assert found.point == (44, 2) and found.value == 0.5


def test_refine_refines_a_lattice_that_differs_anywhere() -> None:
    """One lattice point a little worse is enough to go on with the pattern search,
    which then finds the point off the lattice that beats the rest."""
    values = np.full((50,), 10.0)
    values[48] = 11.0
    values[4] = 9.0  # off the lattice, one half-stride from 0
    found = refine_search(Grid.of(50), table(values), RRSSettings())
    assert found is not None and found.point == (4,) and found.value == 9.0


def test_refine_can_miss_a_needle_between_lattice_points() -> None:
    """A heuristic, stated: a narrow optimum the coarse lattice steps over is missed
    (the search-scale bench reports what this costs on the comparator)."""
    values = np.full((50,), 10.0)
    values[0:9] = np.linspace(5.0, 9.0, 9)
    values[20] = 0.0  # one point, 4 from the nearest lattice values 16 and 24
    found = refine_search(Grid.of(50), table(values), RRSSettings())
    assert found is not None and found.point == (0,)


@pytest.mark.parametrize(
    ("shape", "categorical", "strategy"),
    [((7, 3), [1], "exhaustive"), ((7, 7, 7, 7, 3), [4], "rrs"), ((50, 50, 50), [], "rrs")],
)
def test_refine_leaves_other_spaces_to_auto(
    shape: tuple[int, ...], categorical: list[int], strategy: str
) -> None:
    """No ordered dimension finer than the lattice (the service's default spaces), or
    a coarse lattice larger than RRS's samples: exactly what ``auto`` finds."""
    grid = Grid.of(*shape, categorical=categorical)
    centre = [s // 3 for s in shape]
    auto = search(grid, bowl(centre), RRSSettings(), np.random.default_rng(4))
    refined = search(grid, bowl(centre), RRSSettings(), np.random.default_rng(4), "refine")
    assert refined == auto
    assert refined.strategy == strategy
