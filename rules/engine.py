"""Algorithm 1 (job latency comparison L(R·c_i, J_i, C_i, S_i)) as a numeric engine.

The paper's loop: at each resource-allocation moment t_M, allocate the allocatable
resources r_A to jobs according to C_i and S_i; estimate each allocated job's
execution time with E(j, R_job) (Algorithm 2); the job that finishes first releases
its resources, which sets the next t_M and r_A; return the mean latency.

Here the moments are every instant containers are released or jobs arrive, and
resources are granted a container at a time, in the order the mechanism's kernels
give (queue ranking, then job ranking, subject to the constraint checks) -- which is
how YARN hands out containers on a heartbeat. A job's allocation set R_job is the
sequence of (moment, containers) it receives; its tasks are assigned to those
containers in execution order as in Algorithm 2 (stages are the execution orders:
maps, then reduces), so a job's completion -- and the release of each container --
follows from R_job and the task estimates. Under ``per_task_containers`` a
container returns to the pool when its task ends and the kernels re-arbitrate it;
under ``container_reuse`` it stays with the job while the job has a pending task of
the current stage (Algorithm 2's container-available moments).

Nothing here decides mechanism: every choice comes from the compiled
:class:`~rules.mechanism.Mechanism` through the kernel registries.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

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
    Totals,
    UserCheck,
    lookup,
)
from rules.mechanism import Mechanism
from rules.state import INFINITY, JobState, QueueState, TaskRun
from yarn_adapt.errors import SettingsError
from yarn_adapt.sim.shares import fair_shares

_ARRIVE = 0
_END = 1


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
    ) -> None:
        self.totals = totals = Totals.of(resources.total, resources.unit)
        self.now = mix.now_s
        self.free_mem = totals.memory
        self.free_vc = totals.vcores
        self._kernels(mechanism, totals, constraints)
        self.queues = self._queues(mechanism, config)
        self.jobs = self._jobs(mix, resources)
        self._heap: list[tuple[float, int, int, int, int]] = []
        self._seq = 0
        self._ends: dict[tuple[int, float], int] = {}
        self._shares_dirty = True
        # (moment, job id, is AM) per container granted, when recording R_job for tests
        self.grants: list[tuple[float, str, bool]] | None = [] if record else None

    # ------------------------------------------------------------------ setup

    def _kernels(self, mechanism: Mechanism, totals: Totals, constraints: GroupConstraints) -> None:
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
        self.job_cap = cast(Callable[[JobState], float], self._constraint(mechanism, "placement"))
        self.both_dims = bool(self._constraint(mechanism, "resource_fit"))
        self.reuse = bool(lookup(ESTIMATION, mechanism.estimation))
        self.fair_am = self.am.needs_am and not self.am.on_activation

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
            job = JobState(index, spec, queue, resources.unit)
            if not self.both_dims:
                job.vc = job.am_vc = 0
            job.cap_mem = self.job_cap(job)
            jobs.append(job)
        return jobs

    # ------------------------------------------------------------------ the loop

    def run(self) -> Estimate:
        for job in self.jobs:
            if job.spec.am_running or job.spec.running:
                self._adopt(job)
            else:
                self._push(max(job.submit, self.now), _ARRIVE, job.index, 0)
        heap = self._heap
        while heap:
            self.now = heap[0][0]
            while heap and heap[0][0] == self.now:
                _, _, kind, index, count = heapq.heappop(heap)
                if kind == _END:
                    self._end(self.jobs[index], count)
                else:
                    self._arrive(self.jobs[index])
            self._allocate()
        return self._estimate()

    def _push(self, time: float, kind: int, index: int, count: int) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time, self._seq, kind, index, count))

    def _estimate(self) -> Estimate:
        latencies = tuple(job.finish - job.submit for job in self.jobs)
        unfinished = sum(1 for job in self.jobs if job.finish == INFINITY)
        mean = sum(latencies) / len(latencies) if latencies else 0.0
        return Estimate(mean, latencies, unfinished)

    # ------------------------------------------------------------------ jobs

    def _arrive(self, job: JobState) -> None:
        queue = job.queue
        if self.am.needs_am and self.am.on_activation:
            queue.waiting.append(job)
            self._activate_waiting(queue)
        else:
            self._activate(job)

    def _activate_waiting(self, queue: QueueState) -> None:
        used = self.totals.memory - self.free_mem
        while queue.waiting and self.am.allows(queue, queue.waiting[0], used):
            job = queue.waiting.popleft()
            queue.am_used_mem += job.am_mem
            queue.am_used_vc += job.am_vc
            self._activate(job)

    def _activate(self, job: JobState) -> None:
        queue = job.queue
        queue.active.append(job)
        user = queue.users.setdefault(job.user, [0, 0])
        user[1] += 1
        self._shares_dirty = True
        if self.am.needs_am:
            job.awaiting_am = True
            queue.pending_mem += job.am_mem
            queue.pending_vc += job.am_vc
        else:
            self._next_stage(job)

    def _adopt(self, job: JobState) -> None:
        """A job already running when the mix starts: its AM and busy containers are
        held, the busy ones end ``remaining_s`` from now."""
        queue = job.queue
        queue.active.append(job)
        queue.users.setdefault(job.user, [0, 0])[1] += 1
        if self.am.needs_am and job.spec.am_running:
            job.holds_am = True
            self._hold(job, job.am_mem, job.am_vc)
            queue.am_used_mem += job.am_mem
            queue.am_used_vc += job.am_vc
        first_stage = min((r.stage for r in job.spec.running), default=0)
        while job.stages and first_stage > 0 and not job.stages[0]:
            job.stages.popleft()
            first_stage -= 1
        for run in job.spec.running:
            job.running += run.count
            self._hold(job, job.mem * run.count, job.vc * run.count)
            self._push(self.now + run.remaining_s, _END, job.index, run.count)
        self._load_stage(job)
        if job.pending == 0 and job.running == 0:
            self._next_stage(job)

    def _hold(self, job: JobState, memory: int, vcores: int) -> None:
        queue = job.queue
        self.free_mem -= memory
        self.free_vc -= vcores
        queue.used_mem += memory
        queue.used_vc += vcores
        job.used_mem += memory
        job.used_vc += vcores
        queue.users.setdefault(job.user, [0, 0])[0] += memory

    def _load_stage(self, job: JobState) -> None:
        """Make the current stage's tasks pending (the stage at the head of ``stages``)."""
        count = sum(run.count for run in job.stages[0]) if job.stages else 0
        job.pending = count
        job.queue.pending_mem += count * job.mem
        job.queue.pending_vc += count * job.vc

    def _next_stage(self, job: JobState) -> None:
        """The current stage is over (or the job just got its AM): start the next
        stage that has tasks, or finish the job."""
        while job.stages and not job.stages[0]:
            job.stages.popleft()
        if job.stages:
            self._load_stage(job)
            return
        self._finish(job)

    def _finish(self, job: JobState) -> None:
        job.finish = self.now
        queue = job.queue
        queue.active.remove(job)
        queue.users[job.user][1] -= 1
        self._shares_dirty = True
        if job.holds_am:
            self._release(job, job.am_mem, job.am_vc)
            queue.am_used_mem -= job.am_mem
            queue.am_used_vc -= job.am_vc
            job.holds_am = False
        if self.am.needs_am and self.am.on_activation:
            self._activate_waiting(queue)

    def _release(self, job: JobState, memory: int, vcores: int) -> None:
        queue = job.queue
        self.free_mem += memory
        self.free_vc += vcores
        queue.used_mem -= memory
        queue.used_vc -= vcores
        job.used_mem -= memory
        job.used_vc -= vcores
        queue.users[job.user][0] -= memory

    def _end(self, job: JobState, count: int) -> None:
        """``count`` of the job's containers finished their tasks."""
        job.running -= count
        if self.reuse and job.pending > 0:
            kept = min(count, job.pending)
            for _ in range(kept):
                self._start_task(job)
            job.running += kept
            count -= kept
            self._flush_ends()
        if count:
            self._release(job, job.mem * count, job.vc * count)
        if job.pending == 0 and job.running == 0:
            self._next_stage(job)

    # ------------------------------------------------------------------ allocation

    def _allocate(self) -> None:
        """Grant containers one at a time until nothing more can be granted now."""
        while self.free_mem > 0:
            job = self._pick()
            if job is None:
                break
            self._grant(job)
        self._flush_ends()

    def _pick(self) -> JobState | None:
        asking = [q for q in self.queues if q.has_demand]
        if not asking:
            return None
        if self.fair_am and self._shares_dirty:
            self._update_fair_shares()
        if len(asking) > 1:
            asking.sort(key=self.allocation.key)
        for queue in asking:
            job = self._pick_job(queue)
            if job is not None:
                return job
        return None

    def _pick_job(self, queue: QueueState) -> JobState | None:
        jobs = [j for j in queue.active if j.awaiting_am or j.pending > 0]
        if len(jobs) > 1:
            jobs.sort(key=self.ordering[queue.position])
        used = self.totals.memory - self.free_mem
        for job in jobs:
            memory, vcores = job.request
            if memory > self.free_mem or (vcores > self.free_vc):
                continue
            if queue.used_mem + memory > queue.ceiling_mem:
                continue
            if self.both_dims and queue.used_vc + vcores > queue.ceiling_vc:
                continue
            if job.used_mem + memory > job.cap_mem:
                continue
            if job.awaiting_am:
                if self.fair_am and not self.am.allows(queue, job, used):
                    continue
            elif not self.users.allows(queue, job):
                continue
            return job
        return None

    def _grant(self, job: JobState) -> None:
        queue = job.queue
        if self.grants is not None:
            self.grants.append((self.now, job.spec.id, job.awaiting_am))
        if job.awaiting_am:
            job.awaiting_am = False
            job.holds_am = True
            queue.pending_mem -= job.am_mem
            queue.pending_vc -= job.am_vc
            self._hold(job, job.am_mem, job.am_vc)
            if self.fair_am:
                queue.am_used_mem += job.am_mem
                queue.am_used_vc += job.am_vc
            self._next_stage(job)
            return
        self._hold(job, job.mem, job.vc)
        self._start_task(job)
        job.running += 1

    def _start_task(self, job: JobState) -> None:
        """The job's next pending task (execution order) starts now; its container's
        available moment is now + its estimated seconds (Algorithm 2, line 16)."""
        head: TaskRun = job.stages[0][0]
        head.count -= 1
        if head.count == 0:
            job.stages[0].popleft()
        job.pending -= 1
        job.queue.pending_mem -= job.mem
        job.queue.pending_vc -= job.vc
        job.work_left -= head.seconds
        key = (job.index, head.seconds)
        self._ends[key] = self._ends.get(key, 0) + 1

    def _flush_ends(self) -> None:
        for (index, seconds), count in self._ends.items():
            self._push(self.now + seconds, _END, index, count)
        self._ends.clear()

    def _update_fair_shares(self) -> None:
        self._shares_dirty = False
        active = [q for q in self.queues if q.active]
        for queue in self.queues:
            queue.fair_mem = 0.0
        if not active:
            return
        shares = fair_shares(
            [q.weight for q in active],
            [q.floor_mem for q in active],
            [q.ceiling_mem for q in active],
            float(self.totals.memory),
        )
        for queue, share in zip(active, shares, strict=True):
            queue.fair_mem = share


def evaluate(
    mechanism: Mechanism,
    config: GroupConfig,
    mix: JobMix,
    resources: GroupResources,
    constraints: GroupConstraints,
) -> Estimate:
    """L(R·c_i, J_i, C_i, S_i) under ``mechanism``: mean job latency of ``mix``."""
    return Algorithm1(mechanism, config, mix, resources, constraints).run()


def mean_of(estimates: Sequence[Estimate]) -> float:
    return sum(e.mean_latency_s for e in estimates) / len(estimates) if estimates else 0.0
