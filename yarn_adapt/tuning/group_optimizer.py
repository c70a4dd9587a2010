"""Group-level optimizer: ``L*(o_i, r)`` at a group's candidate resource levels. The
tuner (:func:`yarn_adapt.tuning.tuner.propose`) computes its cluster-level curves with
:func:`optimize_group` (on its executor) and splits the cluster with Algorithm 3
(:mod:`yarn_adapt.tuning.split`).

For one group the optimizer searches the group's configuration space (RRS or
exhaustive, :mod:`yarn_adapt.tuning.search`) and keeps the best latency and point at
each candidate resource level ``r``, in one of two ways (``level_search``):

* ``reference`` (the default): search once, at a reference level (the group's
  current resources in the tuner), and re-score the ``rescored`` best distinct
  points it found at every other level. Levels are visited from the lowest up; once
  two levels in a row give the same best latency and point, the group's demand is
  saturated and the higher levels get that result without being scored. With a
  ``margin``, a candidate more than that (relative) worse than a level's best is not
  re-scored at the levels above it (a race: the gaps between configurations narrow
  as containers are added).
* ``full``: search the whole space again at every level (Algorithm 3 as written;
  the tuner's ``latency_loss_vs_full`` compares the two).

The levels lie between two bounds (§3.4):

* ``lower`` -- an AM container for every job plus one task container for every queue
  that has jobs (the least with which every job can start and every queue can make
  progress);
* ``upper`` -- demand saturation: every job's AM and every task of its widest stage
  at once; more containers cannot shorten any job. Capped at the cluster's size.

When the bounds are at most ``max_levels`` apart every level is a candidate;
otherwise the levels are ``lower`` plus extras spaced geometrically up to ``upper``
(dense where a container more matters most, as latency falls roughly like
``1 / r``). The DP then chooses among exactly these levels.

Each search draws from its own generator seeded by ``(seed, crc32(group name),
level)``, so a round gives the same answer serially, in a process pool or on Dask.
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import partial
from typing import Protocol

import numpy as np

from rules.comparator import Comparator
from rules.compiler import MechanismCompiler
from rules.inputs import (
    NO_CONSTRAINTS,
    GroupConfig,
    GroupConstraints,
    GroupResources,
    JobMix,
    QueueConfig,
)
from yarn_adapt.model.resources import Resources
from yarn_adapt.model.workload import JobSpec
from yarn_adapt.tuning.cluster_dp import GroupCurve
from yarn_adapt.tuning.search import (
    Point,
    RRSSettings,
    SearchResult,
    SearchSpace,
    Strategy,
    search,
)
from yarn_adapt.tuning.space import ConfigSpace, GroupSetting, Scheduler

DEFAULT_MAX_LEVELS = 8
RESCORED = 1
"""Candidates re-scored at the other levels: the reference search's best alone. At
1,600 nodes / 64 groups (seeds 1-3), against the full per-level search, 1 lost
0.32 / 0.65 / 0.21 % (Capacity) and 0.17 / 0.21 / 0.34 % (Fair); 3 lost 2.74 / 1.37
/ 0.45 % and 0.11 / 0.19 / 0.13 %, and took about 1.6x the time (Fair 5.0 s against
3.1 s at seed 1). 8 was slower still and lost no less. ``bench search-scale --set
rescored=N`` reports any of them."""


LEVEL_FLAT = 0.02
"""The tuner's ``level_flat``: a span of levels whose ends differ by at most 2 % is
flat, its inner levels not scored. At 1,600 nodes / 64 groups (seed 1), against the
full per-level search: Capacity lost 0.323 % with it and without; Fair 0.438 %
with it, -0.037 % scoring every level, for a fifth less CPU. ``bench search-scale
--set flat=X`` measures any (``-1``: every level)."""


class LevelSearch(StrEnum):
    REFERENCE = "reference"
    FULL = "full"


LevelKey = Callable[[int, Point], Hashable]
"""``key(containers, point)``: points with equal keys score alike at that level."""


@dataclass(frozen=True)
class ResourceBounds:
    """The least and most containers worth giving a group."""

    lower: int
    upper: int

    def __post_init__(self) -> None:
        if not 0 <= self.lower <= self.upper:
            raise ValueError(f"resource bounds need 0 <= lower <= upper, got {self}")


def resource_bounds(jobs: Sequence[JobSpec], cluster_containers: int) -> ResourceBounds:
    """Bounds for a job mix where every task and AM takes one container."""
    queues = len({job.queue for job in jobs})
    lower = min(len(jobs) + queues, cluster_containers)
    saturated = sum(1 + _widest_stage(job) for job in jobs)
    return ResourceBounds(lower, max(lower, min(saturated, cluster_containers)))


def _widest_stage(job: JobSpec) -> int:
    return max(len(job.maps), len(job.reduces))


def candidate_levels(
    bounds: ResourceBounds, max_levels: int = DEFAULT_MAX_LEVELS
) -> tuple[int, ...]:
    """Every level, or ``max_levels`` of them with geometric spacing above ``lower``."""
    if max_levels < 2:
        raise ValueError(f"need at least 2 candidate levels (lower and upper), got {max_levels}")
    span = bounds.upper - bounds.lower
    if span + 1 <= max_levels:
        return tuple(range(bounds.lower, bounds.upper + 1))
    extras = [0]
    for target in np.geomspace(1, span, max_levels - 1):
        extras.append(max(extras[-1] + 1, round(float(target))))
    extras[-1] = span
    return tuple(bounds.lower + e for e in extras)


class GroupObjective(Protocol):
    """The job-latency comparison ``L(r, J_i, C, S_i)`` of one group's jobs: the
    average latency at ``containers`` for each point of the group's space."""

    def __call__(self, containers: int, points: Sequence[Point]) -> Sequence[float]: ...


