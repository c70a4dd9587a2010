"""The discrete-event core: simulated time, nodes, heartbeats and containers.

Heartbeats. Each NodeManager heartbeats every ``heartbeat_interval_s`` at its own
phase (drawn from the seed). Only heartbeats that can matter are simulated:

* a node whose containers ended heartbeats once to report them, at its next
  heartbeat after they end (or out of band, at the end itself, with
  ``SimulationOptions.out_of_band_heartbeats``): the RM frees their resources and
  schedules on that node in the same heartbeat (several ends within one interval
  share it);
* when demand the scheduler could serve exists and nodes have room, a *scan*
  visits the nodes with room in heartbeat order, one heartbeat at a time, until
  the scheduler says nothing else can be served now (every remaining ask is over a
  queue/user/AM limit) or a full round of nodes granted nothing. New demand (an
  arrival, an AM asking for its tasks, the reduce stage, a kill) restarts it.

Idle heartbeats (no room, or nothing to serve) are never simulated, so a day of a
600-node cluster costs events in proportion to containers, not to time. Grants are
made in runs: after the scheduler picks an app, the model says how many containers
in a row it would pick the same app (``SchedulerModel.repeat_count``), and those are
granted at once -- the same outcome as one at a time (tests/sim/test_batching.py).

Task ends. The job learns of a task's end when the RM does, at that heartbeat (at
the end itself with ``SimulationOptions.out_of_band_heartbeats``, as YARN's
NodeManagers report finished containers out of band): the
reduce stage starts then, standing in for the MapReduce AM's own allocate
heartbeat (also at most one interval). The job's recorded finish is still its
last task's true end (+ ``am_teardown_s``). ``CONTINUOUS`` mode has no heartbeats:
grants happen once every event of the instant has been handled, task ends are
known at once, and no per-heartbeat assignment limit applies.

AM allocate calls (``SimulationOptions.am_allocate_interval_s``). An AM built on
AMRMClient sends its outstanding ask as an absolute count on an allocate call every
interval, and lowers that count only when it processes the containers a call
returned; the new count reaches the RM on the call after. Containers the RM grants
between two calls are thus asked for again: the RM resets its count to the AM's
stale one and grants *surplus* containers, which the AM (the distributed shell's
``onContainersAllocated``) releases on its next call -- they hold resources and
grant slots meanwhile. :class:`_AskProtocol` keeps that count per app; surplus
containers are pending groups and batches of their own, never tasks of the job.

Container starts (``SimulationOptions.container_start_spread_s``). An AM starts
the containers of one grant one after another, so they end apart too, and each end
is its own (out-of-band) heartbeat with less room than all of them together would
free. With a spread, a grant of k containers becomes k batches whose durations grow
by the spread.

Not modelled: container launch and localisation delays (fold them into task
durations or ``am_startup_s``), data locality, node failures, AM retries.
"""

from __future__ import annotations

import heapq
import math
import random
from bisect import bisect_left, bisect_right, insort
from collections import deque
from collections.abc import Sequence
from types import MappingProxyType

from yarn_adapt.errors import SettingsError
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.resources import Resources
from yarn_adapt.model.workload import JobSpec, Workload
from yarn_adapt.sim.hooks import (
    CapacityChange,
    HeartbeatNodePlacement,
    LongRunningContainer,
    PlacementRequest,
)
from yarn_adapt.sim.results import (
    Allocation,
    JobResult,
    JobStatus,
    SimulationResult,
    UsageSeries,
    Utilisation,
    read_only,
)
from yarn_adapt.sim.spec import ClusterSpec, SimulationOptions
from yarn_adapt.sim.start import JobInProgress, RunningContainer, SimulationStart

from .preemption import PreemptionMarks, select_victims
from .state import (
    MAP_STAGE,
    NO_DEMAND,
    NO_TASKS,
    REDUCE_STAGE,
    Batch,
    SchedulerModel,
    SimApp,
    TaskGroup,
    split_stages,
)

# Event kinds, most frequent first.
_FINISH = 0
_HEARTBEAT = 1
_SUBMIT = 2
_AM_READY = 3
_JOB_END = 4
_SAMPLE = 5
_MONITOR = 6
_CAPACITY = 7
_LRA_START = 8
_LRA_END = 9
_SWEEP = 10
_AM_CALL = 11

# A pending group or batch of surplus containers (see _AskProtocol).
_SURPLUS = -1.0
_SURPLUS_STAGE = -1

# An event due at an instant is one integer: its kind, shifted, and its argument
# (an app, node, capacity change or LRA index).
_KIND_SHIFT = 40
_ARG_MASK = (1 << _KIND_SHIFT) - 1
_MORE = 2  # a node stopped granting (full, heartbeat limit, no fit): others may serve


