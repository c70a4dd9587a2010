"""YARN Scheduler Load Simulator inputs -> Workload: SLS JSON and Rumen JSON.

Semantics follow Hadoop's hadoop-sls (AMDefinitionSLS, TaskContainerDefinition,
AMDefinitionRumen, RumenToSLSConverter, SLSConfiguration):

SLS JSON, a stream of job objects:
  ``job.id`` (default ``job_<N>``), ``job.start.ms`` (submit, default 0),
  ``job.queue.name`` (default ``default``), ``job.user``, ``job.count`` (the job is
  repeated that many times, ids get ``#k``), ``am.type`` or ``yarn.sls.am.type``
  (default ``mapreduce``), ``am.memory-mb``/``am.vcores`` and ``job.tasks[]``.
  A task has ``count``, a duration from ``container.duration.ms``, the legacy
  ``duration.ms`` or ``container.end.ms - container.start.ms`` (it must be > 0),
  ``container.type`` (``reduce`` is the second stage; anything else, e.g. SLS's
  default ``map``, the first) and ``container.memory-mb``/``container.vcores``.
  Containers default to 1024 MiB / 1 vcore (``yarn.sls.container.*`` defaults).
  A leading object without ``job.tasks`` but with ``num.nodes``/``num.racks`` is a
  header and is skipped. SLS reads numbers from strings too; so do we.

Rumen JSON (job-history-derived, e.g. hadoop-sls' 2jobs2min-rumen-jh.json):
  each task becomes one container lasting its successful attempt (SLS takes the
  last attempt; the successful one is the last unless a speculative copy lost),
  ``finishTime - startTime``. Submit times are relative to the first job's
  ``submitTime`` (RumenToSLSConverter's baseline); earlier jobs are set to 0.
  Container sizes come from the job's own configuration
  (``mapreduce.map|reduce.memory.mb``, ``mapreduce.map|reduce.cpu.vcores``,
  ``yarn.app.mapreduce.am.resource.mb|cpu-vcores``) with MapReduce's defaults
  (1024 MiB / 1 vcore, AM 1536 MiB / 1 vcore); SLS itself ignores them.

A job object whose tasks (``count`` x ``job.count``) would pass 1,000,000 per job or
50,000,000 in the trace is malformed, refused before its tasks are made.

Queue names are reduced to the leaf (``root.a.b`` -> ``b``). A malformed job is
skipped as a whole when lenient, as SLSRunner does ("Failed to create an AM").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from yarn_adapt.errors import TraceError
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.resources import Resources
from yarn_adapt.model.workload import JobFeatures, JobSpec, TaskSpec, Workload
from yarn_adapt.workload._io import MalformedRows
from yarn_adapt.workload._json import JsonObject, json_objects
from yarn_adapt.workload.queues import leaf_queue_name

SLS_DEFAULT_CONTAINER = Resources(1024, 1)
MR_DEFAULT_TASK = Resources(1024, 1)
MR_DEFAULT_AM = Resources(1536, 1)
# Hadoop's JobPriority names as YARN application priorities (MapReduce TypeConverter).
RUMEN_PRIORITIES = {"VERY_LOW": 1, "LOW": 2, "NORMAL": 3, "HIGH": 4, "VERY_HIGH": 5, "DEFAULT": 0}


class _BadJob(ValueError):
    """A job object that cannot become a JobSpec; the message says why."""


JobParser = Callable[[Mapping[str, object], int], list[JobSpec]]


def load_sls(path: str | Path, *, lenient: bool = False) -> Workload:
    """Load an SLS JSON trace (see the module docstring for the keys)."""
    trace = Path(path)
    return _load(trace, lenient, _SlsParser().jobs, source=f"sls:{trace.name}")


def load_rumen(path: str | Path, *, lenient: bool = False) -> Workload:
    """Load a Rumen job trace (see the module docstring for the rules)."""
    trace = Path(path)
    return _load(trace, lenient, _RumenParser().jobs, source=f"rumen:{trace.name}")


def _load(trace: Path, lenient: bool, parse: JobParser, *, source: str) -> Workload:
    rows = MalformedRows(str(trace), lenient=lenient)
    jobs: list[JobSpec] = []
    seen: set[str] = set()
    for obj in json_objects(trace, rows):
        try:
            jobs.extend(_checked_unique(_parse_object(obj, parse), seen))
        except _BadJob as exc:
            rows.reject(TraceError(str(trace), obj.line, f"job object #{obj.index}: {exc}"))
    jobs.sort(key=lambda job: job.submit_s)
    return Workload(tuple(jobs), source=source, skipped_rows=rows.summarize())


def _parse_object(obj: JsonObject, parse: JobParser) -> list[JobSpec]:
    if not isinstance(obj.value, dict):
        raise _BadJob(f"expected a JSON object, found {type(obj.value).__name__}")
    return parse(obj.value, obj.index)


def _checked_unique(jobs: list[JobSpec], seen: set[str]) -> list[JobSpec]:
    for job in jobs:
        if job.id in seen:
            raise _BadJob(f"duplicate job id {job.id!r}")
        seen.add(job.id)
    return jobs


# --------------------------------------------------------------------------- values


def _integer(value: object, what: str) -> int:
    """An integer given as a JSON number or a decimal string (as SLS's parseLong)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _BadJob(f"{what} {value!r} is not an integer")
    try:
        return int(value)
    except ValueError:
        raise _BadJob(f"{what} {value!r} is not an integer") from None


def _optional_integer(job: Mapping[str, object], key: str, default: int) -> int:
    return _integer(job[key], key) if key in job else default


def _text(job: Mapping[str, object], key: str, default: str) -> str:
    value = job.get(key)
    return default if value is None else str(value)


def _list(job: Mapping[str, object], key: str) -> list[Mapping[str, object]]:
    value = job.get(key)
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise _BadJob(f"{key} is missing or not a list of objects")
    return value


def _positive_resources(memory_mb: int, vcores: int, what: str) -> Resources:
    if memory_mb <= 0 or vcores <= 0:
        raise _BadJob(f"{what} <memory:{memory_mb}, vCores:{vcores}> must be positive")
    return Resources(memory_mb, vcores)


# --------------------------------------------------------------------------- SLS


# A job object whose replay would run more tasks is refused (a malformed row), as
# SWIM rows are (yarn_adapt.workload.swim): ``count`` and ``job.count`` multiply
# one task or job, so a stray 10**18 would otherwise exhaust memory before anything
# runs. The whole trace may hold at most MAX_TASKS_PER_TRACE tasks.
MAX_TASKS_PER_JOB = 1_000_000
MAX_TASKS_PER_TRACE = 50_000_000


class _SlsParser:
    def __init__(self) -> None:
        self.tasks_so_far = 0

    def jobs(self, job: Mapping[str, object], index: int) -> list[JobSpec]:
        if index == 1 and "job.tasks" not in job and ("num.nodes" in job or "num.racks" in job):
            return []
        items = _non_empty(_list(job, "job.tasks"))
        copies = max(1, _optional_integer(job, "job.count", 1))
        self._count_tasks(sum(_task_count(item) for item in items), copies)
        listed = [task for item in items for task in self._tasks(item)]
        tasks = tuple(sorted(listed, key=lambda task: task.kind is TaskType.REDUCE))
        base = JobSpec(
            id=_text(job, "job.id", f"job_{index}"),
            submit_s=_non_negative(_optional_integer(job, "job.start.ms", 0), "job.start.ms")
            / 1000,
            queue=leaf_queue_name(_text(job, "job.queue.name", "default")),
            tasks=tasks,
            user=_text(job, "job.user", "default"),
            name=_text(job, "job.id", ""),
            am_resources=self._resources(job, "am.", SLS_DEFAULT_CONTAINER),
            features=self._features(job, tasks),
        )
        return _repeated(base, copies)

    def _count_tasks(self, per_job: int, copies: int) -> None:
        """Refuse a job object over the limits before any of its tasks is made."""
        if per_job > MAX_TASKS_PER_JOB:
            raise _BadJob(
                f"the job would run {per_job:,} tasks, more than the "
                f"{MAX_TASKS_PER_JOB:,} a job may have"
            )
        total = self.tasks_so_far + per_job * copies
        if total > MAX_TASKS_PER_TRACE:
            raise _BadJob(
                f"job.count {copies:,} x {per_job:,} tasks takes the trace to {total:,} "
                f"tasks, more than the {MAX_TASKS_PER_TRACE:,} a trace may have"
            )
        self.tasks_so_far = total

    def _tasks(self, task: Mapping[str, object]) -> list[TaskSpec]:
        kind = TaskType.REDUCE if _text(task, "container.type", "map") == "reduce" else TaskType.MAP
        spec = TaskSpec(
            kind,
            self._duration_ms(task) / 1000,
            self._resources(task, "container.", SLS_DEFAULT_CONTAINER),
        )
        return [spec] * _task_count(task)

    @staticmethod
    def _duration_ms(task: Mapping[str, object]) -> int:
        if "container.duration.ms" in task:
            duration = _integer(task["container.duration.ms"], "container.duration.ms")
        elif "duration.ms" in task:
            duration = _integer(task["duration.ms"], "duration.ms")
        elif "container.start.ms" in task and "container.end.ms" in task:
            duration = _integer(task["container.end.ms"], "container.end.ms") - _integer(
                task["container.start.ms"], "container.start.ms"
            )
        else:
            raise _BadJob(
                "a task has no duration (container.duration.ms or container.start.ms/end.ms)"
            )
        if duration <= 0:
            raise _BadJob(f"a task's duration {duration} ms is not positive")
        return duration

    @staticmethod
    def _resources(item: Mapping[str, object], prefix: str, default: Resources) -> Resources:
        memory = _optional_integer(item, f"{prefix}memory-mb", default.memory_mb)
        vcores = _optional_integer(item, f"{prefix}vcores", default.vcores)
        return _positive_resources(memory, vcores, f"{prefix}resources")

    @staticmethod
    def _features(job: Mapping[str, object], tasks: tuple[TaskSpec, ...]) -> JobFeatures:
        am_type = _text(job, "am.type", _text(job, "yarn.sls.am.type", "mapreduce"))
        reduces = sum(1 for t in tasks if t.kind is TaskType.REDUCE)
        return JobFeatures(job_type=am_type, map_tasks=len(tasks) - reduces, reduce_tasks=reduces)


def _task_count(task: Mapping[str, object]) -> int:
    return max(1, _optional_integer(task, "count", 1))


def _non_empty(tasks: list[Mapping[str, object]]) -> list[Mapping[str, object]]:
    if not tasks:
        raise _BadJob("job.tasks is empty (SLS: 'No task for the job!')")
    return tasks


def _non_negative(value: int, what: str) -> int:
    if value < 0:
        raise _BadJob(f"{what} {value} is negative")
    return value


def _repeated(job: JobSpec, count: int) -> list[JobSpec]:
    if count <= 1:
        return [job]
    return [
        JobSpec(
            f"{job.id}#{k}",
            job.submit_s,
            job.queue,
            job.tasks,
            job.user,
            job.name,
            job.am_resources,
            job.features,
        )
        for k in range(count)
    ]


# --------------------------------------------------------------------------- Rumen


@dataclass(frozen=True)
class _Attempt:
    duration_s: float
    hdfs_read: int
    hdfs_written: int
    shuffle: int


class _RumenParser:
    def __init__(self) -> None:
        self.baseline_ms: int | None = None

    def jobs(self, job: Mapping[str, object], index: int) -> list[JobSpec]:
        del index
        job_id = _text(job, "jobID", "")
        if not job_id:
            raise _BadJob("jobID is missing")
        submit_ms = _integer(job.get("submitTime"), "submitTime")
        if self.baseline_ms is None:
            self.baseline_ms = submit_ms
        conf = job.get("jobProperties")
        conf = conf if isinstance(conf, dict) else {}
        maps = [self._attempt(t, "mapTasks") for t in _list(job, "mapTasks")]
        reduces = (
            [self._attempt(t, "reduceTasks") for t in _list(job, "reduceTasks")]
            if "reduceTasks" in job
            else []
        )
        if not maps and not reduces:
            raise _BadJob("the job has no tasks")
        map_size, reduce_size, am_size = (
            _mr_resources(conf, kind, default) for kind, default in _MR_CONTAINERS
        )
        tasks = tuple(TaskSpec(TaskType.MAP, a.duration_s, map_size) for a in maps) + tuple(
            TaskSpec(TaskType.REDUCE, a.duration_s, reduce_size) for a in reduces
        )
        return [
            JobSpec(
                id=job_id,
                submit_s=max(0, submit_ms - self.baseline_ms) / 1000,
                queue=leaf_queue_name(_text(job, "queue", "default")),
                tasks=tasks,
                user=_text(job, "user", "default"),
                name=_text(job, "jobName", ""),
                am_resources=am_size,
                features=_rumen_features(job, maps, reduces),
            )
        ]

    @staticmethod
    def _attempt(task: Mapping[str, object], stage: str) -> _Attempt:
        listed = task.get("attempts")
        attempts = [a for a in listed if isinstance(a, dict)] if isinstance(listed, list) else []
        if not attempts:
            raise _BadJob(f"a task in {stage} has no attempt (SLS: 'Invalid ... task, no attempt')")
        successful = [a for a in attempts if a.get("result") == "SUCCESS"]
        chosen = (successful or attempts)[-1]
        duration = _integer(chosen.get("finishTime"), "attempt finishTime") - _integer(
            chosen.get("startTime"), "attempt startTime"
        )
        if duration <= 0:
            raise _BadJob(f"attempt {chosen.get('attemptID')} lasts {duration} ms")
        counters = (
            _counter(chosen, key)
            for key in ("hdfsBytesRead", "hdfsBytesWritten", "reduceShuffleBytes")
        )
        return _Attempt(duration / 1000, *counters)


_MR_CONTAINERS = (
    (("mapreduce.map.memory.mb", "mapreduce.map.cpu.vcores"), MR_DEFAULT_TASK),
    (("mapreduce.reduce.memory.mb", "mapreduce.reduce.cpu.vcores"), MR_DEFAULT_TASK),
    (
        ("yarn.app.mapreduce.am.resource.mb", "yarn.app.mapreduce.am.resource.cpu-vcores"),
        MR_DEFAULT_AM,
    ),
)


def _mr_resources(
    conf: Mapping[str, object], keys: tuple[str, str], default: Resources
) -> Resources:
    memory = _optional_integer(conf, keys[0], default.memory_mb)
    vcores = _optional_integer(conf, keys[1], default.vcores)
    return _positive_resources(memory, vcores, keys[0].rsplit(".", 2)[0])


def _counter(attempt: Mapping[str, object], key: str) -> int:
    """A byte counter; Rumen writes -1 for "not recorded"."""
    value = attempt.get(key, -1)
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _rumen_features(
    job: Mapping[str, object], maps: list[_Attempt], reduces: list[_Attempt]
) -> JobFeatures:
    output_stage = reduces or maps
    return JobFeatures(
        job_type=_text(job, "jobName", ""),
        input_bytes=_total(a.hdfs_read for a in maps),
        shuffle_bytes=_total(a.shuffle for a in reduces) if reduces else None,
        output_bytes=_total(a.hdfs_written for a in output_stage),
        priority=RUMEN_PRIORITIES.get(_text(job, "priority", "NORMAL"), 0),
        map_tasks=len(maps),
        reduce_tasks=len(reduces),
    )


def _total(values: Iterable[int]) -> int | None:
    known = [v for v in values if v >= 0]
    return sum(known) if known else None
