"""Mutable run-time state of one simulation: applications, queues, container batches,
and the interface every scheduler model implements.

Hot-path objects use ``__slots__`` and plain ints (MiB, vcores): a run touches them
millions of times. Containers are never objects of their own: a *batch* is the
containers one heartbeat granted to one job for identical tasks, which start and end
together.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.workload import JobSpec, TaskSpec

MAP_STAGE = 0
REDUCE_STAGE = 1

# What ``SchedulerModel.choose`` returns when it grants nothing.
NO_DEMAND = 0  # nothing any node could serve now (no demand, or all of it over limits)
NO_FIT = 1  # some demand within limits does not fit this node; other nodes may serve it


class TaskGroup:
    """``count`` pending tasks of one stage asking for the same container.

    Either alike, ``duration`` seconds each (``tasks`` is ``None``), or the tasks
    ``tasks[offset:offset + count]`` of the job, each with its own duration: a
    stage of a million tasks is one group, not a million objects.
    """

    __slots__ = ("count", "duration", "memory", "offset", "tasks", "vcores")

    def __init__(
        self,
        count: int,
        duration: float,
        memory: int,
        vcores: int,
        tasks: Sequence[TaskSpec] | None = None,
        offset: int = 0,
    ) -> None:
        self.count = count
        self.duration = duration
        self.memory = memory
        self.vcores = vcores
        self.tasks = tasks
        self.offset = offset


def group_tasks(tasks: Sequence[TaskSpec]) -> deque[TaskGroup]:
    """The tasks in runs asking for the same container, order kept: a run whose
    tasks all last the same is one group of alike tasks, any other run one group
    over its tasks."""
    groups: deque[TaskGroup] = deque()
    total = len(tasks)
    start = 0
    while start < total:
        first = tasks[start]
        shape = first.resources
        memory, vcores = shape.memory_mb, shape.vcores
        duration = first.duration_s
        alike = True
        end = start + 1
        while end < total:
            task = tasks[end]
            if task is not first:
                res = task.resources
                if res is not shape and (res.memory_mb != memory or res.vcores != vcores):
                    break
                if alike and task.duration_s != duration:
                    alike = False
            end += 1
        if alike:
            groups.append(TaskGroup(end - start, duration, memory, vcores))
        else:
            groups.append(TaskGroup(end - start, 0.0, memory, vcores, tasks, start))
        start = end
    return groups


# Shared by every app that has no stage running (a deque costs 760 bytes and a
# datacenter day has hundreds of thousands of apps); never added to: an app gets
# deques of its own when a stage begins (the engine's _enter_stage).
NO_TASKS: deque[TaskGroup] = deque()

UNLIMITED = float("inf")
ORDER_SPAN = 1 << 40  # more apps than any run has


class QueueNode:
    """A queue of either scheduler.

    ``used``: what its containers hold; ``pending``: what its schedulable apps still
    ask for; ``demand_apps``: how many schedulable apps below it ask for anything.
    ``guar``/``max``: the Capacity Scheduler's resolved capacity and maximum
    capacity, or the Fair Scheduler's min and max resources. ``fair``: the Fair
    Scheduler's instantaneous fair share. ``running_apps``: schedulable apps below.
    """

    __slots__ = (
        "abs_capacity",
        "children",
        "demand_apps",
        "fair_mem",
        "fair_vc",
        "guar_mem",
        "guar_vc",
        "max_mem",
        "max_running",
        "max_vc",
        "name",
        "name_rank",
        "parent",
        "path",
        "pending_mem",
        "pending_vc",
        "policy",
        "position",
        "running_apps",
        "stopped",
        "used_mem",
        "used_vc",
        "weight",
    )

    def __init__(self, path: str, parent: QueueNode | None, position: int) -> None:
        self.path = path
        self.name = path.rsplit(".", 1)[-1]
        self.name_rank = 0  # place among its siblings by name (Fair comparators)
        self.parent = parent
        self.position = position
        self.children: list[QueueNode] = []
        self.used_mem = 0
        self.used_vc = 0
        self.pending_mem = 0
        self.pending_vc = 0
        self.demand_apps = 0
        self.running_apps = 0
        self.guar_mem = 0.0
        self.guar_vc = 0.0
        self.max_mem = UNLIMITED
        self.max_vc = UNLIMITED
        self.abs_capacity = 0.0
        self.fair_mem = 0.0
        self.fair_vc = 0.0
        self.weight = 1.0
        self.max_running = UNLIMITED
        self.policy = ""
        self.stopped = False

    @property
    def is_leaf(self) -> bool:
        return False

    def lineage(self) -> Iterator[QueueNode]:
        """This queue, then each ancestor up to the root."""
        node: QueueNode | None = self
        while node is not None:
            yield node
            node = node.parent


class LeafQueue(QueueNode):
    """A leaf: its applications, those asking for containers, and per-user and AM
    bookkeeping. ``waiting``: admitted apps not yet schedulable (Capacity: not
    activated under the AM limit; Fair: over maxRunningApps)."""

    __slots__ = (
        "am_percent",
        "am_used_mem",
        "am_used_vc",
        "apps",
        "by_ask",
        "chain",
        "demand",
        "limit_for_asking",
        "limit_for_guar",
        "limit_for_used",
        "limit_value",
        "max_apps",
        "minimum_user_limit",
        "ordered",
        "user_limit_factor",
        "users",
        "waiting",
    )

    def __init__(self, path: str, parent: QueueNode | None, position: int) -> None:
        super().__init__(path, parent, position)
        self.apps: dict[int, SimApp] = {}
        self.demand: dict[int, SimApp] = {}
        self.ordered: list[tuple[int, SimApp]] = []  # (SimApp.order, app) of asking apps
        self.by_ask: dict[tuple[str, int, int], AskQueue] = {}
        self.waiting: list[SimApp] = []
        self.users: dict[str, UserUsage] = {}
        self.am_used_mem = 0
        self.am_used_vc = 0
        self.am_percent = 0.0
        self.user_limit_factor = 1.0
        self.minimum_user_limit = 100.0
        self.max_apps = UNLIMITED
        self.chain: tuple[QueueNode, ...] = ()
        # The Capacity Scheduler's user limit for a leaf of one user, and what it
        # was computed from (it changes only with them).
        self.limit_for_used = -1
        self.limit_for_guar = -1.0
        self.limit_for_asking = False
        self.limit_value = 0.0

    @property
    def is_leaf(self) -> bool:
        return True

    def link(self) -> None:
        self.chain = tuple(self.lineage())

    def user(self, name: str) -> UserUsage:
        found = self.users.get(name)
        if found is None:
            found = self.users[name] = UserUsage()
        return found


class AskQueue:
    """The asking apps of one FIFO leaf that belong to one user and ask for one
    container size, in the leaf's order (their ``SimApp.order`` beside them)."""

    __slots__ = ("apps", "keys", "memory", "usage", "user", "vcores")

    def __init__(self, user: str, usage: UserUsage, memory: int, vcores: int) -> None:
        self.user = user
        self.usage = usage
        self.memory = memory
        self.vcores = vcores
        self.keys: list[int] = []
        self.apps: list[SimApp] = []


