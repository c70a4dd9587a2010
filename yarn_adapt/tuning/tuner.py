"""The tuner: the cluster's jobs and the running configuration in, a proposed
configuration out -- with predicted latencies before and after, per group and for
the cluster, and the reason for every change (AdaptiveConfig §3.1).

One pass (:func:`propose`, pure: no I/O):

1. *Triggers* (§3.1): a group is re-tuned only if one of its leaves has a job
   submitted within the last tuning interval that still needs resources; groups the
   caller freezes (cooling down after a change) are left as they are.
2. *Group level* (§3.3): for each triggered group, the comparator (:mod:`rules`) scores
   points of the group's configuration space (:mod:`yarn_adapt.tuning.space`) on the
   group's jobs -- task durations are the task-time model's estimates -- at the
   group's current resources; RRS or exhaustive search (:mod:`.search`) finds the
   best. A group whose best is not ``min_improvement`` better than what runs keeps
   its configuration.
3. *Cluster level* (§3.4): with several triggered groups, Algorithm 3
   (:mod:`.cluster_dp`) re-divides the resources those groups hold now among them
   from each one's best latency at several resource levels.
4. The proposal is validated against the running configuration with YARN's own
   rules (:mod:`yarn_adapt.yarn.confxml`); a group whose change YARN would refuse is
   left unchanged, so a proposal is never one the validator rejects.

The state comes from a simulator (:func:`state_from_simulation`) or from a real
cluster's snapshot (:func:`state_from_snapshot`); both become a
:class:`~yarn_adapt.sim.SimulationStart`-shaped description of the jobs in progress.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np

from rules.comparator import POINT_ESTIMATE, Comparator, Uncertainty
from rules.compiler import MechanismCompiler
from rules.inputs import GroupConfig, GroupResources, JobMix, MixJob, RunningTasks
from rules.mixes import mix_job
from yarn_adapt.errors import ValidationIssue
from yarn_adapt.model import (
    CapacityQueue,
    ClusterSnapshot,
    FairQueue,
    Percentage,
    Resources,
    SchedulerConfig,
    Workload,
)
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.workload import JobSpec
from yarn_adapt.sim import ClusterSpec, JobInProgress, SimulationStart
from yarn_adapt.tuning.apply import Group, apply_ratios, apply_setting, groups_of, scheduler_of
from yarn_adapt.tuning.bridge import group_config
from yarn_adapt.tuning.cluster_dp import GroupCurve, best_cluster_allocation
from yarn_adapt.tuning.executors import ExecutorHandle, map_in_chunks
from yarn_adapt.tuning.group_optimizer import ResourceBounds, candidate_levels
from yarn_adapt.tuning.search import Point, RRSSettings, search
from yarn_adapt.tuning.snapshot_state import start_from_snapshot
from yarn_adapt.tuning.space import ConfigSpace, GroupSetting, SpaceSettings, quantized_space
from yarn_adapt.workload.taskmodel import TaskTimeModel
from yarn_adapt.yarn.confxml import ConfigChange, diff_configs, validate, yarn_refuses

OVERDUE_FRACTION = 0.1
"""A running task already past its estimate is expected to need this fraction of
the estimate more (it is late, so it ends soon but not at once)."""


@dataclass(frozen=True)
class TuningState:
    """What the tuner sees: the moment, the jobs not finished (waiting or running,
    with the tasks they have not started and the containers they hold), the
    cluster's nodes, and the jobs submitted in the last interval (finished or not:
    the forecast of the next interval's arrivals)."""

    now_s: float
    start: SimulationStart
    cluster: ClusterSpec
    recent: tuple[JobSpec, ...] = ()


@dataclass(frozen=True, kw_only=True)
class TunerSettings:
    """``interval_s``: the tuning interval (§4.4: 2 minutes works as well as 1);
    ``space``: how each group's space is quantized; ``spaces``: explicit spaces per
    group parent (overrides ``space``); ``rrs``: RRS parameters for spaces larger than
    RRS would sample; ``min_improvement``: the predicted gain a group needs before
    its configuration changes; ``uncertainty``: compare on the expected latency
    over the task-time model's error; ``levels``: resource levels per group for the
    cluster-level DP; ``am_containers``: jobs have ApplicationMasters (MapReduce);
    ``fair_assign_multiple``: yarn-site's ``yarn.scheduler.fair.assignmultiple``;
    ``forecast``: also count on the next interval bringing what the last one did
    (the recent submissions again, one interval later) -- a configuration that
    starves a queue that is idle this instant but busy every interval is then not
    chosen."""

    interval_s: float = 120.0
    space: SpaceSettings = field(default_factory=SpaceSettings)
    spaces: Mapping[str, ConfigSpace] = field(default_factory=dict)
    rrs: RRSSettings = field(default_factory=RRSSettings)
    min_improvement: float = 0.02
    uncertainty: Uncertainty = POINT_ESTIMATE
    levels: int = 16
    am_containers: bool = True
    fair_assign_multiple: bool | None = None
    forecast: bool = False
    seed: int = 0


