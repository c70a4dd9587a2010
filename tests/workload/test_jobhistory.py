"""MapReduce jobs as the JobHistory REST client returns them -> Workload."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest

from yarn_adapt.errors import TraceError
from yarn_adapt.model.apps import JobState, MapReduceJob, MapReduceTask, TaskAttempt, TaskType
from yarn_adapt.model.resources import Resources
from yarn_adapt.workload import QueueMapping, workload_from_history
from yarn_adapt.yarn import parse

T0 = 1_700_000_000_000


def attempt(
    task_id: str, n: int, state: str, start_s: float, finish_s: float, kind: TaskType = TaskType.MAP
) -> TaskAttempt:
    start, finish = T0 + int(start_s * 1000), T0 + int(finish_s * 1000)
    return TaskAttempt(f"attempt_{task_id}_{n}", kind, state, start, finish, finish - start)


def task(
    task_id: str, kind: TaskType, *attempts: TaskAttempt, state: str = "SUCCEEDED"
) -> MapReduceTask:
    good = [a for a in attempts if a.state == "SUCCEEDED"]
    start = min((a.start_ms or 0) for a in attempts) if attempts else None
    finish = good[-1].finish_ms if good else None
    elapsed = (finish or 0) - (start or 0)
    return MapReduceTask(
        task_id, kind, state, start, finish, elapsed, good[-1].id if good else "", attempts
    )


def job(
    job_id: str,
    submit_s: float,
    *tasks: MapReduceTask,
    state: JobState = JobState.SUCCEEDED,
    queue: str = "root.default",
) -> MapReduceJob:
    maps = sum(1 for t in tasks if t.task_type is TaskType.MAP)
    return MapReduceJob(
        job_id,
        "wordcount",
        queue,
        "alice",
        state,
        T0 + int(submit_s * 1000),
        T0,
        T0 + 100_000,
        maps,
        maps,
        len(tasks) - maps,
        len(tasks) - maps,
        tasks=tasks,
    )


MAP_WITH_RETRY = task(
    "task_1_m_0",
    TaskType.MAP,
    attempt("1_m_0", 0, "FAILED", 10, 14),
    attempt("1_m_0", 1, "SUCCEEDED", 15, 27),
)
REDUCE = task(
    "task_1_r_0", TaskType.REDUCE, attempt("1_r_0", 0, "SUCCEEDED", 30, 70, TaskType.REDUCE)
)


def test_durations_come_from_successful_attempts() -> None:
    workload = workload_from_history([job("job_1_1", 5, REDUCE, MAP_WITH_RETRY)])
    (spec,) = workload.jobs
    assert [(t.kind, t.duration_s) for t in spec.tasks] == [
        (TaskType.MAP, 12.0),
        (TaskType.REDUCE, 40.0),
    ]
    assert (spec.queue, spec.user, spec.name, spec.am_resources) == (
        "default",
        "alice",
        "wordcount",
        Resources(1536, 1),
    )
    assert (spec.features.job_type, spec.features.map_tasks, spec.features.reduce_tasks) == (
        "wordcount",
        1,
        1,
    )


def test_tasks_without_fetched_attempts_use_their_own_times() -> None:
    bare = replace(MAP_WITH_RETRY, attempts=(), start_ms=T0, finish_ms=T0 + 9_000)
    assert [
        t.duration_s for t in workload_from_history([job("job_1_1", 0, bare)]).jobs[0].tasks
    ] == [9.0]


def test_jobs_without_tasks_are_rebuilt_from_their_averages() -> None:
    totals = replace(
        job("job_1_1", 0),
        maps_completed=3,
        reduces_completed=1,
        avg_map_time_ms=4_000,
        avg_reduce_time_ms=9_000,
    )
    tasks = workload_from_history([totals]).jobs[0].tasks
    assert [(t.kind, t.duration_s) for t in tasks] == [(TaskType.MAP, 4.0)] * 3 + [
        (TaskType.REDUCE, 9.0)
    ]


def test_only_succeeded_jobs_and_tasks_are_replayed_and_submits_are_relative() -> None:
    killed_task = task(
        "task_2_m_1", TaskType.MAP, attempt("2_m_1", 0, "KILLED", 1, 2), state="KILLED"
    )
    jobs = [
        job("job_1_3", 30, MAP_WITH_RETRY, killed_task),
        job("job_1_2", 12, MAP_WITH_RETRY, state=JobState.FAILED),
        job("job_1_1", 10, REDUCE),
    ]
    workload = workload_from_history(jobs)
    assert [(j.id, j.submit_s, len(j.tasks)) for j in workload.jobs] == [
        ("job_1_1", 0.0, 1),
        ("job_1_3", 20.0, 1),
    ]
    everything = workload_from_history(jobs, include_unsuccessful=True)
    assert [j.id for j in everything.jobs] == ["job_1_1", "job_1_2", "job_1_3"]


def test_queues_can_be_mapped_from_priority() -> None:
    workload = workload_from_history(
        [job("job_1_1", 0, REDUCE)], queues=QueueMapping.single("batch")
    )
    assert workload.jobs[0].queue == "batch"


BROKEN = task("task_9_m_0", TaskType.MAP, attempt("9_m_0", 0, "FAILED", 1, 2))


def test_a_succeeded_task_without_a_successful_attempt_names_the_job() -> None:
    jobs = [job("job_1_1", 0, REDUCE), job("job_1_2", 1, BROKEN)]
    with pytest.raises(TraceError) as caught:
        workload_from_history(jobs)
    assert str(caught.value).startswith("<jobhistory>:2: job job_1_2: task task_9_m_0")


def test_lenient_skips_and_counts_the_broken_job(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="yarn_adapt.workload"):
        workload = workload_from_history(
            [job("job_1_1", 0, REDUCE), job("job_1_2", 1, BROKEN)], lenient=True
        )
    assert ([j.id for j in workload.jobs], workload.skipped_rows) == (["job_1_1"], 1)
    assert "job_1_2" in caplog.text


# --------------------------------------------------------------------------- recorded


JHS = Path(__file__).resolve().parent.parent / "fixtures" / "jhs"
ATTEMPT_FILES = {
    "m_000000": "attempts-map-0.json",
    "m_000001": "attempts-map-1.json",
    "r_000000": "attempts-reduce.json",
}


def _recorded_sleep_job() -> MapReduceJob:
    """The SleepJob a real Hadoop 3.4 JobHistory Server reported (tests/fixtures/jhs),
    parsed by the REST client's own parser."""

    def document(name: str) -> object:
        return json.loads((JHS / name).read_text())

    tasks = parse.parse_tasks(document("tasks.json"), "tasks.json")
    with_attempts = tuple(
        replace(t, attempts=parse.parse_task_attempts(document(ATTEMPT_FILES[t.id[-8:]]), t.id))
        for t in tasks
    )
    return replace(parse.parse_job(document("job.json"), "job.json"), tasks=with_attempts)


