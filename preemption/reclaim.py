"""Algorithm 2 (TopoSch §5.3): QoS-driven gradual reclaim, as a pure state machine.

The paper's loop::

    while Qtgt(m) is unsatisfied:
        r = InferPreemptedResource()
        K = ⌈r / c⌉; T = GetKPreemptedTasks(T, B)
        for t in T, in parallel:
            s = c
            while s > 0:
                s -= ω; Preempt(t, ω)
                if not AlivenessCheck(t): B += t; break

runs here one mini-step per call of :func:`decide` (the agent calls it once per
interval; the simulator once per simulated interval), so "after each step" the
caller can observe the task for one interval before the next step:

1. Tasks that vanished (container exited) leave the round, the blacklist and the
   kill list.
2. Aliveness: a task whose last step made it falter is blacklisted, that step is
   given back, and it is never squeezed again while it runs (B += t).
3. The demand is a desired state: ``desired = max(request, model's inference) +
   extra``, where ``extra`` grows by one task's worth (c, CPU) each time a round ends
   and the QoS is still violated although the request is met ("repeat"), and shrinks
   again when the QoS has headroom or the request changes. ``reclaimed`` counts what
   squeezed tasks gave (baseline − limit) plus what kills freed.
4. More reclaimed than desired (beyond the dead band): give back ω per task per
   interval (scale up slowly), kills first (nothing to write), squeezes after.
5. A round in progress: every planned task whose last step passed its check takes
   its next step min(ω, s), never below the floor, all in parallel.
6. No round: if ``desired - reclaimed`` exceeds the dead band, start one: the
   strategy picks the tasks and their shares (:mod:`preemption.strategies`) and
   the first step is taken at once.
7. Last resort: when the demand has been unmet for ``grace_period_s`` and nothing is
   left to squeeze (every candidate blacklisted or at its floor), kill one container
   through the RM (blacklisted tasks first, then newest first), then wait
   ``kill_cooldown_s`` before another. Never before the grace period, never first.

The ``Kill`` strategy is YARN's own behaviour, kept as the baseline the benchmark
compares against: it kills at once, newest first, until the kills cover the demand.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from preemption.aliveness import AlivenessSettings, Verdict
from preemption.model import NOTHING, Amount, BatchTask, ReclaimTarget, sum_amounts
from preemption.strategies import (
    Assignment,
    SelectionSettings,
    Strategy,
    reclaimable,
    select,
)

DEFAULT_PER_TASK = Amount(1000, 512)
DEFAULT_MINI_STEP = Amount(250, 128)
DEFAULT_FLOOR = Amount(100, 256)
# Koordinator skips changes under 1% of a node; 50 millicores / 32 MiB here.
DEFAULT_DEAD_BAND = Amount(50, 32)


@dataclass(frozen=True, kw_only=True)
class ReclaimSettings:
    """Algorithm 2's knobs (c, ω, floors) and the safety around it."""

    strategy: Strategy = Strategy.NTF
    per_task: Amount = DEFAULT_PER_TASK  # c
    mini_step: Amount = DEFAULT_MINI_STEP  # ω
    floor: Amount = DEFAULT_FLOOR
    dead_band: Amount = DEFAULT_DEAD_BAND
    grace_period_s: float = 60.0
    kill_cooldown_s: float = 30.0
    kill_enabled: bool = True
    settle_s: float = 0.0
    qos_release_margin: float = 0.2
    seed: int = 0
    aliveness: AlivenessSettings = field(default_factory=AlivenessSettings)

    def __post_init__(self) -> None:
        problems = list(self._problems())
        if problems:
            raise ValueError("; ".join(problems))

    def _problems(self) -> list[str]:
        problems = []
        if self.per_task.cpu_millicores <= 0 and self.per_task.memory_mb <= 0:
            problems.append("per-task amount c must be positive")
        for name, value in (("mini_step", self.mini_step), ("floor", self.floor)):
            if value.cpu_millicores < 0 or value.memory_mb < 0:
                problems.append(f"{name} must not be negative")
        if self.mini_step.cpu_millicores == 0 and self.mini_step.memory_mb == 0:
            problems.append("mini-step ω must be positive")
        if self.grace_period_s < 0 or self.kill_cooldown_s < 0 or self.settle_s < 0:
            problems.append("grace period, kill cool-down and settle time must be >= 0")
        if not 0.0 <= self.qos_release_margin < 1.0:
            problems.append("qos_release_margin must be in [0, 1)")
        return problems

    @property
    def selection(self) -> SelectionSettings:
        return SelectionSettings(per_task=self.per_task, floor=self.floor)


