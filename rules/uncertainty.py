"""Task-time uncertainty: the comparator's estimates are a model's, and the model
is wrong by a factor that differs from job to job. Comparing configurations on the
*expected* latency over that error -- a few mixes whose stage durations are scaled
by log-normal factors of the model's measured spread -- ranks them more like the
real durations do than a single point estimate (measured on the §4.3 protocol:
``yarn-adapt bench comparator-accuracy``).

The spread is measured, not assumed: :func:`log_error_spread` is the spread of
log(actual / estimated) of *stage* means (the unit the perturbation scales) over
jobs the model did not train on, taken robustly (1.4826 x the median absolute
deviation, the standard deviation of a normal distribution with that MAD) because
the errors of a few odd jobs are huge (Google 2011: standard deviation 0.86, MAD
scale 0.81; SWIM FB-2009: 0.26 both).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from rules.inputs import JobMix, MixJob, StageSpec, TaskGroupSpec
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.workload import JobSpec
from yarn_adapt.workload.taskmodel import TaskTimeModel

MAD_TO_SIGMA = 1.4826


def log_error_spread(model: TaskTimeModel, jobs: Sequence[JobSpec]) -> float:
    """Robust spread of log(mean actual / estimate) over the stages of ``jobs``
    (0 when fewer than two stages)."""
    errors = [_stage_error(model, job, kind) for job in jobs for kind in _kinds(job)]
    if len(errors) < 2:
        return 0.0
    centre = statistics.median(errors)
    return MAD_TO_SIGMA * statistics.median(abs(e - centre) for e in errors)


def _kinds(job: JobSpec) -> list[TaskType]:
    return list(dict.fromkeys(task.kind for task in job.tasks))


def _stage_error(model: TaskTimeModel, job: JobSpec, kind: TaskType) -> float:
    actual = statistics.fmean(t.duration_s for t in job.tasks if t.kind is kind)
    return math.log(max(actual, 1e-3) / max(model.estimate(job.features, kind), 1e-3))


def perturbed_mixes(mix: JobMix, sigma: float, samples: int, seed: int = 0) -> list[JobMix]:
    """``samples`` copies of ``mix`` whose task groups' durations are scaled by
    independent log-normal(0, ``sigma``) factors -- one per group, since the model
    estimates a stage's tasks alike and errs on them alike."""
    rng = np.random.default_rng(seed)
    return [_perturbed(mix, sigma, rng) for _ in range(samples)]


def _perturbed(mix: JobMix, sigma: float, rng: np.random.Generator) -> JobMix:
    return replace(mix, jobs=tuple(_perturbed_job(job, sigma, rng) for job in mix.jobs))


def _perturbed_job(job: MixJob, sigma: float, rng: np.random.Generator) -> MixJob:
    stages = tuple(_perturbed_stage(stage, sigma, rng) for stage in job.stages)
    return replace(job, stages=stages)


def _perturbed_stage(stage: StageSpec, sigma: float, rng: np.random.Generator) -> StageSpec:
    return tuple(_scaled(group, float(np.exp(rng.normal(0.0, sigma)))) for group in stage)


def _scaled(group: TaskGroupSpec, factor: float) -> TaskGroupSpec:
    if len(group) == 3:
        return (group[0], group[1] * factor, group[2])
    return (group[0], group[1] * factor)
