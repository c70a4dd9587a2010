"""Task execution-time model: how long a job's map or reduce tasks will run -- the
stage's typical task *and* how far its tasks spread -- learned from history (a
Workload whose durations are real: JobHistory, Rumen, SLS, Google, or SWIM's
modelled ones).

What it learns from (only what is known before a job runs): the features of
:mod:`yarn_adapt.workload.taskhistory` (task kind, bytes, stage sizes and bytes per
task, priority, CPU and memory request, and the history of earlier runs of the same
logical job), plus the job type (application / job name) and the user, each
target-encoded per kind: most Google 2011 jobs are the first run of their logical job
but not their user's first job (held out in time order on parts 0-5 the user took
the stage-mean log error from 0.68 to 0.58; a per-user history like the logical
job's did worse, 0.60).

Two models, one row per job *stage* (a job's maps, or its reduces), each stage
weighing the same:

* the **typical task**: ``HistGradientBoostingRegressor`` on the stage's mean log
  seconds;
* the **spread**: the same regressor on the log of the standard deviation of the
  stage's log seconds (corrected for its small-sample shortfall), from stages of
  two or more tasks, each weighted by its degrees of freedom. On logs it fits a
  typical spread: most stages' tasks run alike and a few spread by orders of
  magnitude (Google 2011: median 0.05, 90th percentile 0.3), and a mean of the
  variances would give every stage the few's spread. A stage's tasks are then log-normal around the
  typical task: :meth:`TaskTimeModel.predict_stage` gives both numbers and the
  comparator expands them into per-task quantiles or draws
  (:mod:`rules.uncertainty`).

* Why stage rows, each weighing the same: every task of a stage has the same
  features, so the model can only give them one value. Weighting stages by their
  task count (what one row per task amounts to) lets a 100k-task job outvote
  thousands of small ones; held out, it was no better on FB-2009 or Google 2011.
* Why log seconds: durations span 1 s to hours; squared error on logs fits ratios,
  which is what MAPE and a latency comparison care about.
* Why histogram gradient boosting: it fits the ~12k stages of FB-2009 in 1-3 s on
  one core, predicts a whole workload in one vectorised call, handles NaN
  natively and needs no feature scaling. A random forest (200 trees, leaves >= 5)
  on the same rows was less accurate on FB-2009 held-out jobs (MAPE 0.50, 0.52, 0.21
  for split seeds 0-2, against 0.24, 0.27, 0.22) and no better on Google 2011.
* Job type and user: scikit-learn's ``TargetEncoder`` (cross-fitted, so a job's own
  duration does not leak into its encoding during training); unseen ones get the mean.

The model's own error is measured, not assumed:
:func:`yarn_adapt.workload.taskvalidation.fit_with_measured_error` fits on the
earlier jobs, measures on the last of them in submission order, then refits on all
and keeps the measurement as :attr:`TaskTimeModel.error` (bias and spread of the
stage-mean error, net of the within-stage sampling noise).

Too little history (fewer than ``min_jobs`` jobs) gives the explainable fallback,
the median task duration per kind; ``TaskTimeModel.estimator`` says which is used
and ``reason`` why. Everything is deterministic for a given ``seed``.

The comparator calls :meth:`TaskTimeModel.predict_stage` many times: predictions
are cached per ``(JobFeatures, TaskType)``, and :meth:`TaskTimeModel.prime` fills
the cache for a whole workload with one batch prediction.
:meth:`TaskTimeModel.with_history` gives a model that also knows more finished jobs'
durations (the logical-job history) without refitting.
"""

from __future__ import annotations

import functools
import math
import pickle
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import sklearn
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.model_selection import KFold
from sklearn.preprocessing import TargetEncoder
from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]

from yarn_adapt.errors import InputError, TaskTimeModelError
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.workload import JobFeatures, JobSpec, TaskSpec, Workload
from yarn_adapt.workload.taskhistory import (
    NUMERIC_FEATURES,
    LogicalHistory,
    StageRecord,
    feature_row,
    stage_records,
)

GRADIENT_BOOSTING = "hist-gradient-boosting"
MEDIAN_FALLBACK = "median-per-kind"
MIN_JOBS_FOR_LEARNING = 30
MIN_STAGES_FOR_SPREAD = 30
MIN_SPREAD = 0.005  # a spread below this is no spread (log-seconds)
MODEL_FILE_FORMAT = "yarn-adapt/task-time-model"
MODEL_FILE_VERSION = 2

StageKey = tuple[JobFeatures, TaskType]

__all__ = ["NUMERIC_FEATURES", "feature_row"]


