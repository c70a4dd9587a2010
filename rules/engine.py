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

The engine is split by concern: this module holds the state, the event loop, the
jobs' life and their containers; :mod:`rules.granting` picks who gets the next
container (and records the run's configuration-dependent decisions when its path
is kept, :mod:`rules.paths`); :mod:`rules.heartbeats` times NodeManager
heartbeats (kernel ``heartbeat_grants``); :mod:`rules.kernelset` makes the
kernels; :mod:`rules.judging` checks another configuration against a kept path.

Nothing here decides mechanism: every choice comes from the compiled
:class:`~rules.mechanism.Mechanism` through the kernel registries.
"""

from __future__ import annotations

import heapq
from bisect import insort
from collections.abc import Callable, Sequence

from rules.granting import Granting
from rules.heartbeats import (
    ARRIVE,
    END,
    HEARTBEAT,
    NO_NODE,
    Event,
)
from rules.inputs import GroupConfig, GroupConstraints, GroupResources, JobMix
from rules.kernels import Totals
from rules.kernelset import FairShares, kernel_set, make_queues
from rules.mechanism import Mechanism
from rules.paths import Decisions
from rules.state import INFINITY, Estimate, JobState, QueueState, normalised, plan_of
from yarn_adapt.errors import SettingsError

_NEVER = 1 << 62  # larger than any AM: no refusal yet


class Algorithm1(Granting):
    """One evaluation: build the state, run the allocation loop, report latencies.
    The mechanism's kernels (:class:`~rules.kernelset.KernelSet`) are copied onto the
    engine: the inner loop reads them as plain attributes."""

    job_cap: Callable[[JobState], float]
    reuse: bool

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
        phases: Sequence[float] | None = None,
    ) -> None:
        self.totals = totals = Totals.of(resources.total, resources.unit)
        self.unit_resources = resources.unit
        self.now = mix.now_s
        self.free_mem = totals.memory
        self.free_vc = totals.vcores
        kernels = kernel_set(mechanism, totals, constraints)
        self.allocation = kernels.allocation
        self.ordering = kernels.ordering
        self.bounds = kernels.bounds
        self.am = kernels.am
        self.users = kernels.users
        self.no_user_limit = kernels.no_user_limit
        self.job_cap = kernels.job_cap
        self.both_dims = kernels.both_dims
        self.timing = kernels.timing
        self.reuse = kernels.reuse
        self.fair_am = kernels.fair_am
        self.block_at_ceiling = kernels.block_at_ceiling
        self.queues = make_queues(kernels, mechanism, config)
        self.jobs = self._jobs(mix, resources)
        self._nodes(resources, phases)
        # (time, reports first, seq, kind, job or node, count, node, task end, container)
        self._heap: list[Event] = []
        self._seq = 0
        self._ends: dict[tuple[int, float, int, int, int], int] = {}
        self._am_seen = False
        self._ready: list[int] = []
        self._shares_dirty = True
        self.shares = FairShares(self.allocation, self.queues)
        self._shares_of: tuple[int, ...] | None = None  # active queues of the fair shares
        # every configuration-dependent decision of the run, when its path is kept
        self.decisions = decisions
        # (moment, job id, is AM) per container granted, when recording R_job for tests
        self.grants: list[tuple[float, str, bool]] | None = [] if record else None

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

    # ------------------------------------------------------------------ the loop

    def run(self) -> Estimate:
        asking = False
        for job in self.jobs:
            if job.spec.am_running or job.spec.running:
                asking |= self._adopt(job)
            elif self._fits_somewhere(job):
                self._push(max(job.submit, self.now), ARRIVE, job.index)
            # else: YARN refuses an ask above the largest node: the job never runs
        return self._loop(asking)

    def _fits_somewhere(self, job: JobState) -> bool:
        """Whether every container the job asks for fits the largest node (the whole
        group when nodes are unknown)."""
        largest_mem, largest_vc = self.largest
        task_mem, task_vc = job.largest
        if task_mem > largest_mem or task_vc > largest_vc:
            return False
        return not self.am.needs_am or (job.am_mem <= largest_mem and job.am_vc <= largest_vc)

    def _loop(self, asking: bool) -> Estimate:
        """The events in time order. ``asking``: running jobs ask for containers at
        the start, which is then an instant of its own (with no event at the
        start, a mix of running jobs only and no busy container never moved)."""
        heap, jobs, pop = self._heap, self.jobs, heapq.heappop
        # without heartbeats no node ever reports (containers have no node)
        reports = self.heartbeats
        if asking and not (heap and heap[0][0] <= self.now):
            self._after_instant(True)
        start = self.now
        while heap:
            now = self.now = heap[0][0]
            kicked = asking and now <= start  # the start's own instant
            while heap and heap[0][0] == now:
                _, _, _, kind, index, count, node, end, shape = pop(heap)
                if kind == END:
                    kicked |= self._end(jobs[index], count, node, end, shape)
                    if reports and not self._more_reports():
                        self._report_heartbeats()
                elif kind == HEARTBEAT:
                    self._on_heartbeat(index)
                elif kind == ARRIVE:
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
        node: int = NO_NODE,
        end: float = 0.0,
        shape: tuple[int, int] = (0, 0),
    ) -> None:
        self._seq += 1
        first = 0 if kind == END else 1
        entry = (time, first, self._seq, kind, index, count, node, end, shape)
        heapq.heappush(self._heap, entry)

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
            self._ask(job, True)  # its AM's ask is pending while it waits
            return self._activate_waiting(queue)
        return self._activate(job)

    def _activate_waiting(self, queue: QueueState) -> bool:
        used = (self.totals.memory - self.free_mem, self.totals.vcores - self.free_vc)
        kicked = False
        # Within one pass the queue's AM limit is fixed, a user's AM limit can only
        # fall (more active users) and AM use only grows: an app is refused whenever
        # an earlier one of its user with no larger AM was. It is skipped unasked, and
        # a kept path holds that earlier refusal, which implies it.
        refused: dict[str, int] = {}
        # LeafQueue.activateApplications tries every waiting app, in order
        for job in list(queue.waiting):
            if job.am_mem >= refused.get(job.user, _NEVER):
                continue
            if self._am_allows(queue, job, used):
                queue.waiting.remove(job)
                queue.am_used_mem += job.am_mem
                queue.am_used_vc += job.am_vc
                queue.users.setdefault(job.user, [0, 0, 0, 0])[2] += job.am_mem
                kicked |= self._activate(job)
            else:
                refused[job.user] = min(job.am_mem, refused.get(job.user, _NEVER))
        return kicked

    def _activate(self, job: JobState) -> bool:
        queue = job.queue
        queue.active.append(job)
        user = queue.users.setdefault(job.user, [0, 0, 0, 0])
        user[1] += 1
        self._shares_dirty = True
        if self.am.needs_am:
            job.awaiting_am = True
            insort(queue.asking_am, (self.ordering[queue.position](job), job))
            self._ask(job, True)
            queue.pending_mem += job.am_mem
            queue.pending_vc += job.am_vc
            return True
        return self._next_stage(job)

    def _adopt(self, job: JobState) -> bool:
        """A job already running when the mix starts: its AM and busy containers are
        held, the busy ones end ``remaining_s`` from now. True when it asks for
        containers now."""
        queue = job.queue
        queue.active.append(job)
        queue.users.setdefault(job.user, [0, 0, 0, 0])[1] += 1
        if self.am.needs_am:
            job.holds_am = True
            job.am_node = self._room_for(job.am_mem, job.am_vc)
            self._hold(job, job.am_mem, job.am_vc, job.am_node)
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
            return job.pending > 0
        return self._next_stage(job)

    def _room_for(self, memory: int, vcores: int) -> int:
        """The first node an adopted container fits on (node 0 if none)."""
        for node in range(len(self.node_mem)):
            if self.node_mem[node] >= memory and self.node_vc[node] >= vcores:
                return node
        return 0 if self.node_mem else NO_NODE

    def _load_stage(self, job: JobState) -> None:
        """Make the current stage's tasks pending (the stage at the head of ``stages``)."""
        tasks, memory, vcores = job.demands[job.stage] if job.has_stage else (0, 0, 0)
        job.pending = tasks
        self._ask(job, tasks > 0)
        job.queue.pending_mem += memory
        job.queue.pending_vc += vcores

    def _ask(self, job: JobState, asking: bool) -> None:
        """Whether the job asks for containers (its user is active while one of its
        jobs does: :func:`yarn_adapt.semantics.capacity.is_active_user`)."""
        if job.asking != asking:
            job.asking = asking
            job.queue.users.setdefault(job.user, [0, 0, 0, 0])[3] += 1 if asking else -1

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
        self._ask(job, False)
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
        queue.users.setdefault(job.user, [0, 0, 0, 0])[0] += memory

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
        self._push(report, END, job.index, -1, node, self.now, (memory, vcores))

    def _end_at(
        self, job: JobState, end: float, node: int, count: int, shape: tuple[int, int]
    ) -> None:
        """``count`` containers of ``shape`` of ``job`` on ``node`` end at ``end``; the
        scheduler hears it at the node's next heartbeat (at once without heartbeats)."""
        report = end if node < 0 else self._next_heartbeat(node, end, False)
        self._push(report, END, job.index, count, node, end, shape)

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


def evaluate(
    mechanism: Mechanism,
    config: GroupConfig,
    mix: JobMix,
    resources: GroupResources,
    constraints: GroupConstraints,
) -> Estimate:
    """L(R·c_i, J_i, C_i, S_i) under ``mechanism``: mean job latency of ``mix``."""
    return Algorithm1(mechanism, config, mix, resources, constraints).run()
