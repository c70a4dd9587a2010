"""A confidence interval on each group's prediction, from the comparator's own
uncertainty samples, and the population each prediction is about.

The tuner decides on point estimates (the accuracy figures are best that way); for
the interval the chosen configuration of each group is evaluated once more by a
comparator that draws :data:`SAMPLES` samples of what it cannot know -- every
stage's mean task time off by the task-time model's log error (``sigma``: the one
measured on jobs it had not seen when the model carries it, :attr:`TaskTimeModel.error`),
the spread of task times within a stage, the nodes' heartbeat phases
(:class:`rules.uncertainty.Uncertainty`). The interval is the samples' 5th to 95th
percentile, stretched to hold the point prediction. It costs :data:`SAMPLES`
runs of Algorithm 1 per group, next to the search's hundreds.

The population: the ids of the jobs in progress in the group when the tuner looked,
whose mean latency (submission to finish) the comparator predicted; once they
finished, their realised mean is what the prediction is checked against.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace

import numpy as np

from rules.comparator import Comparator, Uncertainty
from yarn_adapt.model import SchedulerConfig
from yarn_adapt.service.realized import group_of_queue
from yarn_adapt.service.records import GroupPrediction
from yarn_adapt.tuning.apply import groups_of
from yarn_adapt.tuning.bridge import GroupBase
from yarn_adapt.tuning.state import TuningState, group_resources, group_share, state_mix
from yarn_adapt.tuning.tuner import TunerSettings
from yarn_adapt.workload.taskmodel import TaskTimeModel

SAMPLES = 8
LOW_PERCENTILE, HIGH_PERCENTILE = 5.0, 95.0
SOURCE = f"comparator samples ({SAMPLES}, 5th-95th percentile)"


def population_by_group(
    jobs: Iterable[tuple[str, str]], config: SchedulerConfig
) -> dict[str, tuple[str, ...]]:
    """``jobs`` as (id, leaf queue) of the jobs in progress: their ids per group."""
    found: dict[str, list[str]] = {}
    for job_id, queue in jobs:
        group = group_of_queue(queue, config)
        if group is not None:
            found.setdefault(group, []).append(job_id)
    return {group: tuple(ids) for group, ids in found.items()}


def with_population(
    groups: Sequence[GroupPrediction], population: dict[str, tuple[str, ...]]
) -> tuple[GroupPrediction, ...]:
    return tuple(replace(g, population=population.get(g.group, ())) for g in groups)


def sampled_intervals(
    groups: Sequence[GroupPrediction],
    state: TuningState,
    proposed: SchedulerConfig,
    model: TaskTimeModel,
    settings: TunerSettings,
    sigma: float,
) -> tuple[GroupPrediction, ...]:
    """Each prediction with the interval its comparator's samples give (groups
    whose prediction is not finite keep what they had)."""
    found = {g.parent: g for g in groups_of(proposed)}
    whole = len(found) == 1
    uncertainty = Uncertainty(
        sigma=sigma if math.isfinite(sigma) else 0.0, samples=SAMPLES, seed=settings.seed
    )
    result = []
    for prediction in groups:
        group = found.get(prediction.group)
        if group is None or not math.isfinite(prediction.after_s):
            result.append(prediction)
            continue
        mix = state_mix(state, model, group.leaf_names, settings)
        if not mix.jobs:
            result.append(prediction)
            continue
        resources = group_resources(state, group_share(proposed, group), whole=whole)
        config = GroupBase.of(
            proposed, group, fair_assign_multiple=settings.fair_assign_multiple
        ).config
        comparator = Comparator(mix, resources, uncertainty=uncertainty)
        samples = comparator.sample_latencies(config)
        low, high = interval_of(samples, prediction.after_s)
        if low is None:
            result.append(prediction)
            continue
        result.append(
            replace(prediction, after_low_s=low, after_high_s=high, interval_source=SOURCE)
        )
    return tuple(result)


def interval_of(samples: Sequence[float], point: float) -> tuple[float | None, float | None]:
    """The samples' 5th-95th percentile, stretched to hold ``point``; ``None``s
    when a sample is not finite (a job that never finishes in it)."""
    if not samples or not all(math.isfinite(s) for s in samples):
        return None, None
    low, high = np.percentile(np.asarray(samples, dtype=float), [LOW_PERCENTILE, HIGH_PERCENTILE])
    return min(float(low), point), max(float(high), point)
