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

The state comes from a simulator or from a real cluster's snapshot
(:mod:`.state`: both become a :class:`~yarn_adapt.sim.SimulationStart`-shaped
description of the jobs in progress); step 3 is :mod:`.split`, step 4
:func:`.proposal.finish_proposal`.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np

from rules.comparator import POINT_ESTIMATE, Comparator, Uncertainty
from rules.compiler import MechanismCompiler
from rules.inputs import GroupConfig, GroupResources, JobMix
from yarn_adapt.errors import SettingsError
from yarn_adapt.model import (
    CapacitySchedulerConfig,
    ClusterSnapshot,
    Resources,
    SchedulerConfig,
    Workload,
)
from yarn_adapt.model.workload import JobSpec
from yarn_adapt.semantics.capacity import MAXIMUM_APPLICATIONS, maximum_applications
from yarn_adapt.sim import ClusterSpec, SimulationStart
from yarn_adapt.tuning.apply import Group, groups_of, scheduler_of
from yarn_adapt.tuning.bridge import GroupBase, canonical_key
from yarn_adapt.tuning.executors import ExecutorHandle, map_in_chunks
from yarn_adapt.tuning.group_optimizer import (
    RESCORED,
    LevelSearch,
    ResourceBounds,
)
from yarn_adapt.tuning.proposal import (
    GroupDecision,
    Proposal,
    compose,
    finish_proposal,
    seconds_text,
    worth_it,
)
from yarn_adapt.tuning.search import Point, RRSSettings, SearchResult, Strategy, search
from yarn_adapt.tuning.space import ConfigSpace, SpaceSettings, quantized_space
from yarn_adapt.tuning.split import LevelPlan, level_plan, split_cluster, split_pool
from yarn_adapt.tuning.state import (
    TuningState,
    group_resources,
    group_share,
    state_from_simulation,
    state_from_snapshot,
    state_mix,
    triggered_groups,
)
from yarn_adapt.workload.taskmodel import TaskTimeModel


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
class GroupTuning:
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
    work: list[GroupWork] = []
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
        tuning = GroupTuning(group, space, base, mix, settings, compiler, unit, limits=limits)
        resources = group_resources(state, group_share(current, group), whole=whole)
        work.append(GroupWork(tuning, resources, reason))
    split = split_pool(state, current, work)
    if split is not None:
        work = [replace(w, bounds=split.bounds[w.tuning.group.parent]) for w in work]
    done = _tune_groups(work, executor, on_group_tuned)
    decisions.update((d.group, d) for d, _ in done)
    ordered = [decisions[group.parent] for group in groups]
    plans = {plan.curve.name: plan for _, plan in done if plan is not None}
    if split is not None and plans:
        tuned = {w.tuning.group.parent: w for w in work}
        return split_cluster(current, ordered, plans, tuned, split)
    return finish_proposal(current, compose(current, ordered), ordered)


GroupTuned = Callable[[int, int, str], None]


def _tune_groups(
    work: Sequence[GroupWork], executor: ExecutorHandle | None, on_group_tuned: GroupTuned | None
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
class GroupWork:
    """A triggered group to tune (in an executor's worker when one is given): its
    search at ``resources`` and, with ``bounds``, its cluster-level curve."""

    tuning: GroupTuning
    resources: GroupResources
    reason: str
    bounds: ResourceBounds | None = None


def _tune_group(work: GroupWork) -> tuple[GroupDecision, LevelPlan | None]:
    tuning = work.tuning
    decision = _decide(tuning, work.resources, work.reason, tuning.settings)
    if work.bounds is None:
        return decision, None
    return decision, level_plan((tuning.group.parent, tuning, work.bounds))


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
    tuning: GroupTuning, resources: GroupResources, reason: str, settings: TunerSettings
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
    if not worth_it(before, after, settings.min_improvement):
        why = (
            f"every candidate predicts {seconds_text(after)}, as now: its configuration "
            "does not matter at its current resources"
            if decision.indifferent
            else f"best found ({setting.describe()}) predicts {seconds_text(after)} against "
            f"{seconds_text(before)} now: not worth a change"
        )
        return replace(decision, after_s=before, setting=None, reason=f"{reason}; {why}")
    return decision


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
