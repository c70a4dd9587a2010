"""A short description of a workload, for ``yarn-adapt sim`` and the benches."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.workload import Workload
from yarn_adapt.workload.queues import queue_counts


@dataclass(frozen=True)
class WorkloadSummary:
    """Counts and extents of a workload; ``jobs_per_queue`` in first-seen order."""

    source: str
    jobs: int
    maps: int
    reduces: int
    span_s: float
    task_seconds: float
    median_task_s: float
    jobs_per_queue: tuple[tuple[str, int], ...]
    skipped_rows: int

    @property
    def tasks(self) -> int:
        return self.maps + self.reduces

    def lines(self) -> list[str]:
        """Human-readable lines (no trailing newline)."""
        queues = ", ".join(f"{name}={count}" for name, count in self.jobs_per_queue) or "-"
        return [
            f"workload {self.source or '(unnamed)'}: {self.jobs} jobs, {self.tasks} tasks "
            f"({self.maps} maps, {self.reduces} reduces)",
            f"submissions span {self.span_s:.1f} s; {self.task_seconds:.0f} task-seconds, "
            f"median task {self.median_task_s:.1f} s",
            f"jobs per queue: {queues}",
            f"skipped malformed rows: {self.skipped_rows}",
        ]


def summarize(workload: Workload) -> WorkloadSummary:
    """Jobs, tasks, span and per-queue counts of ``workload``."""
    durations = [task.duration_s for job in workload.jobs for task in job.tasks]
    maps = sum(1 for job in workload.jobs for task in job.tasks if task.kind is TaskType.MAP)
    return WorkloadSummary(
        source=workload.source,
        jobs=len(workload),
        maps=maps,
        reduces=len(durations) - maps,
        span_s=workload.span_s,
        task_seconds=sum(durations),
        median_task_s=statistics.median(durations) if durations else 0.0,
        jobs_per_queue=tuple(queue_counts(workload.jobs).items()),
        skipped_rows=workload.skipped_rows,
    )
