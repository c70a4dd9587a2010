"""Google cluster trace 2011 (clusterdata-2011-2) job_events + task_events -> Workload.

Follows AdaptiveConfig §4.2: only best-effort jobs (priorities 2-8) are kept, and a
job's group is its application, the trace's *logical job name* (``JobSpec.name`` and
``JobFeatures.job_type``; :func:`group_by_application` splits a workload by it).

Rules (column meanings from Google's "format + schema" document, v2.1):

* Times are µs. The trace window starts at timestamp 600 s, so ``submit_s`` is
  ``(t - 600 s)``; 0 means "before the window" and such jobs get ``submit_s = 0``.
  A job's submit time is its first SUBMIT in job_events, else its first task SUBMIT,
  else the window's start.
* A task's duration is FINISH minus the SCHEDULE that started that run. A run ended
  by EVICT, FAIL, KILL or LOST is discarded (the task is resubmitted and a later
  run may finish; its duration then counts). Tasks scheduled before the window
  (SCHEDULE at timestamp 0: start unknown), never finished in the files read, or
  with a non-positive duration are left out; jobs left with no task are dropped.
  Their counts are logged at INFO.
* A job's priority is its tasks' priority (the task_events column; all tasks of a
  job share it in the trace). Its queue comes from a :class:`QueueMapping`.
* CPU and memory requests are normalised to the largest machine. They become a
  container by :class:`GoogleResourceMapping`.

Several parts may be read at once (a directory holding ``job_events*`` and
``task_events*`` files, or ``job_events/part-*`` sub-directories): events are
replayed in part order, so a task scheduled in one part may finish in the next.
"""

from __future__ import annotations

import functools
import logging
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from yarn_adapt.errors import TraceError
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.resources import Resources
from yarn_adapt.model.workload import JobFeatures, JobSpec, TaskSpec, Workload
from yarn_adapt.workload._io import MalformedRows, numbered_lines
from yarn_adapt.workload.queues import BEST_EFFORT_PRIORITIES, QueueMapping

log = logging.getLogger("yarn_adapt.workload")

TRACE_START_US = 600_000_000
AFTER_TRACE_US = 2**63 - 1
SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST, UPDATE_PENDING, UPDATE_RUNNING = range(9)
RUN_ENDED_UNFINISHED = frozenset({EVICT, FAIL, KILL, LOST})
JOB_EVENT_COLUMNS = 8
TASK_EVENT_COLUMNS = 13


@dataclass(frozen=True)
class GoogleResourceMapping:
    """Normalised requests -> a YARN container.

    The largest machine of the trace (1.0) is mapped to ``reference`` (default: a
    node of the AdaptiveConfig testbed, §4.2: two 6-core Xeon E5645 and 32 GB, i.e.
    12 vcores and 32,768 MiB); the request is scaled to it and rounded *up* to the
    scheduler's allocation increment (YARN's defaults
    ``yarn.scheduler.minimum-allocation-mb = 1024`` and ``-vcores = 1``, which the
    RM's resource calculator rounds requests up to). A task with no request gets
    one increment of each.
    """

    reference: Resources = field(default_factory=lambda: Resources(32768, 12))
    increment: Resources = field(default_factory=lambda: Resources(1024, 1))

    def container(self, cpu: float | None, memory: float | None) -> Resources:
        """The container a task with these normalised requests asks for."""
        return _container(self, cpu, memory)


@functools.lru_cache(maxsize=4096)
def _container(
    mapping: GoogleResourceMapping, cpu: float | None, memory: float | None
) -> Resources:
    # Requests take few distinct values; caching saves most of the mapping time.
    vcores = _round_up(cpu, mapping.reference.vcores, mapping.increment.vcores)
    memory_mb = _round_up(memory, mapping.reference.memory_mb, mapping.increment.memory_mb)
    return Resources(memory_mb, vcores)


def _round_up(fraction: float | None, reference: int, step: int) -> int:
    if not fraction or fraction <= 0:
        return step
    return max(step, math.ceil(fraction * reference / step) * step)


@dataclass
class _Task:
    requests: tuple[float | None, float | None] = (None, None)
    submit_us: int | None = None
    run_start_us: int | None = None
    duration_s: float | None = None


@dataclass
class _Job:
    priority: int
    user: str
    scheduling_class: int | None = None
    tasks: dict[int, _Task] = field(default_factory=dict)

    def task(self, index: int) -> _Task:
        found = self.tasks.get(index)
        if found is None:
            found = self.tasks[index] = _Task()
        return found


@dataclass
class _JobInfo:
    submit_us: int | None = None
    user: str = ""
    logical_name: str = ""
    scheduling_class: int | None = None


@dataclass
class _Exclusions:
    started_before_window: int = 0
    non_positive: int = 0


