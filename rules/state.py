"""Mutable state of one comparator evaluation: queues and jobs as plain slotted
objects (the inner loop touches them for every container), memory in MiB and
vcores as ints, normalised to the allocation unit as YARN does."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from rules.inputs import MixJob, TaskGroupSpec, group_shape
from yarn_adapt.model.resources import Resources

INFINITY = math.inf


def normalised(request: Resources, unit: Resources) -> tuple[int, int]:
    """YARN rounds a request up to a multiple of the minimum allocation."""
    step = unit.memory_mb
    memory = max(step, -(-request.memory_mb // step) * step)
    return memory, max(unit.vcores, request.vcores)


class QueueState:
    """One leaf queue while the mix runs. ``share``/``ceiling``/``floor`` (MiB and
    vcores) and ``weight`` are the numbers the kernels' bindings resolved."""

    __slots__ = (
        "active",
        "am_fraction",
        "am_used_mem",
        "am_used_vc",
        "asking_am",
        "ceiling_mem",
        "ceiling_vc",
        "fair_mem",
        "fair_vc",
        "floor_mem",
        "floor_vc",
        "name",
        "pending_mem",
        "pending_vc",
        "position",
        "share_mem",
        "share_vc",
        "used_mem",
        "used_vc",
        "user_factor",
        "user_minimum",
        "users",
        "waiting",
        "weight",
    )

    def __init__(self, name: str, position: int) -> None:
        self.name = name
        self.position = position
        self.used_mem = 0
        self.used_vc = 0
        self.pending_mem = 0
        self.pending_vc = 0
        self.am_used_mem = 0
        self.am_used_vc = 0
        self.share_mem = 0.0
        self.share_vc = 0.0
        self.ceiling_mem = INFINITY
        self.ceiling_vc = INFINITY
        self.floor_mem = 0.0
        self.floor_vc = 0.0
        self.weight = 1.0
        self.am_fraction = 0.1
        self.fair_mem = 0.0
        self.fair_vc = 0.0
        self.user_factor = 1.0
        self.user_minimum = 100.0
        self.active: list[JobState] = []
        # the active jobs whose AM is not granted yet, with their ordering keys, in key
        # order: a job's key cannot change while it waits for its AM (it holds nothing
        # and has started no task), so it is worked out once
        self.asking_am: list[tuple[tuple[float, ...], JobState]] = []
        self.waiting: deque[JobState] = deque()
        # user -> [memory held, active jobs, AM memory of active jobs, asking jobs]
        self.users: dict[str, list[int]] = {}

    @property
    def has_demand(self) -> bool:
        return self.pending_mem > 0 or self.pending_vc > 0


# A run of a stage: (count, seconds, memory MiB, vcores) of identical tasks.
TaskRun = tuple[int, float, int, int]


class JobPlan:
    """What a job's evaluations share: its stages as runs normalised to the unit (with
    vcores dropped when only memory is compared), each stage's total demand, and its
    AM's container. Read-only; built once per job, unit and dimension choice."""

    __slots__ = ("am_mem", "am_vc", "demands", "largest", "stages")

    def __init__(self, spec: MixJob, unit: Resources, both_dims: bool) -> None:
        self.am_mem, am_vc = normalised(spec.am, unit)
        self.am_vc = am_vc if both_dims else 0
        self.stages: tuple[tuple[TaskRun, ...], ...] = tuple(
            tuple(_run(group, spec.task, unit, both_dims) for group in stage if group[0] > 0)
            for stage in spec.stages
        )
        # per stage: (tasks, memory, vcores) it asks for in all
        self.demands: tuple[tuple[int, int, int], ...] = tuple(
            (
                sum(run[0] for run in stage),
                sum(run[0] * run[2] for run in stage),
                sum(run[0] * run[3] for run in stage),
            )
            for stage in self.stages
        )
        # the largest task container, per dimension (0, 0 without tasks)
        self.largest = (
            max((run[2] for stage in self.stages for run in stage), default=0),
            max((run[3] for stage in self.stages for run in stage), default=0),
        )


_PLANS: dict[tuple[int, Resources, bool], tuple[MixJob, JobPlan]] = {}
_PLANS_KEPT = 100_000