# ----------------------------------------------------------------- state


@dataclass(frozen=True)
class TaskPlan:
    """One task of the current round: ``remaining`` is Algorithm 2's s."""

    container_id: str
    remaining: Amount
    last_step: Amount = NOTHING
    awaiting_check: bool = False


@dataclass(frozen=True)
class EngineState:
    rounds: int = 0
    plans: tuple[TaskPlan, ...] = ()
    blacklist: frozenset[str] = frozenset()
    killing: frozenset[str] = frozenset()
    freed_by_kill: Amount = NOTHING
    extra: Amount = NOTHING
    generation: int | None = None
    unmet_since_s: float | None = None
    round_ended_s: float | None = None
    last_kill_s: float | None = None


# ----------------------------------------------------------------- observation, actions


@dataclass(frozen=True)
class Observation:
    """What one interval observed. ``health`` holds the aliveness verdict of each
    task judged this interval (tasks not judged are absent). ``inferred`` is the
    total reclaim the QoS model says meets the target, when a model is in use.
    ``excluded`` tasks may not be chosen this interval (the agent could not write
    their cgroup)."""

    now_s: float
    tasks: tuple[BatchTask, ...]
    target: ReclaimTarget
    health: Mapping[str, Verdict] = field(default_factory=dict)
    inferred: Amount | None = None
    excluded: frozenset[str] = frozenset()


@dataclass(frozen=True)
class SetLimit:
    container_id: str
    limit: Amount
    reason: str


@dataclass(frozen=True)
class Kill:
    container_id: str
    application_id: str
    reason: str


@dataclass(frozen=True)
class Blacklist:
    container_id: str
    reason: str


Action = SetLimit | Kill | Blacklist


@dataclass(frozen=True)
class Status:
    """The numbers behind a decision, for logs, metrics and the bench."""

    desired: Amount
    reclaimed: Amount
    in_flight: Amount
    mode: str
    unmet_since_s: float | None


@dataclass(frozen=True)
class Decision:
    state: EngineState
    actions: tuple[Action, ...]
    status: Status


def without_plan(state: EngineState, container_id: str) -> EngineState:
    """The round goes on without a task the caller could not act on."""
    plans = tuple(plan for plan in state.plans if plan.container_id != container_id)
    return replace(state, plans=plans)


# ----------------------------------------------------------------- decide


def decide(state: EngineState, seen: Observation, settings: ReclaimSettings) -> Decision:
    """One interval of Algorithm 2: the next state and the actions to take."""
    tasks = {task.container_id: task for task in seen.tasks}
    state = _forget_vanished(state, tasks)
    state, actions = _judge_aliveness(state, seen, tasks, settings)
    state = _track_generation(state, seen.target)
    tasks = _with_actions(tasks, actions)
    desired = _desired(state, seen)
    reclaimed = _reclaimed(state, tasks)
    if _excess(reclaimed, desired, settings.dead_band).any_positive and not _violated(seen):
        return _release(state, tasks, seen, desired, reclaimed, actions, settings)
    if state.plans:
        return _continue_round(state, tasks, seen, desired, reclaimed, actions, settings)
    return _between_rounds(state, tasks, seen, desired, reclaimed, actions, settings)


def _forget_vanished(state: EngineState, tasks: Mapping[str, BatchTask]) -> EngineState:
    return replace(
        state,
        plans=tuple(plan for plan in state.plans if plan.container_id in tasks),
        blacklist=frozenset(c for c in state.blacklist if c in tasks),
        killing=frozenset(c for c in state.killing if c in tasks),
    )


