"""Algorithm 1 (job latency comparison L(R·c_i, J_i, C_i, S_i)) as a numeric engine.

The paper's loop: at each resource-allocation moment t_M, allocate the allocatable
resources r_A to jobs according to C_i and S_i; estimate each allocated job's
execution time with E(j, R_job) (Algorithm 2); the job that finishes first releases
its resources, which sets the next t_M and r_A; return the mean latency.

Here the allocation moments are the instants containers are released or jobs
arrive -- or, when the mechanism says the scheduler allocates on NodeManager
heartbeats, those heartbeats -- and resources are granted a container at a time, in
the order the mechanism's kernels give (queue ranking, then job ranking, subject to
the constraint checks), as YARN hands out containers. A job's allocation set R_job
is the sequence of (moment, containers) it receives; its tasks are assigned to those
containers in execution order as in Algorithm 2 (stages are the execution orders:
maps, then reduces), so a job's completion -- and each container's release -- follows
from R_job and the task estimates. Under ``per_task_containers`` a container returns
to the scheduler when its task ends and the kernels re-arbitrate it; under
``container_reuse`` it stays with the job while the job has a pending task of the
current stage (Algorithm 2's container-available moments).

Heartbeat timing (kernel ``heartbeat_grants``) follows YARN: a node heartbeats every
interval at its own phase (spread evenly: the real phases are unknown); a finished
container's resources come back at its node's next heartbeat; a heartbeat grants
containers on its own node, at most the per-heartbeat limit; while demand waits and
nodes have room, nodes are visited in heartbeat order until a full round grants
nothing.

Nothing here decides mechanism: every choice comes from the compiled
:class:`~rules.mechanism.Mechanism` through the kernel registries.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

from rules.inputs import GroupConfig, GroupConstraints, GroupResources, JobMix
from rules.kernels import (
    ALLOCATION,
    CONSTRAINTS,
    ESTIMATION,
    ORDERING,
    Allocation,
    AmPolicy,
    Bounds,
    JobKey,
    NoUserLimit,
    Timing,
    Totals,
    UserCheck,
    lookup,
)
from rules.mechanism import Mechanism
from rules.paths import (
    AmDecision,
    Ceiling,
    Decisions,
    Order,
    Path,
    QueueLoad,
    UserDecision,
    Users,
)
from rules.state import INFINITY, JobState, QueueState, normalised, plan_of
from yarn_adapt.errors import SettingsError

_END = 0
_HEARTBEAT = 1
_ARRIVE = 2
_AM_READY = 3
_NO_NODE = -1

T = TypeVar("T")


@dataclass(frozen=True)
class Estimate:
    """The comparator's answer: mean latency over the mix's jobs (infinite if a job
    can never run under the configuration) and each job's latency."""

    mean_latency_s: float
    latencies: tuple[float, ...]
    unfinished: int

    @property
    def finite(self) -> bool:
        return self.unfinished == 0


_KERNEL_FIELDS = (
    "allocation",
    "ordering",
    "bounds",
    "am",
    "users",
    "no_user_limit",
    "job_cap",
    "both_dims",
    "timing",
    "reuse",
    "fair_am",
    "block_at_ceiling",
)
_KERNEL_SETS: dict[tuple[Mechanism, Totals, int], tuple[GroupConstraints, dict[str, object]]] = {}
_KERNEL_SETS_KEPT = 10_000


