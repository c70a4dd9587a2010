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

import gc
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from rules.compiler import MechanismCompiler
from rules.inputs import GroupResources, JobMix
from yarn_adapt.model import (
    JobSpec,
    SchedulerConfig,
    Workload,
)
from yarn_adapt.tuning.apply import Group, groups_of, scheduler_of
from yarn_adapt.tuning.bridge import GroupBase
from yarn_adapt.tuning.candidates import HINDSIGHT, RUNNING, SEARCH, Candidate, Choice, choose
from yarn_adapt.tuning.executors import ExecutorHandle, map_in_chunks
from yarn_adapt.tuning.group_tuning import GroupTuning, GroupWork, app_limits
from yarn_adapt.tuning.hindsight import HindsightStatic, hindsight_static, replayed_jobs
from yarn_adapt.tuning.proposal import (
    GroupDecision,
    Proposal,
    compose,
    finish_proposal,
    seconds_text,
)
from yarn_adapt.tuning.search import Point, SearchResult
from yarn_adapt.tuning.settings import TunerSettings
from yarn_adapt.tuning.space import ConfigSpace, quantized_space
from yarn_adapt.tuning.split import LevelPlan, level_plan, split_cluster, split_pool
from yarn_adapt.tuning.state import (
    TuningState,
    group_resources,
    group_share,
    in_progress_count,
    state_mix,
    triggered_groups,
)
from yarn_adapt.workload.taskmodel import TaskTimeModel

# --------------------------------------------------------------------------- search


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
    with _collector_skips_the_heap_so_far():
        return _propose(state, current, model, settings, frozen, executor, on_group_tuned)


@contextmanager
def _collector_skips_the_heap_so_far() -> Iterator[None]:
    """Python's cyclic collector leaves the objects that exist now (the state, the
    workload, the caches) out of its full collections until the pass ends. A pass
    allocates millions of short-lived objects, which set off full collections that
    walked the whole heap and found nothing: at 12,000 nodes and 500 groups, 13 of
    them cost 0.85 s of a 4.3 s pass (search-scale). Young cycles are still collected;
    what the pass leaves behind is collected after it."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _propose(
    state: TuningState,
    current: SchedulerConfig,
    model: TaskTimeModel,
    settings: TunerSettings | None,
    frozen: frozenset[str],
    executor: ExecutorHandle | None,
    on_group_tuned: GroupTuned | None,
) -> Proposal:
    settings = settings or TunerSettings()
    model.prime(_pending_jobs(state))
    groups = groups_of(current)
    triggers = triggered_groups(state, groups, settings.interval_s)
    history = _history(state, model, settings)
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
        observed = in_progress_count(state, group.leaf_names)
        tuning = GroupTuning(
            group, space, base, mix, settings, compiler, unit, limits=limits, observed=observed
        )
        resources = group_resources(state, group_share(current, group), whole=whole)
        anchor = hindsight_static(
            history, current, group, space, state.cluster, settings.hindsight_points
        )
        work.append(GroupWork(tuning, resources, reason, hindsight=anchor))
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
        item.tuning.forget()  # its searches are done: what they kept need not live on
        if on_group_tuned is not None:
            on_group_tuned(number, len(work), item.tuning.group.parent)
    return results


def _tune_group(work: GroupWork) -> tuple[GroupDecision, LevelPlan | None]:
    tuning = work.tuning
    decision = _decide(tuning, work.resources, work.reason, tuning.settings, work.hindsight)
    if work.bounds is None:
        return decision, None
    return decision, level_plan((tuning.group.parent, tuning, work.bounds))


def _history(
    state: TuningState, model: TaskTimeModel, settings: TunerSettings
) -> tuple[JobSpec, ...]:
    """The jobs the hindsight static is replayed on (none without ``hindsight``)."""
    if not settings.hindsight:
        return ()
    return replayed_jobs(state.history_since(state.now_s - settings.hindsight_window_s), model)


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
    tuning: GroupTuning,
    resources: GroupResources,
    reason: str,
    settings: TunerSettings,
    hindsight: HindsightStatic | None = None,
) -> GroupDecision:
    running = Candidate(RUNNING, None, tuning.predict(resources, tuning.base.config))
    found = tuning.best(resources)
    tuning.units, tuning.reference = resources.units, found
    searched = _candidate(tuning, resources, SEARCH, found.point)
    anchor = _candidate(tuning, resources, HINDSIGHT, hindsight.point) if hindsight else None
    gain = settings.min_improvement
    if anchor is not None:
        gain = max(gain, settings.hindsight_gain)
    choice = choose(running, searched, anchor, gain)
    decision = _decision(tuning, reason, running, searched, choice, found)
    if hindsight is not None:
        decision = replace(decision, hindsight_s=hindsight.latency_s)
    return decision


def _candidate(
    tuning: GroupTuning, resources: GroupResources, name: str, point: Point
) -> Candidate:
    """The space's ``point`` as a candidate; the running configuration when it
    decodes to what runs."""
    config = tuning.config_at(point)
    setting = None if config == tuning.base.config else tuning.space.decode(point)
    return Candidate(name, setting, tuning.predict(resources, config))


def _decision(
    tuning: GroupTuning,
    reason: str,
    running: Candidate,
    searched: Candidate,
    choice: Choice,
    found: SearchResult,
) -> GroupDecision:
    chosen = choice.candidate
    horizon = tuning.observed is not None and tuning.observed < len(tuning.mix.jobs)
    decision = GroupDecision(
        tuning.group.parent,
        tuning.group.queues,
        True,
        reason,
        len(tuning.mix.jobs) if tuning.observed is None else tuning.observed,
        running.prediction.observed_s,
        chosen.prediction.observed_s,
        chosen.setting,
        found.evaluations,
        math.nan if horizon else found.worst,
        found_s=searched.prediction.observed_s,
        candidate=chosen.name,
        forecast_before_s=running.prediction.forecast_s,
        forecast_after_s=chosen.prediction.forecast_s,
        forecast_jobs=len(tuning.mix.jobs) - (tuning.observed or len(tuning.mix.jobs)),
    )
    if choice.why:
        return replace(decision, reason=f"{reason}; {choice.why}{_horizon(decision)}")
    if chosen.setting is not None or chosen.name == SEARCH:
        return decision
    return replace(
        decision, reason=f"{reason}; {_kept(decision, searched, running)}{_horizon(decision)}"
    )


def _kept(decision: GroupDecision, searched: Candidate, running: Candidate) -> str:
    if decision.indifferent:
        return (
            f"every candidate predicts {seconds_text(decision.after_s)}, as now: its "
            "configuration does not matter at its current resources"
        )
    setting = searched.setting.describe() if searched.setting is not None else "as it runs"
    return (
        f"best found ({setting}) predicts {seconds_text(searched.score_s)} against "
        f"{seconds_text(running.score_s)} now: not worth a change"
    )


def _horizon(decision: GroupDecision) -> str:
    if not decision.forecast_jobs:
        return ""
    return (
        f" (scored on its {decision.jobs} jobs in progress and {decision.forecast_jobs} "
        f"forecast ones; forecast part {seconds_text(decision.forecast_before_s)} -> "
        f"{seconds_text(decision.forecast_after_s)})"
    )
