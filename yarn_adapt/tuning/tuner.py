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
   rules (the pure validators of :mod:`yarn_adapt.yarn.schedconf`); a group whose
   change YARN would refuse is left unchanged, so a proposal is never one the
   validator rejects.

The state comes from a simulator (:func:`state_from_simulation`) or from a real
cluster's snapshot (:func:`state_from_snapshot`); both become a
:class:`~yarn_adapt.sim.SimulationStart`-shaped description of the jobs in progress.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np

from rules.comparator import POINT_ESTIMATE, Comparator, Uncertainty
from rules.compiler import MechanismCompiler
from rules.inputs import GroupConfig, GroupResources, JobMix, MixJob, RunningTasks
from rules.mixes import mix_job
from yarn_adapt.errors import SettingsError, ValidationIssue
from yarn_adapt.model import (
    CapacityQueue,
    CapacitySchedulerConfig,
    ClusterSnapshot,
    FairQueue,
    FairSchedulerConfig,
    Percentage,
    Resources,
    SchedulerConfig,
    Workload,
)
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.workload import JobSpec
from yarn_adapt.semantics.capacity import MAXIMUM_APPLICATIONS, maximum_applications
from yarn_adapt.sim import ClusterSpec, JobInProgress, SimulationStart
from yarn_adapt.tuning.apply import Group, apply_ratios, apply_setting, groups_of, scheduler_of
from yarn_adapt.tuning.bridge import GroupBase, canonical_key
from yarn_adapt.tuning.cluster_dp import GroupCurve, best_cluster_allocation
from yarn_adapt.tuning.executors import ExecutorHandle, map_in_chunks
from yarn_adapt.tuning.group_optimizer import (
    RESCORED,
    GroupProblem,
    GroupSearchSettings,
    LevelSearch,
    ResourceBounds,
    optimize_group,
)
from yarn_adapt.tuning.search import Point, RRSSettings, SearchResult, Strategy, search
from yarn_adapt.tuning.snapshot_state import start_from_snapshot
from yarn_adapt.tuning.space import ConfigSpace, GroupSetting, SpaceSettings, quantized_space
from yarn_adapt.workload.taskmodel import TaskTimeModel
from yarn_adapt.yarn.schedconf.diff import ConfigChange, diff_configs
from yarn_adapt.yarn.schedconf.issues import yarn_refuses
from yarn_adapt.yarn.schedconf.validate_capacity import validate_capacity
from yarn_adapt.yarn.schedconf.validate_fair import validate_fair

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
    chosen; ``forecast_intervals``: how many intervals ahead (the recent
    submissions again at 1, 2, ... intervals on). The service does not forecast
    (what it predicts must be checkable on the jobs that realise); ``bench
    adaptive-latency --set forecast=yes`` measures it. The cluster-level curves:
    ``level_search`` ``reference`` searches each group once, at its current
    resources, and re-scores its ``rescored`` best candidates (1: the best alone) at
    the other levels, from the lowest up, dropping those more than ``rescore_margin``
    worse than a level's best (``None``: none); ``full`` searches every level
    (:mod:`yarn_adapt.tuning.group_optimizer`). ``canonical``: candidates the engine
    cannot tell apart in whole containers are scored once
    (:func:`yarn_adapt.tuning.bridge.canonical_key`). RRS stops after an iteration
    that found nothing better (``rrs.patience``). ``strategy``: how a group's space
    is searched (:func:`yarn_adapt.tuning.search.search`); ``refine`` (coarse lattice,
    then a pattern search) only changes spaces with ordered dimensions finer than its
    coarse lattice -- the others are searched as ``auto`` would. ``app_headroom``:
    a Capacity leaf must admit this many times the group's jobs there (at least two
    more) under ``maximum-applications`` (:class:`AppLimits`); 1.0 is YARN's own
    rule, no fewer than the jobs in view."""

    interval_s: float = 120.0
    space: SpaceSettings = field(default_factory=SpaceSettings)
    spaces: Mapping[str, ConfigSpace] = field(default_factory=dict)
    rrs: RRSSettings = field(default_factory=lambda: RRSSettings(patience=1))
    min_improvement: float = 0.02
    uncertainty: Uncertainty = POINT_ESTIMATE
    levels: int = 16
    level_search: LevelSearch = LevelSearch.REFERENCE
    rescored: int = RESCORED
    rescore_margin: float | None = 0.05
    canonical: bool = True
    strategy: Strategy = "refine"
    am_containers: bool = True
    fair_assign_multiple: bool | None = None
    forecast: bool = False
    forecast_intervals: int = 1
    app_headroom: float = 2.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.app_headroom >= 1.0:
            raise SettingsError(f"app_headroom {self.app_headroom}: want at least 1.0")
        if self.forecast_intervals < 1:
            raise SettingsError(f"forecast_intervals {self.forecast_intervals}: want at least 1")


@dataclass(frozen=True)
class GroupDecision:
    """What happened to one group: whether it was triggered and why, its predicted
    mean job latency under the running and the proposed configuration, and the
    setting chosen (``None`` when it keeps its configuration); ``evaluations``:
    the comparator's distinct scores of its search, ``worst_s`` the highest of
    them."""

    group: str
    queues: tuple[str, ...]
    triggered: bool
    reason: str
    jobs: int = 0
    before_s: float = math.nan
    after_s: float = math.nan
    setting: GroupSetting | None = None
    evaluations: int = 0
    worst_s: float = math.nan
    found_s: float = math.nan  # the best setting's prediction, kept or not

    @property
    def changed(self) -> bool:
        return self.setting is not None

    @property
    def indifferent(self) -> bool:
        """Every candidate scored at the group's current resources predicted the same
        latency: its configuration does not matter there (say, its jobs' demand
        fits in its share and no limit binds)."""
        return self.triggered and self.worst_s == self.after_s == self.before_s


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
            _expected(job, model, settings.interval_s, ahead)
            for ahead in range(1, settings.forecast_intervals + 1)
            for job in state.recent
            if _leaf(job.queue) in wanted
        )
    return JobMix(jobs, now_s=state.now_s, am_containers=settings.am_containers)


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


# --------------------------------------------------------------------------- search


@dataclass(frozen=True)
class AppLimits:
    """What a Capacity group's leaves admit (``maximum-applications``): the
    system-wide setting, each leaf's own, and the group's jobs per leaf. A share so
    small that a leaf would hold no more applications than the group sends it makes
    YARN refuse submissions (AbstractLeafQueue.validateSubmitApplication), so the
    tuner predicts such a setting never to finish them (:meth:`refuses`)."""

    cluster_units: int
    system: int | None
    own: Mapping[str, int]
    apps: Mapping[str, int]
    headroom: float = 2.0

    def refuses(self, config: GroupConfig, units: int) -> bool:
        """Some leaf would admit fewer than ``headroom`` times the group's jobs there
        (at least two more): arrivals come in bursts, and one beyond the limit is
        refused (the Google replay's tuned run lost two jobs to a leaf sized for its
        9). The absolute capacity is then taken 1 % low, for the rounding of the
        percents written to the file. ``headroom`` 1.0: YARN's own rule for the jobs
        in view, exactly."""
        margin = self.headroom > 1.0
        for queue in config.queues:
            count = self.apps.get(queue.name, 0)
            if not count:
                continue
            absolute = units / self.cluster_units * queue.capacity / 100.0
            wanted = max(math.ceil(count * self.headroom), count + 2) if margin else count
            admitted = maximum_applications(
                self.own.get(queue.name), self.system, absolute * (0.99 if margin else 1.0)
            )
            if admitted < wanted:
                return True
        return False


def app_limits(
    config: SchedulerConfig, group: Group, mix: JobMix, state: TuningState, headroom: float = 2.0
) -> AppLimits | None:
    """The group's :class:`AppLimits` (Capacity only: Fair's maxRunningApps makes
    applications wait, never refuses them)."""
    if not isinstance(config, CapacitySchedulerConfig):
        return None
    own: dict[str, int] = {}
    for path in group.queues:
        queue = config.find(path)
        value = queue.other(MAXIMUM_APPLICATIONS) if queue is not None else None
        if value is not None and value.strip().lstrip("-").isdigit():
            own[path.rsplit(".", 1)[-1]] = int(value)
    system = config.global_value(MAXIMUM_APPLICATIONS)
    apps: dict[str, int] = {}
    for job in mix.jobs:
        apps[job.queue] = apps.get(job.queue, 0) + 1
    unit = state.cluster.minimum_allocation.memory_mb
    return AppLimits(
        max(1, state.cluster.total.memory_mb // unit),
        int(system) if system is not None and system.strip().isdigit() else None,
        own,
        apps,
        headroom,
    )


@dataclass
class _GroupTuning:
    """One triggered group's search: its space, its C_i as configured, its mix, and
    the search done at its current resources (``reference``, ``units`` of them)."""

    group: Group
    space: ConfigSpace
    base: GroupBase
    mix: JobMix
    settings: TunerSettings
    compiler: MechanismCompiler
    unit: Resources = field(default_factory=lambda: Resources(1024, 1))
    units: int = 0
    reference: SearchResult | None = None
    limits: AppLimits | None = None
    _comparators: dict[GroupResources, Comparator] = field(default_factory=dict, repr=False)
    _configs: dict[Point, GroupConfig] = field(default_factory=dict, repr=False)

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_comparators": {}, "_configs": {}}

    def comparator(self, resources: GroupResources) -> Comparator:
        found = self._comparators.get(resources)
        if found is None:
            if len(self._comparators) >= _COMPARATORS_KEPT:
                self._comparators.clear()
            found = self._comparators[resources] = Comparator(
                self.mix, resources, compiler=self.compiler, uncertainty=self.settings.uncertainty
            )
        return found

    def config_at(self, point: Point) -> GroupConfig:
        found = self._configs.get(point)
        if found is None:
            found = self._configs[point] = self.base.with_setting(self.space.decode(point))
        return found

    def current_latency(self, resources: GroupResources) -> float:
        return self._latency(resources, self.base.config)

    def latencies(self, resources: GroupResources, points: Sequence[Point]) -> list[float]:
        return [self._latency(resources, self.config_at(p)) for p in points]

    def _latency(self, resources: GroupResources, config: GroupConfig) -> float:
        if self.limits is not None and self.limits.refuses(config, resources.units):
            return math.inf
        return self.comparator(resources).latency(config)

    def key(self, resources: GroupResources, point: Point) -> Hashable:
        """Points the engine cannot tell apart at these resources share a key."""
        if not self.settings.canonical:
            return point
        config = self.config_at(point)
        return canonical_key(config, self.comparator(resources).mechanism(config), resources.units)

    def best(self, resources: GroupResources) -> SearchResult:
        rng = np.random.default_rng(
            [self.settings.seed, zlib.crc32(self.group.parent.encode()), resources.units]
        )
        return search(
            self.space,
            partial(self.latencies, resources),
            self.settings.rrs,
            rng,
            self.settings.strategy,
            key=partial(self.key, resources),
        )

    # the cluster-level curve: the objective and key of a GroupProblem, by level

    def at_level(self, containers: int, points: Sequence[Point]) -> Sequence[float]:
        return self.latencies(self.unit_resources(containers), points)

    def key_at_level(self, containers: int, point: Point) -> Hashable:
        return self.key(self.unit_resources(containers), point)

    def unit_resources(self, units: int) -> GroupResources:
        unit = self.unit
        return GroupResources(Resources(units * unit.memory_mb, units * unit.vcores), unit)


_COMPARATORS_KEPT = 4


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
    on_group_tuned: GroupTuned | None = None,
) -> Proposal:
    """The tuner's proposal for ``state`` under the running ``current`` configuration.
    ``executor`` runs the triggered groups' work -- each group's search and its
    cluster-level curve -- in parallel; inline when ``None``. ``on_group_tuned(done,
    total, group)`` hears of each finished group (a command's progress line)."""
    settings = settings or TunerSettings()
    model.prime(_pending_jobs(state))
    groups = groups_of(current)
    triggers = triggered_groups(state, groups, settings.interval_s)
    compiler = MechanismCompiler()
    whole = len(groups) == 1
    decisions: dict[str, GroupDecision] = {}
    work: list[_GroupWork] = []
    for group in groups:
        mix = state_mix(state, model, group.leaf_names, settings)
        reason = triggers.get(group.parent)
        if reason is None or group.parent in frozen or not mix.jobs:
            decisions[group.parent] = _untouched(group, mix, reason, group.parent in frozen)
            continue
        base = GroupBase.of(current, group, fair_assign_multiple=settings.fair_assign_multiple)
        space = _space_for(group, current, settings)
        unit = state.cluster.minimum_allocation
        limits = app_limits(current, group, mix, state, settings.app_headroom)
        tuning = _GroupTuning(group, space, base, mix, settings, compiler, unit, limits=limits)
        resources = group_resources(state, group_share(current, group), whole=whole)
        work.append(_GroupWork(tuning, resources, reason))
    split = _split_pool(state, current, work)
    if split is not None:
        work = [replace(w, bounds=split.bounds[w.tuning.group.parent]) for w in work]
    done = _tune_groups(work, executor, on_group_tuned)
    decisions.update((d.group, d) for d, _ in done)
    ordered = [decisions[group.parent] for group in groups]
    plans = {plan.curve.name: plan for _, plan in done if plan is not None}
    if split is not None and plans:
        tuned = {w.tuning.group.parent: w for w in work}
        return _split_cluster(current, ordered, plans, tuned, split)
    return _finish(current, _compose(current, ordered), ordered)


GroupTuned = Callable[[int, int, str], None]


def _tune_groups(
    work: Sequence[_GroupWork], executor: ExecutorHandle | None, on_group_tuned: GroupTuned | None
) -> list[tuple[GroupDecision, LevelPlan | None]]:
    if executor is not None:

        def heard(done: int) -> None:
            if on_group_tuned is not None:
                on_group_tuned(done, len(work), "")

        return map_in_chunks(executor, _tune_group, work, on_done=heard)
    results = []
    for number, item in enumerate(work, start=1):
        results.append(_tune_group(item))
        if on_group_tuned is not None:
            on_group_tuned(number, len(work), item.tuning.group.parent)
    return results


@dataclass(frozen=True)
class _GroupWork:
    """A triggered group to tune (in an executor's worker when one is given): its
    search at ``resources`` and, with ``bounds``, its cluster-level curve."""

    tuning: _GroupTuning
    resources: GroupResources
    reason: str
    bounds: ResourceBounds | None = None


def _tune_group(work: _GroupWork) -> tuple[GroupDecision, LevelPlan | None]:
    tuning = work.tuning
    decision = _decide(tuning, work.resources, work.reason, tuning.settings)
    if work.bounds is None:
        return decision, None
    return decision, _curve((tuning.group.parent, tuning, work.bounds))


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
    found = tuning.best(resources)
    tuning.units, tuning.reference = resources.units, found
    point, after, evaluations = found.point, found.value, found.evaluations
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
        found.worst,
        found_s=after,
    )
    if not _worth_it(before, after, settings.min_improvement):
        why = (
            f"every candidate predicts {_seconds(after)}, as now: its configuration "
            "does not matter at its current resources"
            if decision.indifferent
            else f"best found ({setting.describe()}) predicts {_seconds(after)} against "
            f"{_seconds(before)} now: not worth a change"
        )
        return replace(decision, after_s=before, setting=None, reason=f"{reason}; {why}")
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


