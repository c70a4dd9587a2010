"""What the tuner sees (AdaptiveConfig §3.1): the jobs in progress and the cluster,
from a simulator or a real cluster's snapshot; which groups a tuning pass triggers;
each group's job mix as the comparator reads it; and its share of the cluster."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from rules.inputs import GroupResources, JobMix, MixJob, RunningTasks
from rules.mixes import mix_job
from yarn_adapt.model import (
    CapacityQueue,
    ClusterSnapshot,
    FairQueue,
    Percentage,
    Resources,
    SchedulerConfig,
)
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.workload import JobSpec
from yarn_adapt.sim import ClusterSpec, JobInProgress, SimulationStart
from yarn_adapt.tuning.apply import Group
from yarn_adapt.tuning.settings import TunerSettings
from yarn_adapt.tuning.snapshot_state import start_from_snapshot
from yarn_adapt.workload.taskmodel import TaskTimeModel

OVERDUE_FRACTION = 0.1
"""A running task already past its estimate is expected to need this fraction of
the estimate more (it is late, so it ends soon but not at once)."""


@dataclass(frozen=True)
class TuningState:
    """What the tuner sees: the moment, the jobs not finished (waiting or running,
    with the tasks they have not started and the containers they hold), the
    cluster's nodes, and the jobs submitted in the last interval (finished or not:
    the forecast of the next interval's arrivals), and the jobs submitted over the
    last hours (``history``, finished or not: the hindsight static's replay)."""

    now_s: float
    start: SimulationStart
    cluster: ClusterSpec
    recent: tuple[JobSpec, ...] = ()
    history: tuple[JobSpec, ...] = ()

    @functools.cached_property
    def positions_by_leaf(self) -> Mapping[str, tuple[int, ...]]:
        """Each leaf queue's jobs in progress, as their positions in ``start.jobs``
        (worked out once: a pass reads every group's)."""
        positions: dict[str, list[int]] = {}
        for position, progress in enumerate(self.start.jobs):
            positions.setdefault(_leaf(progress.job.queue), []).append(position)
        return {leaf: tuple(found) for leaf, found in positions.items()}

    def in_progress_of(self, leaves: Iterable[str]) -> tuple[JobInProgress, ...]:
        """The jobs in progress in ``leaves``, in their order in ``start.jobs``."""
        by_leaf = self.positions_by_leaf
        positions = sorted(p for leaf in set(leaves) for p in by_leaf.get(leaf, ()))
        return tuple(self.start.jobs[p] for p in positions)

    def history_since(self, since_s: float) -> tuple[JobSpec, ...]:
        """The jobs of ``history`` submitted after ``since_s`` and by now."""
        return tuple(j for j in self.history if since_s < j.submit_s <= self.now_s)


def state_from_simulation(
    now_s: float,
    start: SimulationStart,
    cluster: ClusterSpec,
    recent: Sequence[JobSpec] = (),
    history: Sequence[JobSpec] = (),
) -> TuningState:
    """The state of a simulated cluster (``SimulatedCluster.view()`` has all five)."""
    return TuningState(now_s, start, cluster, tuple(recent), tuple(history))


def state_from_snapshot(
    snapshot: ClusterSnapshot,
    history: Sequence[JobSpec] = (),
    container: Resources | None = None,
) -> TuningState:
    """The state of a real cluster: running and waiting applications from the RM's
    snapshot, their remaining tasks from JobHistory's job records where known
    (see :mod:`yarn_adapt.tuning.snapshot_state`), on the RM's nodes with the
    minimum allocation it reports (YARN's default, 1024 MB and 1 vcore, when it
    reports none)."""
    start = start_from_snapshot(snapshot, history, container)
    least = snapshot.scheduler.minimum_allocation
    cluster = (
        ClusterSpec.from_nodes(snapshot.nodes, minimum_allocation=least)
        if least is not None
        else ClusterSpec.from_nodes(snapshot.nodes)
    )
    return TuningState(start.time_s, start, cluster)


# --------------------------------------------------------------------------- triggers


def triggered_groups(
    state: TuningState, groups: Iterable[Group], interval_s: float
) -> dict[str, str]:
    """Groups with a job submitted in the last interval that still needs resources
    (§3.1), each with the reason."""
    since = state.now_s - interval_s
    fresh: dict[str, int] = {}
    for progress in state.start.jobs:
        if progress.job.submit_s > since:
            leaf = _leaf(progress.job.queue)
            fresh[leaf] = fresh.get(leaf, 0) + 1
    found = {}
    for group in groups:
        count = sum(fresh.get(leaf, 0) for leaf in group.leaf_names)
        if count:
            found[group.parent] = f"{count} job(s) submitted in the last {interval_s:g} s"
    return found


def _leaf(queue: str) -> str:
    return queue.rsplit(".", 1)[-1]


# --------------------------------------------------------------------------- mixes


def state_mix(
    state: TuningState,
    model: TaskTimeModel,
    leaves: Iterable[str],
    settings: TunerSettings,
) -> JobMix:
    """The comparator's view of the jobs of ``leaves``: pending tasks as the model
    estimates them; running containers ending when the estimate says (or a little
    after now when they are past it); with ``forecast``, the last interval's
    submissions again, one interval on."""
    wanted = set(leaves)
    in_progress = state.in_progress_of(wanted)
    jobs = tuple(_mix_job(progress, model, state.now_s) for progress in in_progress)
    if settings.forecast:
        jobs += tuple(
            _expected(job, model, settings.interval_s, ahead)
            for ahead in range(1, settings.forecast_intervals + 1)
            for job in state.recent
            if _leaf(job.queue) in wanted
        )
    return JobMix(jobs, now_s=state.now_s, am_containers=settings.am_containers)


def in_progress_count(state: TuningState, leaves: Iterable[str]) -> int:
    """How many of the jobs in progress are in ``leaves`` (the first jobs of their
    :func:`state_mix`; the rest are the forecast)."""
    by_leaf = state.positions_by_leaf
    return sum(len(by_leaf.get(leaf, ())) for leaf in set(leaves))


def _expected(job: JobSpec, model: TaskTimeModel, interval_s: float, ahead: int) -> MixJob:
    """``job`` submitted again ``ahead`` intervals later."""
    suffix = "+next" if ahead == 1 else f"+next{ahead}"
    again = replace(job, id=job.id + suffix, submit_s=job.submit_s + ahead * interval_s)
    return mix_job(again, model)


def _mix_job(progress: JobInProgress, model: TaskTimeModel, now_s: float) -> MixJob:
    job = progress.job
    base = mix_job(job, model)
    running = tuple(
        RunningTasks(
            1, _remaining(model, job, c.task.kind, c.started_s, now_s), _stage(c.task.kind)
        )
        for c in progress.running
    )
    return replace(base, running=running, am_running=progress.am_started_s is not None)


def _remaining(
    model: TaskTimeModel, job: JobSpec, kind: TaskType, started_s: float, now_s: float
) -> float:
    estimate = model.estimate(job.features, kind)
    left = estimate - (now_s - started_s)
    return left if left > 0 else OVERDUE_FRACTION * estimate


def _stage(kind: TaskType) -> int:
    return 0 if kind is TaskType.MAP else 1


# --------------------------------------------------------------------------- resources


def group_share(config: SchedulerConfig, group: Group) -> float:
    """The fraction of the cluster the group's parent is configured to get
    (Capacity: product of capacities from root; Fair: weight among siblings)."""
    path = group.parent
    share = 1.0
    while path != "root" and "." in path:
        share *= _sibling_share(config, path)
        path = path.rsplit(".", 1)[0]
    return share


def _sibling_share(config: SchedulerConfig, path: str) -> float:
    parent = config.find(path.rsplit(".", 1)[0])
    queue = config.find(path)
    if parent is None or queue is None:
        return 1.0
    if isinstance(queue, CapacityQueue):
        return _percent(queue.capacity) / 100.0
    assert isinstance(queue, FairQueue)
    weights = [c.effective_weight for c in parent.children if isinstance(c, FairQueue)]
    total = sum(weights)
    return queue.effective_weight / total if total else 0.0


def _percent(capacity: object) -> float:
    return capacity.percent if isinstance(capacity, Percentage) else 0.0


def group_resources(state: TuningState, share: float, *, whole: bool) -> GroupResources:
    """The group's resources: the whole cluster's nodes when it has all of it (the
    scheduler then allocates on their heartbeats), else its share without nodes."""
    unit = state.cluster.minimum_allocation
    total = state.cluster.total
    if whole:
        nodes = tuple(n.resources for n in state.cluster.nodes)
        return GroupResources(total, unit, nodes)
    units = max(1, math.floor(total.memory_mb * share / unit.memory_mb))
    return GroupResources(Resources(units * unit.memory_mb, units * unit.vcores), unit)
