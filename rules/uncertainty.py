"""Task-time uncertainty: the comparator's estimates are a model's, and the model
is wrong by a factor that differs from job to job. Comparing configurations on the
*expected* latency over that error -- a few mixes whose stage durations are scaled
by log-normal factors of the model's measured spread -- ranks them more like the
real durations do than a single point estimate (measured on the §4.3 protocol:
``yarn-adapt bench comparator-accuracy``).

The spread is measured, not assumed: :func:`log_error_spread` is the standard
deviation of log(actual / estimated) over tasks of jobs the model did not train on.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from rules.inputs import JobMix, MixJob, StageSpec, TaskGroupSpec
from yarn_adapt.model.workload import JobSpec
from yarn_adapt.workload.taskmodel import TaskTimeModel


def log_error_spread(model: TaskTimeModel, jobs: Sequence[JobSpec]) -> float:
    """Std. dev. of log(actual / estimate) over the tasks of ``jobs`` (0 if none)."""
    errors = [
        math.log(max(task.duration_s, 1e-3) / max(estimate, 1e-3))
        for job in jobs
        for task, estimate in zip(job.tasks, model.estimate_job(job), strict=True)
    ]
    return statistics.pstdev(errors) if len(errors) > 1 else 0.0


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
