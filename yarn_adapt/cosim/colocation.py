"""One node where batch containers run beside a latency-critical (LC) service, with
the preemption agent's own code reclaiming CPU for the service.

What is the agent's code and what is modelled:

* **The agent's code**: :class:`preemption.node.NodeReclaimer` (Algorithm 2, the
  strategies, aliveness, the actuator and its journal) runs unchanged. It reads and
  writes cgroup files through :class:`SimCgroups`, a backend implementing the same
  :class:`~preemption.cgroups.base.CgroupBackend` interface as the v1/v2 backends and
  using the v1 translation (``cpu.cfs_quota_us``, ``cpu.shares``). Kills go through
  :class:`SimKiller`, which stands in for the RM's container signal.
* **The service side** (TopoSch's autoscaler): every agent interval it measures the
  LC's P95 (with noise), and asks the QoS model (:mod:`preemption.qos`, GBRT) for the
  smallest reclaim that meets the target with the model's upper bound; the total it
  asks for is the agent's :class:`~preemption.model.ReclaimTarget`.
* **Batch tasks** (modelled): SWIM replay of a trace (``target_machines = 1``, the
  trace's own scaling), arrivals compressed so the node's slots are busy at
  ``utilization``. Maps of a job are queued on arrival, reduces when its maps are
  done; a job finishes with its last task. A task runs for its trace duration D when
  unconstrained; a fraction ``d`` of that time it computes on one core (drawn per
  task from ``cpu_fraction``), the rest it waits on I/O. Under a CPU cap L (its CFS
  quota, or less under contention) it uses ``d / ((1 - d) + d / L)`` cores and
  progresses at that rate divided by d. Below ``falter_cores`` (drawn per task) a
  task stalls: no progress, no CPU (a starved heartbeat or a thrashing JVM); the
  aliveness check sees it.
* **Kill is YARN's**: a killed task loses all its progress; its container is gone
  ``kill_latency_s`` after the agent's decision (RM → NM heartbeat → SIGKILL); the AM
  reruns the attempt from scratch, which may start ``restart_delay_s`` later (AM
  heartbeat, new allocation, container launch) in the first free slot. The slots the
  kills freed are the LC's while the reclaim lasts (YARN gave that capacity to the
  LC), so new batch tasks do not take them back until the demand falls.
* **CPU sharing** (modelled, CFS): each task uses what its cap allows; when the batch
  tasks together would leave the LC less than its weighted share
  (``cpu.shares``: 1024 per vcore, the agent lowers a squeezed task's shares with
  its quota) they are scaled down to leave it that share. The LC's capacity is what
  batch leaves.
* **LC latency** (modelled): requests arrive at the bundled twitter trace's rate (one
  value per ``load_interval_s``), each needs ``lc_service_ms`` of CPU; the median
  load needs ``lc_cores_at_median`` cores. P95 = S · (1 + ln 20 · Wq/S) with Wq/S the
  Sakasegawa M/M/c approximation ρ^(√(2(c+1)) − 1) / (c (1 − ρ)), c the LC's capacity
  in cores and ρ = load · S / c, times (1 + ``interference`` · batch CPU share of the
  node) for cache and memory-bandwidth contention; capped at ``max_latency_factor`` · S.

A later issue (the co-location guard) extends this model to several nodes and
services; :class:`NodeModel` holds every constant with its meaning.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from preemption.cgroups.base import Cgroup as CgroupRef
from preemption.cgroups.base import MemoryPolicy, Originals, Usage
from preemption.cgroups.v1 import v1_desired_values, v1_originals
from preemption.errors import CgroupVanished
from preemption.model import Amount, Locality, QosSignal, ReclaimTarget
from preemption.node import ManagedContainer, NodeReclaimer, NodeSettings
from preemption.qos import QosModel, QosSample, infer_preempted_resource
from preemption.reclaim import ReclaimSettings
from preemption.statefile import StateJournal
from preemption.strategies import Strategy
from yarn_adapt.cosim.interference import LN20, SATURATED_RHO, waiting_ratio
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.workload import Workload

SHARES_PER_VCORE = 1024
CLUSTER_TS = 1700000000000


@dataclass(frozen=True, kw_only=True)
class NodeModel:
    """Every constant of the node model (see the module docstring)."""

    cores: float = 16.0
    batch_slots: int = 12
    task_vcores: int = 1
    task_memory_mb: int = 2048
    lc_vcores: int = 4
    lc_service_ms: float = 10.0
    lc_cores_at_median: float = 4.0
    target_p95_ms: float = 20.0
    interference: float = 0.2
    noise_sigma: float = 0.05
    max_latency_factor: float = 100.0
    cpu_fraction: tuple[float, float] = (0.5, 1.0)
    falter_cores: tuple[float, float] = (0.05, 0.25)
    local_share: float = 0.7
    utilization: float = 0.8
    dt_s: float = 0.5
    interval_s: float = 1.0
    kill_latency_s: float = 1.0
    restart_delay_s: float = 3.0
    load_interval_s: float = 10.0
    epsilon: float = 0.05


# ----------------------------------------------------------------- the cgroup backend


@dataclass
class _Group:
    values: dict[str, str]
    cpu_usage_ns: float = 0.0
    memory_bytes: int = 0


class SimCgroups:
    """The simulated node's cgroups, behind the agent's backend interface (v1 files)."""

    version = "sim"
    limit_keys: tuple[str, ...] = ("cpu.cfs_quota_us", "cpu.shares")
    read_keys: tuple[str, ...] = ("cpu.cfs_quota_us", "cpu.shares", "cpu.cfs_period_us")

    def __init__(self) -> None:
        self.groups: dict[str, _Group] = {}
        self.memory = MemoryPolicy(hard_limit=False)

    def add(self, relpath: str, shares: int, memory_bytes: int) -> None:
        values = {
            "cpu.cfs_quota_us": "-1",
            "cpu.cfs_period_us": "100000",
            "cpu.shares": str(shares),
        }
        self.groups[relpath] = _Group(values, memory_bytes=memory_bytes)

    def drop(self, relpath: str) -> None:
        self.groups.pop(relpath, None)

    def cap_cores(self, relpath: str) -> float:
        values = self.groups[relpath].values
        quota = int(values["cpu.cfs_quota_us"])
        return math.inf if quota < 0 else quota / int(values["cpu.cfs_period_us"])

    def shares(self, relpath: str) -> int:
        return int(self.groups[relpath].values["cpu.shares"])

    def _group(self, group: CgroupRef) -> _Group:
        found = self.groups.get(group.relpath)
        if found is None:
            raise CgroupVanished(group.relpath, "no such simulated cgroup")
        return found

    # The CgroupBackend interface -----------------------------------------------

    def describe(self) -> dict[str, str]:
        return {"version": self.version}

    def exists(self, group: CgroupRef) -> bool:
        return group.relpath in self.groups

    def read(self, group: CgroupRef, key: str) -> str:
        return self._group(group).values[key]

    def write(self, group: CgroupRef, key: str, value: str) -> None:
        self._group(group).values[key] = value

    def usage(self, group: CgroupRef) -> Usage:
        found = self._group(group)
        return Usage(int(found.cpu_usage_ns), found.memory_bytes)

    def pids(self, group: CgroupRef) -> tuple[int, ...]:
        return ()

    def children(self, group: CgroupRef) -> tuple[CgroupRef, ...]:
        return ()

    def create(self, group: CgroupRef) -> None:
        raise NotImplementedError("simulated containers come with their cgroup")

    def remove(self, group: CgroupRef) -> None:
        self.drop(group.relpath)

    def membership(self, pid: int) -> dict[str, str]:
        return {}

    def move(self, pid: int, group: CgroupRef) -> None:
        raise NotImplementedError("simulated containers come with their cgroup")

    def move_back(self, pid: int, membership: Mapping[str, str]) -> None:
        return None

    def originals(self, values: Mapping[str, str]) -> Originals:
        return v1_originals(values)

    def desired_values(
        self, limit: Amount, baseline: Amount, originals: Mapping[str, str], usage: Usage
    ) -> dict[str, str]:
        return v1_desired_values(limit, baseline, originals, usage, self.memory)


class SimKiller:
    """The RM's container kill: recorded now, carried out by the node later."""

    def __init__(self) -> None:
        self.requested: list[str] = []

    def kill(self, container_id: str, application_id: str, reason: str) -> None:
        self.requested.append(container_id)


