"""Mutable state of one comparator evaluation: queues and jobs as plain slotted
objects (the inner loop touches them for every container), memory in MiB and
vcores as ints, normalised to the allocation unit as YARN does."""

from __future__ import annotations

import math
from collections import deque

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
        self.waiting: deque[JobState] = deque()
        # user -> [memory held, active jobs, AM memory of active jobs]
        self.users: dict[str, list[int]] = {}

    @property
    def has_demand(self) -> bool:
        return self.pending_mem > 0 or self.pending_vc > 0


class TaskRun:
    """``count`` pending tasks of a stage that each run ``seconds`` in a container of
    ``mem`` MiB and ``vc`` vcores (normalised)."""

    __slots__ = ("count", "mem", "seconds", "vc")

    def __init__(self, count: int, seconds: float, mem: int, vc: int) -> None:
        self.count = count
        self.seconds = seconds
        self.mem = mem
        self.vc = vc


class JobState:
    """One job while the mix runs. ``stages`` holds the task runs not started yet,
    current stage first."""

    __slots__ = (
        "am_mem",
        "am_node",
        "am_vc",
        "awaiting_am",
        "cap_mem",
        "deadline",
        "finish",
        "holds_am",
        "index",
        "last_end",
        "pending",
        "priority",
        "queue",
        "running",
        "spec",
        "stages",
        "submit",
        "used_mem",
        "used_vc",
        "user",
        "work_left",
    )

    def __init__(self, index: int, spec: MixJob, queue: QueueState, unit: Resources) -> None:
        self.index = index
        self.spec = spec
        self.queue = queue
        self.submit = spec.submit_s
        self.priority = spec.priority
        self.deadline = INFINITY if spec.deadline_s is None else spec.deadline_s
        self.user = spec.user
        self.am_mem, self.am_vc = normalised(spec.am, unit)
        self.stages: deque[deque[TaskRun]] = deque(
            deque(_run(group, spec.task, unit) for group in stage if group[0] > 0)
            for stage in spec.stages
        )
        self.pending = 0
        self.running = 0
        self.used_mem = 0
        self.used_vc = 0
        self.awaiting_am = False
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
        head = self.stages[0][0]
        return head.mem, head.vc

    def drop_vcores(self) -> None:
        """Only memory is compared and fitted: vcores count as zero."""
        self.am_vc = 0
        for stage in self.stages:
            for run in stage:
                run.vc = 0


def _run(group: TaskGroupSpec, default: Resources, unit: Resources) -> TaskRun:
    memory, vcores = normalised(group_shape(group, default), unit)
    return TaskRun(group[0], group[1], memory, vcores)
