"""Group optimizer: resource bounds, candidate levels, ``L*(o_i, r)`` per level, and a
whole tuning round (group searches, then Algorithm 3)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.workload import JobSpec, TaskSpec
from yarn_adapt.tuning.group_optimizer import (
    GroupProblem,
    GroupSearchSettings,
    ResourceBounds,
    candidate_levels,
    optimize_group,
    optimize_groups,
    resource_bounds,
    tune_round,
)
from yarn_adapt.tuning.search import Grid, Point, RRSSettings


@dataclass(frozen=True)
class ShiftingBowl:
    """A stand-in comparator with a known answer: at ``r`` containers the latency is
    ``work / r`` plus a quadratic whose minimum moves with ``r``, so
    ``L*(r) = work / r`` at the point ``(r mod 40, r mod 3)``."""

    work: float

    def __call__(self, containers: int, points: Sequence[Point]) -> Sequence[float]:
        centre = np.array([containers % 40, containers % 3], dtype=float)
        distance = ((np.asarray(points, dtype=float) - centre) ** 2).sum(axis=1)
        return [float(v) for v in self.work / containers + distance]


SPACE = Grid.of(40, 3, categorical=[1])  # 120 points: "auto" enumerates it
SPACE_SIZE = 120


def bowl_problem(name: str, work: float, lower: int, upper: int) -> GroupProblem:
    return GroupProblem(name, SPACE, ShiftingBowl(work), ResourceBounds(lower, upper))


def job(job_id: str, queue: str, maps: int, reduces: int) -> JobSpec:
    tasks = (TaskSpec(TaskType.MAP, 10.0),) * maps + (TaskSpec(TaskType.REDUCE, 20.0),) * reduces
    return JobSpec(job_id, 0.0, queue, tasks)


@pytest.mark.parametrize(
    ("jobs", "cluster", "bounds"),
    [
        # 3 AMs + 2 queues with jobs; saturation: (1+5) + (1+2) + (1+1)
        ([job("a", "q1", 5, 1), job("b", "q1", 2, 2), job("c", "q2", 1, 0)], 100, (5, 11)),
        # the widest stage counts, not the sum of stages
        ([job("a", "q1", 3, 8)], 100, (2, 9)),
        # the cluster caps both bounds
        ([job("a", "q1", 500, 1)], 40, (2, 40)),
        ([job(f"j{i}", "q1", 1, 0) for i in range(10)], 6, (6, 6)),
        ([], 10, (0, 0)),
    ],
)
def test_resource_bounds(jobs: list[JobSpec], cluster: int, bounds: tuple[int, int]) -> None:
    assert resource_bounds(jobs, cluster) == ResourceBounds(*bounds)


@pytest.mark.parametrize(
    ("bounds", "max_levels", "levels"),
    [
        ((3, 3), 8, (3,)),
        ((3, 10), 8, (3, 4, 5, 6, 7, 8, 9, 10)),  # 8 levels: all of them
        ((5, 400), 8, (5, 6, 8, 12, 25, 59, 151, 400)),  # geometric above the lower bound
        ((0, 9), 2, (0, 9)),
    ],
)
def test_candidate_levels(
    bounds: tuple[int, int], max_levels: int, levels: tuple[int, ...]
) -> None:
    assert candidate_levels(ResourceBounds(*bounds), max_levels) == levels


@pytest.mark.parametrize(("lower", "upper"), [(1, 9), (7, 1000), (2, 50_000), (10, 17)])
def test_quantized_levels_keep_both_bounds_and_increase(lower: int, upper: int) -> None:
    levels = candidate_levels(ResourceBounds(lower, upper), 8)
    assert (levels[0], levels[-1]) == (lower, upper)
    assert len(levels) == min(8, upper - lower + 1)
    assert all(b > a for a, b in itertools.pairwise(levels))


def test_bounds_and_levels_refuse_nonsense() -> None:
    with pytest.raises(ValueError):
        ResourceBounds(5, 4)
    with pytest.raises(ValueError):
        candidate_levels(ResourceBounds(1, 9), 1)


@pytest.mark.parametrize("strategy", ["auto", "rrs", "exhaustive"])
def test_each_level_gets_its_best_configuration(strategy: str) -> None:
    problem = bowl_problem("g", work=600.0, lower=4, upper=60)
    outcome = optimize_group(problem, GroupSearchSettings(strategy=strategy))  # type: ignore[arg-type]
    assert [level.containers for level in outcome.levels] == list(candidate_levels(problem.bounds))
    for level in outcome.levels:
        assert level.point == (level.containers % 40, level.containers % 3)
        assert level.latency == pytest.approx(600.0 / level.containers)
        assert level.evaluations <= min(SPACE_SIZE, level.samples)
    assert outcome.curve().latencies == tuple(level.latency for level in outcome.levels)
    assert outcome.evaluations == sum(level.evaluations for level in outcome.levels)


def test_a_groups_result_does_not_depend_on_the_other_groups() -> None:
    settings = GroupSearchSettings(strategy="rrs", seed=4)
    alone = optimize_groups([bowl_problem("b", 90.0, 2, 30)], settings)
    among = optimize_groups(
        [bowl_problem("a", 50.0, 1, 9), bowl_problem("b", 90.0, 2, 30)], settings
    )
    assert among[1].levels == alone[0].levels


def test_a_round_gives_the_big_group_more_and_reports_its_parts() -> None:
    problems = [
        bowl_problem("small", work=20.0, lower=2, upper=20),
        bowl_problem("big", work=2000.0, lower=3, upper=40),
    ]
    round_ = tune_round(problems, 30, GroupSearchSettings(rrs=RRSSettings()))
    small, big = round_.allocation.containers
    assert small + big <= 30
    assert big > small
    assert round_.wall_s == pytest.approx(round_.group_search_s + round_.dp_s)
    assert round_.best_point(1) == (big % 40, big % 3)
    predicted = 20.0 / small + 2000.0 / big
    assert round_.allocation.predicted_total_latency == pytest.approx(predicted)
