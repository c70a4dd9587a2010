"""A real cluster's jobs in progress, as the tuner needs them.

The ResourceManager tells which applications wait (NEW..ACCEPTED) or run, when they
were submitted, their progress and how many containers they hold; it does not tell
a running MapReduce job's remaining tasks, and the JobHistory Server knows only
finished jobs. So each application borrows its shape from history (pure, no I/O):

* its *template* is the latest finished job of the same name (and queue, when one
  exists), else the latest finished job of any name, else one map task;
* a waiting application has all of the template's tasks ahead of it;
* a running one holds ``running containers - 1`` task containers (one is its AM),
  taken as just started; of the template's tasks, ``progress`` x total are done or
  running, the rest are ahead of it (maps before reduces);
* what the RM says a running application holds wins over the template's sizes: a
  running application with one container holds its AM, so that is its AM's size;
  one whose template was borrowed from another job (another name, often another
  kind: a distributed-shell app shaped after a MapReduce job) has containers of the
  size it holds on average. Without this, four small AMs borrowing a MapReduce
  job's 1.5 GB one filled a queue's user limit in the model, and every candidate
  configuration predicted that the jobs starve, while YARN ran them.

Durations are the task-time model's business later; the shape (task counts, kind,
container) is what this module supplies. Times are seconds since the epoch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from yarn_adapt.model import Application, AppState, ClusterSnapshot, Resources
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.workload import JobSpec, TaskSpec
from yarn_adapt.sim import JobInProgress, RunningContainer, SimulationStart

WAITING = frozenset({AppState.NEW, AppState.NEW_SAVING, AppState.SUBMITTED, AppState.ACCEPTED})
DEFAULT_CONTAINER = Resources(1024, 1)


def start_from_snapshot(
    snapshot: ClusterSnapshot,
    history: Sequence[JobSpec] = (),
    container: Resources | None = None,
) -> SimulationStart:
    """The unfinished applications of ``snapshot`` as jobs in progress."""
    now_s = snapshot.taken_ms / 1000.0
    shape = container or DEFAULT_CONTAINER
    jobs = tuple(
        _in_progress(app, _template(app, history, shape), now_s)
        for app in snapshot.apps
        if app.state in WAITING or app.state is AppState.RUNNING
    )
    return SimulationStart(now_s, jobs)


def _template(app: Application, history: Sequence[JobSpec], container: Resources) -> JobSpec:
    named = [j for j in history if j.name == app.name]
    same_queue = [j for j in named if _leaf(j.queue) == _leaf(app.queue)]
    for candidates in (same_queue, named, list(history)):
        if candidates:
            return max(candidates, key=lambda j: j.submit_s)
    return JobSpec(app.id, 0.0, app.queue, (TaskSpec(TaskType.MAP, 60.0, container),))


def _leaf(queue: str) -> str:
    return queue.rsplit(".", 1)[-1]


def _in_progress(app: Application, template: JobSpec, now_s: float) -> JobInProgress:
    tasks = (*template.maps, *template.reduces)
    features = replace(template.features, job_type=app.name or template.features.job_type)
    job = JobSpec(
        app.id,
        app.submitted_ms / 1000.0,
        _leaf(app.queue),
        tasks,
        user=app.user,
        name=app.name,
        am_resources=template.am_resources,
        features=replace(features, priority=app.priority) if app.priority else features,
    )
    if app.state in WAITING:
        return JobInProgress(job)
    return _running(app, _held_sizes(app, job, borrowed=template.name != app.name), now_s)


def _held_sizes(app: Application, job: JobSpec, *, borrowed: bool) -> JobSpec:
    """``job`` with the container sizes the RM reports for running ``app``."""
    count, held = app.running_containers, app.allocated
    if count < 1 or held.memory_mb <= 0 or held.vcores <= 0:
        return job  # the RM said nothing of what the application holds
    if count == 1:
        return replace(job, am_resources=held)
    if not borrowed:
        return job
    each = Resources(held.memory_mb // count, max(1, held.vcores // count))
    tasks = tuple(replace(task, resources=each) for task in job.tasks)
    return replace(job, am_resources=each, tasks=tasks)


def _running(app: Application, job: JobSpec, now_s: float) -> JobInProgress:
    busy = max(0, app.running_containers - 1)
    total = len(job.tasks)
    done_share = app.progress / 100.0 if app.progress > 1 else app.progress  # RM: percent
    started = min(total, max(busy, round(done_share * total)))
    running_tasks = job.tasks[max(0, started - busy) : started]
    running = tuple(RunningContainer(task, now_s) for task in running_tasks)
    launched = (app.launched_ms or app.submitted_ms) / 1000.0
    remaining = replace(job, tasks=job.tasks[started:])
    return JobInProgress(remaining, running, am_started_s=launched)