def _judge_aliveness(
    state: EngineState,
    seen: Observation,
    tasks: Mapping[str, BatchTask],
    settings: ReclaimSettings,
) -> tuple[EngineState, list[Action]]:
    """B += t for every squeezed task that faltered; its last step is given back."""
    actions: list[Action] = []
    blacklist = set(state.blacklist)
    plans = {plan.container_id: plan for plan in state.plans}
    for container_id, verdict in sorted(seen.health.items()):
        task = tasks.get(container_id)
        if verdict.alive or task is None or container_id in blacklist:
            continue
        plan = plans.pop(container_id, None)
        if plan is None and not task.reclaimed.any_positive:
            continue  # never squeezed: not ours to judge
        blacklist.add(container_id)
        actions.append(Blacklist(container_id, verdict.reason))
        undo = plan.last_step if plan is not None else settings.mini_step
        limit = (task.limit + undo).min(task.baseline)
        if limit != task.limit:
            reason = f"faltered ({verdict.reason}): step undone"
            actions.append(SetLimit(container_id, limit, reason))
    # The caller judges every squeezed task it could observe; a task it could not
    # (no second reading yet) is not held back for it.
    checked = tuple(replace(plan, awaiting_check=False) for plan in plans.values())
    return replace(state, plans=checked, blacklist=frozenset(blacklist)), actions


def _track_generation(state: EngineState, target: ReclaimTarget) -> EngineState:
    """A new decision of the service replaces the agent's own extra reclaim."""
    if state.generation == target.generation:
        return state
    return replace(state, generation=target.generation, extra=NOTHING)


def _with_actions(tasks: Mapping[str, BatchTask], actions: list[Action]) -> dict[str, BatchTask]:
    updated = dict(tasks)
    for action in actions:
        if isinstance(action, SetLimit):
            updated[action.container_id] = replace(updated[action.container_id], limit=action.limit)
    return updated


def _desired(state: EngineState, seen: Observation) -> Amount:
    request = NOTHING if seen.target.expired(seen.now_s) else seen.target.reclaim
    if seen.inferred is not None:
        request = request.max(seen.inferred)
    return request + state.extra


def _reclaimed(state: EngineState, tasks: Mapping[str, BatchTask]) -> Amount:
    squeezed = sum_amounts(
        task.reclaimed for task in tasks.values() if task.container_id not in state.killing
    )
    return squeezed + state.freed_by_kill


def _in_flight(state: EngineState) -> Amount:
    return sum_amounts(plan.remaining for plan in state.plans)


def _excess(reclaimed: Amount, desired: Amount, dead_band: Amount) -> Amount:
    over = (reclaimed - desired).clamped()
    return Amount(
        over.cpu_millicores if over.cpu_millicores > dead_band.cpu_millicores else 0,
        over.memory_mb if over.memory_mb > dead_band.memory_mb else 0,
    )


def _shortfall(desired: Amount, covered: Amount, dead_band: Amount) -> Amount:
    short = (desired - covered).clamped()
    return Amount(
        short.cpu_millicores if short.cpu_millicores > dead_band.cpu_millicores else 0,
        short.memory_mb if short.memory_mb > dead_band.memory_mb else 0,
    )


def _violated(seen: Observation) -> bool:
    return seen.target.qos.satisfied is False and not seen.target.expired(seen.now_s)


def _status(state: EngineState, desired: Amount, reclaimed: Amount, mode: str) -> Status:
    return Status(desired, reclaimed, _in_flight(state), mode, state.unmet_since_s)


# ----------------------------------------------------------------- give back


def _release(
    state: EngineState,
    tasks: Mapping[str, BatchTask],
    seen: Observation,
    desired: Amount,
    reclaimed: Amount,
    actions: list[Action],
    settings: ReclaimSettings,
) -> Decision:
    """Hand back the excess: kills' share first, then ω per squeezed task."""
    excess = _excess(reclaimed, desired, settings.dead_band)
    from_kills = excess.min(state.freed_by_kill)
    state = replace(
        state,
        plans=(),
        freed_by_kill=state.freed_by_kill - from_kills,
        unmet_since_s=None,
        extra=_shrunk_extra(state.extra, seen, settings),
    )
    left = excess - from_kills
    for task in sorted(tasks.values(), key=lambda t: t.container_id):
        if not left.any_positive:
            break
        give = task.reclaimed.min(settings.mini_step).min(left.clamped())
        if give.any_positive:
            actions.append(SetLimit(task.container_id, task.limit + give, "demand fell: give back"))
            left = left - give
    return Decision(state, tuple(actions), _status(state, desired, reclaimed, "release"))