@dataclass(frozen=True)
class _Split:
    """The containers the triggered groups hold now (``pool``), their share of the
    cluster, and each one's Algorithm 3 bounds."""

    pool: int
    shares: Mapping[str, float]
    bounds: Mapping[str, ResourceBounds]


def _split_pool(
    state: TuningState, current: SchedulerConfig, work: Sequence[_GroupWork]
) -> _Split | None:
    """Algorithm 3's inputs when two or more groups are tuned."""
    if len(work) < 2:
        return None
    minimum = state.cluster.minimum_allocation
    shares = {w.tuning.group.parent: group_share(current, w.tuning.group) for w in work}
    total_units = state.cluster.total.memory_mb // minimum.memory_mb
    pool = max(len(work), round(sum(shares.values()) * total_units))
    bounds = _feasible(
        {w.tuning.group.parent: group_bounds(w.tuning.mix, minimum, pool) for w in work}, pool
    )
    return _Split(pool, shares, bounds)


def _split_cluster(
    current: SchedulerConfig,
    decisions: list[GroupDecision],
    plans: Mapping[str, LevelPlan],
    tuned: Mapping[str, _GroupWork],
    split: _Split,
) -> Proposal:
    """Algorithm 3 over the triggered groups: the containers they hold now,
    re-divided by their best latency at ``settings.levels`` resource levels. Each
    group then takes the configuration its curve assumed at the level it was given
    (Algorithm 3's latency is that configuration's), unless the one it runs predicts
    as well there."""
    allocation = best_cluster_allocation([p.curve for p in plans.values()], split.pool)
    chosen = dict(zip(allocation.names, allocation.containers, strict=True))
    uppers = {name: b.upper for name, b in split.bounds.items()}
    spread = spread_leftover(chosen, uppers, split.pool)
    fraction = sum(split.shares.values())
    ratios = {name: fraction * count / split.pool for name, count in spread.items()}
    at_levels = [
        _at_level(d, plans[d.group], tuned[d.group], chosen[d.group]) if d.group in chosen else d
        for d in decisions
    ]
    proposed = apply_ratios(_compose(current, at_levels), ratios)
    return _finish(current, proposed, _with_ratios(at_levels, ratios, split.shares))


