"""A simulated cluster the service can drive exactly as it drives a real RM: the
backend of ``yarn-adapt demo`` (no Java, no Hadoop).

:class:`SimulatedCluster` replays a workload in the simulator one segment at a time:
each :meth:`~SimulatedCluster.advance` simulates up to a horizon under the current
configuration, then carries the state over -- jobs in progress keep their
ApplicationMaster, their running containers and their unstarted tasks
(:class:`~yarn_adapt.sim.SimulationStart`) -- so the next segment continues under
whatever configuration was applied in between. Which tasks a job has started is
read from the simulator's allocation records, in the order the scheduler takes a
stage's tasks.

:class:`SimulatedBackend` exposes it through the :class:`ClusterBackend` interface:
the scheduler configuration lives in a real file in the state directory, and
:class:`SimulatedApplier` applies to it with the same discipline as the real
appliers (validate, back up, journal each step, write atomically, activate, verify,
recover after a crash) -- activation being "the simulated RM loads the file".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from yarn_adapt.errors import ApplyNotVerified
from yarn_adapt.model import Resources, SchedulerConfig, TaskSpec, Workload
from yarn_adapt.model.workload import JobSpec
from yarn_adapt.service.backend import FinishedJob, Observed, SimulatedView
from yarn_adapt.sim import (
    Allocation,
    ClusterSpec,
    JobInProgress,
    JobResult,
    JobStatus,
    RunningContainer,
    SimulationOptions,
    SimulationStart,
    simulate,
)
from yarn_adapt.sim.hooks import CapacityChange, ScheduledNodeCapacity
from yarn_adapt.yarn.apply import (
    ApplyHistory,
    ApplyLock,
    ApplyOutcome,
    ApplyPlan,
    ApplyResult,
    ApplySettings,
    ApplyStep,
    ApplyTrail,
    new_apply_id,
)
from yarn_adapt.yarn.apply.backup import sha256_bytes
from yarn_adapt.yarn.apply.journal import ApplyJournal
from yarn_adapt.yarn.confxml import (
    SchedulerDocument,
    diff_configs,
    encode_like,
    raise_if_invalid,
    read_scheduler_bytes,
    read_scheduler_document,
    render_diff,
)
from yarn_adapt.yarn.schedconf.xmlio import write_bytes_atomically

FINISHED_MEMORY = 2000
"""How many finished jobs the cluster remembers for realized latency."""
HISTORY_S = 4 * 3600.0
"""The view's history: the jobs submitted in this many seconds before now."""


@dataclass
class _Progress:
    """What a job has received so far: its AM, and its tasks in start order."""

    spec: JobSpec
    am_started_s: float | None = None
    am_node: str | None = None
    started: list[tuple[TaskSpec, float, str]] = field(default_factory=list)

    @property
    def task_order(self) -> tuple[TaskSpec, ...]:
        return (*self.spec.maps, *self.spec.reduces)

    def grant(self, allocation: Allocation) -> None:
        if allocation.is_am:
            self.am_started_s, self.am_node = allocation.time_s, allocation.node_id
            return
        order = self.task_order
        first = len(self.started)
        for task in order[first : first + allocation.count]:
            self.started.append((task, allocation.time_s, allocation.node_id))

    def in_progress(self, now_s: float) -> JobInProgress:
        remaining = self.task_order[len(self.started) :]
        running = tuple(
            RunningContainer(task, started_s, node)
            for task, started_s, node in self.started
            if started_s + task.duration_s > now_s
        )
        job = replace(self.spec, tasks=remaining)
        return JobInProgress(job, running, self.am_started_s, self.am_node)

    def holding(self, now_s: float) -> Iterable[tuple[str, Resources]]:
        """(node, resources) of each container the job holds at ``now_s``: its AM
        and its running tasks."""
        if self.am_node is not None:
            yield self.am_node, self.spec.am_resources
        for task, started_s, node in self.started:
            if started_s <= now_s < started_s + task.duration_s:
                yield node, task.resources