def plan_of(spec: MixJob, unit: Resources, both_dims: bool) -> JobPlan:
    """``spec``'s plan, built on first use. Keyed by identity (hashing a job's stages
    costs as much as planning them); the entry keeps ``spec`` alive, so an id is
    never reused while its entry stands."""
    key = (id(spec), unit, both_dims)
    found = _PLANS.get(key)
    if found is not None and found[0] is spec:
        return found[1]
    if len(_PLANS) >= _PLANS_KEPT:
        _PLANS.clear()
    plan = JobPlan(spec, unit, both_dims)
    _PLANS[key] = (spec, plan)
    return plan


class JobState:
    """One job while the mix runs. The tasks not started yet are ``stages[stage:]``
    from run ``run`` of the current stage on, ``left`` of that run still to start."""

    __slots__ = (
        "am_mem",
        "am_node",
        "am_vc",
        "asking",
        "awaiting_am",
        "cap_mem",
        "deadline",
        "demands",
        "finish",
        "holds_am",
        "index",
        "largest",
        "last_end",
        "left",
        "pending",
        "priority",
        "queue",
        "run",
        "running",
        "spec",
        "stage",
        "stages",
        "submit",
        "used_mem",
        "used_vc",
        "user",
        "work_left",
    )

    def __init__(self, index: int, spec: MixJob, queue: QueueState, plan: JobPlan) -> None:
        self.index = index
        self.spec = spec
        self.queue = queue
        self.submit = spec.submit_s
        self.priority = spec.priority
        self.deadline = INFINITY if spec.deadline_s is None else spec.deadline_s
        self.user = spec.user
        self.am_mem = plan.am_mem
        self.am_vc = plan.am_vc
        self.stages = plan.stages
        self.demands = plan.demands
        self.largest = plan.largest
        self.stage = 0
        self.run = 0
        self.left = self.stages[0][0][0] if self.stages and self.stages[0] else 0
        self.pending = 0
        self.running = 0
        self.used_mem = 0
        self.used_vc = 0
        self.awaiting_am = False
        self.asking = False
        self.holds_am = False
        self.finish = INFINITY
        self.last_end = -1.0
        self.am_node = -1
        self.cap_mem = INFINITY
        self.work_left = spec.work_s

    @property
    def request(self) -> tuple[int, int]:
        """What the job's next container is: its AM, or its next task's."""
        if self.awaiting_am:
            return self.am_mem, self.am_vc
        head = self.stages[self.stage][self.run]
        return head[2], head[3]

    @property
    def has_stage(self) -> bool:
        """Whether a stage is current (not every stage is over)."""
        return self.stage < len(self.stages)

    @property
    def stage_started(self) -> bool:
        """Whether every task of the current stage has started."""
        return self.run >= len(self.stages[self.stage])

    def next_stage(self) -> None:
        """Drop the current stage (every task of it started)."""
        self.stage += 1
        self.run = 0
        stages = self.stages
        self.left = (
            stages[self.stage][0][0] if self.stage < len(stages) and stages[self.stage] else 0
        )

    def start_task(self) -> TaskRun:
        """The next pending task starts: its run (execution order)."""
        head = self.stages[self.stage][self.run]
        self.left -= 1
        if self.left == 0:
            self.run += 1
            stage = self.stages[self.stage]
            self.left = stage[self.run][0] if self.run < len(stage) else 0
        self.pending -= 1
        self.work_left -= head[1]
        return head


def _run(group: TaskGroupSpec, default: Resources, unit: Resources, both_dims: bool) -> TaskRun:
    memory, vcores = normalised(group_shape(group, default), unit)
    return group[0], group[1], memory, vcores if both_dims else 0


@dataclass(frozen=True)
class Estimate:
    """The comparator's answer: mean latency over the mix's jobs (infinite if a job
    can never run under the configuration) and each job's latency; over several
    samples, their means and ``samples`` each one's mean latency."""

    mean_latency_s: float
    latencies: tuple[float, ...]
    unfinished: int
    samples: tuple[float, ...] = ()

    @property
    def finite(self) -> bool:
        return self.unfinished == 0
