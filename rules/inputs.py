"""What the comparator L(R·c_i, J_i, C_i, S_i) takes: the group's resources R·c_i
(:class:`GroupResources`), its jobs J_i (:class:`JobMix`), its configuration C_i
(:class:`GroupConfig`) and its constraints S_i (:class:`GroupConstraints`).

All frozen data, built once per tuning pass and reused for every candidate
configuration: only :class:`GroupConfig` changes between evaluations.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from yarn_adapt.errors import SettingsError
from yarn_adapt.model.fair import FairResources
from yarn_adapt.model.resources import Resources

ONE_UNIT = Resources(1024, 1)

# (count, seconds) of identical tasks, or (count, seconds, container) when their
# container is not the job's usual ``task``; a stage is a run of these, maps first.
TaskGroupSpec = tuple[int, float] | tuple[int, float, Resources]
StageSpec = tuple[TaskGroupSpec, ...]


def group_shape(group: TaskGroupSpec, default: Resources) -> Resources:
    """The container each task of ``group`` asks for."""
    return group[2] if len(group) == 3 else default


@dataclass(frozen=True)
class RunningTasks:
    """Tasks of a job that hold containers when the mix starts: ``count`` of them end
    ``remaining_s`` from the mix's start. ``stage`` is 0 (maps) or 1 (reduces)."""

    count: int
    remaining_s: float
    stage: int = 0


@dataclass(frozen=True)
class MixJob:
    """One job as the comparator sees it. ``stages``: the tasks *not yet started*, per
    stage (maps, then reduces; a stage starts when the previous one has ended), in
    the order the job runs them. ``task`` is a task's container (unless its group
    names another), ``am`` the ApplicationMaster's. ``am_running``: the AM already
    holds its container (the job is active); ``running``: containers already busy.
    ``deadline_s`` feeds EDF; ``allowed_share``: the share of the group's containers
    on machines the job may use (a placement constraint, §3.2 S^Job), ``None`` for
    anywhere. ``spreads``: per stage, the standard deviation of its tasks' log
    seconds around the stage's durations (a model's estimate; empty: none), which
    :mod:`rules.uncertainty` expands into per-task durations."""

    id: str
    queue: str
    submit_s: float
    stages: tuple[StageSpec, ...]
    task: Resources = ONE_UNIT
    am: Resources = ONE_UNIT
    priority: int = 0
    deadline_s: float | None = None
    allowed_share: float | None = None
    am_running: bool = False
    running: tuple[RunningTasks, ...] = ()
    user: str = "user"
    spreads: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for stage in self.stages:
            for group in stage:
                count, seconds = group[0], group[1]
                if count < 0 or not math.isfinite(seconds) or seconds < 0:
                    raise SettingsError(f"job {self.id}: bad task group ({count}, {seconds})")

    @property
    def task_count(self) -> int:
        return sum(group[0] for stage in self.stages for group in stage)

    @property
    def work_s(self) -> float:
        """Task-seconds left (pending tasks only)."""
        return sum(group[0] * group[1] for stage in self.stages for group in stage)


@dataclass(frozen=True)
class JobMix:
    """J_i: the jobs of one group from ``now_s`` on. ``framework`` names how tasks use
    containers: ``mapreduce`` (a container per task, returned to the scheduler when the
    task ends) or ``reuse`` (a job keeps a container for its next task, as Algorithm
    2 assumes; Tez/Spark executors). ``am_containers``: jobs need an AM container."""

    jobs: tuple[MixJob, ...]
    now_s: float = 0.0
    framework: str = "mapreduce"
    am_containers: bool = True

    def queues(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(job.queue for job in self.jobs))

    @cached_property
    def signature_facts(self) -> tuple[frozenset[Resources], bool, bool]:
        """The container shapes (tasks, and AMs when they take containers), whether
        any job has a deadline, whether any is placement-constrained. Worked out once
        per mix: every candidate of a search asks."""
        shapes = {job.task for job in self.jobs}
        if self.am_containers:
            shapes |= {job.am for job in self.jobs}
        return (
            frozenset(shapes),
            any(job.deadline_s is not None for job in self.jobs),
            any(job.allowed_share is not None for job in self.jobs),
        )

    def for_queues(self, names: Iterable[str]) -> JobMix:
        wanted = set(names)
        jobs = tuple(j for j in self.jobs if j.queue in wanted)
        return JobMix(jobs, self.now_s, self.framework, self.am_containers)