def _shrunk_extra(extra: Amount, seen: Observation, settings: ReclaimSettings) -> Amount:
    """The agent's own extra reclaim shrinks by ω while the QoS has headroom."""
    qos = seen.target.qos
    if qos.latency_ms is None or qos.target_ms is None or qos.satisfied is not True:
        return extra
    if qos.latency_ms > (1.0 - settings.qos_release_margin) * qos.target_ms:
        return extra
    return (extra - settings.mini_step).clamped()


# ----------------------------------------------------------------- a round


def _continue_round(
    state: EngineState,
    tasks: Mapping[str, BatchTask],
    seen: Observation,
    desired: Amount,
    reclaimed: Amount,
    actions: list[Action],
    settings: ReclaimSettings,
) -> Decision:
    """Every planned task takes its next mini-step, in parallel."""
    plans: list[TaskPlan] = []
    for plan in state.plans:
        if plan.awaiting_check:
            plans.append(plan)
            continue
        step = _next_step(plan, tasks[plan.container_id], settings)
        if not step.any_positive:
            continue  # s reached 0, or the task reached its floor
        limit = tasks[plan.container_id].limit - step
        actions.append(SetLimit(plan.container_id, limit, f"round {state.rounds}: mini-step"))
        plans.append(TaskPlan(plan.container_id, (plan.remaining - step).clamped(), step, True))
    state = replace(state, plans=tuple(plans))
    if not plans:
        state = replace(state, round_ended_s=seen.now_s)
    state = _track_unmet(state, seen, desired, reclaimed, settings)
    return Decision(state, tuple(actions), _status(state, desired, reclaimed, "squeeze"))


def _next_step(plan: TaskPlan, task: BatchTask, settings: ReclaimSettings) -> Amount:
    return plan.remaining.min(settings.mini_step).min(reclaimable(task, settings.floor))


def _between_rounds(
    state: EngineState,
    tasks: Mapping[str, BatchTask],
    seen: Observation,
    desired: Amount,
    reclaimed: Amount,
    actions: list[Action],
    settings: ReclaimSettings,
) -> Decision:
    """Start a round when the demand is unmet (or the QoS still violated)."""
    need = _shortfall(desired, reclaimed, settings.dead_band)
    if not need.any_positive and _violated(seen) and _settled(state, seen, settings):
        state = replace(state, extra=state.extra + Amount(settings.per_task.cpu_millicores, 0))
        desired = desired + Amount(settings.per_task.cpu_millicores, 0)
        need = _shortfall(desired, reclaimed, settings.dead_band)
    if not need.any_positive:
        state = replace(state, unmet_since_s=None)
        return Decision(state, tuple(actions), _status(state, desired, reclaimed, "met"))
    if settings.strategy is Strategy.KILL and settings.kill_enabled:
        return _kill_at_once(state, tasks, seen, desired, reclaimed, need, actions, settings)
    chosen = _choose(state, tasks, seen, need, settings)
    if not chosen:
        return _last_resort(state, tasks, seen, desired, reclaimed, actions, settings)
    plans = tuple(TaskPlan(a.container_id, a.amount) for a in chosen)
    state = replace(state, rounds=state.rounds + 1, plans=plans)
    state = _track_unmet(state, seen, desired, reclaimed, settings)
    return _continue_round(state, tasks, seen, desired, reclaimed, actions, settings)


def _settled(state: EngineState, seen: Observation, settings: ReclaimSettings) -> bool:
    """The previous round's effect had ``settle_s`` to show in the QoS."""
    if state.round_ended_s is None:
        return True
    measured = seen.target.qos.measured_at_s
    if measured is not None and measured < state.round_ended_s:
        return False
    return seen.now_s - state.round_ended_s >= settings.settle_s