# ----------------------------------------------------------------- batch work


@dataclass
class SimTask:
    job: int
    kind: TaskType
    duration_s: float
    cpu_fraction: float
    falter_cores: float
    locality: Locality
    remaining_s: float = 0.0
    ready_at_s: float = 0.0
    container_id: str = ""
    started_at_s: float = 0.0
    stalled: bool = False

    def restart(self, at_s: float) -> None:
        self.remaining_s = self.duration_s
        self.ready_at_s = at_s
        self.container_id = ""
        self.stalled = False


@dataclass
class SimJob:
    submit_s: float
    maps: list[SimTask]
    reduces: list[SimTask]
    left: int = 0
    finished_s: float | None = None


def batch_jobs(workload: Workload, model: NodeModel, *, window_s: float, seed: int) -> list[SimJob]:
    """Jobs of ``workload`` compressed in time so the node's slots are busy at
    ``model.utilization`` over ``window_s``; task shapes drawn from ``seed``."""
    rng = random.Random(seed)
    jobs = list(workload.jobs)
    if not jobs:
        raise ValueError(f"{workload.source}: no jobs")
    first = jobs[0].submit_s
    span = (jobs[-1].submit_s - first) or 1.0
    work = sum(job.total_task_seconds for job in jobs)
    budget = model.utilization * model.batch_slots * window_s
    # The trace is replayed as often as the window needs (one pass after the other),
    # compressed into the window; then every k-th job is kept so the offered work
    # is `utilization` of the slots (job shapes unchanged).
    passes = max(1, math.ceil(budget / work))
    replay = [(p * span + job.submit_s - first, job) for p in range(passes) for job in jobs]
    scale = window_s / (passes * span)
    ratio = min(1.0, budget / (work * passes))
    kept = [item for i, item in enumerate(replay) if int((i + 1) * ratio) > int(i * ratio)]
    result: list[SimJob] = []
    for offset, job in kept:
        index = len(result)
        maps = [_task(index, spec.duration_s, TaskType.MAP, rng, model) for spec in job.maps]
        reduces = [
            _task(index, spec.duration_s, TaskType.REDUCE, rng, model) for spec in job.reduces
        ]
        result.append(SimJob(offset * scale, maps, reduces, len(maps) + len(reduces)))
    return result