def load_google(
    path: str | Path,
    *,
    task_events: str | Path | Sequence[str | Path] | None = None,
    lenient: bool = False,
    priorities: Iterable[int] = BEST_EFFORT_PRIORITIES,
    queues: QueueMapping | None = None,
    resources: GoogleResourceMapping | None = None,
) -> Workload:
    """Load Google 2011 job and task events.

    ``path`` is a job_events file (its task_events sibling is found by name), a
    task_events file, or a directory holding both. ``task_events`` overrides the
    task files. ``queues`` defaults to the paper's two priority queues.
    """
    job_files, task_files = _resolve_files(Path(path), task_events)
    rows = MalformedRows(str(path), lenient=lenient)
    infos = _read_job_events(job_files, rows)
    jobs, exclusions = _replay_task_events(task_files, rows, frozenset(priorities))
    specs = _job_specs(
        jobs, infos, queues or QueueMapping.paper_two_queues(), resources or GoogleResourceMapping()
    )
    _log_exclusions(jobs, specs, exclusions)
    specs.sort(key=lambda job: (job.submit_s, job.id))
    return Workload(
        tuple(specs), source=f"google-2011:{Path(path).name}", skipped_rows=rows.summarize()
    )


def group_by_application(workload: Workload) -> dict[str, Workload]:
    """The workload split by logical job name (AdaptiveConfig's user groups)."""
    groups: dict[str, list[JobSpec]] = defaultdict(list)
    for job in workload.jobs:
        groups[job.features.job_type].append(job)
    return {
        name: replace(workload, jobs=tuple(jobs), skipped_rows=0) for name, jobs in groups.items()
    }


# --------------------------------------------------------------------------- files


def _resolve_files(
    path: Path, task_events: str | Path | Sequence[str | Path] | None
) -> tuple[list[Path], list[Path]]:
    if path.is_dir():
        jobs, tasks = _parts(path, "job_events"), _parts(path, "task_events")
    elif "task_events" in path.name:
        jobs, tasks = _existing([_sibling(path, "task_events", "job_events")]), [path]
    else:
        jobs, tasks = [path], _existing([_sibling(path, "job_events", "task_events")])
    if task_events is not None:
        tasks = (
            [Path(task_events)]
            if isinstance(task_events, str | Path)
            else [Path(p) for p in task_events]
        )
    if not tasks:
        raise TraceError(str(path), 0, "no task_events file found next to it (pass task_events=)")
    return jobs, tasks


def _parts(directory: Path, table: str) -> list[Path]:
    flat = sorted(directory.glob(f"{table}*.csv*"))
    return flat + sorted((directory / table).glob("part-*.csv*"))


def _sibling(path: Path, table: str, other: str) -> Path:
    return path.with_name(path.name.replace(table, other))


def _existing(paths: list[Path]) -> list[Path]:
    return [p for p in paths if p.exists()]


def _csv_rows(path: Path, rows: MalformedRows, columns: int) -> Iterator[tuple[int, list[str]]]:
    # The trace is unquoted CSV (hashes are base64: no commas), so split is exact
    # and several times faster than the csv module on 450k-row parts.
    for line_no, line in numbered_lines(path, rows):
        fields = line.rstrip("\r\n").split(",")
        if len(fields) == columns:
            yield line_no, fields
        elif line.strip():
            rows.reject(
                TraceError(str(path), line_no, f"expected {columns} columns, found {len(fields)}")
            )


# --------------------------------------------------------------------------- job_events


def _read_job_events(files: list[Path], rows: MalformedRows) -> dict[str, _JobInfo]:
    infos: dict[str, _JobInfo] = defaultdict(_JobInfo)
    for path in files:
        for line_no, fields in _csv_rows(path, rows, JOB_EVENT_COLUMNS):
            try:
                time_us, event = _event_time(fields[0]), _small_int(fields[3], "event type", 8)
                job_id = _job_id(fields[2])
            except ValueError as exc:
                rows.reject(TraceError(str(path), line_no, str(exc)))
                continue
            info = infos[job_id]
            info.user = info.user or fields[4]
            info.logical_name = info.logical_name or fields[7]
            if info.scheduling_class is None:
                info.scheduling_class = _scheduling_class(fields[5])
            if event == SUBMIT and info.submit_us is None:
                info.submit_us = time_us
    return infos


# --------------------------------------------------------------------------- task_events


def _replay_task_events(
    files: list[Path], rows: MalformedRows, priorities: frozenset[int]
) -> tuple[dict[str, _Job], _Exclusions]:
    replay = _TaskEventReplay(priorities)
    for path in files:
        for line_no, line in numbered_lines(path, rows):
            fields = line.rstrip("\r\n").split(",")
            try:
                replay.apply(fields)
            except ValueError as exc:
                if line.strip():
                    rows.reject(TraceError(str(path), line_no, str(exc)))
    return replay.jobs, replay.exclusions


_PRIORITY_TEXTS = frozenset(str(p) for p in range(12))