@dataclass(frozen=True)
class GroupDecision:
    """What happened to one group: whether it was triggered and why, its predicted
    mean job latency under the running and the proposed configuration, and the
    setting chosen (``None`` when it keeps its configuration)."""

    group: str
    queues: tuple[str, ...]
    triggered: bool
    reason: str
    jobs: int = 0
    before_s: float = math.nan
    after_s: float = math.nan
    setting: GroupSetting | None = None
    evaluations: int = 0

    @property
    def changed(self) -> bool:
        return self.setting is not None


@dataclass(frozen=True)
class Proposal:
    """The proposed configuration (valid for YARN against ``current``), what each
    group decided, the cluster's predicted mean job latency before and after, and the
    changes with their reasons (``reasons[i]`` explains ``changes[i]``)."""

    config: SchedulerConfig
    current: SchedulerConfig
    groups: tuple[GroupDecision, ...]
    cluster_before_s: float
    cluster_after_s: float
    changes: tuple[ConfigChange, ...]
    reasons: tuple[str, ...]
    issues: tuple[ValidationIssue, ...] = ()

    @property
    def triggered(self) -> tuple[str, ...]:
        return tuple(g.group for g in self.groups if g.triggered)

    @property
    def changed(self) -> bool:
        return bool(self.changes)


# --------------------------------------------------------------------------- state


def state_from_simulation(
    now_s: float,
    start: SimulationStart,
    cluster: ClusterSpec,
    recent: Sequence[JobSpec] = (),
) -> TuningState:
    """The state of a simulated cluster (``SimulatedCluster.view()`` has all four)."""
    return TuningState(now_s, start, cluster, tuple(recent))


def state_from_snapshot(
    snapshot: ClusterSnapshot,
    history: Sequence[JobSpec] = (),
    container: Resources | None = None,
) -> TuningState:
    """The state of a real cluster: running and waiting applications from the RM's
    snapshot, their remaining tasks from JobHistory's job records where known
    (see :mod:`yarn_adapt.tuning.snapshot_state`)."""
    start = start_from_snapshot(snapshot, history, container)
    cluster = ClusterSpec.from_nodes(snapshot.nodes)
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
    jobs = tuple(
        _mix_job(progress, model, state.now_s)
        for progress in state.start.jobs
        if _leaf(progress.job.queue) in wanted
    )
    if settings.forecast:
        jobs += tuple(
            _expected(job, model, settings.interval_s)
            for job in state.recent
            if _leaf(job.queue) in wanted
        )
    return JobMix(jobs, now_s=state.now_s, am_containers=settings.am_containers)


def _expected(job: JobSpec, model: TaskTimeModel, interval_s: float) -> MixJob:
    ahead = replace(job, id=f"{job.id}+next", submit_s=job.submit_s + interval_s)
    return mix_job(ahead, model)


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


# --------------------------------------------------------------------------- search


@dataclass
class _GroupTuning:
    """One triggered group's search."""

    group: Group
    space: ConfigSpace
    current: SchedulerConfig
    mix: JobMix
    settings: TunerSettings
    compiler: MechanismCompiler

    def comparator(self, resources: GroupResources) -> Comparator:
        return Comparator(
            self.mix, resources, compiler=self.compiler, uncertainty=self.settings.uncertainty
        )

    def config_at(self, point: Point) -> GroupConfig:
        setting = self.space.decode(point)
        return self._group_config(apply_setting(self.current, setting))

    def _group_config(self, config: SchedulerConfig) -> GroupConfig:
        return group_config(
            config, self.group, fair_assign_multiple=self.settings.fair_assign_multiple
        )

    def current_latency(self, resources: GroupResources) -> float:
        return self.comparator(resources).latency(self._group_config(self.current))

    def best(self, resources: GroupResources) -> tuple[Point, float, int]:
        comparator = self.comparator(resources)

        def objective(points: Sequence[Point]) -> list[float]:
            return [comparator.latency(self.config_at(p)) for p in points]

        rng = np.random.default_rng(
            [self.settings.seed, zlib.crc32(self.group.parent.encode()), resources.units]
        )
        found = search(self.space, objective, self.settings.rrs, rng)
        return found.point, found.value, found.evaluations