@dataclass(frozen=True)
class GroupResources:
    """R·c_i: what the group may use, and the scheduler's allocation unit
    (``yarn.scheduler.minimum-allocation-*``; requests round up to multiples of it).
    ``nodes``: what each NodeManager offers the group, when known (the scheduler then
    allocates on their heartbeats, every ``heartbeat_s``); their sum must be
    ``total``."""

    total: Resources
    unit: Resources = ONE_UNIT
    nodes: tuple[Resources, ...] = ()
    heartbeat_s: float = 1.0

    def __post_init__(self) -> None:
        if self.nodes and sum(n.memory_mb for n in self.nodes) != self.total.memory_mb:
            raise SettingsError("group resources: the nodes do not add up to the total")

    @classmethod
    def of_containers(
        cls, count: int, container: Resources, per_node: int | None = None
    ) -> GroupResources:
        """``count`` containers; ``per_node`` of them on each node when nodes matter."""
        total = Resources(container.memory_mb * count, container.vcores * count)
        if per_node is None:
            return cls(total, container)
        sizes = [per_node] * (count // per_node) + ([count % per_node] if count % per_node else [])
        nodes = tuple(Resources(container.memory_mb * k, container.vcores * k) for k in sizes)
        return cls(total, container, nodes)

    def scaled(self, count: int) -> GroupResources:
        """The same kind of resources with ``count`` units (nodes dropped unless the
        unit count is unchanged): what the DP asks about other resource levels."""
        if count == self.units:
            return self
        total = Resources(self.unit.memory_mb * count, self.unit.vcores * count)
        return GroupResources(total, self.unit, (), self.heartbeat_s)

    @property
    def units(self) -> int:
        return self.total.memory_mb // self.unit.memory_mb


@dataclass(frozen=True)
class QueueConfig:
    """One leaf queue's configured values, as read from the scheduler configuration
    (no default applied here that YARN would not apply). Capacity: ``capacity`` and
    ``maximum`` are percents of the group; Fair: ``weight``, ``min_resources`` and
    ``max_resources``. ``am_share``: maximum-am-resource-percent (Capacity, 0-1) or
    maxAMShare (Fair, -1 disables); ``user_limit_factor`` and
    ``minimum_user_limit_percent``: the Capacity Scheduler's user limit."""

    name: str
    policy: str
    capacity: float = 0.0
    maximum: float = 100.0
    weight: float = 1.0
    min_resources: FairResources | None = None
    max_resources: FairResources | None = None
    am_share: float = 0.1
    user_limit_factor: float = 1.0
    minimum_user_limit_percent: float = 100.0


@dataclass(frozen=True)
class GroupConfig:
    """C_i: the scheduler kind (``capacity`` or ``fair``), the group's leaf queues, and
    the parent's policy (Fair: ``fair`` or ``drf`` orders the queues)."""

    scheduler: str
    queues: tuple[QueueConfig, ...]
    parent_policy: str = "fair"
    calculator: str = "default"
    multiple_assignments: bool | None = None

    def queue(self, name: str) -> QueueConfig:
        return next(q for q in self.queues if q.name == name)


@dataclass(frozen=True)
class GroupConstraints:
    """S_i: per-queue bounds (fractions of the group's resources; §4.2 uses 10 % and
    90 %) that hold whatever the configuration says."""

    queue_min: Mapping[str, float] = field(default_factory=dict)
    queue_max: Mapping[str, float] = field(default_factory=dict)

    @property
    def bounded(self) -> bool:
        return bool(self.queue_min or self.queue_max)


NO_CONSTRAINTS = GroupConstraints()
