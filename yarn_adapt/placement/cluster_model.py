"""A task-level RU cluster model, the world ``yarn-adapt bench placement`` places into
(as Tarcil's own evaluation, §6): jobs arrive, take RUs, run slower by the
contention they meet, and leave.

**Interference.** An RU's occupant sees the pressure the other RUs of its server
cause (eq. 3, with the *true* caused vectors) and tolerates ``1 - sensitivity`` of
it per resource (true profile). It runs at speed ``1 / (1 + slope x sum of the
overshoot over its tolerances)``. A job's tasks run side by side on its RUs and
finish together, so a job progresses at the speed of its slowest RU. Speeds change
whenever a neighbour arrives or leaves: the model advances every affected job's
remaining work and reschedules its end.

**Scheduling.** Every job goes to the scheduler under test (a
:class:`~yarn_adapt.placement.agents.Scheduler`: agents or one direct scheduler,
over the master :class:`~yarn_adapt.placement.state.RUState`, the same placement
code the YARN simulator's hook runs). Outcomes:

* placed -- it starts now;
* queued by admission control (the best of its samples would slow it or its
  neighbours down, and waiting is expected to cost less) -- it waits in the
  :class:`~yarn_adapt.placement.admission.WaitQueue`; whenever servers free RUs
  its class accepts, the oldest waiting jobs of the class are offered them, and
  at its wait bound it is placed with the largest sample, whatever it finds;
* no room (fewer free RUs than it needs) -- it waits in a backfilling queue, retried
  on every release;
* rejected (can never fit) -- recorded, never run.

**Load monitor** (Tarcil §5.2, :mod:`~yarn_adapt.placement.monitor`; Tarcil only).
Every ``interval_s`` the monitors report on the servers whose occupancy changed.
Jobs found below their target join a watch list; each report, watched jobs for
which a move would pay have their slow tasks moved to better RUs (their progress
pays the move's cost) -- until they end, recover, or could no longer gain. With
closing on, servers with an occupant below its target are closed to new work
(reopened when none is). The speeds, contention and pressure seen feed the
profile correction
(:class:`~yarn_adapt.placement.correction.LiveProfiles`), whose corrected
profiles the placer, the scheduler's beliefs about running jobs (headroom) and new
jobs' tenants use from then on.

**Measurement.** The model starts at steady state: a resident population drawn
length-biased from the same mix, with random remaining work, placed at time 0 by the
scheduler under test (not measured). Jobs arriving in ``[0, measure_until_s)`` are
measured: performance = ideal duration / (end - arrival), so it counts queueing
and interference (scheduling is instantaneous in simulated time; its cost is
reported separately as decision time). At the horizon a running job's end is
projected at its current speed, and a waiting job is scored as if it started then
at full speed (optimistic). Decision time is the wall time (and the thread's CPU
time) of the scheduler's ``schedule`` call: admission check, sampling, choice,
commit and retries -- for arrivals, retries of jobs with no room, offers to queued
jobs and placements at a wait bound alike; not the agents' syncs, the admission
counters' update or the monitors' work, which run beside the decisions (Tarcil
§4-5; the relocation searches are timed apart).
"""

from __future__ import annotations

import heapq
import math
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from yarn_adapt.errors import InputError
from yarn_adapt.placement.admission import AdmissionControl, WaitRecord
from yarn_adapt.placement.agents import CommitStats, Scheduled, Scheduler, SharedState, Tenant
from yarn_adapt.placement.correction import LiveProfiles
from yarn_adapt.placement.jobs import Outcome, Placement, PlacementJob
from yarn_adapt.placement.monitor import AdjustmentStats, MonitorSettings, migration_pays
from yarn_adapt.placement.profiles import InterferenceProfile, ProfileSource
from yarn_adapt.placement.quality import LEVELS
from yarn_adapt.placement.state import FREE, RUState
from yarn_adapt.placement.view import PlacementView
from yarn_adapt.placement.workloads import JobArrival

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

_ARRIVE, _END, _DEADLINE, _REPORT = 0, 1, 2, 3


class Adjuster(Protocol):
    """What the admission queue's offers and the monitors' moves need of the
    placer (:class:`~yarn_adapt.placement.tarcil.TarcilPlacer`)."""

    def takeable(
        self, view: PlacementView, job_classes: Sequence[str], servers: IntArray
    ) -> IntArray: ...

    def relocate(
        self, job: PlacementJob, view: PlacementView, rng: np.random.Generator
    ) -> Placement: ...