class UserUsage:
    """One user's share of a leaf (Capacity Scheduler user limits). ``demand_apps``:
    its schedulable apps that ask for containers; ``waiting_apps``: its apps
    waiting for activation (their AMs' asks are pending)."""

    __slots__ = ("am_mem", "am_vc", "demand_apps", "used_mem", "used_vc", "waiting_apps")

    def __init__(self) -> None:
        self.used_mem = 0
        self.used_vc = 0
        self.am_mem = 0
        self.am_vc = 0
        self.demand_apps = 0
        self.waiting_apps = 0


class SimApp:
    """One job while it runs through the simulated RM."""

    __slots__ = (
        "accepted",
        "ahead",
        "am_batch",
        "am_mem",
        "am_vc",
        "awaiting_am",
        "batches",
        "filed",
        "finish_s",
        "groups",
        "index",
        "job",
        "last_end",
        "leaf",
        "order",
        "pending_count",
        "pending_mem",
        "pending_vc",
        "plan",
        "priority",
        "reason",
        "reduces",
        "schedulable",
        "stage",
        "stage_left",
        "start_s",
        "submit_s",
        "usage",
        "used_mem",
        "used_vc",
        "user",
    )

    def __init__(self, index: int, job: JobSpec, leaf: LeafQueue | None) -> None:
        self.index = index
        self.job = job
        self.leaf = leaf
        self.user = job.user
        self.priority = job.features.priority
        # FIFO order (higher priority, then submission) as one integer.
        self.order = -self.priority * ORDER_SPAN + index
        self.submit_s = job.submit_s
        self.am_mem = job.am_resources.memory_mb
        self.am_vc = job.am_resources.vcores
        self.awaiting_am = False
        # Accepted by the RM before the simulation began (adopted): a queue's
        # admission limits, which YARN checks at submission, do not apply again.
        self.accepted = False
        self.am_batch: Batch | None = None
        # The running stage's pending groups and the reduces to come: NO_TASKS
        # until the app's first stage begins and again once it ends.
        self.groups: deque[TaskGroup] = NO_TASKS
        self.reduces: deque[TaskGroup] = NO_TASKS
        self.plan: tuple[deque[TaskGroup], deque[TaskGroup]] | None = None
        self.filed: AskQueue | None = None
        self.usage: UserUsage | None = None  # the user's usage in the leaf, once known
        self.stage = MAP_STAGE
        self.stage_left = 0
        self.ahead = 0
        self.pending_count = 0
        self.pending_mem = 0
        self.pending_vc = 0
        self.used_mem = 0
        self.used_vc = 0
        self.batches: dict[int, Batch] = {}
        self.schedulable = False
        self.start_s: float | None = None
        self.finish_s: float | None = None
        self.last_end: float | None = None
        self.reason = ""

    @property
    def request(self) -> tuple[int, int]:
        """The container size of the app's next grant."""
        if self.awaiting_am:
            return self.am_mem, self.am_vc
        head = self.groups[0]
        return head.memory, head.vcores

    def head_run(self, most: int) -> int:
        """Pending tasks at the head that ask for the same container as the first,
        counted up to ``most``: one grant run can take them whatever their
        durations."""
        groups = self.groups
        head = groups[0]
        run = head.count
        if run >= most or len(groups) == 1:
            return min(run, most)
        for group in groups:
            if group is head:
                continue
            if group.memory != head.memory or group.vcores != head.vcores:
                break
            run += group.count
            if run >= most:
                return most
        return run


