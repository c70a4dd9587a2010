"""What a Google 2011 job carries beyond its logical job name -- its user and its
scheduling class -- reaches the task-time model: the user is target-encoded per task
kind (a job of a logical name never seen is still some user's), the scheduling class
is a numeric feature."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.resources import Resources
from yarn_adapt.model.workload import JobFeatures, JobSpec, TaskSpec, Workload
from yarn_adapt.workload import load_google
from yarn_adapt.workload.taskhistory import NUMERIC_FEATURES, feature_row
from yarn_adapt.workload.taskmodel import GRADIENT_BOOSTING, fit_task_time_model

CONTAINER = Resources(1024, 1)


def _job(index: int, user: str, seconds: float) -> JobSpec:
    tasks = (TaskSpec(TaskType.MAP, seconds, CONTAINER),)
    features = JobFeatures(
        job_type=f"logical-{index}", user=user, priority=2, map_tasks=1, reduce_tasks=0
    )
    return JobSpec(f"j{index}", 10.0 * index, "q1", tasks, user=user, features=features)


def test_a_new_logical_job_is_predicted_from_its_users_earlier_jobs() -> None:
    # Every job is its own logical job (no history) and alike in every other feature:
    # only the user tells a 10 s job from a 1,000 s one.
    jobs = [_job(i, "slow" if i % 2 else "fast", 1000.0 if i % 2 else 10.0) for i in range(60)]
    model = fit_task_time_model(Workload(tuple(jobs)), seed=0)
    assert model.estimator == GRADIENT_BOOSTING
    slow = model.estimate(_job(100, "slow", 1.0).features, TaskType.MAP)
    fast = model.estimate(_job(101, "fast", 1.0).features, TaskType.MAP)
    assert slow / fast > 10.0
    stranger = model.estimate(_job(102, "nobody", 1.0).features, TaskType.MAP)
    assert fast <= stranger <= slow  # an unseen user: the mean encoding, one side or the other


def test_scheduling_class_is_a_numeric_feature() -> None:
    column = NUMERIC_FEATURES.index("scheduling_class")
    assert feature_row(JobFeatures(scheduling_class=3), TaskType.MAP)[column] == 3.0
    assert math.isnan(feature_row(JobFeatures(), TaskType.MAP)[column])


def _task_row(seconds: int, job: int, event: int, scheduling_class: str) -> str:
    return f"{seconds * 1_000_000},,{job},0,77,{event},dXNlcg==,{scheduling_class},2,0.1,0.1,0,0\n"


def test_google_jobs_carry_their_user_and_scheduling_class(tmp_path: Path) -> None:
    rows = [_task_row(700 + t, job, event, "1") for job in (1, 2) for t, event in enumerate((0, 1))]
    rows += [_task_row(760, 1, 4, "1"), _task_row(790, 2, 4, "1")]
    with gzip.open(tmp_path / "task_events-part-00000-of-00500.csv.gz", "wt") as tasks:
        tasks.writelines(sorted(rows, key=lambda r: int(r.split(",")[0])))
    with gzip.open(tmp_path / "job_events-part-00000-of-00500.csv.gz", "wt") as events:
        # job 1's job_events row says class 3 and user "b3du": they win over its tasks'
        events.write("650000000,,1,0,b3du,3,name1,app-A\n")
    by_id = {job.id: job.features for job in load_google(tmp_path).jobs}
    assert (by_id["1"].user, by_id["1"].scheduling_class) == ("b3du", 3)
    # job 2 has no job_events row: its tasks' user and class
    assert (by_id["2"].user, by_id["2"].scheduling_class) == ("dXNlcg==", 1)
