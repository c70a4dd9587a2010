"""The cluster level (AdaptiveConfig §3.4, Algorithm 3): the containers the triggered
groups hold now, re-divided among them from each one's best latency at several
resource levels (:mod:`.cluster_dp`); each group then runs the configuration its
curve assumed at the level it was given."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from rules.inputs import JobMix, MixJob
from yarn_adapt.model import (
    Resources,
    SchedulerConfig,
)
from yarn_adapt.tuning.apply import apply_ratios
from yarn_adapt.tuning.cluster_dp import GroupCurve, best_cluster_allocation
from yarn_adapt.tuning.group_optimizer import (
    GroupProblem,
    GroupSearchSettings,
    ResourceBounds,
    optimize_group,
)
from yarn_adapt.tuning.group_tuning import GroupTuning, GroupWork
from yarn_adapt.tuning.proposal import (
    GroupDecision,
    Proposal,
    compose,
    finish_proposal,
    seconds_text,
    worth_it,
)
from yarn_adapt.tuning.space import GroupSetting
from yarn_adapt.tuning.state import TuningState, group_share


@dataclass(frozen=True)
class Split:
    """The containers the triggered groups hold now (``pool``), their share of the
    cluster, and each one's Algorithm 3 bounds."""

    pool: int
    shares: Mapping[str, float]
    bounds: Mapping[str, ResourceBounds]


def split_pool(
    state: TuningState, current: SchedulerConfig, work: Sequence[GroupWork]
) -> Split | None:
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
    return Split(pool, shares, bounds)


def split_cluster(
    current: SchedulerConfig,
    decisions: list[GroupDecision],
    plans: Mapping[str, LevelPlan],
    tuned: Mapping[str, GroupWork],
    split: Split,
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
    proposed = apply_ratios(compose(current, at_levels), ratios)
    return finish_proposal(current, proposed, _with_ratios(at_levels, ratios, split.shares))


def _at_level(
    decision: GroupDecision, plan: LevelPlan, work: GroupWork, containers: int
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
    if worth_it(running_s, best_s, tuning.settings.min_improvement):
        why = f"{level}, {best.describe()} predicts {seconds_text(best_s)}"
        why += f" against {seconds_text(running_s)} as configured"
        return replace(decision, setting=best, after_s=best_s, reason=f"{decision.reason}; {why}")
    why = f"{level}, its configuration predicts {seconds_text(running_s)}: kept"
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


def level_plan(job: tuple[str, GroupTuning, ResourceBounds]) -> LevelPlan:
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
        flat=settings.level_flat,
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