class SimulatedCluster:
    def __init__(
        self,
        workload: Workload,
        cluster: ClusterSpec,
        config: SchedulerConfig,
        options: SimulationOptions | None = None,
        capacity_plan: Sequence[CapacityChange] = (),
    ) -> None:
        self.cluster = cluster
        self.config = config
        self.options = options or SimulationOptions()
        jobs = sorted(workload.jobs, key=lambda job: job.submit_s)
        self.clock_s = jobs[0].submit_s if jobs else 0.0
        self.started_s = self.clock_s
        self._upcoming = deque(jobs)
        self._progress: dict[str, _Progress] = {}
        self.finished: deque[JobResult] = deque(maxlen=FINISHED_MEMORY)
        self.recent: tuple[JobSpec, ...] = ()
        # every job of the replay and the results of those that ended, by id: the
        # demo's realised latency of the whole run (a replay is bounded)
        self.specs: dict[str, JobSpec] = {job.id: job for job in jobs}
        self.ended: dict[str, JobResult] = {}
        # when each task and ApplicationMaster started (how busy the replay kept it)
        self.task_spans: list[tuple[float, float]] = []
        self.am_started: dict[str, float] = {}
        # every node total set (updateNodeResource on the simulated RM), in order: the
        # next segments schedule on it; a twin replays the same plan
        self.capacity_log: list[CapacityChange] = list(capacity_plan)
        self.segment_ends: list[float] = []  # elapsed_s after each advance (a twin's cuts)

    @property
    def elapsed_s(self) -> float:
        """Simulated seconds since the replay began."""
        return self.clock_s - self.started_s

    @property
    def done(self) -> bool:
        return not self._upcoming and not self._progress

    def load(self, config: SchedulerConfig) -> None:
        """Take a new scheduler configuration from the next segment on (what
        ``refreshQueues`` does to a real RM)."""
        self.config = config

    def set_total(self, node_id: str, total: Resources) -> None:
        """What the scheduler may give batch on the node from now on (YARN's
        ``updateNodeResource``; the containers running there keep running)."""
        if node_id not in {node.id for node in self.cluster.nodes}:
            raise KeyError(node_id)
        self.capacity_log.append(CapacityChange(self.clock_s, node_id, total))

    def totals(self, at_s: float | None = None) -> dict[str, Resources]:
        """Each node's total as the scheduler sees it at ``at_s`` (default: now)."""
        at_s = self.clock_s if at_s is None else at_s
        found = {node.id: node.resources for node in self.cluster.nodes}
        for change in self.capacity_log:
            if change.time_s <= at_s:
                found[change.node_id] = change.visible
        return found

    def used(self) -> dict[str, Resources]:
        """What the containers on each node hold now (AMs and running tasks)."""
        found = {node.id: Resources(0, 0) for node in self.cluster.nodes}
        for progress in self._progress.values():
            for node_id, resources in progress.holding(self.clock_s):
                found[node_id] = found[node_id] + resources
        return found

    def _options_until(self, until: float) -> SimulationOptions:
        options = replace(self.options, horizon_s=until, record_allocations=True)
        if not self.capacity_log:
            return options
        plan = ScheduledNodeCapacity(
            tuple(self.totals(self.clock_s).items()),
            tuple(c for c in self.capacity_log if self.clock_s < c.time_s < until),
        )
        return replace(options, hooks=replace(options.hooks, node_capacity=plan))

    def start_state(self) -> SimulationStart:
        jobs = tuple(p.in_progress(self.clock_s) for p in self._progress.values())
        return SimulationStart(self.clock_s, jobs)

    def advance(self, seconds: float) -> None:
        """Simulate ``seconds`` more under the current configuration."""
        until = self.clock_s + seconds
        arriving = self._arrivals(until)
        options = self._options_until(until)
        start = self.start_state()
        result = simulate(Workload(arriving), self.config, self.cluster, options, start=start)
        for job in arriving:
            self._progress[job.id] = _Progress(job)
        for allocation in result.allocations:
            progress = self._progress[allocation.job_id]
            before = len(progress.started)
            progress.grant(allocation)
            if allocation.is_am:
                self.am_started[allocation.job_id] = allocation.time_s
            self.task_spans += [(at, task.duration_s) for task, at, _ in progress.started[before:]]
        self._settle(result.jobs)
        self.recent = arriving
        self.clock_s = until
        self.segment_ends.append(self.elapsed_s)

    def _arrivals(self, until: float) -> tuple[JobSpec, ...]:
        arriving: list[JobSpec] = []
        while self._upcoming and self._upcoming[0].submit_s < until:
            arriving.append(self._upcoming.popleft())
        return tuple(arriving)

    def _settle(self, results: Iterable[JobResult]) -> None:
        for job in results:
            if job.status is JobStatus.UNFINISHED:
                continue
            self._progress.pop(job.id, None)
            if job.status is JobStatus.FINISHED:
                self.finished.append(job)
                self.ended[job.id] = job

    def busy_container_s(self) -> float:
        """Container-seconds used so far: every task started (up to now) and every
        ApplicationMaster from its start to its job's end (or now)."""
        now = self.clock_s
        tasks = sum(min(duration, now - at) for at, duration in self.task_spans)
        ams = 0.0
        for job_id, at in self.am_started.items():
            ended = self.ended.get(job_id)
            end = ended.finish_s if ended is not None and ended.finish_s is not None else now
            ams += min(end, now) - at
        return tasks + ams

    @property
    def backlog(self) -> int:
        """Jobs submitted and not finished."""
        return len(self._progress)

    def submitted_since(self, since_s: float) -> tuple[JobSpec, ...]:
        """The jobs submitted after ``since_s`` and before now, in submission order."""
        return tuple(j for j in self.specs.values() if since_s < j.submit_s < self.clock_s)

    def view(self) -> SimulatedView:
        history = self.submitted_since(self.clock_s - HISTORY_S)
        return SimulatedView(
            self.clock_s, self.start_state(), self.recent, self.cluster, self.options, history
        )