class _NodeView:
    """The ClusterView a placement policy sees."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @property
    def node_ids(self) -> Sequence[str]:
        return self._engine.node_ids

    def free(self, node_id: str) -> Resources:
        n = self._engine.node_index[node_id]
        return Resources(self._engine.nodes[n].free_mem, self._engine.nodes[n].free_vc)

    def fits(self, node_id: str, resources: Resources) -> bool:
        n = self._engine.node_index[node_id]
        return self._engine.fits(n, resources.memory_mb, resources.vcores)


class Engine:
    def __init__(
        self,
        workload: Workload,
        model: SchedulerModel,
        cluster: ClusterSpec,
        options: SimulationOptions,
        start: SimulationStart | None = None,
    ) -> None:
        self.model = model
        self.options = options
        self.now = start.time_s if start else 0.0
        self.rng = random.Random(options.seed)
        self.continuous = options.continuous
        self._out_of_band = options.out_of_band_heartbeats
        self._asks: dict[int, _AskProtocol] | None = (
            {} if options.am_allocate_interval_s is not None else None
        )
        self.interval = options.heartbeat_interval_s
        self.min_mem = cluster.minimum_allocation.memory_mb
        self.min_vc = cluster.minimum_allocation.vcores
        self._normalised: dict[tuple[int, int], tuple[int, int]] = {}
        self.memory_only = model.memory_only
        self._times: list[float] = []  # a heap of the moments that have something due
        self._reports: dict[float, Batch] = {}  # moment -> its first pending run
        self._events_due: dict[float, _Events] = {}
        self._arrivals: list[tuple[float, int]] = []  # (time, app): submissions, in order
        self.events = 0
        self._init_nodes(cluster)
        self._init_hooks()
        self._track_batches = options.preemption.enabled  # only preemption looks at them
        self._spread = options.container_start_spread_s
        self._record_allocations = options.record_allocations
        self._next_batch = 0
        self._granted: list[Batch] = []  # this heartbeat's grants, first first
        self._grants_by_duration: dict[float, Batch] = {}
        self._grants_by_key: dict[tuple[int, int, float, int, int], Batch] = {}
        self.apps: list[SimApp] = []
        self.open_jobs = 0
        self._init_accounting()
        self._heartbeat_limit = (1 << 30) if self.continuous else model.heartbeat_limit()
        self._marks = PreemptionMarks(options.preemption.max_wait_before_kill_s)
        self.preempted = 0
        self.allocations: list[Allocation] = []
        # Apps are numbered in submission order, as YARN numbers applications
        # (the Capacity Scheduler's FIFO orders by that number).
        progress = sorted(start.jobs, key=lambda p: p.job.submit_s) if start else []
        adopted = [self._new_app(p.job) for p in progress]
        for job in sorted(workload.jobs, key=lambda j: j.submit_s):
            index = self._new_app(job).index
            self._arrivals.append((max(job.submit_s, self.now), index))
        model.resize(self.total_mem, self.total_vc)
        for app, observed in zip(adopted, progress, strict=True):
            self._adopt(app, observed)
        self._schedule_background()

    # ------------------------------------------------------------------ setup

    def _init_nodes(self, cluster: ClusterSpec) -> None:
        provider = self.options.hooks.node_capacity
        self.node_ids = [n.id for n in cluster.nodes]
        self.node_index = {node_id: i for i, node_id in enumerate(self.node_ids)}
        visible = [provider.initial_capacity(n.id, n.resources) for n in cluster.nodes]
        self.total_mem = sum(v.memory_mb for v in visible)
        self.total_vc = sum(v.vcores for v in visible)
        self.largest_mem = max(n.resources.memory_mb for n in cluster.nodes)
        self.largest_vc = max(n.resources.vcores for n in cluster.nodes)
        count = len(self.node_ids)
        phases = [self.rng.random() * self.interval for _ in range(count)]
        self.nodes = [
            _Node(v.memory_mb, v.vcores, phase) for v, phase in zip(visible, phases, strict=True)
        ]
        order = sorted(range(count), key=lambda n: (phases[n], n))
        self.node_at_rank = order
        self.rank_of = [0] * count
        for rank, n in enumerate(order):
            self.rank_of[n] = rank
        self.rank_phase = [phases[n] for n in order]
        self.free_ranks: list[int] = []
        for n in range(count):
            self._update_open(n)
        self.chain_node = -1
        self.chain_idle = 0
        self._sweep_pending = False

    def _init_hooks(self) -> None:
        hooks = self.options.hooks
        self.placement = hooks.placement
        self._default_placement = isinstance(hooks.placement, HeartbeatNodePlacement)
        self._view = _NodeView(self)
        self.capacity_changes: list[CapacityChange] = sorted(
            hooks.node_capacity.capacity_changes(), key=lambda c: c.time_s
        )
        self.lras: list[LongRunningContainer] = list(hooks.long_running.containers())
        named = [c.node_id for c in self.capacity_changes] + [c.node_id for c in self.lras]
        for node_id in named:
            if node_id not in self.node_index:
                raise _unknown_node(node_id)

    def _init_accounting(self) -> None:
        self.used_mem = 0
        self.used_vc = 0
        self._area_mem = 0.0
        self._area_vc = 0.0
        self._cap_area_mem = 0.0
        self._cap_area_vc = 0.0
        self._accounted_to = self.now
        self.sample_times: list[float] = []
        self.sample_used: list[tuple[list[int], list[int], int, int]] = []

    def _new_app(self, job: JobSpec) -> SimApp:
        app = SimApp(len(self.apps), job, self.model.find_leaf(job.queue))
        if self.options.am_containers:
            app.am_mem, app.am_vc = self._normalise(app.am_mem, app.am_vc)
        else:
            app.am_mem = app.am_vc = 0
        self.apps.append(app)
        self.open_jobs += 1
        return app

    def _normalise(self, memory: int, vcores: int) -> tuple[int, int]:
        """YARN rounds requests up to multiples of the minimum allocation."""
        known = self._normalised.get((memory, vcores))
        if known is None:
            step = self.min_mem
            known = (max(step, -(-memory // step) * step), max(self.min_vc, vcores))
            self._normalised[(memory, vcores)] = known
        return known

    def _schedule_background(self) -> None:
        for index, change in enumerate(self.capacity_changes):
            self._push(max(change.time_s, self.now), _CAPACITY, index)
        for index, lra in enumerate(self.lras):
            self._push(max(lra.start_s, self.now), _LRA_START, index)
            if lra.end_s is not None:
                self._push(max(lra.end_s, self.now), _LRA_END, index)
        self._push(self.now, _SAMPLE, 0)
        if self.options.preemption.enabled:
            self._push(self.now + self._monitor_interval, _MONITOR, 0)

    @property
    def _monitor_interval(self) -> float:
        given = self.options.preemption.monitor_interval_s
        return self.model.default_monitor_interval_s if given is None else given

    # ------------------------------------------------------------------ snapshot start

    def _adopt(self, app: SimApp, progress: JobInProgress) -> None:
        if progress.am_started_s is None:
            app.accepted = True
            self._push(self.now, _SUBMIT, app.index)
            return
        if app.leaf is None:
            self._reject(app, f"unknown or non-leaf queue {progress.job.queue!r}")
            return
        app.start_s = progress.am_started_s
        self.model.adopt_running(app)
        if app.am_mem > 0:
            node = self._forced_node(progress.am_node_id, app.am_mem, app.am_vc)
            app.am_batch = self._occupy(app, node, (0.0, app.am_mem, app.am_vc), 1, True)
        maps, reduces = self._stages(progress.job)
        running = [self._adopt_container(app, c) for c in progress.running]
        running_maps = sum(1 for stage in running if stage == MAP_STAGE)
        if maps or running_maps:
            app.ahead = len(running) - running_maps
            self._enter_stage(app, MAP_STAGE, maps, reduces, running_maps)
        else:
            self._enter_stage(app, REDUCE_STAGE, reduces, deque(), len(running))

    def _adopt_container(self, app: SimApp, container: RunningContainer) -> int:
        task = container.task
        memory, vcores = self._normalise(task.resources.memory_mb, task.resources.vcores)
        node = self._forced_node(container.node_id, memory, vcores)
        app.stage = MAP_STAGE if task.kind is TaskType.MAP else REDUCE_STAGE
        batch = self._occupy(app, node, (task.duration_s, memory, vcores), 1, False)
        batch.start = container.started_s
        batch.end = max(self.now, container.started_s + task.duration_s)
        self._push_report(batch)
        return batch.stage

    def _forced_node(self, node_id: str | None, memory: int, vcores: int) -> int:
        named = self.node_index.get(node_id) if node_id is not None else None
        if named is not None and self.fits(named, memory, vcores):
            return named
        for n in range(len(self.node_ids)):
            if self.fits(n, memory, vcores):
                return n
        return named if named is not None else 0

    # ------------------------------------------------------------------ event loop

    def _push(self, time: float, kind: int, arg: int) -> None:
        due = self._events_due.get(time)
        if due is None:
            if time not in self._reports:
                heapq.heappush(self._times, time)
            due = self._events_due[time] = _Events()
        due.items.append(kind << _KIND_SHIFT | arg)

    def _push_report(self, batch: Batch) -> None:
        """A batch's end reaches the RM with its node's next heartbeat; such reports
        come before every other event of the same moment, so that heartbeat sees
        all of them."""
        self._file_report(batch, self._report_time(batch.node, batch.end), False)

    def _file_report(self, batch: Batch, time: float, fold: bool) -> bool:
        """File the batch's report for ``time``, after those filed before (module
        docstring, "Report runs"): in the last pending run of that moment if that
        run is the same node's, else as a new run. With ``fold``, a batch of the
        same job, stage and size as the run's last one joins it instead (True)."""
        first = self._reports.get(time)
        if first is None:
            if time not in self._events_due:
                heapq.heappush(self._times, time)
            batch.run_tail = batch.last_run = batch
            self._reports[time] = batch
            return False
        run = first.last_run
        assert run is not None
        tail = run.run_tail
        assert tail is not None
        if run.node != batch.node:
            run.next_run = batch
            batch.run_tail = first.last_run = batch
            return False
        if (
            fold
            and tail.app is batch.app
            and tail.stage == batch.stage
            and tail.memory == batch.memory
            and tail.vcores == batch.vcores
        ):
            tail.count += batch.count
            tail.reports += 1
            if batch.end > tail.end:
                tail.end = batch.end
            return True
        tail.next = run.run_tail = batch
        return False

    def _report_time(self, n: int, end: float) -> float:
        if self.continuous or self._out_of_band:
            return end
        phase = self.nodes[n].phase
        interval = self.interval
        time = phase + math.ceil((end - phase) / interval) * interval
        return time + interval if time < end else time

    def run(self) -> SimulationResult:
        """Handle events in (time, sequence) order until every job is done or the
        horizon. Submissions wait in a list of their own, in order, rather than in
        the heap (which they would make deeper for the whole run); each event is
        the earlier of the two heads, as if they shared the heap."""
        self._loop()
        self._account()
        self._sample()
        return self._result()

    def _loop(self) -> None:
        """Each moment in turn; at a moment, its report runs first, then the
        submissions due then, then its other events, each in the order they were
        filed (what one heap ordered by (time, sequence) gave, reports sorting
        first). A moment leaves the heap when its last item is taken; anything
        filed for it meanwhile puts it back, to be handled next."""
        times = self._times
        reports = self._reports
        arrivals = self._arrivals
        horizon = math.inf if self.options.horizon_s is None else self.options.horizon_s
        next_arrival = 0
        while self.open_jobs > 0:
            time = times[0] if times else math.inf
            if next_arrival < len(arrivals):
                arrival, index = arrivals[next_arrival]
                if arrival < time or (arrival == time and arrival not in reports):
                    if arrival > horizon:
                        self.now = horizon
                        return
                    next_arrival += 1
                    self.now = arrival
                    self.events += 1
                    self._on_submit(self.apps[index])
                    continue
            if not times:
                return
            if time > horizon:
                self.now = horizon
                return
            self.now = time
            self.events += 1
            head = reports.get(time)
            if head is not None:
                following = head.next_run
                if following is None:
                    del reports[time]
                    if time not in self._events_due:
                        heapq.heappop(times)
                else:
                    following.last_run = head.last_run
                    reports[time] = following
                # A run's first batch points at itself while it waits; no cycle may
                # outlive it (the collector is off during a run).
                head.run_tail = head.last_run = head.next_run = None
                self._on_reports(head)
                continue
            due = self._events_due[time]
            event = due.items[due.taken]
            due.taken += 1
            if due.taken == len(due.items):
                del self._events_due[time]
                heapq.heappop(times)
            kind, arg = event >> _KIND_SHIFT, event & _ARG_MASK
            if kind == _HEARTBEAT:
                self._on_heartbeat(arg)
            else:
                self._on_other(kind, arg)

    def _on_other(self, kind: int, arg: int) -> None:
        if kind == _SUBMIT:
            self._on_submit(self.apps[arg])
        elif kind == _AM_READY:
            self._begin_tasks(self.apps[arg])
            self._start_am_calls(self.apps[arg])
        elif kind == _AM_CALL:
            self._am_call(self.apps[arg])
        elif kind == _JOB_END:
            self._end_job(self.apps[arg], self.now)
        elif kind == _SAMPLE:
            self._sample()
            self._push(self.now + self.options.sample_interval_s, _SAMPLE, 0)
        elif kind == _MONITOR:
            self._preempt()
            self._push(self.now + self._monitor_interval, _MONITOR, 0)
        elif kind == _CAPACITY:
            self._change_capacity(self.capacity_changes[arg])
        elif kind == _SWEEP:
            self._sweep_pending = False
            self._sweep()
        elif kind == _LRA_START:
            self._start_lra(self.lras[arg])
        else:
            self._end_lra(self.lras[arg])

    # ------------------------------------------------------------------ jobs

    def _on_submit(self, app: SimApp) -> None:
        if app.leaf is None:
            self._reject(app, f"unknown or non-leaf queue {app.job.queue!r}")
            return
        oversized = self._oversized(app)
        if oversized:
            self._reject(app, oversized)
            return
        if app.am_mem > 0:
            app.awaiting_am = True
        reason = self.model.admit(app)
        if reason:
            app.awaiting_am = False
            self._reject(app, reason)
            return
        if app.awaiting_am:
            self.model.add_pending(app, 1, app.am_mem, app.am_vc)
            self._kick()
        else:
            self._begin_tasks(app)

    def _oversized(self, app: SimApp) -> str:
        """Why no node could ever hold one of the app's containers, or "" (YARN
        refuses requests above the maximum allocation). The app's task groups are
        made here, once."""
        maps, reduces = split_stages(app.job.tasks)
        widest = self._normalise(
            max((g.memory for stage in (maps, reduces) for g in stage), default=0),
            max((g.vcores for stage in (maps, reduces) for g in stage), default=0),
        )
        app.plan = self._normalised_stages(maps, reduces)
        for memory, vcores in ((app.am_mem, app.am_vc), widest if app.job.tasks else (0, 0)):
            if memory > self.largest_mem or (vcores > self.largest_vc and not self.memory_only):
                return f"a container of {memory} MiB or {vcores} vcores fits no node"
        return ""

    def _reject(self, app: SimApp, reason: str) -> None:
        app.reason = reason
        self.open_jobs -= 1

    def _stages(self, job: JobSpec) -> tuple[deque[TaskGroup], deque[TaskGroup]]:
        return self._normalised_stages(*split_stages(job.tasks))

    def _normalised_stages(
        self, maps: deque[TaskGroup], reduces: deque[TaskGroup]
    ) -> tuple[deque[TaskGroup], deque[TaskGroup]]:
        normalise = self._normalise
        for stage in (maps, reduces):
            for group in stage:
                group.memory, group.vcores = normalise(group.memory, group.vcores)
        return maps, reduces

    def _begin_tasks(self, app: SimApp) -> None:
        if app.plan is None:
            maps, reduces = self._stages(app.job)
        else:
            (maps, reduces), app.plan = app.plan, None
        if maps:
            self._enter_stage(app, MAP_STAGE, maps, reduces, 0)
        else:
            self._enter_stage(app, REDUCE_STAGE, reduces, deque(), 0)

    def _enter_stage(
        self,
        app: SimApp,
        stage: int,
        groups: deque[TaskGroup],
        reduces: deque[TaskGroup],
        running: int,
    ) -> None:
        app.stage = stage
        app.groups = groups
        app.reduces = reduces
        count = sum(g.count for g in groups)
        app.stage_left = count + running
        if app.stage_left == 0:
            self._next_stage(app)
            return
        memory = sum(g.count * g.memory for g in groups)
        vcores = sum(g.count * g.vcores for g in groups)
        self.model.add_pending(app, count, memory, vcores)
        self._kick()

    def _next_stage(self, app: SimApp) -> None:
        if self._asks is not None:
            self._stage_asked(app)
        if app.stage == MAP_STAGE and (app.reduces or app.ahead):
            running, app.ahead = app.ahead, 0
            self._enter_stage(app, REDUCE_STAGE, app.reduces, deque(), running)
        else:
            self._tasks_done(app)

    def _tasks_done(self, app: SimApp) -> None:
        """Every task ended; the job ends ``am_teardown_s`` after its last task (it
        leaves the scheduler then, or now if that moment was reported late)."""
        ended = app.last_end if app.last_end is not None else self.now
        finish = ended + self.options.am_teardown_s
        if finish > self.now:
            self._push(finish, _JOB_END, app.index)
        else:
            self._end_job(app, finish)

    def _end_job(self, app: SimApp, finish: float) -> None:
        app.finish_s = finish
        if app.start_s is None:
            app.start_s = self.now
        self.open_jobs -= 1
        self.model.remove(app)
        app.groups = app.reduces = NO_TASKS  # what is left of the job is its result
        am = app.am_batch
        if am is not None:
            self._release_later(am.node, app, am.memory, am.vcores, True)
        self._kick()

    # ------------------------------------------------------------------ containers

    def _on_reports(self, head: Batch) -> None:
        """The node heartbeat that reports a run of batch ends (``head`` and those
        linked after it): each batch frees its containers and advances its job,
        then (after the node's last report of this moment) the heartbeat schedules
        on the node. Each report is one event, as if it had been an entry of its
        own."""
        batch: Batch | None = head
        self.events += head.reports - 1
        while batch is not None:
            following = batch.next
            if batch is not head:
                if self.open_jobs <= 0:
                    return  # the run loop would have stopped before this report
                self.events += batch.reports
            if batch.count > 0:  # else killed by preemption
                self._finish(batch)
                n = batch.node
                if self.continuous:
                    self._serve_lras(n)
                    self._kick()
                elif not self._more_reports(n, following):
                    self._heartbeat(n, chained=False)
            batch = following

    def _finish(self, batch: Batch) -> None:
        """A batch's end reaches the RM: free its containers, advance its job."""
        app = batch.app
        if self._track_batches:
            del app.batches[batch.id]
            self._marks.forget(batch.id)
        count = batch.count
        memory, vcores = batch.memory * count, batch.vcores * count
        self._shift(batch.node, -memory, -vcores)
        self.model.charge(app, -memory, -vcores, False)
        if batch.stage == _SURPLUS_STAGE:
            pass  # released by its AM; never a task of the job
        elif batch.stage != app.stage:
            app.ahead -= count  # a reduce a snapshot found running before its maps ended
        else:
            app.stage_left -= count
            if app.last_end is None or batch.end > app.last_end:
                app.last_end = batch.end
            if app.stage_left == 0:
                self._next_stage(app)

    def _more_reports(self, n: int, following: Batch | None) -> bool:
        """Whether node ``n`` heartbeats again at this moment: its next report (of
        a container not killed) comes next, or a scheduled heartbeat event does.
        ``following``: the next batch of the run being reported."""
        if self.nodes[n].heartbeat_at == self.now:
            return True
        if following is not None:
            return following.count > 0
        after = self._reports.get(self.now)
        return after is not None and after.count > 0 and after.node == n

    def _release_later(self, n: int, app: SimApp, memory: int, vcores: int, is_am: bool) -> None:
        if self.continuous:
            self._release(n, app, memory, vcores, is_am)
            self._serve_lras(n)
            self._kick()
            return
        self.nodes[n].pending_release.append((app, memory, vcores, is_am))
        if self.nodes[n].heartbeat_at < 0:
            self._schedule_heartbeat(n, self._next_heartbeat(n, self.now, strict=False))

    def _release(self, n: int, app: SimApp, memory: int, vcores: int, is_am: bool) -> None:
        self._shift(n, -memory, -vcores)
        self.model.charge(app, -memory, -vcores, is_am)

    def _occupy(
        self, app: SimApp, n: int, shape: tuple[float, int, int], count: int, is_am: bool
    ) -> Batch:
        """Containers of ``app`` on node ``n`` without asking the scheduler."""
        memory, vcores = shape[1] * count, shape[2] * count
        self._shift(n, memory, vcores)
        self.model.charge(app, memory, vcores, is_am)
        duration, each_mem, each_vc = shape
        batch = Batch(self._next_batch, app, n, count, duration, each_mem, each_vc, self.now, is_am)
        self._next_batch += 1
        if not is_am and self._track_batches:
            app.batches[batch.id] = batch
        return batch

    def _shift(self, n: int, memory: int, vcores: int) -> None:
        """Batch containers on node ``n`` grow by ``memory``/``vcores`` (shrink when
        negative): the time integral of use, the node's room and whether it is open
        are kept up to date. Written out in one piece: it runs twice per task."""
        now = self.now
        if now > self._accounted_to:
            elapsed = now - self._accounted_to
            self._area_mem += self.used_mem * elapsed
            self._area_vc += self.used_vc * elapsed
            self._cap_area_mem += self.total_mem * elapsed
            self._cap_area_vc += self.total_vc * elapsed
            self._accounted_to = now
        self.used_mem += memory
        self.used_vc += vcores
        node = self.nodes[n]
        free_mem = node.free_mem - memory
        free_vc = node.free_vc - vcores
        node.free_mem = free_mem
        node.free_vc = free_vc
        is_open = (
            free_mem >= self.min_mem
            and (self.memory_only or free_vc >= self.min_vc)
            and not node.lra_waiting
        )
        if is_open != node.is_open:
            self._set_open(n, is_open)

    def fits(self, n: int, memory: int, vcores: int) -> bool:
        node = self.nodes[n]
        if node.lra_waiting:
            return False
        if memory > node.free_mem:
            return False
        return self.memory_only or vcores <= node.free_vc

    def _update_open(self, n: int) -> None:
        is_open = self.fits(n, self.min_mem, self.min_vc)
        if is_open != self.nodes[n].is_open:
            self._set_open(n, is_open)

    def _set_open(self, n: int, is_open: bool) -> None:
        self.nodes[n].is_open = is_open
        rank = self.rank_of[n]
        if is_open:
            insort(self.free_ranks, rank)
        else:
            del self.free_ranks[bisect_left(self.free_ranks, rank)]

    # ------------------------------------------------------------------ heartbeats

    def _next_heartbeat(self, n: int, after: float, strict: bool) -> float:
        phase = self.nodes[n].phase
        time = phase + math.ceil((after - phase) / self.interval) * self.interval
        if time < after or (strict and time <= after):
            time += self.interval
        return time

    def _schedule_heartbeat(self, n: int, time: float) -> None:
        self.nodes[n].heartbeat_at = time
        self._push(time, _HEARTBEAT, n)

    def _on_heartbeat(self, n: int) -> None:
        self.nodes[n].heartbeat_at = -1.0
        chained = self.chain_node == n
        if chained:
            self.chain_node = -1
        self._heartbeat(n, chained)

    def _heartbeat(self, n: int, chained: bool) -> None:
        """Node ``n`` heartbeats: report released AM containers, schedule on the
        node, and keep the scan going while demand may remain."""
        node = self.nodes[n]
        released = node.pending_release
        if released:
            node.pending_release = []
            for app, memory, vcores, is_am in released:
                self._release(n, app, memory, vcores, is_am)
        if node.lra_waiting:
            self._serve_lras(n)
        if self.model.root.demand_apps == 0:
            return
        granted, status = self._schedule_node(n)
        if status == NO_DEMAND:
            return
        if chained:
            self.chain_idle = 0 if granted else self.chain_idle + 1
            if self.chain_idle <= len(self.free_ranks):
                self._chain_after(n)
        elif self.chain_node < 0:
            self.chain_idle = 0
            self._chain_after(n)

    def _chain_after(self, n: int) -> None:
        """Continue the scan at the next node with room after ``n``."""
        free = self.free_ranks
        if not free:
            return
        i = bisect_right(free, self.rank_of[n])
        if i < len(free):
            m = self.node_at_rank[free[i]]
            self._chain_to(m, self._next_heartbeat(m, self.now, strict=False))
        else:
            m = self.node_at_rank[free[0]]
            self._chain_to(m, self._next_heartbeat(m, self.now, strict=True))

    def _chain_to(self, m: int, time: float) -> None:
        self.chain_node = m
        if self.nodes[m].heartbeat_at < 0:
            self._schedule_heartbeat(m, time)

    def _kick(self) -> None:
        """New demand or room: make sure a scan is on its way."""
        if self.continuous:
            if not self._sweep_pending:
                self._sweep_pending = True
                self._push(self.now, _SWEEP, 0)
            return
        if self.chain_node >= 0:
            self.chain_idle = 0
            return
        free = self.free_ranks
        if not free or self.model.root.demand_apps == 0:
            return
        position = self.now % self.interval
        i = bisect_left(free, bisect_left(self.rank_phase, position))
        m = self.node_at_rank[free[i] if i < len(free) else free[0]]
        self.chain_idle = 0
        self._chain_to(m, self._next_heartbeat(m, self.now, strict=False))

    def _sweep(self) -> None:
        """Continuous mode: serve demand on every node with room, once every event
        of this instant has been handled."""
        if self.model.root.demand_apps == 0:
            return
        for rank in list(self.free_ranks):
            n = self.node_at_rank[rank]
            if self.nodes[n].is_open and self._schedule_node(n)[1] == NO_DEMAND:
                return

    def _schedule_node(self, n: int) -> tuple[int, int]:
        """One heartbeat's grants on node ``n``: (containers granted, why it stopped)."""
        model = self.model
        limit = self._heartbeat_limit
        capped_by_amount = model.caps_heartbeat_amount
        node = self.nodes[n]
        start_free = (node.free_mem, node.free_vc)
        granted = 0
        granted_mem = granted_vc = 0
        status = _MORE
        while granted < limit and node.is_open:
            pick = model.choose(node.free_mem, node.free_vc)
            if isinstance(pick, int):
                status = pick if pick == NO_DEMAND else _MORE
                break
            if self._default_placement:
                target = n
                count = model.repeat_count(pick, node.free_mem, node.free_vc, limit - granted)
            else:
                target, count = self._place(pick, n), 1
                if target < 0:
                    break
            memory, vcores = self._grant(pick, target, count)
            granted += count
            if capped_by_amount:
                granted_mem += memory
                granted_vc += vcores
                if not model.keep_assigning((granted_mem, granted_vc), start_free):
                    break
        if self._granted:
            self._flush_grants()
        return granted, status

    def _place(self, app: SimApp, n: int) -> int:
        memory, vcores = app.request
        assert app.leaf is not None
        request = PlacementRequest(
            app.job.id, app.leaf.path, Resources(memory, vcores), app.awaiting_am
        )
        chosen = self.placement.choose_node(request, self.node_ids[n], self._view, self.rng)
        target = self.node_index.get(chosen, -1) if chosen is not None else -1
        if target < 0 or not self.fits(target, memory, vcores):
            return -1
        return target

    def _grant(self, app: SimApp, n: int, count: int) -> tuple[int, int]:
        """Grant ``count`` containers (one if an AM) to ``app`` on node ``n``."""
        model = self.model
        if app.awaiting_am:
            memory, vcores = app.am_mem, app.am_vc
            app.awaiting_am = False
            model.add_pending(app, -1, -memory, -vcores)
            app.am_batch = self._occupy(app, n, (0.0, memory, vcores), 1, True)
            app.start_s = self.now
            self._push(self.now + self.options.am_startup_s, _AM_READY, app.index)
            self._record(app, n, 1, True)
            return memory, vcores
        groups = app.groups
        head = groups[0]
        memory, vcores = head.memory * count, head.vcores * count
        left = count
        while left:
            group = groups[0]
            taken = min(left, group.count)
            group.count -= taken
            left -= taken
            if group.count == 0:
                groups.popleft()
            tasks = group.tasks
            if tasks is None:
                self._add_grant(app, n, group.duration, group.memory, group.vcores, taken)
                continue
            start = group.offset
            group.offset = start + taken
            group_mem, group_vc = group.memory, group.vcores
            for task in tasks[start : start + taken]:
                self._add_grant(app, n, task.duration_s, group_mem, group_vc, 1)
        model.add_pending(app, -count, -memory, -vcores)
        model.request_changed(app)
        model.charge(app, memory, vcores, False)
        self._shift(n, memory, vcores)
        if app.start_s is None:
            app.start_s = self.now
        if self._asks is not None:
            self._asks[app.index].granted += count
        return memory, vcores

    def _add_grant(
        self, app: SimApp, n: int, duration: float, memory: int, vcores: int, count: int
    ) -> None:
        """Containers granted in this heartbeat for tasks of one duration: alike
        ones (same job, node, duration and size) make one batch, in the order of
        their first grant. Looked up by duration; a second batch of the same
        duration (another job or size) is looked up by all of them."""
        first = self._grants_by_duration.get(duration)
        if first is None:
            batch = Batch(-1, app, n, count, duration, memory, vcores, self.now, False)
            self._grants_by_duration[duration] = batch
            self._granted.append(batch)
            return
        same = first.app is app and first.node == n
        if same and first.memory == memory and first.vcores == vcores:
            first.count += count
            return
        key = (n, app.index, duration, memory, vcores)
        other = self._grants_by_key.get(key)
        if other is not None:
            other.count += count
            return
        batch = Batch(-1, app, n, count, duration, memory, vcores, self.now, False)
        self._grants_by_key[key] = batch
        self._granted.append(batch)

    def _flush_grants(self) -> None:
        """The heartbeat's grants become running batches."""
        spread = self._spread
        now = self.now
        for batch in self._granted:
            app, n, count = batch.app, batch.node, batch.count
            if batch.duration == _SURPLUS:
                duration = self._surplus_hold(app)
                batch.duration, batch.end, batch.stage = duration, now + duration, _SURPLUS_STAGE
                self._new_batch(batch)
            elif spread and count > 1:
                for k in range(count):
                    piece = batch.duration + k * spread
                    memory, vcores = batch.memory, batch.vcores
                    self._new_batch(Batch(-1, app, n, 1, piece, memory, vcores, now, False))
            else:
                self._new_batch(batch)
            if self._record_allocations:
                self._record(app, n, count, False)
        self._granted.clear()
        self._grants_by_duration.clear()
        self._grants_by_key.clear()

    def _new_batch(self, batch: Batch) -> None:
        """A granted batch starts: its end is due at a report. Without preemption,
        it folds into the batch reported just before it when that one is of the same
        job, stage and size on the same node (module docstring, "Report runs")."""
        tracked = self._track_batches
        if self._file_report(batch, self._report_time(batch.node, batch.end), not tracked):
            return  # folded into the batch reported before it
        batch.id = self._next_batch
        self._next_batch += 1
        if tracked:
            batch.app.batches[batch.id] = batch

    def _record(self, app: SimApp, n: int, count: int, is_am: bool) -> None:
        if self._record_allocations:
            self.allocations.append(
                Allocation(self.now, app.job.id, self.node_ids[n], count, is_am)
            )

    # ------------------------------------------------------------------ AM allocate calls

    def _start_am_calls(self, app: SimApp) -> None:
        """The AM's first allocate call carried its asks (now); calls follow every
        interval while the app runs."""
        interval = self.options.am_allocate_interval_s
        if self._asks is None or interval is None or app.am_mem == 0:
            return
        asks = _AskProtocol(self.now, interval)
        asks.restart(app.groups)
        self._asks[app.index] = asks
        self._push(self.now + interval, _AM_CALL, app.index)

    def _am_call(self, app: SimApp) -> None:
        assert self._asks is not None
        asks = self._asks[app.index]
        if app.finish_s is not None or app.reason:
            return
        if asks.resend:
            self._set_surplus(app, asks, max(0, asks.stale_count() - _real_pending(app)))
        asks.called()
        self._push(self.now + asks.interval, _AM_CALL, app.index)

    def _stage_asked(self, app: SimApp) -> None:
        """A stage ended: its surplus asks go, and the next stage starts afresh."""
        asks = self._asks.get(app.index) if self._asks is not None else None
        if asks is None:
            return
        self._set_surplus(app, asks, 0)
        asks.restart(app.reduces)

    def _set_surplus(self, app: SimApp, asks: _AskProtocol, wanted: int) -> None:
        """Make the app's pending surplus containers number ``wanted``."""
        pending = _surplus_pending(app)
        if wanted == pending:
            return
        memory, vcores = asks.memory, asks.vcores
        if wanted > pending:
            extra = wanted - pending
            app.groups.append(TaskGroup(extra, _SURPLUS, memory, vcores))
            self.model.add_pending(app, extra, extra * memory, extra * vcores)
            self.model.request_changed(app)
            self._kick()
            return
        drop = pending - wanted
        while drop and app.groups and app.groups[-1].duration == _SURPLUS:
            group = app.groups[-1]
            taken = min(drop, group.count)
            group.count -= taken
            drop -= taken
            if group.count == 0:
                app.groups.pop()
            self.model.add_pending(app, -taken, -taken * group.memory, -taken * group.vcores)
            self.model.request_changed(app)

    def _surplus_hold(self, app: SimApp) -> float:
        """A surplus container is returned on the AM's next call and released on
        the call after."""
        assert self._asks is not None
        return (
            self._asks[app.index].next_call_after(self.now)
            + self._asks[app.index].interval
            - self.now
        )

    # ------------------------------------------------------------------ preemption

    def _preempt(self) -> None:
        claims = self.model.preemption_claims(self.now)
        selected = select_victims(claims) if claims else {}
        killed = 0
        for batch, count in self._marks.due(selected, self.now):
            self._kill(batch, count)
            killed += count
        if killed:
            self._kick()

    def _kill(self, batch: Batch, count: int) -> None:
        app = batch.app
        count = min(count, batch.count)
        batch.count -= count
        if batch.count == 0:  # its report, still due, then finds nothing
            del app.batches[batch.id]
            self._marks.forget(batch.id)
        memory, vcores = batch.memory * count, batch.vcores * count
        self._release(batch.node, app, memory, vcores, False)
        if batch.stage == _SURPLUS_STAGE:
            return
        again = TaskGroup(count, batch.duration, batch.memory, batch.vcores)
        self.preempted += count
        if batch.stage != app.stage:
            app.ahead -= count
            app.reduces.appendleft(again)
            return
        app.groups.appendleft(again)
        self.model.add_pending(app, count, memory, vcores)
        self.model.request_changed(app)

    # ------------------------------------------------------------------ hooks

    def _change_capacity(self, change: CapacityChange) -> None:
        n = self.node_index[change.node_id]
        self._account()
        delta_mem = change.visible.memory_mb - self.nodes[n].visible_mem
        delta_vc = change.visible.vcores - self.nodes[n].visible_vc
        self.nodes[n].visible_mem += delta_mem
        self.nodes[n].visible_vc += delta_vc
        self.total_mem += delta_mem
        self.total_vc += delta_vc
        self.nodes[n].free_mem += delta_mem
        self.nodes[n].free_vc += delta_vc
        self.model.resize(self.total_mem, self.total_vc)
        self._update_open(n)
        self._kick()

    def _start_lra(self, lra: LongRunningContainer) -> None:
        n = self.node_index[lra.node_id]
        self.nodes[n].lra_waiting.append(lra)
        self._serve_lras(n)

    def _serve_lras(self, n: int) -> None:
        waiting = self.nodes[n].lra_waiting
        while waiting:
            lra = waiting[0]
            if (
                lra.resources.memory_mb > self.nodes[n].free_mem
                or lra.resources.vcores > self.nodes[n].free_vc
            ):
                break
            waiting.pop(0)
            self.nodes[n].free_mem -= lra.resources.memory_mb
            self.nodes[n].free_vc -= lra.resources.vcores
        self._update_open(n)

    def _end_lra(self, lra: LongRunningContainer) -> None:
        n = self.node_index[lra.node_id]
        if lra in self.nodes[n].lra_waiting:
            self.nodes[n].lra_waiting.remove(lra)
        else:
            self.nodes[n].free_mem += lra.resources.memory_mb
            self.nodes[n].free_vc += lra.resources.vcores
        self._serve_lras(n)
        self._kick()

    # ------------------------------------------------------------------ measuring

    def _account(self) -> None:
        elapsed = self.now - self._accounted_to
        if elapsed > 0:
            self._area_mem += self.used_mem * elapsed
            self._area_vc += self.used_vc * elapsed
            self._cap_area_mem += self.total_mem * elapsed
            self._cap_area_vc += self.total_vc * elapsed
            self._accounted_to = self.now

    def _sample(self) -> None:
        leaves = self.model.leaves
        self.sample_times.append(self.now)
        self.sample_used.append(
            ([q.used_mem for q in leaves], [q.used_vc for q in leaves], self.used_mem, self.used_vc)
        )

    def _result(self) -> SimulationResult:
        leaves = self.model.leaves
        times = read_only(self.sample_times)
        queues = {
            leaf.path: UsageSeries(
                times,
                read_only(s[0][i] if i < len(s[0]) else 0 for s in self.sample_used),
                read_only(s[1][i] if i < len(s[1]) else 0 for s in self.sample_used),
            )
            for i, leaf in enumerate(leaves)
        }
        cluster = UsageSeries(
            times,
            read_only(s[2] for s in self.sample_used),
            read_only(s[3] for s in self.sample_used),
        )
        utilisation = Utilisation(
            self._area_mem / self._cap_area_mem if self._cap_area_mem else 0.0,
            self._area_vc / self._cap_area_vc if self._cap_area_vc else 0.0,
        )
        return SimulationResult(
            jobs=tuple(_job_result(app) for app in self.apps),
            queue_usage=MappingProxyType(queues),
            cluster_usage=cluster,
            utilisation=utilisation,
            end_s=self.now,
            events=self.events,
            preempted_containers=self.preempted,
            allocations=tuple(self.allocations),
        )


