"""One triggered group's search (:class:`GroupTuning`: its space, mix and comparators
at each resource level), the work handed to an executor (:class:`GroupWork`), and what
a Capacity group's leaves admit (:class:`AppLimits`)."""

from __future__ import annotations

import math
import zlib
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from rules.comparator import Comparator
from rules.compiler import MechanismCompiler
from rules.inputs import GroupConfig, GroupResources, JobMix
from yarn_adapt.model import (
    CapacitySchedulerConfig,
    Resources,
    SchedulerConfig,
)
from yarn_adapt.semantics.capacity import MAXIMUM_APPLICATIONS, maximum_applications
from yarn_adapt.tuning.apply import Group
from yarn_adapt.tuning.bridge import GroupBase, canonical_key
from yarn_adapt.tuning.group_optimizer import (
    ResourceBounds,
)
from yarn_adapt.tuning.hindsight import HindsightStatic
from yarn_adapt.tuning.search import Point, SearchResult, search
from yarn_adapt.tuning.settings import TunerSettings
from yarn_adapt.tuning.space import ConfigSpace
from yarn_adapt.tuning.state import (
    TuningState,
)


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


@dataclass(frozen=True)
class Prediction:
    """A candidate's predicted mean job latency over the horizon (``score_s``, what
    the tuner compares), on the jobs in progress alone (``observed_s``: checkable once
    they finish) and on the forecast jobs alone (``forecast_s``; NaN without a
    forecast)."""

    score_s: float
    observed_s: float
    forecast_s: float = math.nan


def split_prediction(latencies: Sequence[float], observed: int) -> Prediction:
    """The mean of the first ``observed`` job latencies (the jobs in progress), of the
    rest (the forecast) and of all (infinite when one of them is)."""
    return Prediction(_mean(latencies), _mean(latencies[:observed]), _mean(latencies[observed:]))


def _mean(values: Sequence[float]) -> float:
    if not values:
        return math.nan
    return math.inf if any(not math.isfinite(v) for v in values) else sum(values) / len(values)


@dataclass
class GroupTuning:
    """One triggered group's search: its space, its C_i as configured, its mix, and
    the search done at its current resources (``reference``, ``units`` of them).
    The mix's first ``observed`` jobs are the jobs in progress (``None``: all), the
    rest the horizon's forecast."""

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
    observed: int | None = None
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

    def forget(self) -> None:
        """Drop the comparators (and the paths they keep) and the decoded points: the
        group's searches are done, and a pass over hundreds of groups need not keep
        them all alive (they slowed every later collection of the heap)."""
        self._comparators.clear()
        self._configs.clear()

    def config_at(self, point: Point) -> GroupConfig:
        found = self._configs.get(point)
        if found is None:
            found = self._configs[point] = self.base.with_setting(self.space.decode(point))
        return found

    def current_latency(self, resources: GroupResources) -> float:
        return self._latency(resources, self.base.config)

    def predict(self, resources: GroupResources, config: GroupConfig) -> Prediction:
        """``config``'s prediction, its observed and forecast parts apart."""
        observed = len(self.mix.jobs) if self.observed is None else self.observed
        if self.limits is not None and self.limits.refuses(config, resources.units):
            return Prediction(
                math.inf, math.inf, math.inf if observed < len(self.mix.jobs) else math.nan
            )
        latencies = self.comparator(resources).estimate(config).latencies
        return split_prediction(latencies, observed)

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


@dataclass(frozen=True)
class GroupWork:
    """A triggered group to tune (in an executor's worker when one is given): its
    search at ``resources`` and, with ``bounds``, its cluster-level curve."""

    tuning: GroupTuning
    resources: GroupResources
    reason: str
    bounds: ResourceBounds | None = None
    hindsight: HindsightStatic | None = None
