"""Task execution-time model: held-out accuracy on the real traces, fallback,
determinism, batch/cached estimates, estimated copies, persistence."""

from __future__ import annotations

import pickle
import statistics
from pathlib import Path

import numpy as np
import pytest

from yarn_adapt.errors import InputError
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.workload import JobFeatures, Workload
from yarn_adapt.workload import (
    GRADIENT_BOOSTING,
    MEDIAN_FALLBACK,
    TaskTimeModel,
    TaskTimeModelError,
    fit_task_time_model,
    held_out_report,
    load_rumen,
    load_swim,
    load_task_time_model,
    save_task_time_model,
    split_by_job,
    task_time_errors,
    with_estimated_durations,
)
from yarn_adapt.workload.taskmodel import MODEL_FILE_FORMAT, MODEL_FILE_VERSION

from .conftest import FB_FIRST50, RUMEN_SAMPLE


def test_fb2009_held_out_error(fb2009: Workload) -> None:
    report = held_out_report(fb2009, test_fraction=0.25, seed=0)
    assert report.estimator == GRADIENT_BOOSTING
    assert (report.train_jobs, report.test_jobs) == (4420, 1474)
    # The durations carry lognormal noise of sigma 0.25, whose own MAPE is ~0.20:
    # the model cannot do much better, and must not do much worse.
    assert 0.18 < report.model.mape < 0.30
    assert report.model.mae_s < report.baseline.mae_s


def test_google_held_out_error(google_part: Workload) -> None:
    reports = [held_out_report(google_part, seed=seed) for seed in range(3)]
    model_mae = statistics.fmean(r.model.mae_s for r in reports)
    baseline_mae = statistics.fmean(r.baseline.mae_s for r in reports)
    # Real durations from 15 s to an hour; 99 unseen jobs per split.
    assert statistics.fmean(r.model.mape for r in reports) < 1.2
    assert model_mae < baseline_mae


def test_split_is_by_whole_jobs() -> None:
    workload = load_swim(FB_FIRST50)
    train, test = split_by_job(workload, test_fraction=0.2, seed=4)
    assert (len(train), len(test)) == (40, 10)
    assert {j.id for j in train.jobs} | {j.id for j in test.jobs} == {j.id for j in workload.jobs}
    assert not {j.id for j in train.jobs} & {j.id for j in test.jobs}
    with pytest.raises(InputError):
        split_by_job(workload, test_fraction=1.0)


def test_little_history_falls_back_to_the_median_per_kind() -> None:
    history = load_rumen(RUMEN_SAMPLE)
    model = fit_task_time_model(history)
    assert model.estimator == MEDIAN_FALLBACK
    assert model.reason.startswith("only 2 jobs of history")
    real_maps = [t.duration_s for j in history.jobs for t in j.tasks]
    assert model.estimate(history.jobs[0].features, TaskType.MAP) == statistics.median(real_maps)
    # A kind never seen in history gets the median over the kinds that were.
    assert model.estimate(JobFeatures(), TaskType.REDUCE) == statistics.median(real_maps)


def test_no_durations_at_all_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no task durations"):
        fit_task_time_model(Workload((), source="empty"))


def test_fitting_is_deterministic_for_a_seed() -> None:
    history = load_swim(FB_FIRST50, seed=1)
    first, second = (fit_task_time_model(history, seed=5, min_jobs=10) for _ in range(2))
    assert first.estimator == GRADIENT_BOOSTING
    assert [first.estimate_job(j) for j in history.jobs] == [
        second.estimate_job(j) for j in history.jobs
    ]


@pytest.fixture(scope="module")
def fb_fitted(fb2009: Workload) -> tuple[Workload, Workload, TaskTimeModel]:
    train, test = split_by_job(fb2009, seed=1)
    return train, test, fit_task_time_model(train, seed=1)


def _fresh(model: TaskTimeModel) -> TaskTimeModel:
    """A copy with an empty estimate cache."""
    copy: TaskTimeModel = pickle.loads(pickle.dumps(model))
    return copy