def _at_level(
    decision: GroupDecision, plan: LevelPlan, work: _GroupWork, containers: int
) -> GroupDecision:
    """``decision`` (made at the group's current resources) re-made at the
    ``containers`` Algorithm 3 gave it: the level's best setting when it beats the
    running configuration there by the tuner's threshold, else the running one."""
    tuning = work.tuning
    if containers == work.resources.units:
        return decision
    best, best_s = plan.settings[containers], plan.curve.latency_at(containers)
    if best_s >= NEVER_S:
        best_s = math.inf  # no setting finishes the jobs at this level either
    running_s = tuning.current_latency(tuning.unit_resources(containers))
    level = f"at the {containers} containers Algorithm 3 gives it"
    if _worth_it(running_s, best_s, tuning.settings.min_improvement):
        why = f"{level}, {best.describe()} predicts {_seconds(best_s)}"
        why += f" against {_seconds(running_s)} as configured"
        return replace(decision, setting=best, after_s=best_s, reason=f"{decision.reason}; {why}")
    why = f"{level}, its configuration predicts {_seconds(running_s)}: kept"
    return replace(decision, setting=None, after_s=running_s, reason=f"{decision.reason}; {why}")


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


@dataclass(frozen=True)
class LevelPlan:
    """A group's Algorithm 3 curve and the setting behind each of its points."""

    curve: GroupCurve
    settings: Mapping[int, GroupSetting]