# --------------------------------------------------------------------------- backend


class Beside(Protocol):
    """What runs beside the simulated cluster and advances it (the demo's services,
    guard and agents, :class:`yarn_adapt.service.demo.simcoloc.DemoColocation`)."""

    def advance(self, seconds: float) -> None: ...


class SimulatedBackend:
    """The :class:`~yarn_adapt.service.backend.ClusterBackend` of a simulated
    cluster. Each observation first simulates ``step_s`` more seconds, so the
    service's rounds drive simulated time (the demo's accelerated clock); with
    ``beside``, that advances it (in its own steps)."""

    def __init__(
        self,
        cluster: SimulatedCluster,
        path: Path,
        settings: ApplySettings,
        step_s: float,
        beside: Beside | None = None,
    ) -> None:
        self.cluster = cluster
        self.path = path
        self.settings = settings
        self.step_s = step_s
        self.beside = beside

    @property
    def target(self) -> str:
        return str(self.path)

    def document(self) -> SchedulerDocument:
        return read_scheduler_document(self.path)

    def observe(self) -> Observed:
        if self.beside is not None:
            self.beside.advance(self.step_s)
        else:
            self.cluster.advance(self.step_s)
        finished = tuple(_finished(job) for job in self.cluster.finished)
        taken_ms = int(self.cluster.clock_s * 1000)
        document = self.document()
        changes = diff_configs(document.config, self.cluster.config)
        drift = tuple(render_diff(changes).splitlines()) if changes else ()
        return Observed(taken_ms, document, finished, self.cluster.view(), drift)

    def applier(self, journal: ApplyJournal) -> SimulatedApplier:
        return SimulatedApplier(self.cluster, self.path, self.settings, journal)

    def recover(self, history: ApplyHistory, journal: ApplyJournal) -> ApplyStep:
        return self.applier(journal).recover(history)

    def close(self) -> None:
        return None


