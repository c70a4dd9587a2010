"""Group optimizer: resource bounds, candidate levels, ``L*(o_i, r)`` per level, and
the curves of several groups split by Algorithm 3."""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from rules.comparator import Comparator
from rules.inputs import GroupConfig, GroupResources, JobMix, QueueConfig
from rules.mixes import mix_job
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.workload import JobSpec, TaskSpec
from yarn_adapt.sim.bench import typical_container
from yarn_adapt.tuning.cluster_dp import best_cluster_allocation
from yarn_adapt.tuning.group_optimizer import (
    ComparatorObjective,
    GroupProblem,
    GroupSearchSettings,
    LevelSearch,
    ResourceBounds,
    _search,
    candidate_config,
    candidate_levels,
    optimize_group,
    resource_bounds,
)
from yarn_adapt.tuning.search import Grid, Point, RRSSettings
from yarn_adapt.tuning.space import Scheduler, paper_space
from yarn_adapt.workload import load_swim


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
    settings = GroupSearchSettings(strategy=strategy, level_search=LevelSearch.FULL)  # type: ignore[arg-type]
    outcome = optimize_group(problem, settings)
    assert [level.containers for level in outcome.levels] == list(candidate_levels(problem.bounds))
    for level in outcome.levels:
        assert level.point == (level.containers % 40, level.containers % 3)
        assert level.latency == pytest.approx(600.0 / level.containers)
        assert level.evaluations <= min(SPACE_SIZE, level.samples)
    assert outcome.curve().latencies == tuple(level.latency for level in outcome.levels)
    assert outcome.evaluations == sum(level.evaluations for level in outcome.levels)


def test_a_groups_search_is_the_same_on_every_run() -> None:
    """A group's result depends on its problem and the seed alone (the tuner's workers
    search groups in any order, on any process)."""
    settings = GroupSearchSettings(strategy="rrs", seed=4)
    first = optimize_group(bowl_problem("b", 90.0, 2, 30), settings)
    optimize_group(bowl_problem("a", 50.0, 1, 9), settings)
    assert optimize_group(bowl_problem("b", 90.0, 2, 30), settings).levels == first.levels


def test_algorithm_3_gives_the_big_group_more_of_the_curves() -> None:
    problems = [
        bowl_problem("small", work=20.0, lower=2, upper=20),
        bowl_problem("big", work=2000.0, lower=3, upper=40),
    ]
    settings = GroupSearchSettings(rrs=RRSSettings(), level_search=LevelSearch.FULL)
    outcomes = [optimize_group(problem, settings) for problem in problems]
    allocation = best_cluster_allocation([o.curve() for o in outcomes], 30)
    small, big = allocation.containers
    assert small + big <= 30
    assert big > small
    assert outcomes[1].at(big).point == (big % 40, big % 3)
    predicted = 20.0 / small + 2000.0 / big
    assert allocation.predicted_total_latency == pytest.approx(predicted)


@dataclass(frozen=True)
class FixedBowl:
    """Latency ``work / r`` plus a quadratic around a point that does not move with
    ``r`` (a group's best configuration is the same at every level), until ``r``
    reaches ``saturation``: more containers change nothing."""

    work: float
    saturation: int

    def __call__(self, containers: int, points: Sequence[Point]) -> Sequence[float]:
        distance = ((np.asarray(points, dtype=float) - np.array([7.0, 1.0])) ** 2).sum(axis=1)
        return [float(v) for v in self.work / min(containers, self.saturation) + distance]


def test_reference_search_rescored_at_the_other_levels_finds_what_full_search_finds() -> None:
    problem = GroupProblem("g", SPACE, FixedBowl(600.0, 15), ResourceBounds(4, 60), reference=11)
    full = optimize_group(problem, GroupSearchSettings(level_search=LevelSearch.FULL))
    fast = optimize_group(problem, GroupSearchSettings(level_search=LevelSearch.REFERENCE))
    assert fast.curve() == full.curve()
    assert [level.point for level in fast.levels] == [(7, 1)] * len(fast.levels)
    # one search at the reference level, a few candidates re-scored elsewhere, and
    # past saturation (two equal levels in a row, the top level no better) only the
    # top level scored, once, to confirm it
    assert fast.evaluations < full.evaluations / 4
    early = replace(problem, objective=FixedBowl(600.0, 5))
    outcome = optimize_group(early, GroupSearchSettings(level_search=LevelSearch.REFERENCE))
    saturated = [level for level in outcome.levels if level.containers in (19, 33)]
    assert saturated and all(level.evaluations == 0 for level in saturated)
    assert outcome.at(60).evaluations > 0
    assert (
        outcome.curve()
        == optimize_group(early, GroupSearchSettings(level_search=LevelSearch.FULL)).curve()
    )