def _choose(
    state: EngineState,
    tasks: Mapping[str, BatchTask],
    seen: Observation,
    need: Amount,
    settings: ReclaimSettings,
) -> tuple[Assignment, ...]:
    if not settings.strategy.gradual:
        return ()  # Kill with kills disabled: nothing to do but wait
    rng = random.Random(settings.seed * 1_000_003 + state.rounds)
    candidates = tuple(t for t in tasks.values() if t.container_id not in state.killing)
    return select(
        settings.strategy,
        candidates,
        need,
        settings.selection,
        blacklist=state.blacklist | seen.excluded,
        now_s=seen.now_s,
        rng=rng,
    )


def _track_unmet(
    state: EngineState,
    seen: Observation,
    desired: Amount,
    reclaimed: Amount,
    settings: ReclaimSettings,
) -> EngineState:
    unmet = _shortfall(desired, reclaimed, settings.dead_band).any_positive or _violated(seen)
    if not unmet:
        return replace(state, unmet_since_s=None)
    if state.unmet_since_s is None:
        return replace(state, unmet_since_s=seen.now_s)
    return state


# ----------------------------------------------------------------- kills


def _last_resort(
    state: EngineState,
    tasks: Mapping[str, BatchTask],
    seen: Observation,
    desired: Amount,
    reclaimed: Amount,
    actions: list[Action],
    settings: ReclaimSettings,
) -> Decision:
    """Nothing left to squeeze: kill one container once the grace period is over."""
    state = _track_unmet(state, seen, desired, reclaimed, settings)
    victim = _kill_victim(state, tasks)
    if victim is None or not _may_kill(state, seen.now_s, settings):
        return Decision(state, tuple(actions), _status(state, desired, reclaimed, "stuck"))
    waited = seen.now_s - (state.unmet_since_s or seen.now_s)
    actions.append(
        Kill(
            victim.container_id,
            victim.application_id,
            f"demand unmet for {waited:.0f} s with nothing left to squeeze",
        )
    )
    state = replace(
        state,
        killing=state.killing | {victim.container_id},
        freed_by_kill=state.freed_by_kill + victim.baseline,
        last_kill_s=seen.now_s,
    )
    return Decision(state, tuple(actions), _status(state, desired, reclaimed, "kill"))


def _may_kill(state: EngineState, now_s: float, settings: ReclaimSettings) -> bool:
    if not settings.kill_enabled or state.unmet_since_s is None:
        return False
    if now_s - state.unmet_since_s < settings.grace_period_s:
        return False
    return state.last_kill_s is None or now_s - state.last_kill_s >= settings.kill_cooldown_s


def _kill_victim(state: EngineState, tasks: Mapping[str, BatchTask]) -> BatchTask | None:
    """Blacklisted (faltering) tasks first, then the newest."""
    alive = [t for t in tasks.values() if t.container_id not in state.killing]
    if not alive:
        return None
    return min(
        alive,
        key=lambda t: (t.container_id not in state.blacklist, -t.started_at_s, t.container_id),
    )


def _kill_at_once(
    state: EngineState,
    tasks: Mapping[str, BatchTask],
    seen: Observation,
    desired: Amount,
    reclaimed: Amount,
    need: Amount,
    actions: list[Action],
    settings: ReclaimSettings,
) -> Decision:
    """The Kill baseline: YARN kills newest containers until the kills cover the demand."""
    candidates = tuple(t for t in tasks.values() if t.container_id not in state.killing)
    victims = select(Strategy.KILL, candidates, need, settings.selection, now_s=seen.now_s)
    for victim in victims:
        task = tasks[victim.container_id]
        actions.append(Kill(task.container_id, task.application_id, "Kill strategy: reclaim"))
    state = replace(
        state,
        killing=state.killing | {v.container_id for v in victims},
        freed_by_kill=state.freed_by_kill + sum_amounts(v.amount for v in victims),
        last_kill_s=seen.now_s if victims else state.last_kill_s,
    )
    state = _track_unmet(state, seen, desired, reclaimed, settings)
    return Decision(state, tuple(actions), _status(state, desired, reclaimed, "kill"))