def _task(
    job: int, duration: float, kind: TaskType, rng: random.Random, model: NodeModel
) -> SimTask:
    if kind is TaskType.REDUCE:
        locality = Locality.NON_LOCAL  # a reduce fetches from every node
    else:
        locality = Locality.LOCAL if rng.random() < model.local_share else Locality.NON_LOCAL
    return SimTask(
        job=job,
        kind=kind,
        duration_s=max(duration, 0.5),
        cpu_fraction=rng.uniform(*model.cpu_fraction),
        falter_cores=rng.uniform(*model.falter_cores),
        locality=locality,
        remaining_s=max(duration, 0.5),
    )


# ----------------------------------------------------------------- the LC service


def lc_p95_ms(
    load_cores: float, capacity_cores: float, batch_share: float, model: NodeModel
) -> float:
    """P95 latency of the LC (see the module docstring)."""
    service = model.lc_service_ms
    ceiling = service * model.max_latency_factor
    c = max(capacity_cores, 1e-6)
    rho = load_cores / c
    if rho >= SATURATED_RHO:
        return ceiling
    waiting = waiting_ratio(rho, c)
    p95 = service * (1.0 + LN20 * waiting) * (1.0 + model.interference * batch_share)
    return min(p95, ceiling)


def load_series(path: Path) -> list[float]:
    values = [float(line) for line in path.read_text().split() if line.strip()]
    if not values:
        raise ValueError(f"{path}: no load values")
    return values


# ----------------------------------------------------------------- results


@dataclass
class RunResult:
    """One run's figures. ``jct_by_job`` is keyed by the job's index (the same jobs
    in every run); ``violation_spans_s`` are the (start, end) of each stretch with
    the LC over its target, within the horizon; ``tasks`` counts the tasks of the
    jobs (a rerun is the same task)."""

    strategy: str
    jct_s: list[float]
    violation_episodes_s: list[float]
    violation_s: float
    tasks_killed: int
    tasks_squeezed: int
    blacklisted: int
    p95_samples_ms: list[float] = field(default_factory=list)
    jct_by_job: dict[int, float] = field(default_factory=dict)
    job_spans_s: dict[int, tuple[float, float]] = field(default_factory=dict)
    violation_spans_s: list[tuple[float, float]] = field(default_factory=list)
    tasks: int = 0

    def jobs_running_during(self, spans: Sequence[tuple[float, float]]) -> set[int]:
        """The jobs of this run that were in the system (submitted, not finished)
        during any of ``spans``."""
        return {
            job
            for job, (submitted, finished) in self.job_spans_s.items()
            if any(submitted < end and start < finished for start, end in spans)
        }