def test_recorded_jobhistory_sleep_job() -> None:
    (spec,) = workload_from_history([_recorded_sleep_job()]).jobs
    assert (spec.id, spec.queue, spec.name, spec.submit_s) == (
        "job_1795312196869_0001",
        "b",
        "Sleep job",
        0.0,
    )
    # attempts: m_000001 2,855 ms, m_000000 3,090 ms, r_000000 2,217 ms
    assert [(t.kind, t.duration_s) for t in spec.tasks] == [
        (TaskType.MAP, 2.855),
        (TaskType.MAP, 3.09),
        (TaskType.REDUCE, 2.217),
    ]


def test_recorded_job_without_tasks_uses_the_reported_averages() -> None:
    summary = replace(_recorded_sleep_job(), tasks=())
    reported = json.loads((JHS / "job.json").read_text())["job"]
    assert (summary.avg_shuffle_time_ms, summary.avg_merge_time_ms) == (
        reported["avgShuffleTime"],
        reported["avgMergeTime"],
    )
    durations = [t.duration_s for t in workload_from_history([summary]).jobs[0].tasks]
    # avgShuffleTime 1,638 + avgMergeTime 24 + avgReduceTime 555 = the attempt's 2,217 ms
    assert durations == [2.972, 2.972, 2.217]
    # Without the phase averages only the reduce phase is known.
    bare = replace(summary, avg_shuffle_time_ms=None, avg_merge_time_ms=None)
    assert [t.duration_s for t in workload_from_history([bare]).jobs[0].reduces] == [0.555]