def candidate_config(base: GroupConfig, setting: GroupSetting) -> GroupConfig:
    """``base`` (the group's C_i as configured) with what the space tunes replaced:
    each queue's share (Capacity percent of the group, or Fair weight), maximum and
    policy (an unset Capacity maximum is YARN's default, 100). Everything the space
    does not tune (AM share, user limits, min/max resources, the parent's policy,
    the resource calculator) stays as configured."""
    configured = {queue.name: queue for queue in base.queues}
    queues = tuple(
        _tuned_queue(
            configured.get(q.name, QueueConfig(q.name, q.policy)),
            q.share,
            q.maximum,
            q.policy,
            setting.scheduler,
        )
        for q in setting.queues
    )
    return replace(base, scheduler=str(setting.scheduler), queues=queues)


def _tuned_queue(
    queue: QueueConfig, share: float, maximum: float | None, policy: str, scheduler: Scheduler
) -> QueueConfig:
    if scheduler is Scheduler.FAIR:
        return replace(queue, weight=share, policy=policy)
    return replace(queue, capacity=share, maximum=max(share, maximum or 100.0), policy=policy)


_COMPILERS: dict[str, MechanismCompiler] = {}


def _shared_compiler() -> MechanismCompiler:
    """One rule compiler per process: every group's search reuses the mechanisms the
    rules already decided for a signature."""
    return _COMPILERS.setdefault("default", MechanismCompiler())