@dataclass
class Monitoring:
    """The §5.2 machinery of a Tarcil run: the monitors' settings, the placer
    that relocates, and the profiles they correct (``None``: no correction)."""

    settings: MonitorSettings
    adjuster: Adjuster
    profiles: LiveProfiles | None
    rng: np.random.Generator


@dataclass(frozen=True)
class ModelSettings:
    slope: float = 1.0
    horizon_s: float = 600.0
    measure_until_s: float = 540.0
    retry_budget: int = 32
    offer_budget: int = 8
    check_slots: bool = False  # diagnose, per arrival, the best speed any free RUs gave
    slot_slowdown: float = 0.05  # "fitting": the job would run within this of ideal

    def __post_init__(self) -> None:
        if self.slope < 0 or self.horizon_s <= 0 or not 0 < self.measure_until_s <= self.horizon_s:
            raise InputError("model: slope >= 0, horizon > 0, 0 < measure_until <= horizon")
        if not 0 < self.slot_slowdown < 1 or self.retry_budget < 0 or self.offer_budget < 0:
            raise InputError("model: 0 < slot_slowdown < 1, retry and offer budgets >= 0")


@dataclass
class JobOutcome:
    """What happened to one measured job."""

    arrival_s: float
    duration_s: float
    job_class: str
    ru_count: int
    start_s: float | None = None
    end_s: float | None = None
    admission_queued: bool = False
    wait_estimate_s: float | None = None
    rejected: bool = False
    projected: bool = False
    migrations: int = 0
    first_servers: tuple[int, ...] = ()  # where it started
    slot_at_arrival: bool | None = None  # see ModelSettings.check_slots
    best_speed_at_arrival: float | None = None  # see ClusterModel._best_speed_now

    @property
    def performance_vs_best_available(self) -> float | None:
        """Performance against the job's optimal in Tarcil §6.3's sense: "the
        performance on the best available resources and zero scheduling delay" --
        its speed on the best ``m`` RUs free at its arrival, started at once.
        ``None`` when not diagnosed, or when no ``m`` RUs were free at all (nothing
        could have started it then). Capped at 1 (neighbours may leave later)."""
        best = self.best_speed_at_arrival
        if best is None or best <= 0.0:
            return None
        return min(self.performance / best, 1.0)

    @property
    def performance(self) -> float:
        if self.rejected or self.end_s is None:
            return 0.0
        return self.duration_s / max(self.end_s - self.arrival_s, self.duration_s)


@dataclass
class ModelResult:
    jobs: list[JobOutcome]
    decision_ns: list[int]
    decision_cpu_ns: list[int]
    utilisation: float
    conflict_rate: float
    estimate_errors: list[tuple[float, float]] = field(default_factory=list)
    wait_records: list[WaitRecord] = field(default_factory=list)
    adjustments: AdjustmentStats | None = None
    profiles: ProfileSource | None = None
    decision_kinds: list[int] = field(default_factory=list)
    stale_rate: float = 0.0  # commits refused for a server grown more contended (agents)

    def performances(self) -> FloatArray:
        values: FloatArray = np.array([j.performance for j in self.jobs if not j.rejected])
        return values


@dataclass
class _Running:
    rus: IntArray
    remaining: float
    rate: float
    since: float
    version: int = 0


# what a decision was for (ModelResult.decision_kinds)
ARRIVAL, RETRY, OFFER, BOUND = 0, 1, 2, 3
DECISION_KINDS = ("arrival", "retry", "offer", "bound")


