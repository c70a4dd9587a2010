"""The task-time model's spread, its logical-job history and its measured error:
time-ordered validation on the real FB-2009 trace, and synthetic histories where
the right answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.resources import Resources
from yarn_adapt.model.workload import JobFeatures, JobSpec, TaskSpec, Workload
from yarn_adapt.workload.taskmodel import fit_task_time_model
from yarn_adapt.workload.taskvalidation import (
    fit_with_measured_error,
    measure_error,
    time_ordered_report,
    time_ordered_split,
)

CONTAINER = Resources(1024, 1)


def test_fb2009_time_ordered(fb2009: Workload) -> None:
    report = time_ordered_report(fb2009, later_fraction=0.25)
    assert (report.train_jobs, report.test_jobs) == (4420, 1474)
    # SWIM's durations are bytes -> seconds times per-task log-normal noise of 0.25:
    # the typical task is learnable, the noise is not.
    assert report.model.stage_log_mae < report.baseline.stage_log_mae
    assert report.model.error.sigma < 0.15
    assert abs(report.model.error.bias) < 0.05
    # the predictive interval holds most later tasks (noise 0.25 is the floor)
    assert 0.65 < report.model.coverage_80 < 0.95


def test_fb2009_spread_is_the_replay_noise(fb2009: Workload) -> None:
    earlier, later = time_ordered_split(fb2009, 0.25)
    model = fit_task_time_model(earlier)
    big = [j for j in later.jobs if len(j.maps) >= 10][:50]
    model.prime(Workload(tuple(big)))
    spreads = [model.spread(j.features, TaskType.MAP) for j in big]
    assert statistics_median(spreads) == pytest.approx(0.25, abs=0.03)


def statistics_median(values: list[float]) -> float:
    return float(np.median(values))


def synthetic(
    types: int,
    runs: int,
    seed: int,
    stage_sigma: float = 0.0,
    spreads: dict[int, float] | None = None,
) -> Workload:
    """``runs`` runs of each of ``types`` logical jobs, one every 100 s in turn; a
    type's tasks last about ``exp(2 + type % 5 + its own offset)`` seconds, each run
    off by ``stage_sigma`` and each task by the type's spread (default 0.1)."""
    rng = np.random.default_rng(seed)
    offsets = rng.normal(0.0, 1.0, types)
    jobs = []
    for run in range(runs):
        for kind in range(types):
            submit = (run * types + kind) * 100.0
            centre = 2.0 + kind % 5 + offsets[kind] + stage_sigma * rng.normal()
            spread = (spreads or {}).get(kind % 2, 0.1)
            durations = np.exp(centre + spread * rng.normal(size=8))
            tasks = tuple(TaskSpec(TaskType.MAP, float(d), CONTAINER) for d in durations)
            features = JobFeatures(job_type=f"type-{kind}", map_tasks=8, priority=kind % 3)
            jobs.append(JobSpec(f"j{run}-{kind}", submit, "q1", tasks, features=features))
    return Workload(tuple(jobs), source="synthetic")


def test_history_of_a_logical_job_predicts_its_next_run() -> None:
    history = synthetic(types=40, runs=6, seed=1)
    model = fit_task_time_model(history)
    # a new logical job the model never saw: its first runs end, then it runs again
    fresh = [
        JobSpec(
            f"new{i}",
            30_000.0 + 100 * i,
            "q1",
            (TaskSpec(TaskType.MAP, math.exp(7.5), CONTAINER),) * 8,
            features=JobFeatures(job_type="brand-new", map_tasks=8),
        )
        for i in range(3)
    ]
    before = model.estimate(fresh[-1].features, TaskType.MAP)
    knowing = model.with_history(fresh[:2])
    after = knowing.estimate(fresh[-1].features, TaskType.MAP)
    assert abs(math.log(after) - 7.5) < abs(math.log(before) - 7.5)
    # runs that had not ended by then are not known
    too_early = model.with_history(fresh[:2], as_of=fresh[0].submit_s)
    assert too_early.estimate(fresh[-1].features, TaskType.MAP) == pytest.approx(before)


def test_the_measured_error_is_net_of_the_tasks_own_spread() -> None:
    # each run's centre is off by 0.4 (unpredictable), its 8 tasks spread by 0.1
    history = synthetic(types=30, runs=12, seed=2, stage_sigma=0.4)
    earlier, later = time_ordered_split(history, 0.3)
    error = measure_error(fit_task_time_model(earlier), later.jobs)
    assert error.sigma == pytest.approx(0.4, abs=0.12)
    assert abs(error.bias) < 0.15
    carried = fit_with_measured_error(history, later_fraction=0.3)
    assert carried.error == error and carried.trained_jobs == len(history.jobs)


def test_spreads_are_learned_per_job() -> None:
    history = synthetic(types=40, runs=6, seed=3, spreads={0: 0.05, 1: 0.6})
    model = fit_task_time_model(history)
    calm = model.spread(JobFeatures(job_type="type-2", map_tasks=8, priority=2), TaskType.MAP)
    wild = model.spread(JobFeatures(job_type="type-3", map_tasks=8, priority=0), TaskType.MAP)
    assert calm < 0.15 < 0.35 < wild