def _curve(job: tuple[str, _GroupTuning, ResourceBounds]) -> LevelPlan:
    """A group's best latency at each resource level between its bounds, and the
    setting that reaches it (runs in an executor's worker):
    :func:`yarn_adapt.tuning.group_optimizer.optimize_group` with the tuner's
    comparator, referenced at the group's current resources."""
    name, tuning, bounds = job
    settings = tuning.settings
    problem = GroupProblem(
        name,
        tuning.space,
        tuning.at_level,
        bounds,
        rrs=settings.rrs,
        key=tuning.key_at_level,
        reference=tuning.units or None,
    )
    search_settings = GroupSearchSettings(
        rrs=settings.rrs,
        max_levels=max(2, settings.levels),
        seed=settings.seed,
        level_search=settings.level_search,
        rescored=settings.rescored,
        margin=settings.rescore_margin,
    )
    outcome = optimize_group(problem, search_settings, reference=tuning.reference)
    curve = outcome.curve()
    finite = GroupCurve(name, curve.levels, tuple(_finite(v) for v in curve.latencies))
    decode = tuning.space.decode
    return LevelPlan(finite, {level.containers: decode(level.point) for level in outcome.levels})


NEVER_S = 1e12  # an infinite prediction on Algorithm 3's curves (the DP adds them up)