def split_stages(tasks: Sequence[TaskSpec]) -> tuple[deque[TaskGroup], deque[TaskGroup]]:
    """The map groups and the reduce groups of ``tasks``."""
    map_kind = TaskType.MAP
    maps = 0
    total = len(tasks)
    while maps < total and tasks[maps].kind is map_kind:
        maps += 1
    if maps == total:
        return group_tasks(tasks), deque()
    rest = tasks[maps:]
    if all(t.kind is not map_kind for t in rest):  # maps, then reduces
        return group_tasks(tasks[:maps]), group_tasks(rest)
    return (
        group_tasks([t for t in tasks if t.kind is map_kind]),
        group_tasks([t for t in tasks if t.kind is not map_kind]),
    )


class Batch:
    """Containers granted together: same job, node, moment, duration and size.

    Without preemption, batches of one job and stage whose ends the same node
    heartbeat reports one after the other are folded into one (``reports`` of
    them; ``end`` is the latest): nothing can tell them apart (see
    :mod:`yarn_adapt.sim.engine`, "Report runs")."""

    __slots__ = (
        "app",
        "count",
        "duration",
        "end",
        "id",
        "is_am",
        "last_run",
        "memory",
        "next",
        "next_run",
        "node",
        "reports",
        "run_tail",
        "stage",
        "start",
        "vcores",
    )

    def __init__(
        self,
        batch_id: int,
        app: SimApp,
        node: int,
        count: int,
        duration: float,
        memory: int,
        vcores: int,
        start: float,
        is_am: bool,
    ) -> None:
        self.id = batch_id
        self.app = app
        self.node = node
        self.count = count
        self.duration = duration
        self.memory = memory
        self.vcores = vcores
        self.start = start
        self.end = start + duration
        self.is_am = is_am
        self.stage = app.stage
        self.reports = 1
        # Reports due at one moment are runs of batches linked in order: ``next``
        # within a run; a run's first batch knows its last (``run_tail``) and the
        # next run's first (``next_run``); the moment's first pending run also
        # knows the last pending run (``last_run``).
        self.next: Batch | None = None
        self.run_tail: Batch | None = None
        self.next_run: Batch | None = None
        self.last_run: Batch | None = None


@dataclass(frozen=True)
class Claim:
    """Preemption wants ``memory``/``vcores`` back from the apps of ``leaf``."""

    leaf: LeafQueue
    memory: int
    vcores: int