@dataclass(frozen=True)
class ComparatorObjective:
    """``L(r, J_i, C, S_i)`` through the rules comparator: a point of ``space`` becomes
    a configuration (:func:`candidate_config` on ``base``), ``r`` containers of size
    ``container`` become the group's resources."""

    space: ConfigSpace
    mix: JobMix
    base: GroupConfig
    container: Resources
    constraints: GroupConstraints = NO_CONSTRAINTS
    # the comparator of the level searched last: its kept paths serve the next batch
    _comparators: dict[int, Comparator] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    # each point's configuration and the numbers of its evaluation key, at every level
    _configs: dict[Point, tuple[GroupConfig, GroupConfig]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_comparators": {}, "_configs": {}}

    def __setstate__(self, state: dict[str, object]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)

    def __call__(self, containers: int, points: Sequence[Point]) -> Sequence[float]:
        comparator = self._comparator(containers)
        return [comparator.latency(self.config_at(point)) for point in points]

    def config_at(self, point: Point) -> GroupConfig:
        return self._decoded(point)[0]

    def _decoded(self, point: Point) -> tuple[GroupConfig, GroupConfig]:
        found = self._configs.get(point)
        if found is None:
            config = candidate_config(self.base, self.space.decode(point))
            numbers = replace(config, queues=tuple(replace(q, policy="") for q in config.queues))
            found = self._configs[point] = (config, numbers)
        return found

    def evaluation_key(self, containers: int, point: Point) -> Hashable:
        """What the comparator's answer for ``point`` depends on: the kernels the rules
        chose (not which rule chose them) and the configuration's numbers. The rules
        decide mechanism from the categorical facts -- policy names included -- and
        the numeric engine sees policies only through the kernels, so two points
        with equal keys score alike (e.g. Fair's ``drf`` and ``fair`` queues when
        every container has one shape)."""
        config, numbers = self._decoded(point)
        mechanism = self._comparator(containers).mechanism(config)
        choices = (mechanism.allocation, *mechanism.ordering, *mechanism.constraints)
        kernels = tuple((c.kernel, c.bindings) for c in (*choices, mechanism.estimation))
        return kernels, numbers

    def _comparator(self, containers: int) -> Comparator:
        found = self._comparators.get(containers)
        if found is None:
            self._comparators.clear()
            resources = GroupResources.of_containers(containers, self.container)
            found = Comparator(self.mix, resources, self.constraints, compiler=_shared_compiler())
            self._comparators[containers] = found
        return found


@dataclass(frozen=True)
class GroupProblem:
    """One group to tune: its space, its comparator, its bounds, optionally RRS
    settings of its own (granularities depend on the space), a key under which
    points score alike (``ComparatorObjective.evaluation_key``) and the reference
    level (default: the middle candidate level). Must pickle: it travels to pool and
    Dask workers."""

    name: str
    space: SearchSpace
    objective: GroupObjective
    bounds: ResourceBounds
    rrs: RRSSettings | None = None
    key: LevelKey | None = None
    reference: int | None = None


@dataclass(frozen=True, kw_only=True)
class GroupSearchSettings:
    rrs: RRSSettings = field(default_factory=RRSSettings)
    strategy: Strategy = "auto"
    max_levels: int = DEFAULT_MAX_LEVELS
    seed: int = 0
    level_search: LevelSearch = LevelSearch.REFERENCE
    rescored: int = RESCORED
    margin: float | None = None
    flat: float | None = None


@dataclass(frozen=True)
class LevelResult:
    """The best configuration found for one resource level."""

    containers: int
    point: Point
    latency: float
    evaluations: int
    samples: int
    strategy: str


@dataclass(frozen=True)
class GroupOutcome:
    """A group's ``L*`` curve and what computing it cost."""

    name: str
    levels: tuple[LevelResult, ...]
    elapsed_s: float

    @property
    def evaluations(self) -> int:
        return sum(level.evaluations for level in self.levels)

    @property
    def samples(self) -> int:
        return sum(level.samples for level in self.levels)

    def curve(self) -> GroupCurve:
        return GroupCurve(
            self.name,
            tuple(level.containers for level in self.levels),
            tuple(level.latency for level in self.levels),
        )

    def at(self, containers: int) -> LevelResult:
        return next(level for level in self.levels if level.containers == containers)


def optimize_group(
    problem: GroupProblem,
    settings: GroupSearchSettings,
    reference: SearchResult | None = None,
) -> GroupOutcome:
    """``L*(o_i, r)`` for each candidate level ``r`` of ``problem``. ``reference``: a
    search already done at ``problem.reference`` (the tuner's at the group's current
    resources), reused instead of searching again."""
    began = time.perf_counter()
    levels = candidate_levels(problem.bounds, settings.max_levels)
    if settings.level_search is LevelSearch.FULL:
        found = tuple(_best_at(problem, settings, containers) for containers in levels)
    elif settings.flat is not None:
        found = _bisected_levels(problem, settings, levels, reference)
    else:
        found = _rescored_levels(problem, settings, levels, reference)
    return GroupOutcome(problem.name, found, time.perf_counter() - began)


def reference_level(problem: GroupProblem, levels: Sequence[int]) -> int:
    return problem.reference if problem.reference is not None else levels[len(levels) // 2]


def _rescored_levels(
    problem: GroupProblem,
    settings: GroupSearchSettings,
    levels: Sequence[int],
    reference: SearchResult | None,
) -> tuple[LevelResult, ...]:
    at = reference_level(problem, levels)
    searched = reference or _search(problem, settings, at)
    candidates = [point for point, _ in searched.ranked[: settings.rescored]] or [searched.point]
    results: list[LevelResult] = []
    top: LevelResult | None = None  # the highest level, scored when a plateau asks
    for containers in levels:
        if containers == at:
            results.append(_level_result(containers, searched))
            continue
        if top is not None and containers == top.containers:
            results.append(top)
            continue
        if _plateau(results):
            if top is None and containers != levels[-1]:
                top = _top_level(problem, levels[-1], candidates, at, searched)
            if top is not None and _saturated(results[-1], top):
                last = results[-1]
                results.append(replace(last, containers=containers, evaluations=0, samples=0))
                continue
        found, values = _rescore(problem, containers, candidates)
        results.append(found)
        candidates = _within(candidates, values, found.latency, settings.margin)
    return tuple(results)


def _bisected_levels(
    problem: GroupProblem,
    settings: GroupSearchSettings,
    levels: Sequence[int],
    reference: SearchResult | None,
) -> tuple[LevelResult, ...]:
    """The ``reference`` way with fewer levels where the curve is flat: the lowest and
    highest levels are scored, then the middle of every span whose ends differ by
    more than ``settings.flat`` (relative to the lower level's latency), until the
    spans are adjacent or flat. A flat span's inner levels are left off the curve:
    on a curve that falls as containers are added they predict at most ``flat``
    better than the span's lower end, so Algorithm 3 loses at most that much on the
    group by not seeing them (at 0, nothing on such a curve). Every scored level
    re-scores all the candidates (no margin)."""
    at = reference_level(problem, levels)
    searched = reference or _search(problem, settings, at)
    candidates = [point for point, _ in searched.ranked[: settings.rescored]] or [searched.point]

    def score(index: int) -> LevelResult:
        containers = levels[index]
        if containers == at:
            return _level_result(containers, searched)
        return _rescore(problem, containers, candidates)[0]

    last = len(levels) - 1
    scored = {0: score(0)}
    spans = [(0, last)] if last > 0 else []
    if last > 0:
        scored[last] = score(last)
    while spans:
        low, high = spans.pop()
        if high - low < 2 or _flat(scored[low], scored[high], settings.flat or 0.0):
            continue
        middle = (low + high) // 2
        scored[middle] = score(middle)
        spans += [(middle, high), (low, middle)]
    return tuple(scored[index] for index in sorted(scored))


def _flat(low: LevelResult, high: LevelResult, flat: float) -> bool:
    """Whether the higher level predicts at most ``flat`` (relative) better."""
    if low.latency == high.latency:
        return True
    if not math.isfinite(low.latency):
        return False
    return high.latency >= low.latency * (1.0 - flat)


def _within(
    candidates: Sequence[Point], values: Sequence[float], best: float, margin: float | None
) -> list[Point]:
    """The candidates still worth re-scoring at the next level: those within
    ``margin`` (relative) of this level's best (all of them with ``None``)."""
    if margin is None or not math.isfinite(best):
        return list(candidates)
    return [p for p, v in zip(candidates, values, strict=True) if v <= best * (1.0 + margin)]


def _top_level(
    problem: GroupProblem,
    highest: int,
    candidates: Sequence[Point],
    at: int,
    searched: SearchResult,
) -> LevelResult:
    if highest == at:
        return _level_result(at, searched)
    return _rescore(problem, highest, candidates)[0]


def _plateau(results: Sequence[LevelResult]) -> bool:
    """Two levels in a row with the same best point and latency."""
    if len(results) < 2:
        return False
    last, before = results[-1], results[-2]
    return last.point == before.point and last.latency == before.latency


def _saturated(plateau: LevelResult, top: LevelResult) -> bool:
    """A plateau is demand saturation -- more containers change nothing -- only
    when the highest level predicts no better. A plateau can be a step too small
    for one more container (2 GiB tasks on 1 GiB units) or a limit that binds for
    a while (the AM share); before this check such a plateau was copied up to the
    top level and Algorithm 3 starved the group."""
    return top.latency >= plateau.latency


def _rescore(
    problem: GroupProblem, containers: int, candidates: Sequence[Point]
) -> tuple[LevelResult, list[float]]:
    """The best of ``candidates`` at ``containers`` and each one's latency there;
    candidates sharing a key at this level (``problem.key``) are scored once (a lone
    candidate needs no key)."""
    keyer = problem.key if len(candidates) > 1 else None
    keys = [keyer(containers, p) if keyer is not None else p for p in candidates]
    first: dict[Hashable, Point] = {}
    for key, point in zip(keys, candidates, strict=True):
        first.setdefault(key, point)
    scored = dict(zip(first, problem.objective(containers, list(first.values())), strict=True))
    values = [float(scored[key]) for key in keys]
    best = min(range(len(values)), key=values.__getitem__)
    found = LevelResult(
        containers, candidates[best], values[best], len(first), len(candidates), "rescored"
    )
    return found, values


def _search(problem: GroupProblem, settings: GroupSearchSettings, containers: int) -> SearchResult:
    rng = np.random.default_rng([settings.seed, zlib.crc32(problem.name.encode()), containers])
    objective = partial(problem.objective, containers)
    rrs = problem.rrs or settings.rrs
    key = partial(problem.key, containers) if problem.key is not None else None
    return search(problem.space, objective, rrs, rng, settings.strategy, key)


def _level_result(containers: int, found: SearchResult) -> LevelResult:
    return LevelResult(
        containers, found.point, found.value, found.evaluations, found.samples, found.strategy
    )


def _best_at(problem: GroupProblem, settings: GroupSearchSettings, containers: int) -> LevelResult:
    return _level_result(containers, _search(problem, settings, containers))