class _Node:
    """One NodeManager as the engine tracks it: what batch may use (``visible_*``)
    and has free, its heartbeat phase, its next simulated heartbeat (-1: none), the
    releases and long-running containers waiting for it, and whether a container of
    the minimum size could start on it now (``is_open``)."""

    __slots__ = (
        "free_mem",
        "free_vc",
        "heartbeat_at",
        "is_open",
        "lra_waiting",
        "pending_release",
        "phase",
        "visible_mem",
        "visible_vc",
    )

    def __init__(self, memory: int, vcores: int, phase: float) -> None:
        self.visible_mem = self.free_mem = memory
        self.visible_vc = self.free_vc = vcores
        self.phase = phase
        self.heartbeat_at = -1.0
        self.is_open = False
        self.pending_release: list[tuple[SimApp, int, int, bool]] = []
        self.lra_waiting: list[LongRunningContainer] = []


class _Events:
    """The events other than reports due at one moment (kind and argument in one
    integer each), in filing order; ``taken`` of them are handled."""

    __slots__ = ("items", "taken")

    def __init__(self) -> None:
        self.items: list[int] = []
        self.taken = 0


def _job_result(app: SimApp) -> JobResult:
    if app.finish_s is not None:
        status = JobStatus.FINISHED
    elif app.reason:
        status = JobStatus.REJECTED
    else:
        status = JobStatus.UNFINISHED
    return JobResult(
        id=app.job.id,
        queue=app.leaf.path if app.leaf is not None else app.job.queue,
        user=app.user,
        submit_s=app.submit_s,
        start_s=app.start_s,
        finish_s=app.finish_s,
        status=status,
        tasks=len(app.job.tasks),
        reason=app.reason,
    )