class Algorithm1:
    """One evaluation: build the state, run the allocation loop, report latencies."""

    def __init__(
        self,
        mechanism: Mechanism,
        config: GroupConfig,
        mix: JobMix,
        resources: GroupResources,
        constraints: GroupConstraints,
        *,
        record: bool = False,
        decisions: Decisions | None = None,
        judging: bool = False,
    ) -> None:
        self.totals = totals = Totals.of(resources.total, resources.unit)
        self.unit_resources = resources.unit
        self.now = mix.now_s
        self.free_mem = totals.memory
        self.free_vc = totals.vcores
        self._kernels(mechanism, totals, constraints)
        self.queues = self._queues(mechanism, config)
        # a judge (see follows) runs no mix: it reads the recorded run's jobs
        self.jobs = [] if judging else self._jobs(mix, resources)
        self._nodes(resources)
        # (time, reports first, seq, kind, job or node, count, node, task end, container)
        self._heap: list[tuple[float, int, int, int, int, int, int, float, tuple[int, int]]] = []
        self._seq = 0
        self._ends: dict[tuple[int, float, int, int, int], int] = {}
        self._shares_dirty = True
        self._fair_shares: dict[tuple[int, ...], tuple[tuple[float, float], ...]] = {}
        self._shares_of: tuple[int, ...] | None = None  # active queues of the fair shares
        # every configuration-dependent decision of the run, when its path is kept
        self.decisions = decisions
        # (moment, job id, is AM) per container granted, when recording R_job for tests
        self.grants: list[tuple[float, str, bool]] | None = [] if record else None

    # ------------------------------------------------------------------ setup

    def _kernels(self, mechanism: Mechanism, totals: Totals, constraints: GroupConstraints) -> None:
        """The mechanism's kernels for these totals and constraints. Kernels keep no
        state of a run, so one set serves every evaluation that shares them."""
        key = (mechanism, totals, id(constraints))
        found = _KERNEL_SETS.get(key)
        if found is not None and found[0] is constraints:
            self.__dict__.update(found[1])
            return
        self._make_kernels(mechanism, totals, constraints)
        if len(_KERNEL_SETS) >= _KERNEL_SETS_KEPT:
            _KERNEL_SETS.clear()
        made = {name: self.__dict__[name] for name in _KERNEL_FIELDS}
        _KERNEL_SETS[key] = (constraints, made)

    def _make_kernels(
        self, mechanism: Mechanism, totals: Totals, constraints: GroupConstraints
    ) -> None:
        choice = mechanism.allocation
        self.allocation = cast(Callable[..., Allocation], lookup(ALLOCATION, choice))(
            choice, totals
        )
        self.ordering = [
            cast(Callable[..., JobKey], lookup(ORDERING, c))(c, totals) for c in mechanism.ordering
        ]
        self.bounds = cast(Bounds, self._constraint(mechanism, "queue_bounds", constraints))
        self.am = cast(AmPolicy, self._constraint(mechanism, "am"))
        self.users = cast(UserCheck, self._constraint(mechanism, "user_limit"))
        self.no_user_limit = isinstance(self.users, NoUserLimit)
        self.job_cap = cast(Callable[[JobState], float], self._constraint(mechanism, "placement"))
        self.both_dims = bool(self._constraint(mechanism, "resource_fit"))
        self.timing = cast(Timing, self._constraint(mechanism, "heartbeat"))
        self.reuse = bool(lookup(ESTIMATION, mechanism.estimation))
        self.fair_am = self.am.needs_am and not self.am.on_activation
        self.block_at_ceiling = mechanism.allocation.binding("over_ceiling") == "block"

    def _constraint(self, mechanism: Mechanism, kind: str, *extra: object) -> object:
        choice = mechanism.constraint(kind)
        factory = cast(Callable[..., object], lookup(CONSTRAINTS, choice))
        return factory(choice, self.totals, *extra)

    def _queues(self, mechanism: Mechanism, config: GroupConfig) -> list[QueueState]:
        if len(mechanism.ordering) != len(config.queues):
            raise SettingsError("mechanism and configuration disagree on the queue count")
        queues = []
        for position, conf in enumerate(config.queues):
            queue = QueueState(conf.name, position)
            self.allocation.configure(queue, conf)
            self.bounds.configure(queue)
            queue.am_fraction = conf.am_share
            queue.user_factor = conf.user_limit_factor
            queue.user_minimum = conf.minimum_user_limit_percent
            queues.append(queue)
        return queues

    def _jobs(self, mix: JobMix, resources: GroupResources) -> list[JobState]:
        by_name = {q.name: q for q in self.queues}
        jobs = []
        for index, spec in enumerate(mix.jobs):
            queue = by_name.get(spec.queue)
            if queue is None:
                raise SettingsError(f"job {spec.id} names queue {spec.queue!r}, not in the group")
            job = JobState(index, spec, queue, plan_of(spec, resources.unit, self.both_dims))
            job.cap_mem = self.job_cap(job)
            jobs.append(job)
        return jobs

    def _nodes(self, resources: GroupResources) -> None:
        """Heartbeat timing: nodes in phase order (node ``n`` heartbeats at
        ``phase[n] + k x interval``)."""
        self.heartbeats = not self.timing.continuous and bool(resources.nodes)
        nodes = resources.nodes if self.heartbeats else ()
        self.interval = resources.heartbeat_s
        self.phase = [(n + 0.5) * self.interval / len(nodes) for n in range(len(nodes))]
        self.node_mem = [r.memory_mb for r in nodes]
        self.node_vc = [r.vcores if self.both_dims else 1 << 30 for r in nodes]
        self.largest = (
            max(self.node_mem, default=self.totals.memory),
            max(self.node_vc, default=self.totals.vcores if self.both_dims else 0),
        )
        self.reporting: set[int] = set()
        self._chain_node = _NO_NODE
        self._chain_idle = 0

    # ------------------------------------------------------------------ the loop

    def run(self) -> Estimate:
        for job in self.jobs:
            if job.spec.am_running or job.spec.running:
                self._adopt(job)
            elif self._fits_somewhere(job):
                self._push(max(job.submit, self.now), _ARRIVE, job.index)
            # else: YARN refuses an ask above the largest node: the job never runs
        return self._loop()

    def _fits_somewhere(self, job: JobState) -> bool:
        """Whether every container the job asks for fits the largest node (the whole
        group when nodes are unknown)."""
        largest_mem, largest_vc = self.largest
        task_mem, task_vc = job.largest
        if task_mem > largest_mem or task_vc > largest_vc:
            return False
        return not self.am.needs_am or (job.am_mem <= largest_mem and job.am_vc <= largest_vc)

    def _loop(self) -> Estimate:
        heap, jobs, pop = self._heap, self.jobs, heapq.heappop
        # without heartbeats no node ever reports (containers have no node)
        reports = self.heartbeats
        while heap:
            now = self.now = heap[0][0]
            kicked = False
            while heap and heap[0][0] == now:
                _, _, _, kind, index, count, node, end, shape = pop(heap)
                if kind == _END:
                    kicked |= self._end(jobs[index], count, node, end, shape)
                    if reports and not self._more_reports():
                        self._report_heartbeats()
                elif kind == _HEARTBEAT:
                    self._on_heartbeat(index)
                elif kind == _ARRIVE:
                    kicked |= self._arrive(jobs[index])
                else:
                    kicked |= self._next_stage(jobs[index])
            self._after_instant(kicked)
        return self._estimate()

    def _push(
        self,
        time: float,
        kind: int,
        index: int,
        count: int = 0,
        node: int = _NO_NODE,
        end: float = 0.0,
        shape: tuple[int, int] = (0, 0),
    ) -> None:
        self._seq += 1
        first = 0 if kind == _END else 1
        entry = (time, first, self._seq, kind, index, count, node, end, shape)
        heapq.heappush(self._heap, entry)

    def _more_reports(self) -> bool:
        heap = self._heap
        return bool(heap) and heap[0][0] == self.now and heap[0][3] == _END

    def _report_heartbeats(self) -> None:
        """Nodes that just reported finished containers heartbeat: they schedule."""
        for node in sorted(self.reporting):
            self._heartbeat(node, chained=False)
        self.reporting.clear()

    def _after_instant(self, kicked: bool) -> None:
        if not self.heartbeats:
            self._allocate_anywhere()
        elif kicked:
            self._kick()

    def _estimate(self) -> Estimate:
        latencies = tuple(job.finish - job.submit for job in self.jobs)
        unfinished = sum(1 for job in self.jobs if job.finish == INFINITY)
        mean = sum(latencies) / len(latencies) if latencies else 0.0
        return Estimate(mean, latencies, unfinished)

    # ------------------------------------------------------------------ jobs

    def _arrive(self, job: JobState) -> bool:
        queue = job.queue
        if self.am.needs_am and self.am.on_activation:
            queue.waiting.append(job)
            return self._activate_waiting(queue)
        return self._activate(job)

    def _activate_waiting(self, queue: QueueState) -> bool:
        used = (self.totals.memory - self.free_mem, self.totals.vcores - self.free_vc)
        kicked = False
        # LeafQueue.activateApplications tries every waiting app, in order
        for job in list(queue.waiting):
            if self._am_allows(queue, job, used):
                queue.waiting.remove(job)
                queue.am_used_mem += job.am_mem
                queue.am_used_vc += job.am_vc
                queue.users.setdefault(job.user, [0, 0, 0])[2] += job.am_mem
                kicked |= self._activate(job)
        return kicked

    def _activate(self, job: JobState) -> bool:
        queue = job.queue
        queue.active.append(job)
        user = queue.users.setdefault(job.user, [0, 0, 0])
        user[1] += 1
        self._shares_dirty = True
        if self.am.needs_am:
            job.awaiting_am = True
            queue.pending_mem += job.am_mem
            queue.pending_vc += job.am_vc
            return True
        return self._next_stage(job)

    def _adopt(self, job: JobState) -> None:
        """A job already running when the mix starts: its AM and busy containers are
        held, the busy ones end ``remaining_s`` from now."""
        queue = job.queue
        queue.active.append(job)
        queue.users.setdefault(job.user, [0, 0, 0])[1] += 1
        if self.am.needs_am:
            job.holds_am = True
            self._hold(job, job.am_mem, job.am_vc, self._room_for(job.am_mem, job.am_vc))
            queue.am_used_mem += job.am_mem
            queue.am_used_vc += job.am_vc
            queue.users[job.user][2] += job.am_mem
        later = min((r.stage for r in job.spec.running), default=0)
        while job.has_stage and later > 0 and job.stage_started:
            job.next_stage()
            later -= 1
        memory, vcores = normalised(job.spec.task, self.unit_resources)
        vcores = vcores if self.both_dims else 0
        for run in job.spec.running:
            job.running += run.count
            for _ in range(run.count):
                node = self._room_for(memory, vcores)
                self._hold(job, memory, vcores, node)
                self._end_at(job, self.now + run.remaining_s, node, 1, (memory, vcores))
        if job.running:
            self._load_stage(job)
        else:
            self._next_stage(job)

    def _room_for(self, memory: int, vcores: int) -> int:
        """The first node an adopted container fits on (node 0 if none)."""
        for node in range(len(self.node_mem)):
            if self.node_mem[node] >= memory and self.node_vc[node] >= vcores:
                return node
        return 0 if self.node_mem else _NO_NODE

    def _load_stage(self, job: JobState) -> None:
        """Make the current stage's tasks pending (the stage at the head of ``stages``)."""
        tasks, memory, vcores = job.demands[job.stage] if job.has_stage else (0, 0, 0)
        job.pending = tasks
        job.queue.pending_mem += memory
        job.queue.pending_vc += vcores

    def _next_stage(self, job: JobState) -> bool:
        """The current stage is over (or the job just got its AM): start the next
        stage that has tasks, or finish the job. True when new demand appeared."""
        while job.has_stage and job.stage_started:
            job.next_stage()
        if job.has_stage:
            self._load_stage(job)
            return True
        return self._finish(job)

    def _finish(self, job: JobState) -> bool:
        job.finish = self.now if job.last_end < 0 else job.last_end
        queue = job.queue
        queue.active.remove(job)
        queue.users[job.user][1] -= 1
        self._shares_dirty = True
        if job.holds_am:
            self._release_later(job, job.am_mem, job.am_vc, job.am_node)
            queue.am_used_mem -= job.am_mem
            queue.am_used_vc -= job.am_vc
            queue.users[job.user][2] -= job.am_mem
            job.holds_am = False
        if self.am.needs_am and self.am.on_activation:
            return self._activate_waiting(queue)
        return False

    # ------------------------------------------------------------------ containers

    def _hold(self, job: JobState, memory: int, vcores: int, node: int) -> None:
        queue = job.queue
        self.free_mem -= memory
        self.free_vc -= vcores
        if node >= 0:
            self.node_mem[node] -= memory
            self.node_vc[node] -= vcores
        queue.used_mem += memory
        queue.used_vc += vcores
        job.used_mem += memory
        job.used_vc += vcores
        queue.users.setdefault(job.user, [0, 0, 0])[0] += memory

    def _release(self, job: JobState, memory: int, vcores: int, node: int) -> None:
        queue = job.queue
        self.free_mem += memory
        self.free_vc += vcores
        if node >= 0:
            self.node_mem[node] += memory
            self.node_vc[node] += vcores
            self.reporting.add(node)
        queue.used_mem -= memory
        queue.used_vc -= vcores
        job.used_mem -= memory
        job.used_vc -= vcores
        queue.users[job.user][0] -= memory

    def _release_later(self, job: JobState, memory: int, vcores: int, node: int) -> None:
        """An AM container: YARN frees it at its node's next heartbeat."""
        if node < 0:
            self._release(job, memory, vcores, node)
            return
        report = self._next_heartbeat(node, self.now, False)
        self._push(report, _END, job.index, -1, node, self.now, (memory, vcores))

    def _end_at(
        self, job: JobState, end: float, node: int, count: int, shape: tuple[int, int]
    ) -> None:
        """``count`` containers of ``shape`` of ``job`` on ``node`` end at ``end``; the
        scheduler hears it at the node's next heartbeat (at once without heartbeats)."""
        report = end if node < 0 else self._next_heartbeat(node, end, False)
        self._push(report, _END, job.index, count, node, end, shape)

    def _end(
        self, job: JobState, count: int, node: int, end: float, shape: tuple[int, int]
    ) -> bool:
        """``count`` of the job's containers of ``shape`` finished their tasks (count
        -1: its AM container)."""
        if count < 0:
            self._release(job, shape[0], shape[1], node)
            return False
        job.running -= count
        job.last_end = max(job.last_end, end)
        if self.reuse:
            count -= self._reuse(job, count, node, shape)
        if count:
            self._release(job, shape[0] * count, shape[1] * count, node)
        if job.pending == 0 and job.running == 0:
            return self._next_stage(job)
        return False

    def _reuse(self, job: JobState, count: int, node: int, shape: tuple[int, int]) -> int:
        """Containers kept for the job's next tasks of the same shape (Algorithm 2)."""
        kept = 0
        while kept < count and job.pending > 0 and job.request == shape:
            self._start_task(job, node)
            kept += 1
        job.running += kept
        self._flush_ends()
        return kept

    # ------------------------------------------------------------------ allocation

    def _allocate_anywhere(self) -> None:
        """Continuous timing: grant until nothing more can be granted now."""
        # every request is at least the unit (normalised): below it nothing fits
        unit_mem = self.totals.unit_mem
        while self.free_mem >= unit_mem:
            job = self._pick(self.free_mem, self.free_vc)
            if job is None:
                break
            self._grant(job, _NO_NODE)
        if self._ends:
            self._flush_ends()

    def _allocate_on(self, node: int) -> int:
        """One heartbeat of ``node``: grants within the per-heartbeat limit."""
        start_mem, start_vc = self.node_mem[node], self.node_vc[node]
        granted = 0
        while granted < self.timing.limit and self._open(node):
            job = self._pick(self.node_mem[node], self.node_vc[node])
            if job is None:
                break
            self._grant(job, node)
            granted += 1
            if self.timing.half_free and not self._under_half(node, start_mem, start_vc):
                break
        self._flush_ends()
        return granted

    def _under_half(self, node: int, start_mem: int, start_vc: int) -> bool:
        used_mem = start_mem - self.node_mem[node]
        used_vc = start_vc - self.node_vc[node]
        return used_mem <= start_mem * 0.5 and used_vc <= start_vc * 0.5

    def _pick(self, free_mem: int, free_vc: int) -> JobState | None:
        asking = [q for q in self.queues if q.pending_mem > 0 or q.pending_vc > 0]
        if not asking:
            return None
        if self.fair_am and self._shares_dirty:
            self._update_fair_shares()
        if len(asking) > 1:
            if self.decisions is None:
                asking.sort(key=self.allocation.key)
            else:
                loads = tuple(_load(q) for q in asking)
                asking.sort(key=self.allocation.key)
                self.decisions.orders[loads, tuple(q.position for q in asking)] = None
        for queue in asking:
            job = self._pick_job(queue, free_mem, free_vc)
            if job is not None:
                return job
        return None

    def _pick_job(self, queue: QueueState, free_mem: int, free_vc: int) -> JobState | None:
        jobs = [j for j in queue.active if j.awaiting_am or j.pending > 0]
        if len(jobs) > 1:
            jobs.sort(key=self.ordering[queue.position])
        users = None if self.no_user_limit else self.users
        refused_am = INFINITY  # an AM as big as a refused one is refused too
        for job in jobs:
            if job.awaiting_am:
                memory, vcores = job.am_mem, job.am_vc
                if memory >= refused_am:
                    continue
            else:
                head = job.stages[job.stage][job.run]
                memory, vcores = head[2], head[3]
            if users is not None and not self._user_allows(queue, job):
                continue
            if self._over_ceiling(queue, memory, vcores):
                if self.block_at_ceiling:
                    return None
                continue
            if job.used_mem + memory > job.cap_mem:
                continue
            if job.awaiting_am and self.fair_am and not self._am_allows(queue, job, self._used()):
                refused_am = memory
                continue
            if memory > free_mem or vcores > free_vc:
                continue
            return job
        return None

    def _used(self) -> tuple[int, int]:
        return self.totals.memory - self.free_mem, self.totals.vcores - self.free_vc

    def _over_ceiling(self, queue: QueueState, memory: int, vcores: int) -> bool:
        asked_mem, asked_vc = queue.used_mem + memory, queue.used_vc + vcores
        over = asked_mem > queue.ceiling_mem or (self.both_dims and asked_vc > queue.ceiling_vc)
        if self.decisions is not None:
            self.decisions.ceilings[queue.position, asked_mem, asked_vc, over] = None
        return over

    def _user_allows(self, queue: QueueState, job: JobState) -> bool:
        allowed = self.users.allows(queue, job)
        if self.decisions is not None:
            decision = (queue.position, queue.used_mem, _users(queue), job.index, allowed)
            self.decisions.users[decision] = None
        return allowed

    def _am_allows(self, queue: QueueState, job: JobState, used: tuple[int, int]) -> bool:
        allowed = self.am.allows(queue, job, used)
        if self.decisions is not None:
            decision = (
                _load(queue),
                queue.am_used_mem,
                queue.am_used_vc,
                _users(queue) if self.am.reads_users else (),
                self._shares_of,
                job.index,
                used,
                allowed,
            )
            self.decisions.ams[decision] = None
        return allowed

    def _grant(self, job: JobState, node: int) -> None:
        queue = job.queue
        if self.grants is not None:
            self.grants.append((self.now, job.spec.id, job.awaiting_am))
        if job.awaiting_am:
            job.awaiting_am = False
            job.holds_am = True
            job.am_node = node
            queue.pending_mem -= job.am_mem
            queue.pending_vc -= job.am_vc
            self._hold(job, job.am_mem, job.am_vc, node)
            if self.fair_am:
                queue.am_used_mem += job.am_mem
                queue.am_used_vc += job.am_vc
                queue.users[job.user][2] += job.am_mem
            # The AM asks for its tasks once running: after this allocation pass.
            self._push(self.now, _AM_READY, job.index)
            return
        memory, vcores = job.request
        self._hold(job, memory, vcores, node)
        self._start_task(job, node)
        job.running += 1

    def _start_task(self, job: JobState, node: int) -> None:
        """The job's next pending task (execution order) starts now; its container's
        available moment is now + its estimated seconds (Algorithm 2, line 16)."""
        _, seconds, memory, vcores = job.start_task()
        job.queue.pending_mem -= memory
        job.queue.pending_vc -= vcores
        key = (job.index, seconds, node, memory, vcores)
        self._ends[key] = self._ends.get(key, 0) + 1

    def _flush_ends(self) -> None:
        for (index, seconds, node, memory, vcores), count in self._ends.items():
            self._end_at(self.jobs[index], self.now + seconds, node, count, (memory, vcores))
        self._ends.clear()

    def _update_fair_shares(self) -> None:
        """Each queue's instantaneous fair share; it depends only on which queues are
        active (their weights and bounds are fixed while the mix runs), so it is
        worked out once per set of active queues."""
        self._shares_dirty = False
        active = tuple(q.position for q in self.queues if q.active)
        self._shares_of = active
        self._set_fair_shares(active)

    def _set_fair_shares(self, active: tuple[int, ...]) -> None:
        queues = self.queues
        shares = self._fair_shares.get(active)
        if shares is None:
            for queue in queues:
                queue.fair_mem = queue.fair_vc = 0.0
            if active:
                self.allocation.share_out([queues[p] for p in active])
            self._fair_shares[active] = tuple((q.fair_mem, q.fair_vc) for q in queues)
            return
        for queue, (fair_mem, fair_vc) in zip(queues, shares, strict=True):
            queue.fair_mem, queue.fair_vc = fair_mem, fair_vc

    # ------------------------------------------------------------------ paths

    def follows(self, path: Path) -> bool:
        """Whether this configuration decides every decision of ``path`` (recorded
        under another configuration with the same mechanism and queues) the same
        way. Call on an engine built with ``judging=True``, as often as wanted: it
        overwrites the queues' state, every check setting what it reads."""
        decisions, jobs = path.decisions, path.jobs
        # Decisions that told configurations apart before go first: one of them
        # usually settles a configuration that takes another path.
        if (
            self._broken_order(decisions.hot.orders) is not None
            or self._broken_ceiling(decisions.hot.ceilings) is not None
            or self._broken_user_limit(decisions.hot.users, jobs) is not None
            or self._broken_am_limit(decisions.hot.ams, jobs) is not None
        ):
            return False
        hot = decisions.hot
        order = self._broken_order(decisions.orders)
        if order is not None:
            return _remember(hot.orders, order)
        ceiling = self._broken_ceiling(decisions.ceilings)
        if ceiling is not None:
            return _remember(hot.ceilings, ceiling)
        user = self._broken_user_limit(decisions.users, jobs)
        if user is not None:
            return _remember(hot.users, user)
        am = self._broken_am_limit(decisions.ams, jobs)
        if am is not None:
            return _remember(hot.ams, am)
        return True

    def _broken_order(self, orders: Iterable[Order]) -> Order | None:
        queues, key = self.queues, self.allocation.key
        for decision in orders:
            loads, order = decision
            asking = [_loaded(queues[load[0]], load) for load in loads]
            asking.sort(key=key)
            if tuple(q.position for q in asking) != order:
                return decision
        return None

    def _broken_ceiling(self, ceilings: Iterable[Ceiling]) -> Ceiling | None:
        queues, both_dims = self.queues, self.both_dims
        for decision in ceilings:
            position, asked_mem, asked_vc, over = decision
            queue = queues[position]
            now = asked_mem > queue.ceiling_mem or (both_dims and asked_vc > queue.ceiling_vc)
            if now != over:
                return decision
        return None

    def _broken_user_limit(
        self, users: Iterable[UserDecision], jobs: Sequence[JobState]
    ) -> UserDecision | None:
        for decision in users:
            position, used_mem, held, index, allowed = decision
            queue = self.queues[position]
            queue.used_mem = used_mem
            queue.users = _users_dict(held)
            if self.users.allows(queue, jobs[index]) != allowed:
                return decision
        return None

    def _broken_am_limit(
        self, ams: Iterable[AmDecision], jobs: Sequence[JobState]
    ) -> AmDecision | None:
        shares: tuple[int, ...] | bool | None = False  # which fair shares the queues hold
        for decision in ams:
            load, am_mem, am_vc, users, shares_of, index, used, allowed = decision
            queue = _loaded(self.queues[load[0]], load)
            queue.am_used_mem, queue.am_used_vc = am_mem, am_vc
            if self.am.reads_users:
                queue.users = _users_dict(users)
            if shares_of != shares:
                shares = shares_of
                if shares_of is None:
                    for each in self.queues:
                        each.fair_mem = each.fair_vc = 0.0
                else:
                    self._set_fair_shares(shares_of)
            if self.am.allows(queue, jobs[index], used) != allowed:
                return decision
        return None

    # ------------------------------------------------------------------ heartbeats

    def _next_heartbeat(self, node: int, after: float, strict: bool) -> float:
        phase, interval = self.phase[node], self.interval
        time = phase + math.ceil((after - phase) / interval) * interval
        if time < after or (strict and time <= after):
            time += interval
        return time

    def _open(self, node: int) -> bool:
        return self.node_mem[node] >= self.totals.unit_mem and self.node_vc[node] >= (
            self.totals.unit_vc if self.both_dims else 0
        )

    def _open_nodes(self) -> list[int]:
        return [n for n in range(len(self.node_mem)) if self._open(n)]

    def _on_heartbeat(self, node: int) -> None:
        chained = node == self._chain_node
        if chained:
            self._chain_node = _NO_NODE
        self.reporting.discard(node)
        self._heartbeat(node, chained)

    def _heartbeat(self, node: int, chained: bool) -> None:
        if not any(q.has_demand for q in self.queues):
            return
        granted = self._allocate_on(node)
        if not any(q.has_demand for q in self.queues):
            return
        if chained:
            self._chain_idle = 0 if granted else self._chain_idle + 1
            if self._chain_idle <= len(self._open_nodes()):
                self._chain_after(node)
        elif self._chain_node == _NO_NODE:
            self._chain_idle = 0
            self._chain_after(node)

    def _chain_after(self, node: int) -> None:
        """Continue the visit at the next node with room after ``node``."""
        open_nodes = self._open_nodes()
        if not open_nodes:
            return
        later = bisect_right(open_nodes, node)
        if later < len(open_nodes):
            target = open_nodes[later]
            self._chain_to(target, self._next_heartbeat(target, self.now, False))
        else:
            target = open_nodes[0]
            self._chain_to(target, self._next_heartbeat(target, self.now, True))

    def _chain_to(self, node: int, time: float) -> None:
        self._chain_node = node
        self._push(time, _HEARTBEAT, node)

    def _kick(self) -> None:
        """New demand: make sure a visit of the nodes is on its way."""
        if self._chain_node != _NO_NODE:
            self._chain_idle = 0
            return
        open_nodes = self._open_nodes()
        if not open_nodes or not any(q.has_demand for q in self.queues):
            return
        position = self.now % self.interval
        later = [n for n in open_nodes if self.phase[n] >= position]
        target = later[0] if later else open_nodes[0]
        self._chain_idle = 0
        self._chain_to(target, self._next_heartbeat(target, self.now, False))


_HOT_KEPT = 8


def _remember(hot: list[T], decision: T) -> bool:
    """Keep a decision that told a configuration apart; False (it did not follow)."""
    if decision not in hot:
        hot.insert(0, decision)
        del hot[_HOT_KEPT:]
    return False


def _load(queue: QueueState) -> QueueLoad:
    return queue.position, queue.used_mem, queue.used_vc, queue.pending_mem, queue.pending_vc


def _loaded(queue: QueueState, load: QueueLoad) -> QueueState:
    _, queue.used_mem, queue.used_vc, queue.pending_mem, queue.pending_vc = load
    return queue


def _users(queue: QueueState) -> Users:
    return tuple((user, *held) for user, held in queue.users.items())  # type: ignore[misc]


def _users_dict(users: Users) -> dict[str, list[int]]:
    return {user: [memory, active, am] for user, memory, active, am in users}


def evaluate(
    mechanism: Mechanism,
    config: GroupConfig,
    mix: JobMix,
    resources: GroupResources,
    constraints: GroupConstraints,
) -> Estimate:
    """L(R·c_i, J_i, C_i, S_i) under ``mechanism``: mean job latency of ``mix``."""
    return Algorithm1(mechanism, config, mix, resources, constraints).run()
