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
* queued by admission control -- it is retried whenever RUs free up, and placed
  with the largest sample once its wait bound has passed;
* no room (fewer free RUs than it needs) -- it waits in a backfilling queue, retried
  on every release;
* rejected (can never fit) -- recorded, never run.

**Measurement.** The model starts at steady state: a resident population drawn
length-biased from the same mix, with random remaining work, placed at time 0 by the
scheduler under test (not measured). Jobs arriving in ``[0, measure_until_s)`` are
measured: performance = ideal duration / (end - arrival), so it counts queueing
and interference (scheduling is instantaneous in simulated time; its cost is
reported separately as decision time). At the horizon a running job's end is
projected at its current speed, and a waiting job is scored as if it started then
at full speed (optimistic). Decision time is the wall time (and the thread's CPU
time) of the scheduler's ``schedule`` call: admission check, sampling, choice,
commit and retries; not the agents' syncs or the admission counters' update,
which run beside the decisions (Tarcil §4-5).
"""

from __future__ import annotations

import heapq
import math
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from yarn_adapt.errors import InputError
from yarn_adapt.placement.admission import AdmissionControl
from yarn_adapt.placement.agents import CommitStats, Scheduled, Scheduler, Tenant
from yarn_adapt.placement.policies import Outcome
from yarn_adapt.placement.profiles import InterferenceProfile, ProfileBook
from yarn_adapt.placement.state import FREE, RUState
from yarn_adapt.placement.workloads import JobArrival

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

_ARRIVE, _END, _DEADLINE = 0, 1, 2


@dataclass(frozen=True)
class ModelSettings:
    slope: float = 1.0
    horizon_s: float = 600.0
    measure_until_s: float = 540.0
    retry_budget: int = 32

    def __post_init__(self) -> None:
        if self.slope < 0 or self.horizon_s <= 0 or not 0 < self.measure_until_s <= self.horizon_s:
            raise InputError("model: slope >= 0, horizon > 0, 0 < measure_until <= horizon")


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


class ClusterModel:
    """See the module docstring."""

    def __init__(
        self,
        state: RUState,
        scheduler: Scheduler,
        truth: dict[str, InterferenceProfile],
        book: ProfileBook,
        settings: ModelSettings,
        admission: AdmissionControl | None = None,
        warm_scheduler: Scheduler | None = None,
    ) -> None:
        self.state = state
        self.scheduler = scheduler
        self.admission = admission
        self.warm_scheduler = warm_scheduler or scheduler
        self.settings = settings
        self.truth = truth
        self._class_index = {name: i for i, name in enumerate(sorted(truth))}
        rows = [truth[name] for name in sorted(truth)]
        self._tolerance = np.array([p.tolerance for p in rows])
        # measured pressure, believed tolerance (see Tenant)
        self._tenants = [
            Tenant(np.array(truth[name].caused), np.array(book.profile(name).tolerance))
            for name in sorted(truth)
        ]
        self._owner_class = np.full(state.ru_count, -1, dtype=np.int64)
        self._ru_speed = np.ones(state.ru_count)
        self._running: dict[int, _Running] = {}
        self._heap: list[tuple[float, int, int, int, int]] = []
        self._seq = 0
        self.now = 0.0
        self._busy_area = 0.0

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
        self._admission: dict[int, tuple[float, float | None]] = {}
        self._waiting: deque[int] = deque()
        for index in range(len(residents)):
            self._start_resident(index)
        self.scheduler.shared.stats = CommitStats()  # measure the run, not the warm-up
        for offset, job in enumerate(jobs):
            index = len(residents) + offset
            if job.arrival_s < self.settings.measure_until_s:
                self._outcomes[index] = JobOutcome(
                    job.arrival_s, job.duration_s, job.job.job_class, job.job.ru_count
                )
            self._push(job.arrival_s, _ARRIVE, index)
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
            elif index in self._admission:
                self._deadline(index)
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
        tenant = self._tenants[self._class_index[arrival.job.job_class]]
        done = self.warm_scheduler.schedule(arrival.job, index, tenant, 0.0, force=True)
        if done.placed:
            self._start(index, done.rus)

    def _arrive(self, index: int) -> None:
        done = self._schedule(index, force=False)
        if done.placed:
            self._start(index, done.rus)
            return
        self._not_placed(index, done)

    def _not_placed(self, index: int, done: Scheduled) -> None:
        outcome = self._outcomes.get(index)
        placement = done.placement
        if placement.outcome is Outcome.QUEUED:
            bound = placement.wait_bound_s or 0.0
            self._admission[index] = (self.now, placement.wait_estimate_s)
            if outcome is not None:
                outcome.admission_queued = True
                outcome.wait_estimate_s = placement.wait_estimate_s
            self._push(self.now + bound, _DEADLINE, index)
        elif placement.outcome is Outcome.REJECTED:
            if outcome is not None:
                outcome.rejected = True
        else:
            self._waiting.append(index)

    def _schedule(self, index: int, *, force: bool) -> Scheduled:
        arrival = self._all[index]
        tenant = self._tenants[self._class_index[arrival.job.job_class]]
        self.scheduler.maintain(self.now)
        began, began_cpu = time.perf_counter_ns(), time.thread_time_ns()
        done = self.scheduler.schedule(arrival.job, index, tenant, self.now, force=force)
        self._decisions_cpu.append(time.thread_time_ns() - began_cpu)
        self._decisions.append(time.perf_counter_ns() - began)
        return done

    def _deadline(self, index: int) -> None:
        del self._admission[index]
        done = self._schedule(index, force=True)
        if done.placed:
            self._start(index, done.rus)
        else:
            self._waiting.append(index)

    def _finish(self, index: int) -> None:
        running = self._running.pop(index)
        outcome = self._outcomes.get(index)
        if outcome is not None:
            outcome.end_s = self.now
        self._owner_class[running.rus] = -1
        self.scheduler.shared.release(running.rus, self.now)
        self._refresh(np.unique(self.state.server_of(running.rus)))
        self._retry_waiting()

    def _retry_waiting(self) -> None:
        budget = self.settings.retry_budget
        for index in list(self._waiting)[:budget]:
            if self.state.free_count < self._all[index].job.ru_count:
                continue
            done = self._schedule(index, force=True)
            if done.placed:
                self._waiting.remove(index)
                self._start(index, done.rus)
        for index in list(self._admission)[:budget]:
            done = self._schedule(index, force=False)
            if done.placed:
                queued_at, estimate = self._admission.pop(index)
                self._record_wait(index, queued_at, estimate)
                self._start(index, done.rus)

    def _record_wait(self, index: int, queued_at: float, estimate: float | None) -> None:
        if self.admission is not None and estimate is not None:
            job = self._all[index].job
            self.admission.record_wait(job.job_class, job.ru_count, self.now - queued_at, estimate)

    # ------------------------------------------------------------------ speeds

    def _start(self, index: int, rus: IntArray) -> None:
        arrival = self._all[index]
        outcome = self._outcomes.get(index)
        if outcome is not None:
            outcome.start_s = self.now
        self._owner_class[rus] = self._class_index[arrival.job.job_class]
        self._running[index] = _Running(rus, arrival.duration_s, 1.0, self.now)
        self._refresh(np.unique(self.state.server_of(rus)))

    def _refresh(self, servers: IntArray) -> None:
        """Recompute the speed of every RU on ``servers`` and of the jobs on them."""
        state = self.state
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
        running.remaining -= running.rate * (self.now - running.since)
        running.since = self.now
        running.rate = float(self._ru_speed[running.rus].min())
        running.version += 1
        end = self.now + max(running.remaining, 0.0) / running.rate
        self._push(end, _END, index, running.version)

    # ------------------------------------------------------------------ results

    def _project(self, horizon: float) -> None:
        for index, running in self._running.items():
            outcome = self._outcomes.get(index)
            if outcome is not None:
                left = running.remaining - running.rate * (horizon - running.since)
                outcome.end_s = horizon + max(left, 0.0) / running.rate
                outcome.projected = True
        waiting = [*self._waiting, *self._admission]
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
        stats = self.scheduler.shared.stats
        capacity = self.state.ru_count * self.settings.horizon_s
        utilisation = self._busy_area / capacity if capacity > 0 else 0.0
        errors = self.admission.estimate_errors() if self.admission is not None else []
        return ModelResult(
            list(self._outcomes.values()),
            self._decisions,
            self._decisions_cpu,
            utilisation if math.isfinite(utilisation) else 0.0,
            stats.conflict_rate,
            errors,
        )