@dataclass(frozen=True)
class StagePrediction:
    """A stage's tasks as the model expects them: log-normal, centred on
    ``log_seconds`` (the mean log seconds of a task) with standard deviation
    ``log_spread``."""

    log_seconds: float
    log_spread: float

    @property
    def seconds(self) -> float:
        """The typical task (the geometric mean of the stage's tasks)."""
        return math.exp(self.log_seconds)


@dataclass(frozen=True)
class ModelError:
    """How wrong the model was on later jobs it had not seen: the stage-mean error
    log(actual / predicted) has median ``bias`` and, net of the spread of the
    stage's own tasks, standard deviation ``sigma`` (robust: from the median
    absolute deviation). ``stages``: how many held-out stages were measured."""

    bias: float
    sigma: float
    stages: int


# --------------------------------------------------------------------------- models


@dataclass(eq=False)
class TaskTimeModel:
    """A fitted estimator of task seconds. ``estimator`` is ``hist-gradient-boosting``
    or ``median-per-kind``; ``reason`` says why that one was chosen. ``spreads``:
    the median within-stage log spread per kind (the spread when no spread model was
    fitted); ``error``: its measured error, when measured; ``history``: the
    finished stages per logical job it knows of."""

    estimator: str
    reason: str
    trained_jobs: int
    trained_tasks: int
    medians: dict[TaskType, float]
    seed: int = 0
    _boosting: _Boosting | None = None
    spreads: dict[TaskType, float] = field(default_factory=dict)
    error: ModelError | None = None
    history: LogicalHistory = field(default_factory=LogicalHistory)
    _cache: dict[StageKey, StagePrediction] = field(default_factory=dict, repr=False)

    def predict_stage(self, features: JobFeatures, kind: TaskType) -> StagePrediction:
        """The stage's tasks as the model expects them."""
        key = (features, kind)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = self._predict([key])[0]
        return cached

    def estimate(self, features: JobFeatures, kind: TaskType) -> float:
        """Seconds a typical task of this kind of this job is expected to run."""
        return self.predict_stage(features, kind).seconds

    def spread(self, features: JobFeatures, kind: TaskType) -> float:
        """Standard deviation of the log seconds of this stage's tasks."""
        return self.predict_stage(features, kind).log_spread

    def prime(self, workload: Workload) -> None:
        """Predict every stage of ``workload`` at once into the cache."""
        missing = list(
            dict.fromkeys(key for key in _stage_keys(workload.jobs) if key not in self._cache)
        )
        if missing:
            self._cache.update(zip(missing, self._predict(missing), strict=True))

    def estimate_job(self, job: JobSpec) -> tuple[float, ...]:
        """Estimated seconds of a typical task, for each of the job's tasks in order."""
        return tuple(self.estimate(job.features, task.kind) for task in job.tasks)

    def with_history(self, jobs: Iterable[JobSpec], as_of: float = math.inf) -> TaskTimeModel:
        """The same fitted model, also knowing the runs of ``jobs`` that had ended by
        ``as_of`` (their durations are real) as earlier runs of their logical jobs.
        No refit."""
        history = self.history.copy()
        history.extend(r for r in stage_records(jobs) if r.ended_s <= as_of)
        return replace(self, history=history, _cache={})

    def with_error(self, error: ModelError | None) -> TaskTimeModel:
        return replace(self, error=error, _cache=dict(self._cache))

    def _predict(self, keys: Sequence[StageKey]) -> list[StagePrediction]:
        if self._boosting is None:
            return [
                StagePrediction(
                    math.log(max(self._median(kind), 1e-3)), self.spreads.get(kind, 0.0)
                )
                for _, kind in keys
            ]
        rows = [feature_row(f, k, self.history.features(f, k)) for f, k in keys]
        means, spreads = self._boosting.predict(keys, rows, self.spreads)
        return [StagePrediction(m, s) for m, s in zip(means.tolist(), spreads, strict=True)]

    def _median(self, kind: TaskType) -> float:
        return self.medians.get(kind) or statistics.median(self.medians.values())

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cache"] = {}
        return state


def _stage_keys(jobs: Iterable[JobSpec]) -> Iterable[StageKey]:
    for job in jobs:
        for task in job.tasks:
            yield job.features, task.kind


def fit_task_time_model(
    history: Workload, *, seed: int = 0, min_jobs: int = MIN_JOBS_FOR_LEARNING
) -> TaskTimeModel:
    """Learn task seconds from ``history``; the median fallback below ``min_jobs``
    jobs. The error is not measured here (``error`` is ``None``):
    :func:`yarn_adapt.workload.taskvalidation.fit_with_measured_error` does both."""
    return _fit(history, seed, min_jobs)