def _finite(value: float) -> float:
    return value if math.isfinite(value) else NEVER_S


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


def validate(config: SchedulerConfig, running: SchedulerConfig) -> list[ValidationIssue]:
    """YARN's rules for ``config`` replacing ``running`` (the pure validators, not the
    XML facade: decision code reads no files)."""
    if isinstance(config, CapacitySchedulerConfig):
        previous = running if isinstance(running, CapacitySchedulerConfig) else None
        return list(validate_capacity(config, previous))
    assert isinstance(config, FairSchedulerConfig)
    previous_fair = running if isinstance(running, FairSchedulerConfig) else None
    return list(validate_fair(config, previous_fair))


def _valid(
    current: SchedulerConfig, proposed: SchedulerConfig, decisions: list[GroupDecision]
) -> tuple[SchedulerConfig, list[GroupDecision], list[ValidationIssue]]:
    """Drop the changes of groups YARN would refuse, until what is left is valid:
    first only the groups a refusal names (their queues go back to what runs, the
    other groups' changes and the cluster-level split stay), then every group's."""
    issues = validate(proposed, current)
    if not yarn_refuses(issues):
        return proposed, decisions, issues
    changed = {d.group for d in decisions if d.setting is not None}
    blamed = _blamed(issues, changed)
    if blamed and blamed != changed:
        narrowed = _restore_groups(proposed, current, blamed)
        left = validate(narrowed, current)
        if not yarn_refuses(left):
            return narrowed, _refused(decisions, issues, blamed), left
    kept = _refused(decisions, issues, changed)
    fallback = _compose(current, kept)
    return fallback, kept, validate(fallback, current)


