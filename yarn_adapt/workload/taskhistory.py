"""What the task-time model knows of a stage before it runs: its numeric features,
and the history of earlier runs of the same logical job.

Features (:func:`feature_row`, in ``NUMERIC_FEATURES`` order): the task kind; log
input, shuffle and output bytes; log tasks in the stage and in the other stage; log
shuffle bytes per reduce (what a reduce fetches); priority; the CPU and memory
request; the scheduling class (Google 2011); and two history features
(:class:`LogicalHistory`). Missing values are NaN. (The job type and the user are
target-encoded by the model itself.)
Other per-task sizes were tried and left out: on FB-2009 held-out jobs (random
split, seed 0) output bytes per reduce raised the task MAPE from 0.23 to 0.34, input
and shuffle bytes per map changed nothing.

Per-logical-job history. Many production jobs are runs of the same logical job (the
Google trace's *logical job name*, a JobHistory job name): the last runs' durations
predict the next run better than any other feature. The history is kept per
``(job type, task kind)`` as the mean log seconds of each earlier stage, stamped with
the earliest moment that stage's job can have finished (its submission plus its
longest task: a job's durations are only known once it has ended). A stage's two
history features are the mean of the last :data:`HISTORY_WINDOW` entries that ended
before the moment asked about, and the log of how many there were; a job without a
type (SWIM) has none (NaN).

Training rows read the history *as of their own submission*, so the model learns
from history exactly as it will use it: time-ordered, never from the future.
"""

from __future__ import annotations

import math
from bisect import bisect_right, insort
from collections.abc import Iterable
from dataclasses import dataclass, field

from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.workload import JobFeatures, JobSpec

HISTORY_WINDOW = 8
NUMERIC_FEATURES = (
    "reduce_kind",
    "log_input_bytes",
    "log_shuffle_bytes",
    "log_output_bytes",
    "log_stage_tasks",
    "log_other_stage_tasks",
    "log_shuffle_per_reduce",
    "priority",
    "cpu_request",
    "memory_request",
    "scheduling_class",
    "history_mean_log_seconds",
    "history_log_runs",
)

HistoryKey = tuple[str, TaskType]
NO_HISTORY = (math.nan, math.nan)


def _log_or_nan(value: int | float | None) -> float:
    return math.log1p(value) if value is not None and value >= 0 else math.nan


def _number_or_nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _per_task(amount: int | None, tasks: int | None) -> float:
    if amount is None or not tasks:
        return math.nan
    return math.log1p(amount / tasks)


def feature_row(
    features: JobFeatures, kind: TaskType, history: tuple[float, float] = NO_HISTORY
) -> list[float]:
    """The numeric inputs for one stage, in ``NUMERIC_FEATURES`` order."""
    stage, other = (
        (features.reduce_tasks, features.map_tasks)
        if kind is TaskType.REDUCE
        else (features.map_tasks, features.reduce_tasks)
    )
    return [
        1.0 if kind is TaskType.REDUCE else 0.0,
        _log_or_nan(features.input_bytes),
        _log_or_nan(features.shuffle_bytes),
        _log_or_nan(features.output_bytes),
        _log_or_nan(stage),
        _log_or_nan(other),
        _per_task(features.shuffle_bytes, features.reduce_tasks),
        float(features.priority),
        _number_or_nan(features.cpu_request),
        _number_or_nan(features.memory_request),
        _number_or_nan(features.scheduling_class),
        *history,
    ]


@dataclass(frozen=True)
class StageRecord:
    """One finished stage of a job: what the model learns from."""

    job_id: str
    features: JobFeatures
    kind: TaskType
    submit_s: float
    ended_s: float
    log_seconds: tuple[float, ...]

    @property
    def mean_log_seconds(self) -> float:
        return math.fsum(self.log_seconds) / len(self.log_seconds)

    @property
    def log_spread(self) -> float:
        """Sample standard deviation of the tasks' log seconds (0 for one task)."""
        count = len(self.log_seconds)
        if count < 2:
            return 0.0
        mean = self.mean_log_seconds
        return math.sqrt(math.fsum((x - mean) ** 2 for x in self.log_seconds) / (count - 1))


def stage_records(jobs: Iterable[JobSpec]) -> list[StageRecord]:
    """Every stage of ``jobs`` that has tasks, in submission order."""
    records = []
    for job in sorted(jobs, key=lambda j: j.submit_s):
        if not job.tasks:
            continue
        ended = job.submit_s + max(t.duration_s for t in job.tasks)
        for kind in TaskType:
            logs = tuple(math.log(max(t.duration_s, 1e-3)) for t in job.tasks if t.kind is kind)
            if logs:
                records.append(StageRecord(job.id, job.features, kind, job.submit_s, ended, logs))
    return records


@dataclass
class LogicalHistory:
    """Mean log seconds of earlier stages per (job type, kind), by when they ended."""

    window: int = HISTORY_WINDOW
    _runs: dict[HistoryKey, list[tuple[float, float]]] = field(default_factory=dict)
    _seen: set[tuple[str, TaskType]] = field(default_factory=set)

    def copy(self) -> LogicalHistory:
        runs = {key: list(value) for key, value in self._runs.items()}
        return LogicalHistory(self.window, runs, set(self._seen))

    def add(self, record: StageRecord) -> None:
        """Remember ``record`` (once: a job's stage already known is skipped)."""
        seen = (record.job_id, record.kind)
        if record.features.job_type and seen not in self._seen:
            self._seen.add(seen)
            runs = self._runs.setdefault((record.features.job_type, record.kind), [])
            insort(runs, (record.ended_s, record.mean_log_seconds))

    def extend(self, records: Iterable[StageRecord]) -> None:
        for record in records:
            self.add(record)

    def features(
        self, features: JobFeatures, kind: TaskType, before_s: float = math.inf
    ) -> tuple[float, float]:
        """(mean of the last runs that ended before ``before_s``, log run count)."""
        runs = self._runs.get((features.job_type, kind)) if features.job_type else None
        if not runs:
            return NO_HISTORY
        seen = bisect_right(runs, (before_s, math.inf))
        if seen == 0:
            return NO_HISTORY
        last = runs[max(0, seen - self.window) : seen]
        return math.fsum(value for _, value in last) / len(last), math.log1p(seen)

    @property
    def types(self) -> int:
        return len(self._runs)