def _space_for(group: Group, config: SchedulerConfig, settings: TunerSettings) -> ConfigSpace:
    given = settings.spaces.get(group.parent)
    if given is not None:
        return given
    return quantized_space(scheduler_of(config), group.parent, group.queues, settings.space)


# --------------------------------------------------------------------------- propose


def propose(
    state: TuningState,
    current: SchedulerConfig,
    model: TaskTimeModel,
    settings: TunerSettings | None = None,
    *,
    frozen: frozenset[str] = frozenset(),
    executor: ExecutorHandle | None = None,
) -> Proposal:
    """The tuner's proposal for ``state`` under the running ``current`` configuration.
    ``executor`` runs the triggered groups' searches at every resource level (the
    cluster-level curves) in parallel; inline when ``None``."""
    settings = settings or TunerSettings()
    model.prime(_pending_jobs(state))
    groups = groups_of(current)
    triggers = triggered_groups(state, groups, settings.interval_s)
    compiler = MechanismCompiler()
    whole = len(groups) == 1
    decisions: list[GroupDecision] = []
    tunings: dict[str, _GroupTuning] = {}
    for group in groups:
        mix = state_mix(state, model, group.leaf_names, settings)
        resources = group_resources(state, group_share(current, group), whole=whole)
        reason = triggers.get(group.parent)
        if reason is None or group.parent in frozen or not mix.jobs:
            decisions.append(_untouched(group, mix, reason, group.parent in frozen))
            continue
        tuning = _GroupTuning(
            group, _space_for(group, current, settings), current, mix, settings, compiler
        )
        tunings[group.parent] = tuning
        decisions.append(_decide(tuning, resources, reason, settings))
    proposed = _compose(current, decisions)
    proposed, decisions = _split_cluster(state, proposed, decisions, tunings, settings, executor)
    return _finish(current, proposed, decisions)


def _pending_jobs(state: TuningState) -> Workload:
    return Workload((*(p.job for p in state.start.jobs), *state.recent))


def _untouched(group: Group, mix: JobMix, reason: str | None, frozen: bool) -> GroupDecision:
    why = (
        "frozen while a recent change settles"
        if frozen
        else "no job submitted in the interval"
        if reason is None
        else "no job waiting or running"
    )
    return GroupDecision(group.parent, group.queues, reason is not None, why, len(mix.jobs))


def _decide(
    tuning: _GroupTuning, resources: GroupResources, reason: str, settings: TunerSettings
) -> GroupDecision:
    before = tuning.current_latency(resources)
    point, after, evaluations = tuning.best(resources)
    setting = tuning.space.decode(point)
    decision = GroupDecision(
        tuning.group.parent,
        tuning.group.queues,
        True,
        reason,
        len(tuning.mix.jobs),
        before,
        after,
        setting,
        evaluations,
    )
    if not _worth_it(before, after, settings.min_improvement):
        return replace(
            decision,
            after_s=before,
            setting=None,
            reason=f"{reason}; best found ({setting.describe()}) predicts "
            f"{_seconds(after)} against {_seconds(before)} now: not worth a change",
        )
    return decision


def _worth_it(before: float, after: float, threshold: float) -> bool:
    if not math.isfinite(after):
        return False
    if not math.isfinite(before):
        return True
    return after < before * (1.0 - threshold)


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if math.isfinite(value) else "never (jobs starve)"


def _compose(current: SchedulerConfig, decisions: Sequence[GroupDecision]) -> SchedulerConfig:
    config = current
    for decision in decisions:
        if decision.setting is not None:
            config = apply_setting(config, decision.setting)
    return config


# --------------------------------------------------------------------------- cluster level


