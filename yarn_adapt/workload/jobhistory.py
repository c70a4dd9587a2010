"""Real MapReduce jobs from the JobHistory Server (model.MapReduceJob) -> Workload.

Rules:

* Only SUCCEEDED jobs are replayable (a failed or killed job's task times say
  nothing about how long its work takes); others are left out, not counted as
  malformed. ``include_unsuccessful=True`` keeps them with their finished tasks.
* A task's duration is its successful attempt's runtime (``finish - start``, else
  the attempt's ``elapsedTime``). Without fetched attempts, the task's own
  SUCCEEDED times are used. Failed and killed attempts are not tasks of the replay.
* A job fetched without its tasks is rebuilt from its totals: ``maps_completed``
  maps of ``avg_map_time_ms`` and ``reduces_completed`` reduces of average shuffle
  + merge + reduce time (JobHistory's ``avgReduceTime`` is the reduce phase only;
  when shuffle and merge averages are unknown the reduces come out too short).
* Submit times are seconds after the earliest submit of the list.
* Queue names are reduced to the leaf (``root.a.b`` -> ``b``); ``queues`` may
  instead map the job's priority (0 from JobHistory) to a queue.

A job whose succeeded task has no usable time is malformed: ``TraceError`` naming
``<jobhistory>:N`` (N = the job's 1-based position in the list) and the job id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from yarn_adapt.errors import TraceError
from yarn_adapt.model.apps import JobState, MapReduceJob, MapReduceTask, TaskAttempt, TaskType
from yarn_adapt.model.resources import Resources
from yarn_adapt.model.workload import JobFeatures, JobSpec, TaskSpec, Workload
from yarn_adapt.workload._io import MalformedRows
from yarn_adapt.workload.queues import QueueMapping, leaf_queue_name

HISTORY_SOURCE = "<jobhistory>"
SUCCEEDED = "SUCCEEDED"
# MapReduce defaults (mapred-default.xml): JobHistory does not report container sizes.
MR_TASK_CONTAINER = Resources(1024, 1)
MR_AM_CONTAINER = Resources(1536, 1)


def workload_from_history(
    jobs: Sequence[MapReduceJob],
    *,
    lenient: bool = False,
    include_unsuccessful: bool = False,
    queues: QueueMapping | None = None,
) -> Workload:
    """The jobs as a replayable workload (see the module docstring)."""
    rows = MalformedRows(HISTORY_SOURCE, lenient=lenient)
    kept = [
        (n, job)
        for n, job in enumerate(jobs, start=1)
        if include_unsuccessful or job.state is JobState.SUCCEEDED
    ]
    origin_ms = min((job.submit_ms for _, job in kept), default=0)
    specs: list[JobSpec] = []
    for position, job in kept:
        try:
            specs.append(_job_spec(job, origin_ms))
        except ValueError as exc:
            rows.reject(TraceError(HISTORY_SOURCE, position, f"job {job.id}: {exc}"))
    if queues is not None:
        specs = [replace(spec, queue=queues.queue_for(spec.features.priority)) for spec in specs]
    specs.sort(key=lambda spec: spec.submit_s)
    return Workload(tuple(specs), source="jobhistory", skipped_rows=rows.summarize())


def _job_spec(job: MapReduceJob, origin_ms: int) -> JobSpec:
    tasks = _tasks(job)
    if not tasks:
        raise ValueError("no finished task to replay")
    maps = sum(1 for t in tasks if t.kind is TaskType.MAP)
    features = JobFeatures(
        job_type=job.name, user=job.user, map_tasks=maps, reduce_tasks=len(tasks) - maps
    )
    return JobSpec(
        id=job.id,
        submit_s=(job.submit_ms - origin_ms) / 1000,
        queue=leaf_queue_name(job.queue),
        tasks=tasks,
        user=job.user,
        name=job.name,
        am_resources=MR_AM_CONTAINER,
        features=features,
    )


def _tasks(job: MapReduceJob) -> tuple[TaskSpec, ...]:
    if not job.tasks:
        return _tasks_from_totals(job)
    ordered = sorted(job.tasks, key=lambda t: t.task_type is TaskType.REDUCE)
    return tuple(
        TaskSpec(t.task_type, _task_seconds(t), MR_TASK_CONTAINER)
        for t in ordered
        if t.state == SUCCEEDED
    )


def _tasks_from_totals(job: MapReduceJob) -> tuple[TaskSpec, ...]:
    stages = (
        (TaskType.MAP, job.maps_completed, job.avg_map_time_ms),
        (TaskType.REDUCE, job.reduces_completed, _whole_reduce_ms(job)),
    )
    tasks: list[TaskSpec] = []
    for kind, count, average_ms in stages:
        if count and not average_ms:
            raise ValueError(
                f"{count} {kind.value.lower()}s completed but no average {kind.value.lower()} time"
            )
        tasks += [TaskSpec(kind, (average_ms or 0) / 1000, MR_TASK_CONTAINER)] * count
    return tuple(tasks)


def _whole_reduce_ms(job: MapReduceJob) -> int | None:
    if job.avg_reduce_time_ms is None:
        return None
    return job.avg_reduce_time_ms + (job.avg_shuffle_time_ms or 0) + (job.avg_merge_time_ms or 0)


def _task_seconds(task: MapReduceTask) -> float:
    attempt = _successful_attempt(task)
    if attempt is not None:
        return _positive_seconds(
            attempt.start_ms, attempt.finish_ms, attempt.elapsed_ms, attempt.id
        )
    if task.attempts:
        raise ValueError(f"task {task.id} SUCCEEDED but none of its attempts did")
    return _positive_seconds(task.start_ms, task.finish_ms, task.elapsed_ms, task.id)


def _successful_attempt(task: MapReduceTask) -> TaskAttempt | None:
    named = [a for a in task.attempts if a.id == task.successful_attempt]
    succeeded = [a for a in task.attempts if a.state == SUCCEEDED]
    candidates = named or succeeded
    return candidates[-1] if candidates else None


def _positive_seconds(
    start_ms: int | None, finish_ms: int | None, elapsed_ms: int, what: str
) -> float:
    runtime_ms = (
        finish_ms - start_ms if start_ms is not None and finish_ms is not None else elapsed_ms
    )
    if runtime_ms <= 0:
        raise ValueError(
            f"{what} has no positive runtime "
            f"(start {start_ms}, finish {finish_ms}, elapsed {elapsed_ms})"
        )
    return runtime_ms / 1000
