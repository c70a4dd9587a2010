"""The per-group gates between a suggestion and a move (pure), beside the
cluster-wide ones of :mod:`yarn_adapt.service.hysteresis`:

- **Minimum evidence**: a group whose prediction rests on fewer than ``min_jobs``
  jobs (the jobs in progress in it when the tuner looked) does not move: a big
  move from two jobs is noise, not a finding.
- **Feedback from misses**: each prediction is checked on its own population once
  those jobs finished (:class:`~yarn_adapt.service.records.PredictionError`). A
  group whose recent predictions missed by more than ``miss_tolerance`` (median
  relative error of the last :data:`MISS_WINDOW`) needs a larger predicted gain,
  ``min_improvement x (1 + miss / miss_tolerance)``, and its interval is widened by
  ``(1 + miss)`` on both sides.
- **Oscillation guard**: a change that undoes one applied within
  ``oscillation_window_s`` (the same property of the same queue moving back
  towards the value it had before) needs ``oscillation_gain`` times the gain the
  group needs otherwise.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from yarn_adapt.service.records import DecisionKind, GroupPrediction
from yarn_adapt.yarn.confxml import ConfigChange

MISS_WINDOW = 5
"""A group's miss is the median error of its last this many checked predictions."""


@dataclass(frozen=True, kw_only=True)
class GateSettings:
    min_improvement: float = 0.05
    min_jobs: int = 3
    miss_tolerance: float = 0.25
    oscillation_window_s: float = 3600.0
    oscillation_gain: float = 2.0


@dataclass(frozen=True)
class RecentChange:
    """A change applied at ``at`` (the clock the gates judge ``now`` in)."""

    proposal_id: int
    at: float
    change: ConfigChange


@dataclass(frozen=True)
class GroupHistory:
    """What earlier rounds say about a group: its checked predictions' relative
    errors (oldest first) and the changes applied to it recently."""

    errors: tuple[float, ...] = ()
    recent: tuple[RecentChange, ...] = ()


@dataclass(frozen=True)
class Hold:
    """A group a gate holds back, the gate's kind and why."""

    group: str
    kind: DecisionKind
    reason: str


def miss_of(errors: Sequence[float]) -> float:
    """The median relative error of the last :data:`MISS_WINDOW` checked
    predictions (0 when there are none)."""
    finite = [e for e in errors if math.isfinite(e)][-MISS_WINDOW:]
    return statistics.median(finite) if finite else 0.0


def required_gain(miss: float, settings: GateSettings) -> float:
    """The predicted gain a group needs given its recent miss."""
    if miss <= settings.miss_tolerance or settings.miss_tolerance <= 0:
        return settings.min_improvement
    return settings.min_improvement * (1.0 + miss / settings.miss_tolerance)


def widened(
    low: float | None, high: float | None, miss: float
) -> tuple[float | None, float | None]:
    """The interval widened by ``(1 + miss)`` on both sides."""
    factor = 1.0 + max(miss, 0.0)
    return (
        None if low is None else low / factor,
        None if high is None else high * factor,
    )


def undone(
    change: ConfigChange, recent: Iterable[RecentChange], now: float, window_s: float
) -> RecentChange | None:
    """The recent change ``change`` undoes, if any: the same property of the same
    queue, applied within ``window_s`` of ``now``, moving back towards the value
    it had before (numbers: the opposite direction; other values: back to it)."""
    for earlier in sorted(recent, key=lambda r: r.at, reverse=True):
        before = earlier.change
        if (before.queue, before.prop) != (change.queue, change.prop):
            continue
        if now - earlier.at > window_s:
            continue
        if _reverses(before, change):
            return earlier
    return None


def _reverses(earlier: ConfigChange, later: ConfigChange) -> bool:
    first, second = _number(earlier.old), _number(earlier.new)
    third, fourth = _number(later.old), _number(later.new)
    if None not in (first, second, third, fourth):
        assert first is not None and second is not None
        assert third is not None and fourth is not None
        return (second - first) * (fourth - third) < 0
    return later.new == earlier.old and later.new != later.old


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    text = value.strip().rstrip("%")
    if text.startswith("[") or not text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def group_holds(
    predictions: Sequence[GroupPrediction],
    moved: Mapping[str, Sequence[ConfigChange]],
    history: Mapping[str, GroupHistory],
    now: float,
    settings: GateSettings,
) -> tuple[Hold, ...]:
    """The groups the per-group gates hold back, in order of ``predictions``:
    ``moved`` maps each changed group to its changes."""
    holds = []
    for prediction in predictions:
        own = moved.get(prediction.group)
        if not own:
            continue
        past = history.get(prediction.group, GroupHistory())
        found = hold_for(prediction, own, past, now, settings)
        if found is not None:
            holds.append(found)
    return tuple(holds)


def hold_for(
    prediction: GroupPrediction,
    own: Sequence[ConfigChange],
    history: GroupHistory,
    now: float,
    settings: GateSettings,
) -> Hold | None:
    """The first gate that holds one changed group back, or ``None``."""
    group = prediction.group
    if prediction.jobs < settings.min_jobs:
        return Hold(
            group,
            DecisionKind.INSUFFICIENT_EVIDENCE,
            f"{group}: the prediction rests on {prediction.jobs} job(s), fewer than "
            f"the {settings.min_jobs} a move needs; no move",
        )
    miss = miss_of(history.errors)
    needed = required_gain(miss, settings)
    gain = prediction.improvement
    if gain < needed:
        why = (
            f"; its recent predictions missed by {miss:.0%} (median), so it needs more"
            if needed > settings.min_improvement
            else ""
        )
        return Hold(
            group,
            DecisionKind.BELOW_THRESHOLD,
            f"{group}: predicted gain {gain:.1%} is below the {needed:.1%} it needs{why}",
        )
    for change in own:
        earlier = undone(change, history.recent, now, settings.oscillation_window_s)
        if earlier is None:
            continue
        guarded = needed * settings.oscillation_gain
        if gain < guarded:
            return Hold(
                group,
                DecisionKind.OSCILLATION_GUARD,
                f"{group}: {change.queue or '(global)'} {change.prop} {change.old} -> "
                f"{change.new} undoes proposal {earlier.proposal_id} "
                f"({earlier.change.old} -> {earlier.change.new}, {now - earlier.at:.0f} s ago); "
                f"predicted gain {gain:.1%} is below the {guarded:.1%} an undo needs",
            )
    return None


def annotated(
    predictions: Sequence[GroupPrediction],
    history: Mapping[str, GroupHistory],
    settings: GateSettings,
) -> tuple[GroupPrediction, ...]:
    """Each prediction with the gain its group needs and its interval widened by
    the group's recent miss (what the proposal's page shows)."""
    found = []
    for prediction in predictions:
        miss = miss_of(history.get(prediction.group, GroupHistory()).errors)
        low, high = widened(prediction.after_low_s, prediction.after_high_s, miss)
        source = prediction.interval_source
        if miss > 0 and low is not None:
            source = f"{source or 'interval'}, widened by the recent miss {miss:.0%}"
        found.append(
            replace(
                prediction,
                after_low_s=low,
                after_high_s=high,
                interval_source=source,
                required_gain=required_gain(miss, settings),
            )
        )
    return tuple(found)
