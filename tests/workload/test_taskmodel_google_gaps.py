"""The task-time model on a Google-like history where every multi-task stage lacks
a feature the single-task stages have (their logical job ran before, the
multi-task jobs' never did): the spread regressor, fitted on the multi-task stages
alone, must not see an all-empty column (sklearn's binning raised on it; found
replaying time slices of the bundled Google 2011 part in adaptive-latency)."""

from __future__ import annotations

import math

from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.resources import Resources
from yarn_adapt.model.workload import JobFeatures, JobSpec, TaskSpec, Workload
from yarn_adapt.workload.taskmodel import fit_task_time_model

CONTAINER = Resources(1024, 1)


def _job(index: int, name: str, seconds: list[float]) -> JobSpec:
    tasks = tuple(TaskSpec(TaskType.MAP, s, CONTAINER) for s in seconds)
    features = JobFeatures(job_type=name, priority=2, map_tasks=len(tasks), reduce_tasks=0)
    # 300 s apart: each job has ended before the next is submitted (history counts it)
    return JobSpec(f"j{index}", 300.0 * index, "q1", tasks, name=name, features=features)


def test_multi_task_stages_without_history_still_fit_a_spread() -> None:
    repeated = [_job(i, "again", [100.0 + i]) for i in range(40)]
    fresh = [_job(40 + i, f"new{i}", [50.0, 80.0, 120.0 + i]) for i in range(35)]
    model = fit_task_time_model(Workload((*repeated, *fresh)), seed=1)
    features = _job(99, "newest", [60.0, 90.0]).features
    assert math.isfinite(model.estimate(features, TaskType.MAP))
    assert math.isfinite(model.spread(features, TaskType.MAP))
