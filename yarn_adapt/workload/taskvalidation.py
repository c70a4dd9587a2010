"""Time-ordered validation of the task-time model: train on the earlier jobs, measure
on the later ones, as the model is used (it always predicts jobs submitted after
the history it learned from).

* :func:`fit_with_measured_error` -- the model the comparator uses: fitted on all of
  the history, carrying the error measured on its last part by a model fitted on
  the rest.
* :func:`measure_error` -- the model's stage-mean error on later jobs:
  ``bias`` (median log(actual / predicted) of the stage's mean log seconds) and
  ``sigma``, its robust spread *net of the stage's own sampling noise*: a stage of
  ``n`` tasks with log spread ``s`` has a sample mean that misses its own centre by
  about ``s / sqrt(n)`` even when the model is exact, so ``sigma`` is the value that
  makes ``(error - bias) / sqrt(sigma^2 + s^2 / n)`` have unit spread (1.4826 x the
  median absolute deviation; the errors of a few odd jobs are huge).
* :func:`time_ordered_report` -- the held-out figures per trace the issue asks for:
  the stage-mean log error, the task-level log error, how often a task falls in the
  model's 80 % predictive interval, against the median-per-kind baseline.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from yarn_adapt.errors import InputError
from yarn_adapt.model.workload import JobSpec, Workload
from yarn_adapt.workload.taskhistory import stage_records
from yarn_adapt.workload.taskmodel import (
    MIN_JOBS_FOR_LEARNING,
    ModelError,
    TaskTimeModel,
    fit_task_time_model,
)

MAD_TO_SIGMA = 1.4826
Z_80 = 1.2816  # the standard normal's 90th percentile: an 80 % central interval


def fit_with_measured_error(
    history: Workload,
    *,
    later_fraction: float = 0.2,
    seed: int = 0,
    min_jobs: int = MIN_JOBS_FOR_LEARNING,
) -> TaskTimeModel:
    """The model fitted on all of ``history``, carrying the error a model fitted on
    its earlier jobs made on the last ``later_fraction`` of them."""
    model = fit_task_time_model(history, seed=seed, min_jobs=min_jobs)
    earlier, later = time_ordered_split(history, later_fraction)
    if not earlier.jobs or not any(job.tasks for job in earlier.jobs):
        return model
    probe = fit_task_time_model(earlier, seed=seed, min_jobs=min_jobs)
    return model.with_error(measure_error(probe, later.jobs))


def time_ordered_split(workload: Workload, later_fraction: float) -> tuple[Workload, Workload]:
    """(earlier, later): jobs in submission order, the last ``later_fraction`` later."""
    if not 0.0 < later_fraction < 1.0:
        raise InputError(f"held-out fraction {later_fraction} must be between 0 and 1")
    jobs = sorted(workload.jobs, key=lambda job: job.submit_s)
    cut = len(jobs) - max(1, round(len(jobs) * later_fraction))
    return (
        replace(workload, jobs=tuple(jobs[:cut]), skipped_rows=0),
        replace(workload, jobs=tuple(jobs[cut:]), skipped_rows=0),
    )


@dataclass(frozen=True)
class _Residual:
    error: float  # log(actual mean / predicted), on mean log seconds
    noise: float  # variance of the stage's own sample mean: spread^2 / tasks


def _residuals(model: TaskTimeModel, jobs: Sequence[JobSpec]) -> list[_Residual]:
    model.prime(Workload(tuple(jobs)))
    found = []
    for record in stage_records(jobs):
        predicted = model.predict_stage(record.features, record.kind)
        noise = predicted.log_spread**2 / len(record.log_seconds)
        found.append(_Residual(record.mean_log_seconds - predicted.log_seconds, noise))
    return found


def measure_error(model: TaskTimeModel, later: Sequence[JobSpec]) -> ModelError:
    """The model's stage-mean error on ``later`` jobs (see the module docstring)."""
    residuals = _residuals(model, later)
    if len(residuals) < 2:
        return ModelError(0.0, 0.0, len(residuals))
    bias = statistics.median(r.error for r in residuals)
    return ModelError(bias, _net_sigma(residuals, bias), len(residuals))


def _net_sigma(residuals: Sequence[_Residual], bias: float) -> float:
    """The sigma whose standardised residuals have a robust spread of one."""

    def spread(sigma: float) -> float:
        scaled = [abs(r.error - bias) / math.sqrt(sigma**2 + r.noise + 1e-12) for r in residuals]
        return MAD_TO_SIGMA * statistics.median(scaled)

    if spread(0.0) <= 1.0:
        return 0.0
    low, high = 0.0, 1.0
    while spread(high) > 1.0 and high < 64.0:
        low, high = high, high * 2
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (middle, high) if spread(middle) > 1.0 else (low, middle)
    return high


@dataclass(frozen=True)
class HeldOutFigures:
    """One model on later jobs: ``stage_log_mae`` (mean |log actual/predicted| of the
    stage's mean log seconds), ``task_log_mae`` (the same per task against the
    typical task), ``coverage_80`` (share of tasks inside the model's 80 %
    predictive interval, stage error and task spread both counted), and the
    measured ``error``."""

    stages: int
    tasks: int
    stage_log_mae: float
    task_log_mae: float
    coverage_80: float
    error: ModelError


@dataclass(frozen=True)
class TimeOrderedReport:
    """The model and the median-per-kind baseline, trained on the same earlier jobs
    and measured on the same later ones."""

    source: str
    estimator: str
    train_jobs: int
    test_jobs: int
    model: HeldOutFigures
    baseline: HeldOutFigures


def held_out_figures(model: TaskTimeModel, later: Sequence[JobSpec]) -> HeldOutFigures:
    error = measure_error(model, later)
    records = stage_records(later)
    stage_errors, task_errors, inside = [], [], 0
    for record in records:
        predicted = model.predict_stage(record.features, record.kind)
        stage_errors.append(abs(record.mean_log_seconds - predicted.log_seconds))
        width = Z_80 * math.sqrt(error.sigma**2 + predicted.log_spread**2)
        centre = predicted.log_seconds + error.bias
        for value in record.log_seconds:
            task_errors.append(abs(value - predicted.log_seconds))
            inside += abs(value - centre) <= width
    return HeldOutFigures(
        len(records),
        len(task_errors),
        _mean(stage_errors),
        _mean(task_errors),
        inside / len(task_errors) if task_errors else math.nan,
        error,
    )


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def time_ordered_report(
    workload: Workload,
    *,
    later_fraction: float = 0.25,
    seed: int = 0,
    min_jobs: int = MIN_JOBS_FOR_LEARNING,
) -> TimeOrderedReport:
    """Fit on the earlier ``1 - later_fraction`` of the jobs, measure on the rest."""
    earlier, later = time_ordered_split(workload, later_fraction)
    model = fit_task_time_model(earlier, seed=seed, min_jobs=min_jobs)
    baseline = fit_task_time_model(earlier, seed=seed, min_jobs=len(earlier.jobs) + 1)
    return TimeOrderedReport(
        workload.source,
        model.estimator,
        len(earlier.jobs),
        len(later.jobs),
        held_out_figures(model, later.jobs),
        held_out_figures(baseline, later.jobs),
    )