def _fit(history: Workload, seed: int, min_jobs: int) -> TaskTimeModel:
    jobs = [job for job in history.jobs if job.tasks]
    tasks = [task for job in jobs for task in job.tasks]
    if not tasks:
        raise InputError(f"{history.source or 'history'}: no task durations to learn from")
    records = stage_records(jobs)
    medians = _kind_medians(tasks)
    spreads = _kind_spreads(records)
    logical = LogicalHistory()
    logical.extend(records)
    if len(jobs) < min_jobs:
        reason = f"only {len(jobs)} jobs of history (< {min_jobs}): median task time per kind"
        return TaskTimeModel(
            MEDIAN_FALLBACK,
            reason,
            len(jobs),
            len(tasks),
            medians,
            seed,
            None,
            spreads,
            None,
            logical,
        )
    boosting = _fit_boosting(records, seed)
    reason = f"{len(jobs)} jobs of history (>= {min_jobs}): gradient boosting on log seconds"
    return TaskTimeModel(
        GRADIENT_BOOSTING,
        reason,
        len(jobs),
        len(tasks),
        medians,
        seed,
        boosting,
        spreads,
        None,
        logical,
    )


def _kind_medians(tasks: Sequence[TaskSpec]) -> dict[TaskType, float]:
    by_kind: dict[TaskType, list[float]] = {}
    for task in tasks:
        by_kind.setdefault(task.kind, []).append(task.duration_s)
    return {kind: statistics.median(values) for kind, values in by_kind.items()}


def _kind_spreads(records: Sequence[StageRecord]) -> dict[TaskType, float]:
    """Median within-stage log spread per kind, over stages of two or more tasks."""
    by_kind: dict[TaskType, list[float]] = {}
    for record in records:
        if len(record.log_seconds) >= 2:
            by_kind.setdefault(record.kind, []).append(record.log_spread)
    return {kind: statistics.median(values) for kind, values in by_kind.items()}


@dataclass
class _Boosting:
    """The fitted parts: job-type encoder, the numeric columns that had any value in
    training (an all-NaN column breaks the histogram binning), the regressor of the
    mean log seconds and, given enough multi-task stages, the regressor of the
    within-stage log spread (on its log)."""

    encoder: TargetEncoder
    columns: np.ndarray
    regressor: HistGradientBoostingRegressor
    spread: HistGradientBoostingRegressor | None = None

    def predict(
        self,
        keys: Sequence[StageKey],
        rows: Sequence[Sequence[float]],
        fallback: dict[TaskType, float],
    ) -> tuple[np.ndarray, list[float]]:
        matrix = self._matrix(keys, rows, self.encoder.transform(_categories(keys)))
        with _one_thread():
            means = np.asarray(self.regressor.predict(matrix), dtype=float)
            if self.spread is None:
                return means, [fallback.get(kind, 0.0) for _, kind in keys]
            log_spreads = np.asarray(self.spread.predict(matrix), dtype=float)
        spreads: list[float] = np.exp(log_spreads).tolist()
        return means, spreads

    def _matrix(
        self, keys: Sequence[StageKey], rows: Sequence[Sequence[float]], encoded: np.ndarray
    ) -> np.ndarray:
        numeric = np.array(rows, dtype=float).reshape(len(keys), len(NUMERIC_FEATURES))
        return np.hstack([numeric[:, self.columns], encoded])


def _categories(keys: Sequence[StageKey]) -> np.ndarray:
    """The target-encoded columns: the job type and the user, each per task kind."""
    return np.array(
        [[f"{k.value}:{f.job_type}", f"{k.value}:{f.user}"] for f, k in keys], dtype=object
    )


def _training_rows(records: Sequence[StageRecord]) -> list[list[float]]:
    """Each stage's features with the logical-job history as of its submission."""
    history = LogicalHistory()
    rows = []
    pending = sorted(records, key=lambda r: r.ended_s)
    added = 0
    for record in sorted(records, key=lambda r: r.submit_s):
        while added < len(pending) and pending[added].ended_s <= record.submit_s:
            history.add(pending[added])
            added += 1
        rows.append(
            feature_row(
                record.features, record.kind, history.features(record.features, record.kind)
            )
        )
    return rows


