"""The workload model every loader produces and the simulator and tuner consume.

A job is a set of tasks in two stages, maps then reduces (a reduce starts only after
every map finished, as MapReduce without slow-start). Traces without reduces (the
Google trace) have only the first stage. Times are seconds from the workload's start.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.resources import Resources

DEFAULT_CONTAINER = Resources(1024, 1)


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """One task: its stage, how long it runs once it has a container, and the
    container it asks for."""

    kind: TaskType
    duration_s: float
    resources: Resources = DEFAULT_CONTAINER


@dataclass(frozen=True)
class JobFeatures:
    """What is known about a job before it runs: the task-time model's inputs.

    ``map_tasks``/``reduce_tasks`` are the stage sizes (known at submission: input
    splits and the configured reduces). ``cpu_request``/``memory_request`` are a
    task's request in the trace's own units (Google 2011: fractions of the largest
    machine), ``None`` where the trace has none. ``user``: who submits it ("" when
    the trace does not say); ``scheduling_class``: Google 2011's latency-sensitivity
    class (0-3), ``None`` elsewhere.
    """

    job_type: str = ""
    user: str = ""
    scheduling_class: int | None = None
    input_bytes: int | None = None
    shuffle_bytes: int | None = None
    output_bytes: int | None = None
    priority: int = 0
    map_tasks: int | None = None
    reduce_tasks: int | None = None
    cpu_request: float | None = None
    memory_request: float | None = None


@dataclass(frozen=True)
class JobSpec:
    """A job of a workload: when it is submitted, where, and its tasks."""

    id: str
    submit_s: float
    queue: str
    tasks: tuple[TaskSpec, ...]
    user: str = "user"
    name: str = ""
    am_resources: Resources = DEFAULT_CONTAINER
    features: JobFeatures = field(default_factory=JobFeatures)

    @property
    def maps(self) -> tuple[TaskSpec, ...]:
        return tuple(t for t in self.tasks if t.kind is TaskType.MAP)

    @property
    def reduces(self) -> tuple[TaskSpec, ...]:
        return tuple(t for t in self.tasks if t.kind is TaskType.REDUCE)

    @property
    def total_task_seconds(self) -> float:
        return sum(t.duration_s for t in self.tasks)


@dataclass(frozen=True)
class Workload:
    """Jobs in submission order, and where they came from."""

    jobs: tuple[JobSpec, ...]
    source: str = ""
    skipped_rows: int = 0

    def __len__(self) -> int:
        return len(self.jobs)

    @property
    def span_s(self) -> float:
        return self.jobs[-1].submit_s - self.jobs[0].submit_s if self.jobs else 0.0
