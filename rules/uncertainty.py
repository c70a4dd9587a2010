"""What the comparator cannot know, and how it samples it.

The comparator's task durations are a model's (:mod:`yarn_adapt.workload.taskmodel`):
for each stage a typical task and the spread of the stage's tasks around it, both
predicted, and the model's own measured error on later jobs (a bias and a spread of
the stage-mean error). The NodeManagers' heartbeat phases are unknown too. So an
evaluation runs on *samples* of all three (:func:`sample_mixes`,
:func:`heartbeat_phases`):

* each stage's typical task is off by a log-normal factor ``exp(bias + sigma Z)``,
  one per stage -- the model errs on a stage's tasks alike;
* each task spreads around it by ``exp(spread Z_i)``, one per task (a stage's
  stragglers decide when it ends);
* each sample runs on its own draw of the nodes' phases, uniform over the heartbeat
  interval as the simulator draws them (from a stream of the comparator's own).

Every candidate configuration is evaluated on the same samples -- common random
numbers -- so a comparison between two candidates is not blurred by the draws
(:mod:`rules.decision` picks the candidate most likely to be best over them).

One sample is the point estimate: the typical task shifted by the bias, each stage's
tasks at ``bins`` quantiles of its spread (interleaved, so no stage has all its long
tasks at the end), the first phase draw.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np

from rules.inputs import JobMix, MixJob, StageSpec, TaskGroupSpec

# A stage of more tasks than this draws this many durations and cycles through them:
# per-task events of a 5,000-task stage would cost far more than they tell.
MAX_DISTINCT_TASKS = 64
POINT_BINS = 5
_PHASE_STREAM = 0x9E3779B9  # keeps the comparator's phase draws apart from the simulator's


class Phases(StrEnum):
    """``drawn``: each sample draws its nodes' heartbeat phases (uniform over the
    interval, as the simulator does); ``even``: phases spread evenly."""

    DRAWN = "drawn"
    EVEN = "even"


@dataclass(frozen=True)
class Uncertainty:
    """How many samples (:mod:`rules.uncertainty`) the comparator evaluates and what
    they vary: the stage-mean error (``bias``, ``sigma``: the task-time model's
    measured error, ``yarn_adapt.workload.taskmodel.ModelError``), the
    within-stage spread (from the mix's jobs), the heartbeat phases. ``bins``:
    quantiles per stage of the point estimate (one sample)."""

    sigma: float = 0.0
    samples: int = 1
    seed: int = 0
    bias: float = 0.0
    bins: int = POINT_BINS
    phases: Phases = Phases.DRAWN

    def __post_init__(self) -> None:
        if self.samples < 1 or self.bins < 1 or self.sigma < 0 or not math.isfinite(self.bias):
            raise ValueError(f"uncertainty: invalid settings {self}")


POINT_ESTIMATE = Uncertainty()


_SAMPLED: dict[tuple[int, Uncertainty], tuple[JobMix, tuple[JobMix, ...]]] = {}
_SAMPLED_KEPT = 4_096


def sample_mixes(mix: JobMix, uncertainty: Uncertainty) -> list[JobMix]:
    """The mixes the comparator evaluates: the point estimate, or ``samples`` draws.
    Worked out once per mix and uncertainty (every comparator of a group's search,
    one per resource level, samples the same mix), keyed by the mix's identity as
    :func:`rules.state.plan_of` keys a job: the entry keeps ``mix`` alive. Reusing
    the sampled jobs also lets their plans be reused."""
    key = (id(mix), uncertainty)
    found = _SAMPLED.get(key)
    if found is None or found[0] is not mix:
        if len(_SAMPLED) >= _SAMPLED_KEPT:
            _SAMPLED.clear()
        found = _SAMPLED[key] = (mix, tuple(_sampled(mix, uncertainty)))
    return list(found[1])


def _sampled(mix: JobMix, uncertainty: Uncertainty) -> list[JobMix]:
    if uncertainty.samples == 1:
        return [_point_mix(mix, uncertainty)]
    rng = np.random.default_rng([uncertainty.seed, len(mix.jobs)])
    return [_drawn_mix(mix, uncertainty, rng) for _ in range(uncertainty.samples)]


def heartbeat_phases(
    count: int, interval: float, uncertainty: Uncertainty, sample: int
) -> tuple[float, ...] | None:
    """Sample ``sample``'s phases of ``count`` nodes, or ``None`` (evenly spread)."""
    if uncertainty.phases is Phases.EVEN or count == 0:
        return None
    rng = np.random.default_rng([_PHASE_STREAM, uncertainty.seed, sample, count])
    return tuple(float(p) for p in rng.uniform(0.0, interval, count))


# --------------------------------------------------------------------------- point


def _point_mix(mix: JobMix, uncertainty: Uncertainty) -> JobMix:
    factor = math.exp(uncertainty.bias)
    if factor == 1.0 and not any(job.spreads for job in mix.jobs):
        return mix
    jobs = tuple(_point_job(job, factor, uncertainty.bins) for job in mix.jobs)
    return replace(mix, jobs=jobs)


def _point_job(job: MixJob, factor: float, bins: int) -> MixJob:
    stages = tuple(
        _quantile_stage(stage, factor, _spread(job, index), bins)
        for index, stage in enumerate(job.stages)
    )
    return replace(job, stages=stages)


def _spread(job: MixJob, stage: int) -> float:
    return job.spreads[stage] if stage < len(job.spreads) else 0.0


def _quantile_stage(stage: StageSpec, factor: float, spread: float, bins: int) -> StageSpec:
    """Each run's tasks at ``bins`` quantiles of log-normal(0, ``spread``), the
    quantiles taken in turn."""
    if spread <= 0 or bins == 1:
        return tuple(_scaled(group, factor) for group in stage)
    levels = [math.exp(spread * _normal_quantile((i + 0.5) / bins)) for i in range(bins)]
    order = _interleaved(bins)
    tasks: list[TaskGroupSpec] = []
    for group in stage:
        tasks.extend(
            _scaled(_one(group), factor * levels[order[i % bins]]) for i in range(group[0])
        )
    return _merged(tasks)


def _interleaved(bins: int) -> list[int]:
    """Quantile indices alternating from the middle out (0.5, 0.3, 0.7, ...): any
    prefix of a stage holds short and long tasks alike."""
    middle = bins // 2
    order = [middle]
    for step in range(1, bins):
        order.append(middle + step // 2 + 1 if step % 2 else middle - step // 2)
    return [i for i in order if 0 <= i < bins] + [i for i in range(bins) if i not in order]


_NORMAL = statistics.NormalDist()


def _normal_quantile(p: float) -> float:
    return _NORMAL.inv_cdf(p)


# --------------------------------------------------------------------------- draws


def _drawn_mix(mix: JobMix, uncertainty: Uncertainty, rng: np.random.Generator) -> JobMix:
    return replace(mix, jobs=tuple(_drawn_job(job, uncertainty, rng) for job in mix.jobs))


def _drawn_job(job: MixJob, uncertainty: Uncertainty, rng: np.random.Generator) -> MixJob:
    stages = tuple(
        _drawn_stage(stage, uncertainty, _spread(job, index), rng)
        for index, stage in enumerate(job.stages)
    )
    return replace(job, stages=stages)


def _drawn_stage(
    stage: StageSpec, uncertainty: Uncertainty, spread: float, rng: np.random.Generator
) -> StageSpec:
    shift = math.exp(uncertainty.bias + uncertainty.sigma * float(rng.standard_normal()))
    count = sum(group[0] for group in stage)
    if spread <= 0 or count == 0:
        return tuple(_scaled(group, shift) for group in stage)
    distinct = min(count, MAX_DISTINCT_TASKS)
    factors = (shift * np.exp(spread * rng.standard_normal(distinct))).tolist()
    tasks: list[TaskGroupSpec] = []
    position = 0
    for group in stage:
        for _ in range(group[0]):
            tasks.append(_scaled(_one(group), factors[position % distinct]))
            position += 1
    return _merged(tasks)


# --------------------------------------------------------------------------- runs


def _one(group: TaskGroupSpec) -> TaskGroupSpec:
    return (1, group[1], group[2]) if len(group) == 3 else (1, group[1])


def _scaled(group: TaskGroupSpec, factor: float) -> TaskGroupSpec:
    if len(group) == 3:
        return (group[0], group[1] * factor, group[2])
    return (group[0], group[1] * factor)


def _merged(tasks: Sequence[TaskGroupSpec]) -> StageSpec:
    """Consecutive equal tasks as one run."""
    merged: list[TaskGroupSpec] = []
    for task in tasks:
        last = merged[-1] if merged else None
        if last is not None and last[1:] == task[1:]:
            merged[-1] = (last[0] + task[0], *last[1:])
        else:
            merged.append(task)
    return tuple(merged)
