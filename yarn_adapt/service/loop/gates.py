"""The per-group gates between a suggestion and a move (pure), beside the
cluster-wide ones of :mod:`yarn_adapt.service.loop.hysteresis`:

- **Minimum evidence**: a group whose prediction rests on fewer than ``min_jobs``
  jobs (the jobs in progress in it when the tuner looked) does not move: a big
  move from two jobs is noise, not a finding.
- **The gain a group needs** grows with its record of misses and with the size of
  the move: ``min_improvement x (1 + miss / miss_tolerance) x (1 + points /
  move_doubling_points)``. ``miss`` is the median relative error of its last
  :data:`MISS_WINDOW` predictions checked on their own jobs
  (:class:`~yarn_adapt.service.state.records.PredictionError`): a miss of
  ``miss_tolerance`` doubles the gain needed. ``points`` is the largest share of its
  parent any of the group's queues moves, in percentage points: a move of
  ``move_doubling_points`` doubles it again. (The likely range is calibrated on the
  checked predictions themselves: :mod:`yarn_adapt.service.proposers.intervals`.)
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

from yarn_adapt.durations import duration
from yarn_adapt.service.state.records import (
    DecisionKind,
    GroupHistory,
    GroupPrediction,
    RecentChange,
)
from yarn_adapt.yarn.confxml import ConfigChange

MISS_WINDOW = 5
"""A group's miss is the median error of its last this many checked predictions."""


MOVE_DOUBLING_POINTS = 20.0
"""A move of this many percentage points of a queue's share doubles the gain needed."""


@dataclass(frozen=True, kw_only=True)
class GateSettings:
    min_improvement: float = 0.05
    min_jobs: int = 3
    miss_tolerance: float = 0.25
    oscillation_window_s: float = 3600.0
    oscillation_gain: float = 2.0
    move_doubling_points: float = MOVE_DOUBLING_POINTS


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


def required_gain(miss: float, settings: GateSettings, move_points: float = 0.0) -> float:
    """The predicted gain a group needs given its recent miss and the size of its
    move (the largest share step of its queues, in percentage points)."""
    gain = settings.min_improvement
    if settings.miss_tolerance > 0 and math.isfinite(miss):
        gain *= 1.0 + max(miss, 0.0) / settings.miss_tolerance
    if settings.move_doubling_points > 0 and math.isfinite(move_points):
        gain *= 1.0 + max(move_points, 0.0) / settings.move_doubling_points
    return gain


def needs_words(miss: float, move_points: float, settings: GateSettings) -> str:
    """Why a group needs more than the minimum, in words ('' when it does not)."""
    parts = []
    if miss > 0:
        parts.append(f"its recent predictions missed by {miss:.0%} (median)")
    if move_points > 0:
        parts.append(f"the move shifts {move_points:.1f} points of share")
    return f" because {' and '.join(parts)}" if parts else ""


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
    moves: Mapping[str, float] | None = None,
) -> tuple[Hold, ...]:
    """The groups the per-group gates hold back, in order of ``predictions``:
    ``moved`` maps each changed group to its changes, ``moves`` to its move size."""
    holds = []
    for prediction in predictions:
        own = moved.get(prediction.group)
        if not own:
            continue
        past = history.get(prediction.group, GroupHistory())
        points = (moves or {}).get(prediction.group, 0.0)
        found = hold_for(prediction, own, past, now, settings, points)
        if found is not None:
            holds.append(found)
    return tuple(holds)


def hold_for(
    prediction: GroupPrediction,
    own: Sequence[ConfigChange],
    history: GroupHistory,
    now: float,
    settings: GateSettings,
    move_points: float = 0.0,
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
    needed = required_gain(miss, settings, move_points)
    gain = prediction.improvement
    if gain < needed:
        why = needs_words(miss, move_points, settings)
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
                f"({earlier.change.old} -> {earlier.change.new}, "
                f"{duration(now - earlier.at)} ago); "
                f"predicted gain {gain:.1%} is below the {guarded:.1%} an undo needs",
            )
    return None


def annotated(
    predictions: Sequence[GroupPrediction],
    history: Mapping[str, GroupHistory],
    settings: GateSettings,
    moves: Mapping[str, float] | None = None,
) -> tuple[GroupPrediction, ...]:
    """Each prediction with the gain its group needs (what the proposal's page shows)."""
    found = []
    for prediction in predictions:
        miss = miss_of(history.get(prediction.group, GroupHistory()).errors)
        points = (moves or {}).get(prediction.group, 0.0)
        found.append(replace(prediction, required_gain=required_gain(miss, settings, points)))
    return tuple(found)


def reaches_no_gain(prediction: GroupPrediction) -> str:
    """Why a move may gain nothing ('' when its range stays clear): the top of the
    proposed latency's likely range reaches the running configuration's predicted
    latency on the same scale (the range's centre is where outcomes have tended to
    fall relative to predictions, so the running prediction is moved alike)."""
    low, high = prediction.after_low_s, prediction.after_high_s
    before, after = prediction.before_s, prediction.after_s
    if low is None or high is None or not all(map(math.isfinite, (before, after, low, high))):
        return ""
    if after <= 0 or low <= 0:
        return ""
    no_gain = before * math.sqrt(low * high) / after
    if high < no_gain:
        return ""
    return (
        f"{prediction.group}: its likely range {duration(low)} – {duration(high)} reaches "
        f"{duration(no_gain)}, what the running configuration would give on the same "
        "scale: the move may gain nothing"
    )