def _finished(job: JobResult) -> FinishedJob:
    assert job.finish_s is not None
    return FinishedJob(job.id, job.queue, int(job.submit_s * 1000), int(job.finish_s * 1000))


class SimulatedApplier:
    """Apply to the simulated cluster's scheduler file and make it load it, with the
    real appliers' discipline: the lock beside the file, the journal trail with both
    hashes, a byte-exact backup, a durable atomic write, recovery from the file."""

    name = "file+simulated-refresh"

    def __init__(
        self,
        cluster: SimulatedCluster,
        path: Path,
        settings: ApplySettings,
        journal: ApplyJournal,
    ) -> None:
        self.cluster = cluster
        self.path = path
        self.settings = settings
        self.journal = journal

    def plan(self, desired: SchedulerConfig) -> ApplyPlan:
        return self._plan(read_scheduler_document(self.path), desired)

    def _plan(self, document: SchedulerDocument, desired: SchedulerConfig) -> ApplyPlan:
        changes = tuple(diff_configs(document.config, desired))
        payload = document.render(desired) if changes else ""  # type: ignore[arg-type]
        steps = (
            f"back up and write {self.path}",
            "the simulated RM loads the file",
            "confirm the simulated RM runs it",
        )
        return ApplyPlan(self.name, str(self.path), changes, steps, payload)

    def apply(self, desired: SchedulerConfig, *, apply_id: str | None = None) -> ApplyOutcome:
        apply_id = apply_id or new_apply_id()
        with ApplyLock.beside(self.path):
            old_bytes, document = read_scheduler_bytes(self.path)
            plan = self._plan(document, desired)
            trail = ApplyTrail(self.journal, apply_id, self.name, str(self.path))
            if plan.is_empty and not diff_configs(self.cluster.config, desired):
                trail.record(ApplyStep.NOTHING_TO_DO)
                return ApplyOutcome(apply_id, ApplyResult.ALREADY_APPLIED, plan)
            raise_if_invalid(desired, document.config, source=str(self.path))
            new_bytes = encode_like(document, plan.payload) if plan.payload else old_bytes
            trail.old_sha256, trail.new_sha256 = sha256_bytes(old_bytes), sha256_bytes(new_bytes)
            trail.record(ApplyStep.PLANNED)
            trail.backup = str(self.settings.backups.save(self.path, old_bytes))
            trail.record(ApplyStep.BACKED_UP)
            write_bytes_atomically(self.path, new_bytes)
            trail.record(ApplyStep.WRITTEN)
            self._activate(trail, desired)
            return ApplyOutcome(apply_id, ApplyResult.APPLIED, plan, Path(trail.backup))

    def _activate(self, trail: ApplyTrail, desired: SchedulerConfig) -> ApplyStep:
        self.cluster.load(read_scheduler_document(self.path).config)
        trail.record(ApplyStep.ACTIVATED)
        if diff_configs(self.cluster.config, desired):
            trail.record(ApplyStep.FAILED, "the simulated RM runs another config")
            raise ApplyNotVerified(f"{self.path}: the simulated RM does not run the new config")
        return trail.record(ApplyStep.VERIFIED)

    def recover(self, history: ApplyHistory) -> ApplyStep:
        """The file says what the cluster should run: the new file is loaded
        (finishing the apply); the previous one is loaded again if it had been
        written over, and nothing is done if it never was."""
        with ApplyLock.beside(self.path):
            trail = ApplyTrail.resume(self.journal, history)
            data, document = read_scheduler_bytes(self.path)
            sha = sha256_bytes(data)
            if sha == trail.new_sha256:
                return self._activate(trail, document.config)
            if not history.reached(ApplyStep.WRITTEN):
                return trail.record(ApplyStep.ABANDONED, "recovered: never written")
            self.cluster.load(document.config)
            return trail.record(ApplyStep.ROLLED_BACK, "recovered: the previous file is back")