def _fit_boosting(records: list[StageRecord], seed: int) -> _Boosting:
    records = sorted(records, key=lambda r: r.submit_s)
    keys = [(r.features, r.kind) for r in records]
    target = np.array([r.mean_log_seconds for r in records])
    folds = KFold(n_splits=5, shuffle=True, random_state=seed)
    encoder = TargetEncoder(target_type="continuous", cv=folds)
    encoded = encoder.fit_transform(_categories(keys), target)
    rows = _training_rows(records)
    numeric = np.array(rows, dtype=float)
    boosting = _Boosting(encoder, ~np.all(np.isnan(numeric), axis=0), _regressor(seed))
    matrix = boosting._matrix(keys, rows, encoded)
    spread_rows = [i for i, r in enumerate(records) if len(r.log_seconds) >= 2]
    with _one_thread():
        boosting.regressor.fit(matrix, target)
        if len(spread_rows) >= MIN_STAGES_FOR_SPREAD:
            boosting.spread = _regressor(seed)
            boosting.spread.fit(
                _without_empty_columns(matrix[spread_rows]),
                np.array([_log_spread_target(records[i]) for i in spread_rows]),
                sample_weight=np.array([len(records[i].log_seconds) - 1.0 for i in spread_rows]),
            )
    return boosting