def test_batch_and_single_estimates_agree(
    fb_fitted: tuple[Workload, Workload, TaskTimeModel],
) -> None:
    _, test, model = fb_fitted
    batch, single = _fresh(model), _fresh(model)
    batch.prime(test)
    sample = test.jobs[:50]
    batch_values = [s for j in sample for s in batch.estimate_job(j)]
    single_values = [s for j in sample for s in single.estimate_job(j)]
    assert batch_values == pytest.approx(single_values)


def test_estimates_follow_the_real_stage_durations(
    fb_fitted: tuple[Workload, Workload, TaskTimeModel],
) -> None:
    _, test, model = fb_fitted
    model.prime(test)
    stages = [
        (job, kind)
        for job in test.jobs
        for kind in TaskType
        if any(t.kind is kind for t in job.tasks)
    ]
    real = [
        statistics.fmean(t.duration_s for t in job.tasks if t.kind is kind) for job, kind in stages
    ]
    guessed = [model.estimate(job.features, kind) for job, kind in stages]
    assert np.corrcoef(np.log(real), np.log(guessed))[0, 1] > 0.5


def test_estimated_copy_replaces_only_durations(
    fb_fitted: tuple[Workload, Workload, TaskTimeModel],
) -> None:
    _, test, model = fb_fitted
    estimated = with_estimated_durations(test, model)
    assert estimated.source.endswith("+estimated(hist-gradient-boosting)")
    assert [(j.id, j.submit_s, j.queue, len(j.tasks)) for j in estimated.jobs] == [
        (j.id, j.submit_s, j.queue, len(j.tasks)) for j in test.jobs
    ]
    for real_job, guessed_job in zip(test.jobs[:100], estimated.jobs[:100], strict=True):
        assert [t.duration_s for t in guessed_job.tasks] == list(model.estimate_job(real_job))
        assert [(t.kind, t.resources) for t in guessed_job.tasks] == [
            (t.kind, t.resources) for t in real_job.tasks
        ]
    assert task_time_errors(model, estimated).mae_s == pytest.approx(0.0)
    assert task_time_errors(model, test).mae_s > 0.5


def test_saved_model_predicts_the_same_after_loading(tmp_path: Path) -> None:
    history = load_swim(FB_FIRST50)
    model = fit_task_time_model(history, min_jobs=10)
    save_task_time_model(model, tmp_path / "model.pkl")
    loaded = load_task_time_model(tmp_path / "model.pkl")
    assert (loaded.estimator, loaded.trained_jobs) == (model.estimator, 50)
    assert [loaded.estimate_job(j) for j in history.jobs] == [
        model.estimate_job(j) for j in history.jobs
    ]


def _payload(**changes: object) -> bytes:
    header = {
        "format": MODEL_FILE_FORMAT,
        "version": MODEL_FILE_VERSION,
        "sklearn": "1.9.1",
        "model": b"",
    }
    return pickle.dumps({**header, **changes})


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "cannot read a task-time model"),
        (b"not a pickle", "cannot read a task-time model"),
        (pickle.dumps(["a list"]), "not a yarn-adapt task-time model"),
        (_payload(version=99), "model file version 99"),
        (_payload(sklearn="0.1"), "saved with scikit-learn 0.1"),
    ],
)
def test_unusable_model_files_are_refused(tmp_path: Path, content: bytes, problem: str) -> None:
    import sklearn

    path = tmp_path / "model.pkl"
    path.write_bytes(
        content.replace(b"1.9.1", sklearn.__version__.encode()) if content else content
    )
    with pytest.raises(TaskTimeModelError, match=problem):
        load_task_time_model(path)


def test_a_model_file_holding_something_else_is_refused(tmp_path: Path) -> None:
    import sklearn

    path = tmp_path / "model.pkl"
    path.write_bytes(_payload(sklearn=sklearn.__version__, model=pickle.dumps({"not": "a model"})))
    with pytest.raises(TaskTimeModelError, match="no TaskTimeModel"):
        load_task_time_model(path)
