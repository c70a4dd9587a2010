"""Granting containers in Algorithm 1: which job gets the next container, under
the kernels' queue ranking, job ordering and constraint checks, as YARN hands them
out one at a time -- and, when the run's path is kept (:mod:`rules.paths`), the
record of every configuration-dependent decision taken on the way.

:class:`Granting` is that part of :class:`rules.engine.Algorithm1`.
"""

from __future__ import annotations

from rules.heartbeats import AM_READY, NO_NODE, HeartbeatTiming
from rules.kernels import Allocation, AmPolicy, JobKey, Timing, Totals, UserCheck
from rules.kernelset import FairShares
from rules.paths import (
    AmDecision,
    Ceiling,
    Decisions,
    Order,
    UserDecision,
    load_of,
    users_of,
)
from rules.state import INFINITY, JobState, QueueState

# a named tuple built without its keyword-checking __new__ (the recording is hot)
_new = tuple.__new__


class Granting(HeartbeatTiming):
    """The grant loop and its checks. The engine provides the state and kernels
    declared here, and ``_hold`` / ``_push`` / ``_end_at``."""

    totals: Totals
    now: float
    free_mem: int
    free_vc: int
    node_mem: list[int]
    node_vc: list[int]
    queues: list[QueueState]
    jobs: list[JobState]
    allocation: Allocation
    ordering: tuple[JobKey, ...]
    am: AmPolicy
    users: UserCheck
    no_user_limit: bool
    both_dims: bool
    timing: Timing
    fair_am: bool
    block_at_ceiling: bool
    decisions: Decisions | None
    grants: list[tuple[float, str, bool]] | None
    shares: FairShares
    _shares_dirty: bool
    _shares_of: tuple[int, ...] | None
    _ends: dict[tuple[int, float, int, int, int], int]
    _am_seen: bool  # an AM check at this instant read the group's use
    _ready: list[int]  # jobs whose AM was granted since the last flush

    # provided by the engine
    def _hold(self, job: JobState, memory: int, vcores: int, node: int) -> None:
        raise NotImplementedError

    def _end_at(
        self, job: JobState, end: float, node: int, count: int, shape: tuple[int, int]
    ) -> None:
        raise NotImplementedError

    def _ask(self, job: JobState, asking: bool) -> None:
        raise NotImplementedError

    def _allocate_anywhere(self) -> None:
        """Continuous timing: grant until nothing more can be granted now. When the
        path is kept, the queue rankings of an instant that met every ask are
        dropped from it (:meth:`_orders_matter`)."""
        decisions = self.decisions
        if decisions is None:
            self._grant_all()
            return
        orders, decisions.orders = decisions.orders, {}
        self._am_seen = False
        try:
            self._grant_all()
        finally:
            instant, decisions.orders = decisions.orders, orders
        if instant and self._orders_matter():
            orders.update(instant)

    def _grant_all(self) -> None:
        # every request is at least the unit (normalised): below it nothing fits
        unit_mem = self.totals.unit_mem
        while self.free_mem >= unit_mem:
            job = self._pick(self.free_mem, self.free_vc)
            if job is None:
                break
            self._grant(job, NO_NODE)
        if self._ends or self._ready:
            self._flush_ends()

    def _orders_matter(self) -> bool:
        """Whether the order the queues were served in at this instant (continuous
        timing) can matter to the run. It cannot when every ask was met and no AM
        check read the group's use (:meth:`rules.kernels.AmPolicy.reads_used`):
        each queue's checks read its own state (its use, users, ceiling) and its
        own jobs, which grants to other queues leave alone; room cannot run out in
        another order (the asks met in one order fit in all); and what the instant
        leaves behind -- every job's and queue's holdings, the granted AMs and the
        containers' ends, pushed in a fixed order (:meth:`_flush_ends`) -- is the
        same in any order. So a configuration that ranks the queues otherwise but
        decides every recorded check alike takes the same path
        (:mod:`rules.paths`). The group's use at an AM check is what the order
        changes."""
        return self._am_seen or any(q.pending_mem > 0 or q.pending_vc > 0 for q in self.queues)

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
                loads = tuple(load_of(q) for q in asking)
                asking.sort(key=self.allocation.key)
                self.decisions.orders[_new(Order, (loads, tuple(q.position for q in asking)))] = (
                    None
                )
        for queue in asking:
            job = self._pick_job(queue, free_mem, free_vc)
            if job is not None:
                return job
        return None

    def _pick_job(self, queue: QueueState, free_mem: int, free_vc: int) -> JobState | None:
        """The queue's first job, in its ordering, whose next container may be
        granted now: its AM or its next task's."""
        by_key = self.ordering[queue.position]
        tasks = [(by_key(j), j) for j in queue.active if j.pending > 0]
        if len(tasks) > 1:
            tasks.sort()
        ams = queue.asking_am  # no job asks for its AM and for tasks at once
        users = None if self.no_user_limit else self.users
        refused_am: float = INFINITY  # an AM as big as a refused one is refused too
        # shapes over the queue's ceiling: the queue's use is fixed while this runs, so
        # a shape refused once is refused again (and its decision is on record)
        over: set[tuple[int, int]] = set()
        next_task = next_am = 0
        while True:
            # the next job in key order of the two sorted lists
            if next_am < len(ams) and (
                next_task == len(tasks) or ams[next_am][0] < tasks[next_task][0]
            ):
                job = ams[next_am][1]
                next_am += 1
                memory, vcores = job.am_mem, job.am_vc
                if memory >= refused_am:
                    continue
            elif next_task < len(tasks):
                job = tasks[next_task][1]
                next_task += 1
                head = job.stages[job.stage][job.run]
                memory, vcores = head[2], head[3]
            else:
                return None
            if users is not None and not self._user_allows(queue, job):
                continue
            if (memory, vcores) in over:
                continue
            if self._over_ceiling(queue, memory, vcores):
                if self.block_at_ceiling:
                    return None
                over.add((memory, vcores))
                continue
            if job.used_mem + memory > job.cap_mem:
                continue
            if job.awaiting_am and self.fair_am and not self._am_allows(queue, job, self._used()):
                refused_am = float(memory)
                if all(other.am_mem >= memory for _, other in ams[next_am:]):
                    next_am = len(ams)  # every AM left is refused
                continue
            if memory > free_mem or vcores > free_vc:
                continue
            return job

    def _used(self) -> tuple[int, int]:
        return self.totals.memory - self.free_mem, self.totals.vcores - self.free_vc

    def _over_ceiling(self, queue: QueueState, memory: int, vcores: int) -> bool:
        asked_mem, asked_vc = queue.used_mem + memory, queue.used_vc + vcores
        over = asked_mem > queue.ceiling_mem or (self.both_dims and asked_vc > queue.ceiling_vc)
        if self.decisions is not None:
            self.decisions.ceilings[_new(Ceiling, (queue.position, asked_mem, asked_vc, over))] = (
                None
            )
        return over

    def _user_allows(self, queue: QueueState, job: JobState) -> bool:
        allowed = self.users.allows(queue, job)
        if self.decisions is not None:
            decision = _new(
                UserDecision, (queue.position, queue.used_mem, users_of(queue), job.index, allowed)
            )
            self.decisions.users[decision] = None
        return allowed

    def _am_allows(self, queue: QueueState, job: JobState, used: tuple[int, int]) -> bool:
        allowed = self.am.allows(queue, job, used)
        if self.decisions is not None:
            self._am_seen |= self.am.reads_used(queue, job)
            decision = _new(
                AmDecision,
                (
                    load_of(queue),
                    queue.am_used_mem,
                    queue.am_used_vc,
                    users_of(queue) if self.am.reads_users else (),
                    self._shares_of,
                    job.index,
                    used,
                    allowed,
                ),
            )
            self.decisions.ams[decision] = None
        return allowed

    def _grant(self, job: JobState, node: int) -> None:
        queue = job.queue
        if self.grants is not None:
            self.grants.append((self.now, job.spec.id, job.awaiting_am))
        if job.awaiting_am:
            job.awaiting_am = False
            queue.asking_am.remove((self.ordering[queue.position](job), job))
            self._ask(job, False)  # until the AM asks for its tasks
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
            self._ready.append(job.index)
            return
        memory, vcores = job.request
        self._hold(job, memory, vcores, node)
        self._start_task(job, node)
        job.running += 1

    def _start_task(self, job: JobState, node: int) -> None:
        """The job's next pending task (execution order) starts now; its container's
        available moment is now + its estimated seconds (Algorithm 2, line 16)."""
        _, seconds, memory, vcores = job.start_task()
        if job.pending == 0:
            self._ask(job, False)
        job.queue.pending_mem -= memory
        job.queue.pending_vc -= vcores
        key = (job.index, seconds, node, memory, vcores)
        self._ends[key] = self._ends.get(key, 0) + 1

    def _flush_ends(self) -> None:
        """Push the AMs granted since the last flush (ready now, by job) and the ends
        of the containers granted since then, in the order of their keys (job,
        duration, node, shape) -- not the order they were granted in, which another
        ranking of the queues would change."""
        for index in sorted(self._ready):
            self._push(self.now, AM_READY, index)
        self._ready.clear()
        for (index, seconds, node, memory, vcores), count in sorted(self._ends.items()):
            self._end_at(self.jobs[index], self.now + seconds, node, count, (memory, vcores))
        self._ends.clear()

    def _update_fair_shares(self) -> None:
        """Each queue's instantaneous fair share; it depends only on which queues are
        active (their weights and bounds are fixed while the mix runs), so it is
        worked out once per set of active queues."""
        self._shares_dirty = False
        active = tuple(q.position for q in self.queues if q.active)
        self._shares_of = active
        self.shares.set(active)