def _split_cluster(
    state: TuningState,
    proposed: SchedulerConfig,
    decisions: list[GroupDecision],
    tunings: Mapping[str, _GroupTuning],
    settings: TunerSettings,
    executor: ExecutorHandle | None = None,
) -> tuple[SchedulerConfig, list[GroupDecision]]:
    """Algorithm 3 over the triggered groups: the containers they hold now,
    re-divided by their best latency at ``settings.levels`` resource levels."""
    if len(tunings) < 2:
        return proposed, decisions
    unit = state.cluster.minimum_allocation.memory_mb
    shares = {name: group_share(proposed, t.group) for name, t in tunings.items()}
    total_units = state.cluster.total.memory_mb // unit
    pool = max(len(tunings), round(sum(shares.values()) * total_units))
    minimum = state.cluster.minimum_allocation
    bounds = _feasible(
        {name: group_bounds(t.mix, minimum, pool) for name, t in tunings.items()}, pool
    )
    run = partial(_curve, unit=minimum)
    named = [(name, t, bounds[name]) for name, t in tunings.items()]
    curves = map_in_chunks(executor, run, named) if executor else [run(n) for n in named]
    allocation = best_cluster_allocation(curves, pool)
    chosen = dict(zip(allocation.names, allocation.containers, strict=True))
    uppers = {name: b.upper for name, b in bounds.items()}
    spread = spread_leftover(chosen, uppers, pool)
    fraction = sum(shares.values())
    ratios = {name: fraction * count / pool for name, count in spread.items()}
    return apply_ratios(proposed, ratios), _with_ratios(decisions, ratios, shares)


def spread_leftover(
    chosen: Mapping[str, int], uppers: Mapping[str, int], pool: int
) -> dict[str, float]:
    """YARN shares must add up, so the containers no group's latency needs still go
    somewhere: to the groups below their demand saturation, in proportion to what
    Algorithm 3 gave them (to every group when all are saturated)."""
    leftover = pool - sum(chosen.values())
    hungry = {name: n for name, n in chosen.items() if n < uppers[name]} or dict(chosen)
    weight = sum(hungry.values())
    return {
        name: n + (leftover * hungry[name] / weight if name in hungry and weight else 0.0)
        for name, n in chosen.items()
    }


def group_bounds(mix: JobMix, unit: Resources, pool: int) -> ResourceBounds:
    """Algorithm 3's bounds for a group, in minimum allocations (``unit``), within
    ``pool``. Lower: an AM container per job and one task container per queue --
    with less, some job cannot make progress. Upper: demand saturation -- every job's
    AM, running tasks and widest pending stage at once; more changes nothing."""
    ams = sum(_units(job.am, unit) for job in mix.jobs) if mix.am_containers else 0
    first_tasks = sum(
        min(_units(job.task, unit) for job in mix.jobs if job.queue == queue)
        for queue in mix.queues()
    )
    saturated = ams + sum(_demand_units(job, unit) for job in mix.jobs)
    lower = max(1, min(ams + first_tasks, pool))
    return ResourceBounds(lower, max(lower, min(saturated, pool)))


def _units(shape: Resources, unit: Resources) -> int:
    return max(1, math.ceil(shape.memory_mb / unit.memory_mb))


def _demand_units(job: MixJob, unit: Resources) -> int:
    running = sum(r.count for r in job.running) * _units(job.task, unit)
    widest = max((sum(g[0] for g in stage) for stage in job.stages), default=0)
    return running + widest * _units(job.task, unit)


def _feasible(bounds: Mapping[str, ResourceBounds], pool: int) -> dict[str, ResourceBounds]:
    """When the cluster cannot give every group its lower bound, Algorithm 3 splits
    it with no floor but one container each."""
    if sum(b.lower for b in bounds.values()) <= pool:
        return dict(bounds)
    return {name: ResourceBounds(1, b.upper) for name, b in bounds.items()}


def _curve(job: tuple[str, _GroupTuning, ResourceBounds], unit: Resources) -> GroupCurve:
    """A group's best latency at each resource level between its bounds (runs in an
    executor's worker)."""
    name, tuning, bounds = job
    levels = candidate_levels(bounds, max(2, tuning.settings.levels))
    latencies = []
    for units in levels:
        resources = GroupResources(Resources(units * unit.memory_mb, units * unit.vcores), unit)
        latencies.append(_finite(tuning.best(resources)[1]))
    return GroupCurve(name, tuple(int(u) for u in levels), tuple(latencies))


def _finite(value: float) -> float:
    return value if math.isfinite(value) else 1e12


def _with_ratios(
    decisions: Sequence[GroupDecision], ratios: Mapping[str, float], shares: Mapping[str, float]
) -> list[GroupDecision]:
    updated = []
    for decision in decisions:
        ratio = ratios.get(decision.group)
        if ratio is not None and abs(ratio - shares[decision.group]) > 1e-3:
            decision = replace(
                decision,
                reason=f"{decision.reason}; Algorithm 3 moves its share of the cluster "
                f"from {shares[decision.group]:.1%} to {ratio:.1%}",
            )
        updated.append(decision)
    return updated


