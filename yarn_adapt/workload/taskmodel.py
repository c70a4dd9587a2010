"""Task execution-time model: how long a job's map or reduce task will run, learned
from history (a Workload whose durations are real: JobHistory, Rumen, SLS, Google,
or SWIM's modelled ones).

What it learns from (only what is known before a job runs, ``JobFeatures``): the
task kind; the job type (application / job name) target-encoded per kind; log input,
shuffle and output bytes; log tasks in the task's stage and in the other stage;
priority; the CPU and memory request. Missing values are NaN.

Model: ``HistGradientBoostingRegressor`` on log seconds, one row per job *stage*
(a job's maps, or its reduces), target the mean log duration of that stage.

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
* Job type: scikit-learn's ``TargetEncoder`` (cross-fitted, so a job's own duration
  does not leak into its encoding during training); unseen types get the mean.

Too little history (fewer than ``min_jobs`` jobs) gives the explainable fallback,
the median task duration per kind; ``TaskTimeModel.estimator`` says which is used
and ``reason`` why. Everything is deterministic for a given ``seed``.

The comparator calls :meth:`TaskTimeModel.estimate` many times: predictions are
cached per ``(JobFeatures, TaskType)``, and :meth:`TaskTimeModel.prime` fills the
cache for a whole workload with one batch prediction.
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

GRADIENT_BOOSTING = "hist-gradient-boosting"
MEDIAN_FALLBACK = "median-per-kind"
MIN_JOBS_FOR_LEARNING = 30
MODEL_FILE_FORMAT = "yarn-adapt/task-time-model"
MODEL_FILE_VERSION = 1
NUMERIC_FEATURES = (
    "reduce_kind",
    "log_input_bytes",
    "log_shuffle_bytes",
    "log_output_bytes",
    "log_stage_tasks",
    "log_other_stage_tasks",
    "priority",
    "cpu_request",
    "memory_request",
)

StageKey = tuple[JobFeatures, TaskType]


# --------------------------------------------------------------------------- features


def _log_or_nan(value: int | float | None) -> float:
    return math.log1p(value) if value is not None and value >= 0 else math.nan


def _number_or_nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def feature_row(features: JobFeatures, kind: TaskType) -> list[float]:
    """The numeric inputs for one stage, in ``NUMERIC_FEATURES`` order."""
    stage, other = (
        (features.reduce_tasks, features.map_tasks)
        if kind is TaskType.REDUCE
        else (features.map_tasks, features.reduce_tasks)
    )
    return [
        1.0 if kind is TaskType.REDUCE else 0.0,
        _log_or_nan(features.input_bytes),
        _log_or_nan(features.shuffle_bytes),
        _log_or_nan(features.output_bytes),
        _log_or_nan(stage),
        _log_or_nan(other),
        float(features.priority),
        _number_or_nan(features.cpu_request),
        _number_or_nan(features.memory_request),
    ]


def _category(features: JobFeatures, kind: TaskType) -> str:
    return f"{kind.value}:{features.job_type}"


@dataclass(frozen=True)
class _Stage:
    key: StageKey
    durations: tuple[float, ...]

    @property
    def mean_log_seconds(self) -> float:
        return statistics.fmean(math.log(max(d, 1e-3)) for d in self.durations)


def _stages(workload: Workload) -> list[_Stage]:
    stages: list[_Stage] = []
    for job in workload.jobs:
        for kind in TaskType:
            durations = tuple(t.duration_s for t in job.tasks if t.kind is kind)
            if durations:
                stages.append(_Stage((job.features, kind), durations))
    return stages


# --------------------------------------------------------------------------- models


@dataclass(eq=False)
class TaskTimeModel:
    """A fitted estimator of task seconds. ``estimator`` is ``hist-gradient-boosting``
    or ``median-per-kind``; ``reason`` says why that one was chosen."""

    estimator: str
    reason: str
    trained_jobs: int
    trained_tasks: int
    medians: dict[TaskType, float]
    seed: int = 0
    _boosting: _Boosting | None = None
    _cache: dict[StageKey, float] = field(default_factory=dict, repr=False)

    def estimate(self, features: JobFeatures, kind: TaskType) -> float:
        """Seconds one task of this kind of this job is expected to run."""
        key = (features, kind)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = float(self._predict([key])[0])
        return cached

    def prime(self, workload: Workload) -> None:
        """Predict every stage of ``workload`` at once into the cache."""
        missing = list(
            dict.fromkeys(key for key in _stage_keys(workload.jobs) if key not in self._cache)
        )
        if missing:
            self._cache.update(zip(missing, self._predict(missing).tolist(), strict=True))

    def estimate_job(self, job: JobSpec) -> tuple[float, ...]:
        """Estimated seconds of each of the job's tasks, in task order."""
        return tuple(self.estimate(job.features, task.kind) for task in job.tasks)

    def _predict(self, keys: Sequence[StageKey]) -> np.ndarray:
        if self._boosting is None:
            return np.array([self._median(kind) for _, kind in keys])
        seconds: np.ndarray = np.exp(self._boosting.predict_log_seconds(keys))
        return seconds

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
    """Learn task seconds from ``history``; the median fallback below ``min_jobs`` jobs."""
    jobs = [job for job in history.jobs if job.tasks]
    tasks = [task for job in jobs for task in job.tasks]
    if not tasks:
        raise InputError(f"{history.source or 'history'}: no task durations to learn from")
    medians = _kind_medians(tasks)
    if len(jobs) < min_jobs:
        reason = f"only {len(jobs)} jobs of history (< {min_jobs}): median task time per kind"
        return TaskTimeModel(MEDIAN_FALLBACK, reason, len(jobs), len(tasks), medians, seed)
    boosting = _fit_boosting(_stages(history), seed)
    reason = f"{len(jobs)} jobs of history (>= {min_jobs}): gradient boosting on log seconds"
    return TaskTimeModel(GRADIENT_BOOSTING, reason, len(jobs), len(tasks), medians, seed, boosting)


