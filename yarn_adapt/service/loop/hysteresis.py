"""The gates between a proposal and an action (pure): minimum improvement, a
cooldown per group, and a change budget per round.

- **Minimum improvement**: a proposal whose predicted cluster latency improves by
  less than ``min_improvement`` (relative) is not worth an operator's attention nor
  a refresh of the queues; the round records why and stores nothing.
- **Cooldown**: a group changed less than ``cooldown_s`` ago is frozen -- the
  proposer is not asked to re-tune it, and a proposal that would change it anyway is
  held back -- so the cluster has time to show the effect of the last change.
- **Change budget**: a proposal changing more than ``max_queue_changes`` queues, or
  moving any queue's share by more than ``max_share_step`` percentage points, is
  still stored, but in enforce mode it waits for an operator instead of being applied.
- **No gain within reach**: a proposal whose likely range (calibrated on the
  predictions already checked, :mod:`yarn_adapt.service.proposers.intervals`) reaches what the
  running configuration would give is stored too, but never applied unattended
  (:func:`~yarn_adapt.service.loop.gates.reaches_no_gain`).

Between the minimum improvement and the cooldown come the per-group gates of
:mod:`yarn_adapt.service.loop.gates` (minimum evidence, the gain a group's record of
misses and the size of its move ask for, the oscillation guard); the groups they
hold back are named in the verdict's ``held``. A suggestion that changes nothing
although the tuner found a better setting for some group is ``below-threshold``
(the gain was too small), not ``no-change`` (nothing better was found).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from yarn_adapt.durations import duration
from yarn_adapt.model import (
    CapacityQueue,
    CapacitySchedulerConfig,
    FairQueue,
    FairSchedulerConfig,
    Percentage,
    SchedulerConfig,
)
from yarn_adapt.service.loop.gates import (
    GateSettings,
    Hold,
    group_holds,
    reaches_no_gain,
)
from yarn_adapt.service.settings import TuningSection
from yarn_adapt.service.state.records import (
    DecisionKind,
    GroupHistory,
    GroupPrediction,
    Suggestion,
)
from yarn_adapt.tuning.apply import groups_of
from yarn_adapt.yarn.confxml import ConfigChange


@dataclass(frozen=True)
class Verdict:
    """Whether a suggestion becomes a proposal (``propose``), whether enforce mode
    may apply it without an operator (``auto_apply``), and why, in words."""

    propose: bool
    auto_apply: bool
    kind: DecisionKind | None
    reason: str
    changed_groups: tuple[str, ...] = ()
    held: tuple[Hold, ...] = ()


def cooling_groups(
    last_change: Mapping[str, float], now: float, cooldown_s: float
) -> dict[str, float]:
    """``{group: the time its cooldown ends}`` for groups changed too recently."""
    return {group: at + cooldown_s for group, at in last_change.items() if now < at + cooldown_s}


def changed_groups(changes: Iterable[ConfigChange], config: SchedulerConfig) -> tuple[str, ...]:
    """The groups whose settings the changes touch: a change to a group's parent
    (its share of the cluster) or to one of its leaves belongs to that group; a
    global setting to the group ``(global)``."""
    parents = {group.parent for group in groups_of(config)}
    found: dict[str, None] = {}
    for change in changes:
        found[_group_of(change.queue, parents)] = None
    return tuple(found)


def changes_by_group(
    changes: Iterable[ConfigChange], config: SchedulerConfig
) -> dict[str, tuple[ConfigChange, ...]]:
    """The changes of each group :func:`changed_groups` names."""
    parents = {group.parent for group in groups_of(config)}
    found: dict[str, list[ConfigChange]] = {}
    for change in changes:
        found.setdefault(_group_of(change.queue, parents), []).append(change)
    return {group: tuple(own) for group, own in found.items()}


def _group_of(queue: str, parents: set[str]) -> str:
    if not queue:
        return "(global)"
    if queue in parents:
        return queue
    return queue.rsplit(".", 1)[0] if "." in queue else queue


def judge(
    suggestion: Suggestion,
    changes: Sequence[ConfigChange],
    current: SchedulerConfig,
    cooling: Mapping[str, float],
    settings: TuningSection,
    history: Mapping[str, GroupHistory] | None = None,
    now: float = 0.0,
) -> Verdict:
    """Apply the gates, in order, to one suggestion. ``history``: what earlier
    rounds say about each group (its checked predictions, its recent changes,
    ``now`` in the same clock); ``None`` skips the per-group gates."""
    groups = changed_groups(changes, current)
    if not changes and any(group in cooling for group in suggestion.triggered):
        frozen_now = ", ".join(g for g in suggestion.triggered if g in cooling)
        reason = f"{frozen_now} changed recently; cooldown {duration(settings.cooldown_s)}"
        return Verdict(False, False, DecisionKind.COOLDOWN, reason, groups)
    if not changes:
        return _unchanged(suggestion, groups)
    if suggestion.improvement < settings.min_improvement:
        return Verdict(False, False, DecisionKind.BELOW_THRESHOLD, _too_small(suggestion, settings))
    if history is not None and suggestion.objective is None:
        moved = changes_by_group(changes, current)
        moves = group_moves(current, suggestion.config)
        holds = group_holds(suggestion.groups, moved, history, now, gate_settings(settings), moves)
        if holds:
            reason = "; ".join(hold.reason for hold in holds)
            return Verdict(False, False, holds[0].kind, reason, groups, holds)
    frozen = [g for g in groups if g in cooling]
    if frozen:
        reason = f"{', '.join(frozen)} changed recently; cooldown {duration(settings.cooldown_s)}"
        return Verdict(False, False, DecisionKind.COOLDOWN, reason, groups)
    for_operator = [
        *filter(None, [budget_problem(changes, current, suggestion.config, settings)]),
        *no_gain_problems(suggestion, groups),
    ]
    gain = f"predicted {_latency_change(suggestion)}"
    if for_operator:
        return Verdict(True, False, None, "; ".join([gain, *for_operator]), groups)
    return Verdict(True, True, None, gain, groups)


def no_gain_problems(suggestion: Suggestion, changed: Sequence[str]) -> list[str]:
    """The changed groups whose likely range reaches no gain, in words."""
    if suggestion.objective is not None:
        return []
    found = (reaches_no_gain(g) for g in suggestion.groups if g.group in changed)
    return [why for why in found if why]


def group_moves(current: SchedulerConfig, proposed: SchedulerConfig) -> dict[str, float]:
    """The size of each group's move: the largest share step (percentage points of
    its parent) of the queues it changes, by the group :func:`changed_groups` names."""
    parents = {group.parent for group in groups_of(current)}
    moves: dict[str, float] = {}
    for queue, step in share_steps(current, proposed).items():
        group = _group_of(queue, parents)
        moves[group] = max(moves.get(group, 0.0), step)
    return moves


def gate_settings(settings: TuningSection) -> GateSettings:
    return GateSettings(
        min_improvement=settings.min_improvement,
        min_jobs=settings.min_jobs,
        miss_tolerance=settings.miss_tolerance,
        oscillation_window_s=settings.oscillation_window_s,
        oscillation_gain=settings.oscillation_gain,
    )  # move_doubling_points: GateSettings' default (not in [tuning] yet)


def _unchanged(suggestion: Suggestion, groups: tuple[str, ...]) -> Verdict:
    """Nothing changes: below-threshold when the tuner found a better setting for
    some group but too small a gain, no-change when it found nothing better."""
    why = "; ".join(suggestion.reasons) or "no group found a better setting"
    small = [g for g in suggestion.groups if _found_better(g)]
    if small:
        gains = ", ".join(
            f"{g.group} {duration(g.before_s)} → {duration(g.found_s)} ({-relative_gain(g):+.1%})"
            for g in small
        )
        reason = f"the best setting found gains too little to move ({gains}; {why})"
        return Verdict(False, False, DecisionKind.BELOW_THRESHOLD, reason, groups)
    reason = f"the tuner proposes the configuration that already runs ({why})"
    return Verdict(False, False, DecisionKind.NO_CHANGE, reason, groups)


def _found_better(group: GroupPrediction) -> bool:
    found = group.found_s
    return found is not None and math.isfinite(found) and found < group.before_s


def relative_gain(group: GroupPrediction) -> float:
    """The relative gain of the best setting found (0 when unknown)."""
    if group.found_s is None or not math.isfinite(group.before_s) or group.before_s <= 0:
        return 0.0
    return (group.before_s - group.found_s) / group.before_s


def _too_small(suggestion: Suggestion, settings: TuningSection) -> str:
    return (
        f"predicted {_latency_change(suggestion)} is below the "
        f"{settings.min_improvement:.0%} minimum improvement"
    )


def _latency_change(suggestion: Suggestion) -> str:
    if suggestion.objective is not None:
        return suggestion.objective.describe()
    return (
        f"cluster latency {duration(suggestion.cluster_before_s)} → "
        f"{duration(suggestion.cluster_after_s)} ({-suggestion.improvement:+.1%})"
    )


def budget_problem(
    changes: Sequence[ConfigChange],
    current: SchedulerConfig,
    proposed: SchedulerConfig,
    settings: TuningSection,
) -> str:
    """Why the change is too large for one unattended step ('' when it is not)."""
    queues = {change.queue for change in changes if change.queue}
    if len(queues) > settings.max_queue_changes:
        return f"{len(queues)} queues change (budget {settings.max_queue_changes} per round)"
    steps = share_steps(current, proposed)
    if steps:
        queue, step = max(steps.items(), key=lambda item: item[1])
        if step > settings.max_share_step:
            return (
                f"{queue} share moves {step:.1f} points "
                f"(budget {settings.max_share_step:g} per round)"
            )
    return ""


def share_steps(current: SchedulerConfig, proposed: SchedulerConfig) -> dict[str, float]:
    """How far each queue's share of its parent moves, in percentage points
    (Capacity: its capacity percent; Fair: its weight over its siblings' weights)."""
    before, after = queue_shares(current), queue_shares(proposed)
    return {path: abs(after[path] - before[path]) for path in before.keys() & after.keys()}


def queue_shares(config: SchedulerConfig) -> dict[str, float]:
    shares: dict[str, float] = {}
    for queue in config.queues():
        if isinstance(config, CapacitySchedulerConfig):
            shares.update(_capacity_shares(queue))  # type: ignore[arg-type]
        elif isinstance(config, FairSchedulerConfig):
            shares.update(_fair_shares(queue))  # type: ignore[arg-type]
    return shares


def _capacity_shares(parent: CapacityQueue) -> dict[str, float]:
    return {
        child.path: child.capacity.percent
        for child in parent.children
        if isinstance(child.capacity, Percentage)
    }


def _fair_shares(parent: FairQueue) -> dict[str, float]:
    weights = {child.path: child.effective_weight for child in parent.children}
    total = sum(weights.values())
    if total <= 0:
        return {}
    return {path: 100.0 * weight / total for path, weight in weights.items()}
