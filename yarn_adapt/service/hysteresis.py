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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from yarn_adapt.model import (
    CapacityQueue,
    CapacitySchedulerConfig,
    FairQueue,
    FairSchedulerConfig,
    Percentage,
    SchedulerConfig,
)
from yarn_adapt.service.records import DecisionKind, Suggestion
from yarn_adapt.service.settings import TuningSection
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
) -> Verdict:
    """Apply the three gates, in order, to one suggestion."""
    groups = changed_groups(changes, current)
    if not changes and any(group in cooling for group in suggestion.triggered):
        frozen_now = ", ".join(g for g in suggestion.triggered if g in cooling)
        reason = f"{frozen_now} changed recently; cooldown {settings.cooldown_s:g} s"
        return Verdict(False, False, DecisionKind.COOLDOWN, reason, groups)
    if not changes:
        why = "; ".join(suggestion.reasons) or "no group found a better setting"
        reason = f"the tuner proposes the configuration that already runs ({why})"
        return Verdict(False, False, DecisionKind.NO_CHANGE, reason, groups)
    if suggestion.improvement < settings.min_improvement:
        return Verdict(False, False, DecisionKind.BELOW_THRESHOLD, _too_small(suggestion, settings))
    frozen = [g for g in groups if g in cooling]
    if frozen:
        reason = f"{', '.join(frozen)} changed recently; cooldown {settings.cooldown_s:g} s"
        return Verdict(False, False, DecisionKind.COOLDOWN, reason, groups)
    over_budget = budget_problem(changes, current, suggestion.config, settings)
    gain = f"predicted {_latency_change(suggestion)}"
    if over_budget:
        return Verdict(True, False, None, f"{gain}; {over_budget}", groups)
    return Verdict(True, True, None, gain, groups)


def _too_small(suggestion: Suggestion, settings: TuningSection) -> str:
    return (
        f"predicted {_latency_change(suggestion)} is below the "
        f"{settings.min_improvement:.0%} minimum improvement"
    )


def _latency_change(suggestion: Suggestion) -> str:
    if suggestion.objective is not None:
        return suggestion.objective.describe()
    return (
        f"cluster latency {suggestion.cluster_before_s:.1f} s -> "
        f"{suggestion.cluster_after_s:.1f} s ({-suggestion.improvement:+.1%})"
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