def _kind_medians(tasks: Sequence[TaskSpec]) -> dict[TaskType, float]:
    by_kind: dict[TaskType, list[float]] = {}
    for task in tasks:
        by_kind.setdefault(task.kind, []).append(task.duration_s)
    return {kind: statistics.median(values) for kind, values in by_kind.items()}


@dataclass
class _Boosting:
    """The fitted parts: job-type encoder, the numeric columns that had any value in
    training (an all-NaN column breaks the histogram binning), and the regressor."""

    encoder: TargetEncoder
    columns: np.ndarray
    regressor: HistGradientBoostingRegressor

    def predict_log_seconds(self, keys: Sequence[StageKey]) -> np.ndarray:
        matrix = self._matrix(keys, self.encoder.transform(_categories(keys)))
        with _one_thread():
            return np.asarray(self.regressor.predict(matrix), dtype=float)

    def _matrix(self, keys: Sequence[StageKey], encoded: np.ndarray) -> np.ndarray:
        numeric = np.array([feature_row(f, k) for f, k in keys], dtype=float).reshape(
            len(keys), len(NUMERIC_FEATURES)
        )
        return np.hstack([numeric[:, self.columns], encoded])


def _categories(keys: Sequence[StageKey]) -> np.ndarray:
    return np.array([[_category(f, k)] for f, k in keys], dtype=object)


def _fit_boosting(stages: list[_Stage], seed: int) -> _Boosting:
    keys = [stage.key for stage in stages]
    target = np.array([stage.mean_log_seconds for stage in stages])
    folds = KFold(n_splits=5, shuffle=True, random_state=seed)
    encoder = TargetEncoder(target_type="continuous", cv=folds)
    encoded = encoder.fit_transform(_categories(keys), target)
    numeric = np.array([feature_row(*key) for key in keys], dtype=float)
    boosting = _Boosting(
        encoder, ~np.all(np.isnan(numeric), axis=0), HistGradientBoostingRegressor()
    )
    boosting.regressor.set_params(
        max_iter=200, learning_rate=0.1, early_stopping=False, random_state=seed
    )
    with _one_thread():
        boosting.regressor.fit(boosting._matrix(keys, encoded), target)
    return boosting


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