class ClusterModel:
    """See the module docstring."""

    def __init__(
        self,
        state: RUState,
        scheduler: Scheduler,
        truth: dict[str, InterferenceProfile],
        book: ProfileSource,
        settings: ModelSettings,
        admission: AdmissionControl | None = None,
        warm_scheduler: Scheduler | None = None,
        monitoring: Monitoring | None = None,
    ) -> None:
        self.state = state
        self.scheduler = scheduler
        self.admission = admission
        self.warm_scheduler = warm_scheduler or scheduler
        self.settings = settings
        self.truth = truth
        self.book = book
        self.monitoring = monitoring
        self._class_names = sorted(truth)
        self._class_index = {name: i for i, name in enumerate(self._class_names)}
        rows = [truth[name] for name in self._class_names]
        self._tolerance = np.array([p.tolerance for p in rows])
        self._caused = np.array([p.caused for p in rows])
        # measured pressure, believed tolerance (see Tenant), per class and revision
        self._tenants: dict[int, tuple[int, Tenant]] = {}
        self._owner_class = np.full(state.ru_count, -1, dtype=np.int64)
        self._ru_speed = np.ones(state.ru_count)
        self._running: dict[int, _Running] = {}
        self._heap: list[tuple[float, int, int, int, int]] = []
        self._seq = 0
        self.now = 0.0
        self._busy_area = 0.0
        self._touched: set[int] = set()
        self._watched: dict[int, None] = {}  # suffering jobs, oldest first
        self.adjustments = AdjustmentStats()

    @property
    def shared(self) -> SharedState:
        return self.scheduler.shared

    def _tenant(self, class_index: int) -> Tenant:
        name = self._class_names[class_index]
        revision = self.book.revision(name)
        found = self._tenants.get(class_index)
        if found is None or found[0] != revision:
            believed = np.array(self.book.profile(name).tolerance)
            found = (revision, Tenant(self._caused[class_index], believed))
            self._tenants[class_index] = found
        return found[1]

    # ------------------------------------------------------------------ running

    def run(self, jobs: Sequence[JobArrival], residents: Sequence[JobArrival] = ()) -> ModelResult:
        """Place ``residents`` at time 0 (unmeasured), then replay ``jobs``."""
        for job in (*residents, *jobs):
            if job.job.job_class not in self._class_index:
                raise InputError(
                    f"job {job.job.id}: class {job.job.job_class!r} has no true profile"
                )
        self._all = list(residents) + list(jobs)
        self._outcomes: dict[int, JobOutcome] = {}
        self._decisions: list[int] = []
        self._decisions_cpu: list[int] = []
        self._kinds: list[int] = []
        self._waiting: deque[int] = deque()
        for index in range(len(residents)):
            self._start_resident(index)
        self.shared.stats = CommitStats()  # measure the run, not the warm-up
        for offset, job in enumerate(jobs):
            index = len(residents) + offset
            if job.arrival_s < self.settings.measure_until_s:
                self._outcomes[index] = JobOutcome(
                    job.arrival_s, job.duration_s, job.job.job_class, job.job.ru_count
                )
            self._push(job.arrival_s, _ARRIVE, index)
        if self.monitoring is not None:
            self._push(self.monitoring.settings.interval_s, _REPORT, -1)
        self._loop()
        return self._result()

    def _loop(self) -> None:
        horizon = self.settings.horizon_s
        while self._heap and self._heap[0][0] <= horizon:
            at, _, kind, index, version = heapq.heappop(self._heap)
            self._advance_clock(at)
            if kind == _ARRIVE:
                self._arrive(index)
            elif kind == _END:
                running = self._running.get(index)
                if running is not None and running.version == version:
                    self._finish(index)
            elif kind == _DEADLINE:
                if self.admission is not None and index in self.admission.queue:
                    self._deadline(index)
            else:
                self._report()
            if self.admission is not None:
                self.admission.flush()  # the background counter update
        self._advance_clock(horizon)
        self._project(horizon)

    def _push(self, at: float, kind: int, index: int, version: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, kind, index, version))

    def _advance_clock(self, at: float) -> None:
        busy = self.state.ru_count - self.state.free_count
        self._busy_area += busy * (at - self.now)
        self.now = at

    # ------------------------------------------------------------------ events

    def _start_resident(self, index: int) -> None:
        arrival = self._all[index]
        tenant = self._tenant(self._class_index[arrival.job.job_class])
        done = self.warm_scheduler.schedule(arrival.job, index, tenant, 0.0, force=True)
        if done.placed:
            self._start(index, done.rus)

    def _arrive(self, index: int) -> None:
        outcome = self._outcomes.get(index)
        if outcome is not None and self.settings.check_slots:
            best = self._best_speed_now(self._all[index].job)
            outcome.best_speed_at_arrival = best
            outcome.slot_at_arrival = best >= 1.0 - self.settings.slot_slowdown
        done = self._schedule(index, force=False, kind=ARRIVAL)
        if done.placed:
            self._start(index, done.rus)
            return
        self._not_placed(index, done)

    def _not_placed(self, index: int, done: Scheduled) -> None:
        outcome = self._outcomes.get(index)
        placement = done.placement
        if placement.outcome is Outcome.QUEUED and self.admission is not None:
            bound = placement.wait_bound_s or 0.0
            job = self._all[index].job
            self.admission.enqueue(
                index, job.job_class, job.ru_count, self.now, bound, placement.wait_estimate_s
            )
            if outcome is not None:
                outcome.admission_queued = True
                outcome.wait_estimate_s = placement.wait_estimate_s
            self._push(self.now + bound, _DEADLINE, index)
        elif placement.outcome is Outcome.REJECTED:
            if outcome is not None:
                outcome.rejected = True
        else:
            self._waiting.append(index)

    def _schedule(
        self, index: int, *, force: bool, kind: int, offered: IntArray | None = None
    ) -> Scheduled:
        arrival = self._all[index]
        tenant = self._tenant(self._class_index[arrival.job.job_class])
        self.scheduler.maintain(self.now)
        if offered is not None:
            self.scheduler.notice(offered)
        began, began_cpu = time.perf_counter_ns(), time.thread_time_ns()
        done = self.scheduler.schedule(
            arrival.job, index, tenant, self.now, force=force, offered=offered
        )
        self._decisions_cpu.append(time.thread_time_ns() - began_cpu)
        self._decisions.append(time.perf_counter_ns() - began)
        self._kinds.append(kind)
        return done

    def _deadline(self, index: int) -> None:
        self._leave_queue(index, ran_out=True)
        done = self._schedule(index, force=True, kind=BOUND)
        if done.placed:
            self._start(index, done.rus)
        else:
            self._waiting.append(index)

    def _leave_queue(self, index: int, *, ran_out: bool) -> None:
        assert self.admission is not None
        self.admission.dequeue(index, self.now, ran_out=ran_out)

    def _finish(self, index: int) -> None:
        running = self._running.pop(index)
        outcome = self._outcomes.get(index)
        if outcome is not None:
            outcome.end_s = self.now
        self._owner_class[running.rus] = -1
        self.shared.release(running.rus, self.now)
        servers = np.unique(self.state.server_of(running.rus))
        self._refresh(servers)
        self._retry_waiting()
        self._offer(servers)

    def _retry_waiting(self) -> None:
        budget = self.settings.retry_budget
        for index in list(self._waiting)[:budget]:
            if self.state.free_count < self._all[index].job.ru_count:
                continue
            done = self._schedule(index, force=True, kind=RETRY)
            if done.placed:
                self._waiting.remove(index)
                self._start(index, done.rus)

    def _offer(self, servers: IntArray) -> None:
        """Admission control hears that ``servers`` freed RUs (or contention): it
        notes which classes accept them (the appearance rates behind its wait
        estimates) and offers them to the oldest queued jobs of those classes."""
        admission = self.admission
        if admission is None or self.monitoring is None or not len(servers):
            return
        self.state.settle()  # the monitors' update of the freed servers
        takeable = self.monitoring.adjuster.takeable(self.state, self._class_names, servers)
        for class_index, count in enumerate(takeable.sum(axis=1).tolist()):
            admission.appearances.note(self._class_names[class_index], count, self.now)
        budget = self.settings.offer_budget
        for job_class in admission.queue.classes():
            row = self._class_index.get(job_class)
            if budget <= 0 or row is None or not takeable[row].any():
                continue
            offered = servers[takeable[row] > 0]
            room = int(takeable[row].sum())
            for index in admission.queue.oldest(job_class, len(admission.queue)):
                if budget <= 0 or room <= 0:
                    break
                need = self._all[index].job.ru_count
                if need > room:  # the freed RUs alone cannot hold it: wait on
                    continue
                budget -= 1
                done = self._schedule(index, force=False, kind=OFFER, offered=offered)
                if not done.placed:
                    break
                room -= need
                self._leave_queue(index, ran_out=False)
                self._start(index, done.rus)

    def _best_speed_now(self, job: PlacementJob) -> float:
        """A diagnostic with the true profiles, outside every decision (it scans the
        cluster): the speed the job would run at on the best ``m`` RUs free now --
        its own RUs contending, each server's contention as it is now -- or 0 when
        fewer than ``m`` RUs are free. A job runs at the speed of its slowest RU
        and an RU's speed only falls as more of the job's RUs share its server, so
        the best choice takes the ``m`` fastest (server, k-th RU there) slots and
        its speed is the ``m``-th fastest. ``slot_at_arrival`` is that speed
        within ``slot_slowdown`` of ideal: jobs without such slots are ones no
        placement could have served well at arrival."""
        self.state.settle()
        servers = self.state.servers_with_free()
        m = job.ru_count
        if not len(servers):
            return 0.0
        free = self.state.server_free_of(servers)
        if int(free.sum()) < m:
            return 0.0
        row = self._class_index[job.job_class]
        seen = self.state.server_levels_of(servers) * (1.0 / LEVELS)
        per_ru = self._caused[row][None, :] / self.state.server_neighbours_of(servers)[:, None]
        levels = min(m, int(free.max()))
        speeds = np.empty((levels, len(servers)))
        for k in range(levels):
            overshoot = np.maximum(seen + k * per_ru - self._tolerance[row], 0.0).sum(axis=1)
            speeds[k] = np.where(free > k, 1.0 / (1.0 + self.settings.slope * overshoot), -1.0)
        flat = speeds.ravel()
        return float(np.partition(flat, len(flat) - m)[len(flat) - m])

    # ------------------------------------------------------------------ speeds

    def _start(self, index: int, rus: IntArray) -> None:
        arrival = self._all[index]
        outcome = self._outcomes.get(index)
        if outcome is not None and outcome.start_s is None:
            outcome.start_s = self.now
            outcome.first_servers = tuple(np.unique(self.state.server_of(rus)).tolist())
        self._owner_class[rus] = self._class_index[arrival.job.job_class]
        self._running[index] = _Running(rus, arrival.duration_s, 1.0, self.now)
        self._refresh(np.unique(self.state.server_of(rus)))

    def _refresh(self, servers: IntArray) -> None:
        """Recompute the speed of every RU on ``servers`` and of the jobs on them."""
        state = self.state
        if self.monitoring is not None:
            self._touched.update(servers.tolist())
        rus = state.rus_of(servers)
        rus = rus[state.occupant[rus] != FREE]
        if len(rus) == 0:
            return
        overshoot = np.maximum(
            state.ru_contention(rus) - self._tolerance[self._owner_class[rus]], 0.0
        ).sum(axis=1)
        self._ru_speed[rus] = 1.0 / (1.0 + self.settings.slope * overshoot)
        for owner in np.unique(state.occupant[rus]).tolist():
            self._reschedule(owner)

    def _reschedule(self, index: int) -> None:
        running = self._running.get(index)
        if running is None:
            return
        running.remaining -= running.rate * max(self.now - running.since, 0.0)
        running.since = max(running.since, self.now)
        running.rate = float(self._ru_speed[running.rus].min())
        running.version += 1
        end = running.since + max(running.remaining, 0.0) / running.rate
        self._push(end, _END, index, running.version)

    # ------------------------------------------------------------------ monitors

    def _report(self) -> None:
        """The load monitors' report (see the module docstring)."""
        monitoring = self.monitoring
        assert monitoring is not None
        settings = monitoring.settings
        self._push(self.now + settings.interval_s, _REPORT, -1)
        self.adjustments.reports += 1
        if self._touched:
            self.state.settle()
            servers = np.fromiter(self._touched, dtype=np.int64, count=len(self._touched))
            self._touched = set()
            rus = self.state.rus_of(servers)
            rus = rus[self.state.occupant[rus] != FREE]
            below = self._ru_speed[rus] < settings.target_speed
            self.adjustments.suffering_seen += int(below.sum())
            if monitoring.profiles is not None and settings.correct:
                self._observe(monitoring.profiles, rus, settings.observations_per_report)
            if settings.close:
                self._close_and_reopen(servers, np.unique(self.state.server_of(rus[below])))
            for owner in np.unique(self.state.occupant[rus[below]]).tolist():
                self._watched[owner] = None
        if settings.migrate and self._watched:
            self._migrate(monitoring)

    def _close_and_reopen(self, servers: IntArray, suffering: IntArray) -> None:
        """Close the servers where someone runs below target; reopen the calm ones."""
        calm = servers[~np.isin(servers, suffering)]
        reopen = calm[self.state.server_closed_of(calm)]
        self.adjustments.closed += int((~self.state.server_closed_of(suffering)).sum())
        self.adjustments.reopened += len(reopen)
        self.shared.set_closed(suffering, True, self.now)
        self.shared.set_closed(reopen, False, self.now)
        if len(reopen):
            self._offer(reopen)

    def _observe(self, profiles: LiveProfiles, rus: IntArray, budget: int) -> None:
        if len(rus) > budget:
            assert self.monitoring is not None
            rus = self.monitoring.rng.choice(rus, size=budget, replace=False)
        contention = self.state.ru_contention(rus)
        speed = self._ru_speed[rus]
        classes = self._owner_class[rus]
        for class_index in np.unique(classes).tolist():
            mine = classes == class_index
            name = self._class_names[class_index]
            profiles.observe_slowdown(name, contention[mine], speed[mine])
            # the pressure a job of the class exerts, as its server measures it
            profiles.observe_pressure(name, self.state.ru_caused[rus[mine][0]])
        self.adjustments.observations += len(rus)
        changed = profiles.refit()
        self.adjustments.corrections += len(changed)
        for name in changed:
            class_index = self._class_index[name]
            believed = self._tenant(class_index).tolerance
            held = np.flatnonzero(self._owner_class == class_index)
            self.shared.retolerate(held, believed, self.now)

    def _migrate(self, monitoring: Monitoring) -> None:
        """Move the watched (suffering) jobs for which a move would pay, oldest
        first, at most ``migrations_per_report`` searches per report; a job leaves
        the watch when it ends, runs on target again or cannot gain from a move."""
        settings = monitoring.settings
        moves = 0
        for index in list(self._watched):
            if moves >= settings.migrations_per_report:
                return
            running = self._running.get(index)
            if running is None or running.rate >= settings.target_speed:
                del self._watched[index]
                continue
            left = running.remaining - running.rate * max(self.now - running.since, 0.0)
            if not migration_pays(left, running.rate, 1.0, settings):
                del self._watched[index]  # not even a perfect move would pay
                continue
            moves += 1
            self._move(index, running, monitoring)

    def _move(self, index: int, running: _Running, monitoring: Monitoring) -> None:
        settings = monitoring.settings
        slow = running.rus[self._ru_speed[running.rus] < settings.target_speed]
        if not len(slow):  # an earlier move this report relieved it
            return
        job = self._all[index].job
        self.state.settle()
        began = time.perf_counter_ns()
        placement = monitoring.adjuster.relocate(job.needing(len(slow)), self.state, monitoring.rng)
        self.adjustments.adjust_ns.append(time.perf_counter_ns() - began)
        if not placement.placed:
            self.adjustments.relocation_misses += 1
            return
        class_index = self._class_index[job.job_class]
        taken, conflicting = self.shared.try_commit(
            placement.rus, index, self._tenant(class_index), self.now
        )
        if len(conflicting) or len(taken) != len(slow):
            if len(taken):
                self.shared.release(taken, self.now)
            self.adjustments.relocation_misses += 1
            return
        # progress so far, then the move: the old RUs go, the new ones come
        running.remaining -= running.rate * max(self.now - running.since, 0.0)
        running.since = self.now + settings.migration_cost_s  # the job pauses to move
        self._owner_class[slow] = -1
        self.shared.release(slow, self.now)
        self._owner_class[taken] = class_index
        running.rus = np.concatenate((running.rus[~np.isin(running.rus, slow)], taken))
        old = np.unique(self.state.server_of(slow))
        self._refresh(np.unique(np.concatenate((old, self.state.server_of(taken)))))
        self.adjustments.migrations += 1
        self.adjustments.migrated_rus += len(slow)
        self.adjustments.migration_cost_s += settings.migration_cost_s
        outcome = self._outcomes.get(index)
        if outcome is not None:
            outcome.migrations += 1
        self._offer(old)

    # ------------------------------------------------------------------ results

    def _project(self, horizon: float) -> None:
        for index, running in self._running.items():
            outcome = self._outcomes.get(index)
            if outcome is not None:
                left = running.remaining - running.rate * max(horizon - running.since, 0.0)
                outcome.end_s = max(horizon, running.since) + max(left, 0.0) / running.rate
                outcome.projected = True
        queued = self.admission.queue.owners() if self.admission is not None else []
        waiting = [*self._waiting, *queued]
        for index in waiting:
            outcome = self._outcomes.get(index)
            if outcome is not None and outcome.end_s is None:
                outcome.end_s = horizon + outcome.duration_s
                outcome.projected = True
        for index, outcome in self._outcomes.items():
            if outcome.end_s is None and not outcome.rejected and index not in self._running:
                outcome.end_s = max(horizon, outcome.arrival_s) + outcome.duration_s
                outcome.projected = True

    def _result(self) -> ModelResult:
        stats = self.shared.stats
        capacity = self.state.ru_count * self.settings.horizon_s
        utilisation = self._busy_area / capacity if capacity > 0 else 0.0
        admission = self.admission
        return ModelResult(
            list(self._outcomes.values()),
            self._decisions,
            self._decisions_cpu,
            utilisation if math.isfinite(utilisation) else 0.0,
            stats.conflict_rate,
            admission.estimate_errors() if admission is not None else [],
            admission.wait_records() if admission is not None else [],
            self.adjustments if self.monitoring is not None else None,
            self.book,
            self._kinds,
            stats.stale_rate,
        )