# --------------------------------------------------------------------------- validation


def finish_proposal(
    current: SchedulerConfig, proposed: SchedulerConfig, decisions: Sequence[GroupDecision]
) -> Proposal:
    """The common end of every proposer: groups whose change YARN would refuse are
    left unchanged, then the diff against ``current`` with a reason per change."""
    return _finish(current, proposed, list(decisions))


def _finish(
    current: SchedulerConfig, proposed: SchedulerConfig, decisions: list[GroupDecision]
) -> Proposal:
    proposed, decisions, issues = _valid(current, proposed, decisions)
    changes = tuple(diff_configs(current, proposed))
    reasons = tuple(_reason_for(change, decisions) for change in changes)
    before, after = _cluster_latency(decisions)
    return Proposal(
        proposed, current, tuple(decisions), before, after, changes, reasons, tuple(issues)
    )


def _valid(
    current: SchedulerConfig, proposed: SchedulerConfig, decisions: list[GroupDecision]
) -> tuple[SchedulerConfig, list[GroupDecision], list[ValidationIssue]]:
    """Drop the changes of groups YARN would refuse, until what is left is valid."""
    issues = validate(proposed, current)
    if not yarn_refuses(issues):
        return proposed, decisions, issues
    kept = [
        replace(
            d,
            setting=None,
            after_s=d.before_s,
            reason=f"{d.reason}; YARN would refuse: {_first(issues, d)}",
        )
        if d.setting is not None
        else d
        for d in decisions
    ]
    fallback = _compose(current, kept)
    return fallback, kept, validate(fallback, current)


def _first(issues: Sequence[ValidationIssue], decision: GroupDecision) -> str:
    mine = [i for i in issues if i.queue.startswith(decision.group)]
    return str((mine or list(issues))[0])


def _reason_for(change: ConfigChange, decisions: Sequence[GroupDecision]) -> str:
    owner = max(
        (d for d in decisions if change.queue == d.group or change.queue.startswith(d.group + ".")),
        key=lambda d: len(d.group),
        default=None,
    )
    if owner is None or owner.setting is None:
        return owner.reason if owner else "cluster-level split (Algorithm 3)"
    if math.isnan(owner.before_s):  # a proposer that predicts no latency
        return f"{owner.group}: {owner.reason}; {owner.setting.describe()}"
    return (
        f"{owner.group}: {owner.reason}; predicted mean latency of its {owner.jobs} jobs "
        f"{_seconds(owner.before_s)} -> {_seconds(owner.after_s)} with {owner.setting.describe()}"
    )


def _cluster_latency(decisions: Sequence[GroupDecision]) -> tuple[float, float]:
    """Job-weighted mean over the groups that were predicted (infinite when a
    group's jobs starve)."""
    known = [d for d in decisions if d.jobs and not math.isnan(d.before_s)]
    jobs = sum(d.jobs for d in known)
    if not jobs:
        return math.nan, math.nan
    before = sum(d.before_s * d.jobs for d in known) / jobs
    after = sum(d.after_s * d.jobs for d in known) / jobs
    return before, after


def propose_from_simulation(
    now_s: float,
    start: SimulationStart,
    cluster: ClusterSpec,
    current: SchedulerConfig,
    model: TaskTimeModel,
    settings: TunerSettings | None = None,
    *,
    recent: Sequence[JobSpec] = (),
    frozen: frozenset[str] = frozenset(),
    executor: ExecutorHandle | None = None,
) -> Proposal:
    """:func:`propose` on a simulated cluster's state (``recent``: the jobs submitted
    in the last interval, for the forecast)."""
    state = state_from_simulation(now_s, start, cluster, recent)
    return propose(state, current, model, settings, frozen=frozen, executor=executor)


def propose_from_snapshot(
    snapshot: ClusterSnapshot,
    current: SchedulerConfig,
    model: TaskTimeModel,
    settings: TunerSettings | None = None,
    *,
    history: Sequence[JobSpec] = (),
    container: Resources | None = None,
    frozen: frozenset[str] = frozenset(),
    executor: ExecutorHandle | None = None,
) -> Proposal:
    """:func:`propose` on a real cluster's snapshot."""
    state = state_from_snapshot(snapshot, history, container)
    return propose(state, current, model, settings, frozen=frozen, executor=executor)