def _without_empty_columns(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` with its all-NaN columns set to 0: a column with no value breaks the
    histogram binning, and a constant one is never split on, so the fitted model
    ignores it whatever it holds at prediction time (the multi-task stages the spread
    learns from can lack a feature every stage of the mean's training has)."""
    empty = np.all(np.isnan(matrix), axis=0)
    if not empty.any():
        return matrix
    filled = matrix.copy()
    filled[:, empty] = 0.0
    return filled


def _log_spread_target(record: StageRecord) -> float:
    """The stage's log spread, unbiased: the log of a sample standard deviation of
    ``k = n - 1`` degrees of freedom falls short of the log of the true one by
    ``(log(k / 2) - digamma(k / 2)) / 2`` on average (0.64 for two tasks, 0.07 for
    eight), which would make every small stage look calmer than it is."""
    dof = len(record.log_seconds) - 1
    shortfall = 0.5 * (math.log(dof / 2.0) - _digamma_of_half(dof))
    return math.log(max(record.log_spread, MIN_SPREAD)) + shortfall


_EULER = 0.5772156649015329


def _digamma_of_half(k: int) -> float:
    """digamma(k / 2) for a whole ``k`` >= 1: from digamma(1/2) = -gamma - 2 ln 2 or
    digamma(1) = -gamma, up by digamma(x + 1) = digamma(x) + 1 / x."""
    x, value = (0.5, -_EULER - 2.0 * math.log(2.0)) if k % 2 else (1.0, -_EULER)
    while x < k / 2.0:
        value += 1.0 / x
        x += 1.0
    return value


def _regressor(seed: int, loss: str = "squared_error") -> HistGradientBoostingRegressor:
    regressor = HistGradientBoostingRegressor()
    regressor.set_params(
        loss=loss, max_iter=200, learning_rate=0.1, early_stopping=False, random_state=seed
    )
    return regressor


def _one_thread() -> Any:
    # The stage tables are small; OpenMP threads competing with other work on a busy
    # 2-core host made fitting 15x and predicting 35x slower than one thread.
    return _thread_controller().limit(limits=1, user_api="openmp")


@functools.cache
def _thread_controller() -> ThreadpoolController:
    # One controller: threadpool_limits() rescans the loaded libraries (~2 ms) on
    # every call, a limit from a kept controller costs ~0.05 ms.
    return ThreadpoolController()


# --------------------------------------------------------------------------- evaluation


def split_by_job(
    workload: Workload, *, test_fraction: float = 0.25, seed: int = 0
) -> tuple[Workload, Workload]:
    """(train, test): whole jobs drawn at random, so no job has tasks on both sides."""
    if not 0 < test_fraction < 1:
        raise InputError(f"test fraction {test_fraction} must be between 0 and 1")
    order = np.random.default_rng(seed).permutation(len(workload.jobs))
    test_count = max(1, round(len(order) * test_fraction))
    test_ids = set(order[:test_count].tolist())
    train = tuple(job for i, job in enumerate(workload.jobs) if i not in test_ids)
    test = tuple(job for i, job in enumerate(workload.jobs) if i in test_ids)
    return replace(workload, jobs=train, skipped_rows=0), replace(
        workload, jobs=test, skipped_rows=0
    )


@dataclass(frozen=True)
class TaskTimeErrors:
    """Errors over tasks: mean absolute error (s) and mean absolute percentage error
    (a fraction: 0.2 = 20 %)."""

    tasks: int
    mae_s: float
    mape: float


def task_time_errors(model: TaskTimeModel, workload: Workload) -> TaskTimeErrors:
    """How far ``model``'s estimates are from ``workload``'s real task durations."""
    model.prime(workload)
    pairs = [
        (model.estimate(job.features, t.kind), t.duration_s)
        for job in workload.jobs
        for t in job.tasks
    ]
    if not pairs:
        return TaskTimeErrors(0, math.nan, math.nan)
    estimates, actual = np.array(pairs).T
    errors = np.abs(estimates - actual)
    return TaskTimeErrors(
        len(pairs), float(errors.mean()), float((errors / np.maximum(actual, 1e-3)).mean())
    )


@dataclass(frozen=True)
class HeldOutReport:
    """A model trained on some jobs and measured on other, unseen jobs, next to the
    median-per-kind baseline on the same split."""

    estimator: str
    reason: str
    train_jobs: int
    test_jobs: int
    model: TaskTimeErrors
    baseline: TaskTimeErrors


def held_out_report(
    workload: Workload,
    *,
    test_fraction: float = 0.25,
    seed: int = 0,
    min_jobs: int = MIN_JOBS_FOR_LEARNING,
) -> HeldOutReport:
    """Fit on ``1 - test_fraction`` of the jobs, measure on the rest."""
    train, test = split_by_job(workload, test_fraction=test_fraction, seed=seed)
    model = fit_task_time_model(train, seed=seed, min_jobs=min_jobs)
    baseline = fit_task_time_model(train, seed=seed, min_jobs=len(train.jobs) + 1)
    return HeldOutReport(
        model.estimator,
        model.reason,
        len(train.jobs),
        len(test.jobs),
        task_time_errors(model, test),
        task_time_errors(baseline, test),
    )


def with_estimated_durations(workload: Workload, model: TaskTimeModel) -> Workload:
    """A copy of ``workload`` whose task durations are ``model``'s estimates: what a
    comparator that only sees the model would believe."""
    model.prime(workload)
    jobs = tuple(replace(job, tasks=_estimated_tasks(job, model)) for job in workload.jobs)
    return replace(workload, jobs=jobs, source=f"{workload.source}+estimated({model.estimator})")


def _estimated_tasks(job: JobSpec, model: TaskTimeModel) -> tuple[TaskSpec, ...]:
    return tuple(
        replace(task, duration_s=model.estimate(job.features, task.kind)) for task in job.tasks
    )


# --------------------------------------------------------------------------- persistence


def save_task_time_model(model: TaskTimeModel, path: str | Path) -> None:
    """Write ``model`` behind a header naming the file format and the scikit-learn
    version it was fitted with (the header is read before the model is unpickled)."""
    header = {
        "format": MODEL_FILE_FORMAT,
        "version": MODEL_FILE_VERSION,
        "sklearn": sklearn.__version__,
    }
    body = pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)
    Path(path).write_bytes(
        pickle.dumps({**header, "model": body}, protocol=pickle.HIGHEST_PROTOCOL)
    )


def load_task_time_model(path: str | Path) -> TaskTimeModel:
    """Read a model saved by :func:`save_task_time_model`. Pickle runs code: load
    only files you wrote."""
    payload = _unpickle(path, Path(path).read_bytes() if Path(path).is_file() else b"")
    _check_header(path, payload)
    model = _unpickle(path, payload["model"])
    if not isinstance(model, TaskTimeModel):
        raise TaskTimeModelError(f"{path}: the file holds no TaskTimeModel")
    return model


def _unpickle(path: str | Path, data: bytes) -> Any:
    try:
        return pickle.loads(data)  # own files only, see load_task_time_model
    except (
        pickle.UnpicklingError,
        EOFError,
        AttributeError,
        ImportError,
        TypeError,
        ValueError,
    ) as exc:
        raise TaskTimeModelError(
            f"{path}: cannot read a task-time model: {exc or 'empty file'}"
        ) from exc


def _check_header(path: str | Path, payload: object) -> None:
    if (
        not isinstance(payload, dict)
        or payload.get("format") != MODEL_FILE_FORMAT
        or not isinstance(payload.get("model"), bytes)
    ):
        raise TaskTimeModelError(f"{path}: not a yarn-adapt task-time model")
    if payload.get("version") != MODEL_FILE_VERSION:
        raise TaskTimeModelError(
            f"{path}: model file version {payload.get('version')}, "
            f"this yarn-adapt reads {MODEL_FILE_VERSION}"
        )
    if payload.get("sklearn") != sklearn.__version__:
        raise TaskTimeModelError(
            f"{path}: saved with scikit-learn {payload.get('sklearn')}, "
            f"running {sklearn.__version__}: refit the model"
        )
