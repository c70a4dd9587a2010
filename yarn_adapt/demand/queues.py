"""YARN queues as Cilantro tenants (pure): the feedback a queue gives in one
interval, its allocation under a scheduler configuration, and an allocation
written back as queue capacities / weights.

**Feedback.** A leaf queue's *load* is the number of applications submitted to it
in the interval; its *performance* is the fraction of its applications whose
outcome was decided in the interval that met the queue's latency bound
(submission to finish within ``latency_s``) -- the analogue of the paper's
"fraction of queries under 2 s". Each application counts once, when its outcome
is decided: at its finish if it met the bound, at ``submitted + latency_s``
otherwise (finished late or still running then). The standard error is the
binomial one with add-one smoothing, ``sqrt(p(1-p)/(n+2))``, ``p = (met+1)/(n+2)``.

**Allocation.** A tenant's allocation is its guaranteed share of the cluster in
units (vcores): the product of its and its ancestors' shares (Capacity percent;
Fair weight over the siblings' weights) times the cluster's units.

**Back to a configuration.** The leaves of each group (a parent whose children are
all leaves, :func:`~yarn_adapt.tuning.apply.groups_of`) get capacities (Capacity,
normalised to 100) or weights (Fair) in proportion to their units; each group's
parent gets its units' share of the cluster (:func:`~yarn_adapt.tuning.apply.apply_ratios`).
Ordering policies and maximum capacities are kept.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from yarn_adapt.demand.utility import QueueObjective
from yarn_adapt.model import CapacityQueue, FairQueue, FairSchedulerConfig, SchedulerConfig
from yarn_adapt.tuning.apply import Group, apply_ratios, apply_setting, groups_of, scheduler_of
from yarn_adapt.tuning.space import GroupSetting, QueueSetting, normalised_percentages
from yarn_adapt.tuning.state import group_share


@dataclass(frozen=True)
class AppOutcome:
    """An application seen in a queue: submitted, and finished (``None``: not yet)."""

    queue: str
    submitted_ms: int
    finished_ms: int | None = None


@dataclass(frozen=True)
class QueueRound:
    """One queue's feedback for one interval."""

    queue: str
    arrivals: int
    decided: int
    met: int

    @property
    def performance(self) -> float:
        return self.met / self.decided if self.decided else math.nan

    @property
    def sigma(self) -> float:
        """The binomial standard error with add-one smoothing, so that a queue
        meeting its SLO every time still shows some doubt."""
        if not self.decided:
            return math.inf
        smoothed = (self.met + 1) / (self.decided + 2)
        return math.sqrt(smoothed * (1 - smoothed) / (self.decided + 2))


def leaf_of(queue: str, leaves: Iterable[str]) -> str | None:
    """The leaf path a queue name or path stands for (``None``: not a leaf here)."""
    by_name = {leaf.rsplit(".", 1)[-1]: leaf for leaf in leaves}
    if queue in by_name.values():
        return queue
    return by_name.get(queue.rsplit(".", 1)[-1])


def queue_rounds(
    outcomes: Iterable[AppOutcome],
    objectives: Mapping[str, QueueObjective],
    start_ms: int,
    end_ms: int,
) -> dict[str, QueueRound]:
    """Each objective's queue's feedback over ``(start_ms, end_ms]``."""
    counts = {leaf: [0, 0, 0] for leaf in objectives}
    for outcome in outcomes:
        leaf = leaf_of(outcome.queue, objectives)
        if leaf is None:
            continue
        tally = counts[leaf]
        if start_ms < outcome.submitted_ms <= end_ms:
            tally[0] += 1
        bound_ms = outcome.submitted_ms + int(objectives[leaf].latency_s * 1000)
        met = outcome.finished_ms is not None and outcome.finished_ms <= bound_ms
        decided_at = outcome.finished_ms if met else bound_ms
        if decided_at is not None and start_ms < decided_at <= end_ms:
            tally[1] += 1
            tally[2] += met
    return {leaf: QueueRound(leaf, *tally) for leaf, tally in counts.items()}


# --------------------------------------------------------------------------- allocations


def managed_leaves(config: SchedulerConfig) -> tuple[str, ...]:
    """The leaves Cilantro splits resources among: those of every group."""
    return tuple(leaf for group in groups_of(config) for leaf in group.queues)


def leaf_units(config: SchedulerConfig, units: int) -> dict[str, float]:
    """Each managed leaf's guaranteed share of ``units``."""
    return {leaf: group_share(config, Group(leaf, ())) * units for leaf in managed_leaves(config)}


def configure(
    config: SchedulerConfig, allocation: Mapping[str, int]
) -> tuple[SchedulerConfig, dict[str, GroupSetting]]:
    """``config`` with every group's leaves shared as ``allocation`` says (units per
    leaf path) and every group's parent given its units' share; the settings
    written, per group."""
    total = sum(allocation.values())
    settings: dict[str, GroupSetting] = {}
    ratios: dict[str, float] = {}
    proposed = config
    for group in groups_of(config):
        units = [float(allocation.get(leaf, 0)) for leaf in group.queues]
        setting = _group_setting(config, group, units)
        proposed = apply_setting(proposed, setting)
        settings[group.parent] = setting
        ratios[group.parent] = sum(units) / total if total else 0.0
    return apply_ratios(proposed, ratios), settings


def _group_setting(config: SchedulerConfig, group: Group, units: list[float]) -> GroupSetting:
    shares = units if sum(units) > 0 else [1.0] * len(units)
    percents = normalised_percentages(shares, group.queues)
    queues = tuple(
        QueueSetting(leaf, percents[leaf], _policy_of(config, leaf)) for leaf in group.queues
    )
    return GroupSetting(scheduler_of(config), group.parent, queues)


def _policy_of(config: SchedulerConfig, leaf: str) -> str:
    queue = config.find(leaf)
    if isinstance(queue, CapacityQueue):
        return queue.effective_ordering_policy
    assert isinstance(queue, FairQueue) and isinstance(config, FairSchedulerConfig)
    return config.effective_policy(queue)