class _TaskEventReplay:
    """Task states as the events unfold. Rows of other priorities are only checked
    for shape: parsing every field of the 450k-row part would double the load time."""

    def __init__(self, priorities: frozenset[int]) -> None:
        self.kept = frozenset(str(p) for p in priorities)
        self.jobs: dict[str, _Job] = {}
        self.exclusions = _Exclusions()

    def apply(self, fields: list[str]) -> None:
        if len(fields) != TASK_EVENT_COLUMNS:
            raise ValueError(f"expected {TASK_EVENT_COLUMNS} columns, found {len(fields)}")
        if fields[8] not in self.kept:
            if fields[8] not in _PRIORITY_TEXTS:
                _small_int(fields[8], "priority", 11)
            return
        time_us, event = _event_time(fields[0]), _small_int(fields[5], "event type", 8)
        task = self._job(fields).task(_task_index(fields[3]))
        if event in (SUBMIT, UPDATE_PENDING, UPDATE_RUNNING):
            task.requests = (
                _request(fields[9], "CPU request"),
                _request(fields[10], "memory request"),
            )
        if event == SUBMIT and task.submit_us is None:
            task.submit_us = time_us
        elif event == SCHEDULE:
            task.run_start_us = time_us
        elif event == FINISH:
            _finish(task, time_us, self.exclusions)
        elif event in RUN_ENDED_UNFINISHED:
            task.run_start_us = None

    def _job(self, fields: list[str]) -> _Job:
        job = self.jobs.get(fields[2])
        if job is None:
            job = self.jobs[_job_id(fields[2])] = _Job(
                int(fields[8]), fields[6], _scheduling_class(fields[7])
            )
        return job


def _finish(task: _Task, time_us: int, exclusions: _Exclusions) -> None:
    start, task.run_start_us = task.run_start_us, None
    if start is None or time_us >= AFTER_TRACE_US:
        return
    if start == 0:
        exclusions.started_before_window += 1
    elif time_us <= start:
        exclusions.non_positive += 1
    else:
        task.duration_s = (time_us - start) / 1e6


def _event_time(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"time {text!r} is not an integer (µs)") from None
    if value < 0:
        raise ValueError(f"time {value} is negative")
    return value


def _small_int(text: str, what: str, maximum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{what} {text!r} is not an integer") from None
    if not 0 <= value <= maximum:
        raise ValueError(f"{what} {value} is outside 0..{maximum}")
    return value


def _job_id(text: str) -> str:
    if not text.isdigit():
        raise ValueError(f"job ID {text!r} is not a non-negative integer")
    return text


def _task_index(text: str) -> int:
    if not text.isdigit():
        raise ValueError(f"task index {text!r} is not a non-negative integer")
    return int(text)


def _scheduling_class(text: str) -> int | None:
    """The scheduling class (0-3, latency sensitivity); ``None`` when absent or odd."""
    return int(text) if text in _SCHEDULING_CLASSES else None


_SCHEDULING_CLASSES = frozenset(str(c) for c in range(4))


def _request(text: str, what: str) -> float | None:
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{what} {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} {text} is negative or not finite")
    return value


# --------------------------------------------------------------------------- jobs


def _job_specs(
    jobs: dict[str, _Job],
    infos: dict[str, _JobInfo],
    queues: QueueMapping,
    mapping: GoogleResourceMapping,
) -> list[JobSpec]:
    specs = []
    for job_id, job in jobs.items():
        finished = [
            (index, t) for index, t in sorted(job.tasks.items()) if t.duration_s is not None
        ]
        if finished:
            specs.append(
                _job_spec(job_id, job, infos.get(job_id, _JobInfo()), finished, queues, mapping)
            )
    return specs


def _job_spec(
    job_id: str,
    job: _Job,
    info: _JobInfo,
    finished: list[tuple[int, _Task]],
    queues: QueueMapping,
    mapping: GoogleResourceMapping,
) -> JobSpec:
    tasks = tuple(
        TaskSpec(TaskType.MAP, t.duration_s or 0.0, mapping.container(*t.requests))
        for _, t in finished
    )
    user = info.user or job.user
    features = JobFeatures(
        job_type=info.logical_name,
        user=user,
        scheduling_class=_first_known(info.scheduling_class, job.scheduling_class),
        priority=job.priority,
        map_tasks=len(tasks),
        reduce_tasks=0,
        cpu_request=_median(t.requests[0] for _, t in finished),
        memory_request=_median(t.requests[1] for _, t in finished),
    )
    submit_s = max(0.0, (_submit_us(job, info) - TRACE_START_US) / 1e6)
    return JobSpec(
        job_id,
        submit_s,
        queues.queue_for(job.priority),
        tasks,
        user=user,
        name=info.logical_name,
        features=features,
    )


def _submit_us(job: _Job, info: _JobInfo) -> int:
    if info.submit_us is not None:
        return info.submit_us
    submits = [t.submit_us for t in job.tasks.values() if t.submit_us is not None]
    return min(submits, default=TRACE_START_US)


def _first_known(first: int | None, second: int | None) -> int | None:
    return first if first is not None else second


def _median(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _log_exclusions(jobs: dict[str, _Job], specs: list[JobSpec], exclusions: _Exclusions) -> None:
    log.info(
        "google-2011: %d best-effort jobs seen, %d kept; left out %d tasks started before the "
        "window and %d with non-positive duration",
        len(jobs),
        len(specs),
        exclusions.started_before_window,
        exclusions.non_positive,
    )