class _AskProtocol:
    """One AM's view of its ask (module docstring, "AM allocate calls"): ``wanted``
    containers for the stage, ``granted`` so far (surplus included), and what had
    been granted at its previous call, which is what its next update is based on."""

    __slots__ = (
        "first_call",
        "granted",
        "granted_before",
        "interval",
        "memory",
        "resend",
        "vcores",
        "wanted",
    )

    def __init__(self, first_call: float, interval: float) -> None:
        self.first_call = first_call
        self.interval = interval
        self.wanted = self.granted = self.granted_before = 0
        self.memory = self.vcores = 0
        self.resend = False

    def stale_count(self) -> int:
        """The count this call sends: the AM lowered it for what it had received
        by its previous call."""
        return max(0, self.wanted - self.granted_before)

    def called(self) -> None:
        received = self.granted - self.granted_before
        self.resend = received > 0 and self.wanted - self.granted_before > 0
        self.granted_before = self.granted

    def restart(self, groups: deque[TaskGroup]) -> None:
        """A new stage asks for ``groups``; surplus takes the first one's size."""
        self.wanted = sum(g.count for g in groups)
        self.granted = self.granted_before = 0
        self.resend = False
        if groups:
            self.memory, self.vcores = groups[0].memory, groups[0].vcores

    def next_call_after(self, time: float) -> float:
        calls = math.floor((time - self.first_call) / self.interval) + 1
        return self.first_call + calls * self.interval


def _real_pending(app: SimApp) -> int:
    return sum(g.count for g in app.groups if g.duration != _SURPLUS)


def _surplus_pending(app: SimApp) -> int:
    return sum(g.count for g in app.groups if g.duration == _SURPLUS)


def _unknown_node(node_id: str) -> SettingsError:
    return SettingsError(f"simulation hooks name a node the cluster spec lacks: {node_id}")
