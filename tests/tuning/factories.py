"""Jobs and a task-time model for the tuner's tests: sleep jobs of map tasks."""

from __future__ import annotations

from yarn_adapt.model import JobFeatures, JobSpec, Resources, TaskSpec, TaskType, Workload
from yarn_adapt.workload import TaskTimeModel, fit_task_time_model

CONTAINER = Resources(2048, 1)


def spec(job_id: str, queue: str, submit: float, maps: int = 4, seconds: float = 60.0) -> JobSpec:
    tasks = (TaskSpec(TaskType.MAP, seconds, CONTAINER),) * maps
    return JobSpec(
        job_id, submit, queue, tasks, features=JobFeatures(job_type="sleep", map_tasks=maps)
    )


def sleep_model() -> TaskTimeModel:
    """A model fitted on 40 sleep jobs of q1 (gradient boosting: history enough)."""
    history = Workload(tuple(spec(f"h{i}", "q1", float(i)) for i in range(40)))
    return fit_task_time_model(history)