# ----------------------------------------------------------------- the node


class ColocatedNode:
    """One run: the node, its batch queue, the LC, and (unless ``strategy`` is None)
    the agent's reclaimer."""

    def __init__(
        self,
        model: NodeModel,
        jobs: Sequence[SimJob],
        loads: Sequence[float],
        *,
        strategy: Strategy | None,
        reclaim: ReclaimSettings,
        qos_model: QosModel | None,
        seed: int,
    ) -> None:
        self.model = model
        self.jobs = [
            SimJob(j.submit_s, [_copy(t) for t in j.maps], [_copy(t) for t in j.reduces], j.left)
            for j in jobs
        ]
        self.loads = list(loads)
        self.median_load = float(np.median(self.loads))
        self.rng = random.Random(seed)
        self.noise = np.random.default_rng(seed)
        self.cgroups = SimCgroups()
        self.killer = SimKiller()
        self.qos_model = qos_model
        self.strategy = strategy
        self.reclaimer = None
        if strategy is not None:
            settings = _with_strategy(reclaim, strategy)
            journal = StateJournal(None, self.cgroups.describe())
            node = NodeSettings(node_cpu_millicores=int(model.cores * 1000))
            self.reclaimer = NodeReclaimer(self.cgroups, journal, self.killer, settings, node)
        self.now = 0.0
        self.queue: deque[SimTask] = deque()
        self.running: dict[str, SimTask] = {}
        self.pending_kills: list[tuple[float, str]] = []
        self.sequence = itertools.count(2)
        self.generation = 0
        self.desired = Amount()
        self.last_usage = 0.0
        self.interval_p95: list[float] = []
        self.lc_capacity = model.cores
        self.batch_usage = 0.0
        self.batch_weighted_usage = 0.0  # batch cores x their cpu.shares / 1024
        self.kills = 0
        self.squeezed: set[str] = set()
        self.blacklisted = 0

    # ----------------------------------------------------------------- driving

    def run(self, horizon_s: float) -> RunResult:
        next_job = 0
        next_interval = self.model.interval_s
        violation_start: float | None = None
        episodes: list[float] = []
        spans: list[tuple[float, float]] = []
        violation_s = 0.0
        samples: list[float] = []
        end = horizon_s + 4 * 3600.0  # then drain the batch work at median LC load
        while self.now < end:
            while next_job < len(self.jobs) and self.jobs[next_job].submit_s <= self.now:
                self.queue.extend(self.jobs[next_job].maps)
                next_job += 1
            self._execute_kills()
            self._start_tasks()
            p95 = self._step()
            self.interval_p95.append(p95)
            if self.now < horizon_s:
                samples.append(p95)
                if p95 > self.model.target_p95_ms:
                    violation_s += self.model.dt_s
                    violation_start = self.now if violation_start is None else violation_start
                elif violation_start is not None:
                    episodes.append(self.now - violation_start)
                    spans.append((violation_start, self.now))
                    violation_start = None
            self.now += self.model.dt_s
            if self.now >= next_interval - 1e-9:
                self._interval()
                next_interval += self.model.interval_s
            if (
                next_job >= len(self.jobs)
                and not self.queue
                and not self.running
                and self.now >= horizon_s
            ):
                break
        if violation_start is not None:
            episodes.append(horizon_s - violation_start)
            spans.append((violation_start, horizon_s))
        finished = [j for j in self.jobs if j.finished_s is not None]
        spans_by_job = {
            index: (job.submit_s, job.finished_s)
            for index, job in enumerate(self.jobs)
            if job.finished_s is not None
        }
        return RunResult(
            strategy=self.strategy.value if self.strategy else "none",
            jct_s=[j.finished_s - j.submit_s for j in finished if j.finished_s is not None],
            violation_episodes_s=episodes,
            violation_s=violation_s,
            tasks_killed=self.kills,
            tasks_squeezed=len(self.squeezed),
            blacklisted=self.blacklisted,
            p95_samples_ms=samples,
            jct_by_job={index: end - start for index, (start, end) in spans_by_job.items()},
            job_spans_s=spans_by_job,
            violation_spans_s=spans,
            tasks=sum(len(job.maps) + len(job.reduces) for job in self.jobs),
        )

    def _load_cores(self) -> float:
        index = int(self.now // self.model.load_interval_s)
        load = self.loads[index] if index < len(self.loads) else self.median_load
        return self.model.lc_cores_at_median * load / self.median_load

    # ----------------------------------------------------------------- batch slots

    def _blocked_slots(self) -> int:
        if self.reclaimer is None:
            return 0
        freed = self.reclaimer.state.freed_by_kill.cpu_millicores
        return math.ceil(freed / (1000 * self.model.task_vcores) - 1e-9)

    def _start_tasks(self) -> None:
        """Fill free slots in queue order, skipping a rerun whose AM has not asked yet."""
        free = self.model.batch_slots - len(self.running) - self._blocked_slots()
        if free <= 0 or not self.queue:
            return
        waiting: list[SimTask] = []
        while free > 0 and self.queue:
            task = self.queue.popleft()
            if task.ready_at_s > self.now:
                waiting.append(task)
                continue
            self._start(task)
            free -= 1
        self.queue.extendleft(reversed(waiting))

    def _start(self, task: SimTask) -> None:
        task.container_id = (
            f"container_{CLUSTER_TS}_{task.job + 1:04d}_01_{next(self.sequence):06d}"
        )
        task.started_at_s = self.now
        self.cgroups.add(
            task.container_id, 1024 * self.model.task_vcores, self.model.task_memory_mb << 20
        )
        self.running[task.container_id] = task

    def _finish(self, task: SimTask) -> None:
        del self.running[task.container_id]
        self.cgroups.drop(task.container_id)
        job = self.jobs[task.job]
        job.left -= 1
        if task.kind is TaskType.MAP and all(t.remaining_s <= 0 for t in job.maps):
            self.queue.extend(job.reduces)
        if job.left == 0:
            job.finished_s = self.now

    def _execute_kills(self) -> None:
        for container_id in self.killer.requested:
            self.pending_kills.append((self.now + self.model.kill_latency_s, container_id))
        self.killer.requested.clear()
        due = [k for k in self.pending_kills if k[0] <= self.now]
        self.pending_kills = [k for k in self.pending_kills if k[0] > self.now]
        for _, container_id in due:
            task = self.running.pop(container_id, None)
            if task is None:
                continue  # finished before the kill arrived
            self.cgroups.drop(container_id)
            self.kills += 1
            task.restart(self.now + self.model.restart_delay_s)
            self.queue.appendleft(task)  # the AM asks for it again first

    # ----------------------------------------------------------------- one step

    def _step(self) -> float:
        dt = self.model.dt_s
        usage: dict[str, float] = {}
        for container_id, task in self.running.items():
            cap = min(self.cgroups.cap_cores(container_id), float(self.model.task_vcores))
            task.stalled = cap < task.falter_cores
            d = task.cpu_fraction
            usage[container_id] = 0.0 if task.stalled else d / ((1.0 - d) + d / min(cap, 1.0))
        weights = sum(self.cgroups.shares(cid) for cid in self.running)
        lc_weight = 1024 * self.model.lc_vcores
        lc_floor = self.model.cores * lc_weight / (lc_weight + weights)
        total = sum(usage.values())
        if total > self.model.cores - lc_floor:
            factor = (self.model.cores - lc_floor) / total
            usage = {cid: u * factor for cid, u in usage.items()}
            total = sum(usage.values())
        self.batch_usage = total
        self.batch_weighted_usage = sum(
            u * self.cgroups.shares(cid) / SHARES_PER_VCORE for cid, u in usage.items()
        )
        self.lc_capacity = self.model.cores - total
        for container_id, task in list(self.running.items()):
            used = usage[container_id]
            self.cgroups.groups[container_id].cpu_usage_ns += used * dt * 1e9
            task.remaining_s -= used / task.cpu_fraction * dt
            if task.remaining_s <= 0:
                self._finish(task)
        return lc_p95_ms(self._load_cores(), self.lc_capacity, total / self.model.cores, self.model)

    # ----------------------------------------------------------------- one interval

    def _interval(self) -> None:
        true_p95 = float(np.mean(self.interval_p95)) if self.interval_p95 else 0.0
        self.interval_p95 = []
        if self.reclaimer is None:
            return
        measured = true_p95 * float(self.noise.lognormal(0.0, self.model.noise_sigma))
        target = self._target(measured)
        containers = [
            ManagedContainer(
                container_id=cid,
                application_id=f"application_{CLUSTER_TS}_{task.job + 1:04d}",
                group=CgroupRef(cid),
                started_at_s=task.started_at_s,
                allocation=Amount(1000 * self.model.task_vcores, self.model.task_memory_mb),
                locality=task.locality,
            )
            for cid, task in self.running.items()
        ]
        report = self.reclaimer.tick(self.now, containers, target)
        for event in report.events:
            if event.kind == "step":
                self.squeezed.add(event.container_id)
            elif event.kind == "blacklisted":
                self.blacklisted += 1

    def _target(self, measured_p95: float) -> ReclaimTarget:
        """The autoscaler: the QoS model's smallest reclaim that meets the target."""
        assert self.reclaimer is not None
        load = self._load_cores()
        reclaimed = self._reclaimed_cpu()
        desired = self.desired
        if self.qos_model is not None:
            now = QosSample(
                load=load,
                lc_cpu_millicores=self.lc_capacity * 1000,
                batch_cpu_millicores=self.batch_usage * 1000,
                batch_memory_mb=len(self.running) * self.model.task_memory_mb,
                latency_ms=measured_p95,
            )
            step = self.reclaimer.settings.mini_step.cpu_millicores
            inference = infer_preempted_resource(
                self.qos_model, now, self.model.target_p95_ms, step_millicores=step,
                epsilon=self.model.epsilon, min_reclaim_millicores=-reclaimed,
            )  # fmt: skip
            total = max(0, reclaimed + inference.reclaim.cpu_millicores)
            if (
                abs(total - desired.cpu_millicores)
                > self.reclaimer.settings.dead_band.cpu_millicores
            ):
                desired = Amount(total, 0)
                self.generation += 1
        self.desired = desired
        qos = QosSignal(
            service="lc",
            satisfied=measured_p95 <= self.model.target_p95_ms,
            latency_ms=measured_p95,
            target_ms=self.model.target_p95_ms,
            load=load,
            measured_at_s=self.now,
        )
        return ReclaimTarget(reclaim=desired, generation=self.generation, qos=qos, source="sim")

    def _reclaimed_cpu(self) -> int:
        assert self.reclaimer is not None
        squeezed = 0
        for tracked in self.reclaimer.tracked.values():
            if tracked.baseline is not None:
                squeezed += max(0, tracked.baseline.cpu_millicores - tracked.limit.cpu_millicores)
        return squeezed + self.reclaimer.state.freed_by_kill.cpu_millicores


def _copy(task: SimTask) -> SimTask:
    return SimTask(
        task.job, task.kind, task.duration_s, task.cpu_fraction, task.falter_cores,
        task.locality, remaining_s=task.duration_s,
    )  # fmt: skip


def _with_strategy(settings: ReclaimSettings, strategy: Strategy) -> ReclaimSettings:
    from dataclasses import replace

    return replace(settings, strategy=strategy)


# ----------------------------------------------------------------- profiling (Table 3)


def profile_samples(
    model: NodeModel, loads: Sequence[float], *, count: int, seed: int
) -> list[QosSample]:
    """QoS samples for training the model, as TopoSch's offline profiling: random
    loads and random batch caps, the LC's P95 measured (with noise) for each."""
    rng = np.random.default_rng(seed)
    median = float(np.median(loads))
    low, high = min(loads) / median, max(loads) / median
    samples = []
    for _ in range(count):
        load = model.lc_cores_at_median * rng.uniform(low * 0.9, high * 1.15)
        running = int(rng.integers(model.batch_slots // 2, model.batch_slots + 1))
        fractions = rng.uniform(*model.cpu_fraction, size=running)
        caps = rng.uniform(0.1, 1.0, size=running) if rng.random() < 0.7 else np.ones(running)
        usage = fractions / ((1.0 - fractions) + fractions / caps)
        batch = float(usage.sum())
        weights = 1024 * caps  # squeezed tasks have their shares scaled down too
        lc_weight = 1024 * model.lc_vcores
        floor = model.cores * lc_weight / (lc_weight + weights.sum())
        batch = min(batch, model.cores - floor)
        capacity = model.cores - batch
        p95 = lc_p95_ms(load, capacity, batch / model.cores, model)
        measured = p95 * float(rng.lognormal(0.0, model.noise_sigma))
        samples.append(
            QosSample(load, capacity * 1000, batch * 1000, running * model.task_memory_mb, measured)
        )
    return samples