class SchedulerModel(ABC):
    """A scheduler's decisions, driven by the engine. The engine owns time, nodes and
    containers; the model owns queues and answers *which app gets the next container
    on a node with this much free*."""

    memory_only: bool = False
    caps_heartbeat_amount: bool = False  # keep_assigning looks at what was granted

    def __init__(self, leaves: Sequence[LeafQueue], root: QueueNode) -> None:
        self.leaves = tuple(leaves)
        self.root = root
        self.cluster_mem = 0
        self.cluster_vc = 0

    # ---------------------------------------------------------------- lifecycle

    @abstractmethod
    def find_leaf(self, queue: str) -> LeafQueue | None: ...

    @abstractmethod
    def admit(self, app: SimApp) -> str:
        """Take a submitted app; the reason it is refused, or ``""``."""

    @abstractmethod
    def remove(self, app: SimApp) -> None:
        """The app ended; it may let waiting apps become schedulable."""

    @abstractmethod
    def adopt_running(self, app: SimApp) -> None:
        """An app whose AM already runs when the simulation starts (snapshot start):
        schedulable at once, whatever the limits say now."""

    def resize(self, memory: int, vcores: int) -> None:
        self.cluster_mem = memory
        self.cluster_vc = vcores

    # ---------------------------------------------------------------- decisions

    @abstractmethod
    def choose(self, free_mem: int, free_vc: int) -> SimApp | int:
        """The app that gets the next container on a node with this much free, or
        ``NO_DEMAND`` / ``NO_FIT``."""

    def repeat_count(self, app: SimApp, free_mem: int, free_vc: int, most: int) -> int:
        """How many containers in a row (at most ``most``) :meth:`choose` would give
        the app it just chose on a node with this much free. 1 is always right."""
        return 1

    @abstractmethod
    def heartbeat_limit(self) -> int:
        """How many containers one node heartbeat may grant."""

    def keep_assigning(self, granted: tuple[int, int], start_free: tuple[int, int]) -> bool:
        """Whether a heartbeat that has granted ``granted`` (MiB, vcores) on a node
        that had ``start_free`` unallocated may grant another container."""
        return True

    @abstractmethod
    def preemption_claims(self, now: float) -> list[Claim]:
        """What to take back now, per victim leaf (empty when nothing is starved)."""

    @property
    @abstractmethod
    def default_monitor_interval_s(self) -> float: ...

    # ---------------------------------------------------------------- accounting

    def make_schedulable(self, app: SimApp) -> None:
        app.schedulable = True
        self._add_pending_to_queues(app, app.pending_mem, app.pending_vc)
        if app.pending_count > 0:
            self._flip_demand(app, True)

    def drop_schedulable(self, app: SimApp) -> None:
        if not app.schedulable:
            return
        if app.pending_count > 0:
            self._flip_demand(app, False)
        self._add_pending_to_queues(app, -app.pending_mem, -app.pending_vc)
        app.schedulable = False

    def add_pending(self, app: SimApp, count: int, memory: int, vcores: int) -> None:
        had = app.pending_count > 0
        app.pending_count += count
        app.pending_mem += memory
        app.pending_vc += vcores
        if not app.schedulable:
            return
        assert app.leaf is not None
        for queue in app.leaf.chain:
            queue.pending_mem += memory
            queue.pending_vc += vcores
        has = app.pending_count > 0
        if had != has:
            self._flip_demand(app, has)

    def request_changed(self, app: SimApp) -> None:
        """The container ``app`` asks for next may have changed while it asks (a
        task group ended, a killed task came back first); models that index asks by
        size refile it."""
        return

    def charge(self, app: SimApp, memory: int, vcores: int, is_am: bool) -> None:
        """Containers of ``app`` granted (positive) or released (negative)."""
        app.used_mem += memory
        app.used_vc += vcores
        assert app.leaf is not None
        for queue in app.leaf.chain:
            queue.used_mem += memory
            queue.used_vc += vcores

    def _add_pending_to_queues(self, app: SimApp, memory: int, vcores: int) -> None:
        assert app.leaf is not None
        for queue in app.leaf.chain:
            queue.pending_mem += memory
            queue.pending_vc += vcores

    def _flip_demand(self, app: SimApp, has_demand: bool) -> None:
        leaf = app.leaf
        assert leaf is not None
        step = 1 if has_demand else -1
        for queue in leaf.chain:
            queue.demand_apps += step
        if has_demand:
            leaf.demand[app.index] = app
        else:
            del leaf.demand[app.index]
        self._demand_changed(app, has_demand)

    @abstractmethod
    def _demand_changed(self, app: SimApp, has_demand: bool) -> None:
        """An app started or stopped asking for containers (models keeping their
        own ordered structures update them here)."""
