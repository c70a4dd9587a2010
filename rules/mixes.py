"""Job mixes from the workload model: what the comparator sees of a set of jobs.

:func:`mix_from_workload` turns :class:`~yarn_adapt.model.workload.JobSpec` s into
:class:`~rules.inputs.MixJob` s, with task durations either as given (ground truth, a
replay) or as the task-time model estimates them -- the comparator in the tuner
only ever sees estimates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from rules.inputs import JobMix, MixJob, StageSpec
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.resources import Resources
from yarn_adapt.model.workload import JobSpec, TaskSpec, Workload
from yarn_adapt.workload.taskmodel import TaskTimeModel

STAGE_ORDER = (TaskType.MAP, TaskType.REDUCE)


def runs(tasks: Iterable[tuple[float, Resources]], usual: Resources) -> StageSpec:
    """Consecutive tasks of equal duration and container merged into runs, order
    kept; a run names its container only when it is not ``usual``."""
    merged: list[tuple[int, float, Resources]] = []
    for seconds, shape in tasks:
        if merged and merged[-1][1:] == (seconds, shape):
            merged[-1] = (merged[-1][0] + 1, seconds, shape)
        else:
            merged.append((1, seconds, shape))
    return tuple(
        (count, float(seconds)) if shape == usual else (count, float(seconds), shape)
        for count, seconds, shape in merged
    )


def stages_of(
    tasks: Sequence[TaskSpec], seconds: Sequence[float], usual: Resources
) -> tuple[StageSpec, ...]:
    """Maps then reduces, each as runs of ``seconds`` (one per task, task order)."""
    return tuple(
        runs(
            ((s, t.resources) for t, s in zip(tasks, seconds, strict=True) if t.kind is kind), usual
        )
        for kind in STAGE_ORDER
    )


def usual_container(job: JobSpec) -> Resources:
    """The container most of the job's tasks ask for (its AM's when it has none)."""
    if not job.tasks:
        return job.am_resources
    return Counter(t.resources for t in job.tasks).most_common(1)[0][0]


def mix_job(job: JobSpec, model: TaskTimeModel | None = None) -> MixJob:
    """The comparator's view of ``job``: real durations, or ``model``'s estimates (a
    stage's typical task, and the spread of its tasks)."""
    seconds = [t.duration_s for t in job.tasks] if model is None else list(model.estimate_job(job))
    usual = usual_container(job)
    spreads = () if model is None else _spreads(job, model)
    return MixJob(
        id=job.id,
        queue=job.queue.rsplit(".", 1)[-1],
        submit_s=job.submit_s,
        stages=stages_of(job.tasks, seconds, usual),
        task=usual,
        am=job.am_resources,
        priority=job.features.priority,
        user=job.user,
        spreads=spreads,
    )


def _spreads(job: JobSpec, model: TaskTimeModel) -> tuple[float, ...]:
    kinds = {task.kind for task in job.tasks}
    return tuple(model.spread(job.features, kind) if kind in kinds else 0.0 for kind in STAGE_ORDER)


def mix_from_workload(
    workload: Workload,
    model: TaskTimeModel | None = None,
    *,
    am_containers: bool = True,
    framework: str = "mapreduce",
    now_s: float = 0.0,
) -> JobMix:
    """All jobs of ``workload`` as one mix (``model``: estimated durations)."""
    if model is not None:
        model.prime(workload)
    jobs = tuple(mix_job(job, model) for job in workload.jobs)
    return JobMix(jobs, now_s=now_s, framework=framework, am_containers=am_containers)