def _blamed(issues: Sequence[ValidationIssue], groups: set[str]) -> set[str]:
    """The changed groups holding a queue YARN refuses."""
    refused = [i for i in issues if yarn_refuses([i])]
    return {g for g in groups if any(_within(i.queue, g) for i in refused)}


def _within(queue: str, group: str) -> bool:
    return queue == group or queue.startswith(group + ".")


def _restore_groups(
    proposed: SchedulerConfig, current: SchedulerConfig, groups: set[str]
) -> SchedulerConfig:
    """``proposed`` with each of ``groups``' children as they run now (the group's own
    share, set by the cluster-level split, stays as proposed)."""
    config = proposed
    for group in groups:
        now, new = current.find(group), config.find(group)
        assert now is not None and new is not None, group
        config = config.with_queue(replace(new, children=now.children))  # type: ignore[arg-type]
    return config


def _refused(
    decisions: Sequence[GroupDecision], issues: Sequence[ValidationIssue], groups: set[str]
) -> list[GroupDecision]:
    return [
        replace(
            d,
            setting=None,
            after_s=d.before_s,
            reason=f"{d.reason}; YARN would refuse: {_first(issues, d)}",
        )
        if d.group in groups
        else d
        for d in decisions
    ]


def _first(issues: Sequence[ValidationIssue], decision: GroupDecision) -> str:
    mine = [i for i in issues if _within(i.queue, decision.group)]
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
    on_group_tuned: GroupTuned | None = None,
) -> Proposal:
    """:func:`propose` on a simulated cluster's state (``recent``: the jobs submitted
    in the last interval, for the forecast)."""
    state = state_from_simulation(now_s, start, cluster, recent)
    return propose(
        state,
        current,
        model,
        settings,
        frozen=frozen,
        executor=executor,
        on_group_tuned=on_group_tuned,
    )


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
    on_group_tuned: GroupTuned | None = None,
) -> Proposal:
    """:func:`propose` on a real cluster's snapshot."""
    state = state_from_snapshot(snapshot, history, container)
    return propose(
        state,
        current,
        model,
        settings,
        frozen=frozen,
        executor=executor,
        on_group_tuned=on_group_tuned,
    )
