"""Task times learned from the MapReduce JobHistory Server as a real cluster runs: the
jobs seen so far (by id, the newest :data:`HISTORY_LIMIT`) and the task-time model
fitted to them, refitted when new jobs arrive. ``yarn-adapt serve`` and ``propose``
both learn this way."""

from __future__ import annotations

from dataclasses import dataclass, field

from yarn_adapt.errors import TraceError
from yarn_adapt.model import ClusterSnapshot, Workload
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.workload import JobSpec
from yarn_adapt.workload.jobhistory import workload_from_history
from yarn_adapt.workload.taskmodel import MEDIAN_FALLBACK, TaskTimeModel, fit_task_time_model

DEFAULT_TASK_S = 60.0
"""Task time assumed before any job history exists: the tuner's own default shape for
an application it knows nothing about (one 60 s map, ``tuning.snapshot_state``)."""

HISTORY_LIMIT = 2000
"""Jobs kept, the newest: enough for every logical job's recent runs."""


@dataclass
class HistoryModel:
    """Task times learned from the JobHistory jobs seen so far (kept by id)."""

    seed: int = 0
    jobs: dict[str, JobSpec] = field(default_factory=dict)
    model: TaskTimeModel | None = None

    def update(self, snapshot: ClusterSnapshot) -> tuple[JobSpec, ...]:
        try:
            fresh = workload_from_history(snapshot.jobs, lenient=True).jobs
        except TraceError:
            fresh = ()
        new = [job for job in fresh if job.id not in self.jobs and job.tasks]
        for job in new:
            self.jobs[job.id] = job
        if len(self.jobs) > HISTORY_LIMIT:
            for stale in list(self.jobs)[: len(self.jobs) - HISTORY_LIMIT]:
                del self.jobs[stale]
        if new or self.model is None:
            self.model = self._fit()
        return tuple(self.jobs.values())

    def _fit(self) -> TaskTimeModel:
        if not self.jobs:
            reason = f"no JobHistory jobs yet: {DEFAULT_TASK_S:g} s per task"
            medians = {TaskType.MAP: DEFAULT_TASK_S, TaskType.REDUCE: DEFAULT_TASK_S}
            return TaskTimeModel(MEDIAN_FALLBACK, reason, 0, 0, medians, self.seed)
        history = Workload(tuple(self.jobs.values()), "JobHistory")
        return fit_task_time_model(history, seed=self.seed)