@dataclass(frozen=True)
class StepBowl:
    """``work`` shared by whole 4-container blocks (a task needs 4 units): the
    latency is flat from 4 to 7 containers, then falls again at 8, 12, ..."""

    work: float

    def __call__(self, containers: int, points: Sequence[Point]) -> Sequence[float]:
        distance = ((np.asarray(points, dtype=float) - np.array([7.0, 1.0])) ** 2).sum(axis=1)
        return [float(v) for v in self.work / (containers // 4) + distance]


def test_a_plateau_below_the_top_level_is_not_taken_for_saturation() -> None:
    """Two equal levels in a row (4 and 5 containers hold one 4-unit task alike)
    are saturation only when the top level predicts no better; here it does, so
    every level is scored and the curve is the full search's."""
    problem = GroupProblem("g", SPACE, StepBowl(600.0), ResourceBounds(4, 60), reference=11)
    full = optimize_group(problem, GroupSearchSettings(level_search=LevelSearch.FULL))
    fast = optimize_group(problem, GroupSearchSettings(level_search=LevelSearch.REFERENCE))
    assert fast.levels[0].latency == fast.levels[1].latency  # the plateau at 4, 5
    assert fast.at(60).latency == pytest.approx(600.0 / 15)
    assert fast.curve() == full.curve()


def test_flat_spans_of_the_curve_are_left_off_and_lose_at_most_the_tolerance() -> None:
    """``flat``: the levels inside a span whose ends differ by at most that much are
    not scored. At 0 a step curve keeps exactly the levels where it steps (and the
    span ends); with a tolerance, fewer levels, and none of those dropped predicts
    more than the tolerance better than the scored level below it."""
    problem = GroupProblem("g", SPACE, StepBowl(600.0), ResourceBounds(4, 19), reference=11)
    every_level = GroupSearchSettings(max_levels=16)  # 4 to 19: every level a candidate
    full = optimize_group(problem, replace(every_level, level_search=LevelSearch.FULL))
    every = {level.containers: level.latency for level in full.levels}
    assert list(every) == list(range(4, 20))
    exact = optimize_group(problem, replace(every_level, flat=0.0))
    kept = [level.containers for level in exact.levels]
    assert kept[0] == 4 and kept[-1] == 19 and len(kept) < len(every)
    assert {8, 12, 16} <= set(kept)  # every step of the curve is still on it
    assert all(every[c] == level.latency for c, level in zip(kept, exact.levels, strict=True))
    loose = optimize_group(problem, replace(every_level, flat=0.5))
    assert len(loose.levels) < len(exact.levels)
    scored = [level.containers for level in loose.levels]
    for containers, latency in every.items():
        below = max(c for c in scored if c <= containers)
        assert latency >= every[below] * (1 - 0.5)


def test_rescored_candidates_sharing_a_key_at_a_level_are_scored_once() -> None:
    asked: list[tuple[int, Point]] = []
    bowl = FixedBowl(600.0, 15)

    def objective(containers: int, points: Sequence[Point]) -> Sequence[float]:
        asked.extend((containers, p) for p in points)
        return bowl(containers, points)

    def key(containers: int, point: Point) -> Point:
        # below 20 containers the split's finest steps are not whole containers
        return (point[0] // 2, point[1]) if containers < 20 else point

    problem = GroupProblem("g", SPACE, objective, ResourceBounds(4, 60), key=key, reference=40)
    outcome = optimize_group(problem, GroupSearchSettings(rescored=8))
    for level in outcome.levels:
        scored = [p for c, p in asked if c == level.containers]
        assert len({key(level.containers, p) for p in scored}) == len(scored)
        if level.containers != 40 and level.evaluations:
            assert level.evaluations == len(scored)
    low = [level for level in outcome.levels if level.containers < 20]
    assert low and all(level.evaluations < 8 for level in low)


def test_with_a_margin_candidates_far_behind_a_levels_best_are_not_rescored_above_it() -> None:
    asked: list[tuple[int, Point]] = []
    bowl = FixedBowl(600.0, 60)

    def objective(containers: int, points: Sequence[Point]) -> Sequence[float]:
        asked.extend((containers, p) for p in points)
        return bowl(containers, points)

    problem = GroupProblem("g", SPACE, objective, ResourceBounds(4, 60), reference=60)
    raced = optimize_group(problem, GroupSearchSettings(rescored=8, margin=0.005))
    lowest = [p for c, p in asked if c == 4]
    above = [p for c, p in asked if 4 < c < 60]
    assert len(lowest) == 8 and above
    # at 4 containers the work term is 150 s: within 0.75 s of the best only the
    # bowl's centre remains (its neighbours are 1 s behind)
    assert set(above) == {(7, 1)}
    everything = optimize_group(problem, GroupSearchSettings(rescored=8))
    assert raced.curve() == everything.curve()
    assert raced.evaluations < everything.evaluations


def test_a_reference_search_done_already_is_reused() -> None:
    problem = GroupProblem("g", SPACE, FixedBowl(600.0, 15), ResourceBounds(4, 60), reference=11)
    settings = GroupSearchSettings()
    done = _search(problem, settings, 11)
    outcome = optimize_group(problem, settings, reference=done)
    assert outcome.at(11).evaluations == done.evaluations


# --------------------------------------------------------------------------- the real comparator

FB_SAMPLE = (
    Path(__file__).parents[1] / "fixtures/workload/FB-2009_samples_24_times_1hr_0_first50jobs.tsv"
)
TWO = ("root.q1", "root.q2")


def comparator_objective(scheduler: Scheduler, jobs: slice) -> ComparatorObjective:
    workload = load_swim(FB_SAMPLE, seed=3)
    chosen = workload.jobs[jobs]
    mix = JobMix(tuple(mix_job(job) for job in chosen), now_s=chosen[0].submit_s)
    space = paper_space(scheduler, "root", TWO)
    base = GroupConfig(str(scheduler), (QueueConfig("q1", "fifo"), QueueConfig("q2", "fifo")))
    return ComparatorObjective(space, mix, base, typical_container(workload))


@pytest.mark.parametrize(
    ("scheduler", "point", "expected"),
    [
        # Capacity: the split's percents; maximum unset means 100 (YARN's default)
        (
            Scheduler.CAPACITY,
            (0,),
            [("q1", "fifo", 16.67, 100.0, 1.0), ("q2", "fifo", 83.33, 100.0, 1.0)],
        ),
        # Fair: the split in twelfths as weights, the policy on every queue
        (Scheduler.FAIR, (1, 2), [("q1", "drf", 0.0, 100.0, 4.0), ("q2", "drf", 0.0, 100.0, 8.0)]),
    ],
)
def test_a_point_becomes_the_configuration_it_names(
    scheduler: Scheduler, point: Point, expected: list[tuple[str, str, float, float, float]]
) -> None:
    config = comparator_objective(scheduler, slice(0, 4)).config_at(point)
    got = [(q.name, q.policy, q.capacity, q.maximum, q.weight) for q in config.queues]
    assert got == expected
    assert config.scheduler == str(scheduler)


def test_what_the_space_does_not_tune_stays_as_configured() -> None:
    base = GroupConfig(
        "capacity",
        (QueueConfig("q1", "fifo", am_share=0.3, user_limit_factor=2.0), QueueConfig("q2", "fair")),
        calculator="dominant",
    )
    setting = paper_space(Scheduler.CAPACITY, "root", TWO).decode((2,))
    config = candidate_config(base, setting)
    assert (config.queues[0].am_share, config.queues[0].user_limit_factor) == (0.3, 2.0)
    assert config.calculator == "dominant"
    assert [q.capacity for q in config.queues] == [50.0, 50.0]


@pytest.mark.parametrize(
    ("scheduler", "containers"), [(Scheduler.CAPACITY, 4), (Scheduler.FAIR, 12)]
)
def test_the_objective_is_the_comparators_latency(scheduler: Scheduler, containers: int) -> None:
    objective = comparator_objective(scheduler, slice(32, 38))
    points = list(objective.space.points())
    got = objective(containers, points)
    resources = GroupResources.of_containers(containers, objective.container)
    comparator = Comparator(objective.mix, resources)
    assert got == [comparator.latency(objective.config_at(p)) for p in points]
    assert len(set(got)) > 1  # the configurations really differ on this mix


def test_points_with_equal_keys_score_alike() -> None:
    objective = comparator_objective(Scheduler.FAIR, slice(30, 38))
    points = list(objective.space.points())
    for containers in (4, 8, 12, 30):
        scores: dict[object, set[float]] = {}
        for point, value in zip(points, objective(containers, points), strict=True):
            scores.setdefault(objective.evaluation_key(containers, point), set()).add(value)
        assert all(len(values) == 1 for values in scores.values())


def test_the_objective_travels_to_other_processes() -> None:
    objective = comparator_objective(Scheduler.FAIR, slice(0, 4))
    copy = pickle.loads(pickle.dumps(objective))
    assert copy(8, [(0, 0), (4, 2)]) == objective(8, [(0, 0), (4, 2)])
