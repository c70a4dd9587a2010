"""Google cluster trace 2011: best-effort filter, durations, groups, resources, speed."""

from __future__ import annotations

import gzip
import time
from pathlib import Path

import pytest

from yarn_adapt.model.resources import Resources
from yarn_adapt.model.workload import Workload
from yarn_adapt.workload import (
    GoogleResourceMapping,
    QueueMapping,
    group_by_application,
    load_google,
)

from .conftest import GOOGLE_SAMPLE

SAMPLE_JOBS = ["6251688639", "6251688722", "6251703545", "6251704772", "6251705242", "6251735311"]


def test_sample_keeps_only_best_effort_jobs_with_tasks_run_inside_the_window() -> None:
    workload = load_google(GOOGLE_SAMPLE)
    # Left out: priorities 0 and 9 (3 jobs), and 9 best-effort jobs whose finished
    # tasks were all scheduled before the window (SCHEDULE at timestamp 0).
    assert [job.id for job in workload.jobs] == SAMPLE_JOBS
    assert {job.features.priority for job in workload.jobs} == {2}


def test_hand_checked_job() -> None:
    # Rows of job 6251704772: job SUBMIT at 1,159,915,677 µs; task 5 SCHEDULE at
    # 1,160,810,150 and FINISH at 1,365,020,072; its six other tasks were KILLed.
    job = next(j for j in load_google(GOOGLE_SAMPLE).jobs if j.id == "6251704772")
    assert job.submit_s == pytest.approx(559.915677)
    assert [t.duration_s for t in job.tasks] == [pytest.approx(204.209922)]
    # Requests 0.03125 CPU and 0.004784 memory of the largest machine.
    assert job.tasks[0].resources == Resources(1024, 1)
    assert job.queue == "q1"
    assert job.features.cpu_request == pytest.approx(0.03125)
    assert job.name == job.features.job_type == "ehYKtZPLK9Q5hq1DtGUa9TI64Blb5/sjzwyLs+UPLgA="


def test_jobs_are_grouped_by_logical_job_name() -> None:
    groups = group_by_application(load_google(GOOGLE_SAMPLE))
    assert sum(len(group) for group in groups.values()) == len(SAMPLE_JOBS)
    for name, group in groups.items():
        assert {job.name for job in group.jobs} == {name}


def test_job_events_file_alone_finds_its_task_events_sibling() -> None:
    by_file = load_google(GOOGLE_SAMPLE / "job_events-part-00000-of-00500.csv.gz")
    assert by_file.jobs == load_google(GOOGLE_SAMPLE).jobs


# --------------------------------------------------------------------------- event rules

USER = "dXNlcg=="
TASK_ROWS = [
    # job 1 (priority 2) task 0: evicted, resubmitted, finishes 60 s after its 2nd SCHEDULE
    (700, 1, 0, 0, 2, "0.025", "0.03"),
    (701, 1, 0, 1, 2, "0.025", "0.03"),
    (720, 1, 0, 2, 2, "0.025", "0.03"),
    (721, 1, 0, 0, 2, "0.025", "0.03"),
    (730, 1, 0, 1, 2, "0.025", "0.03"),
    (790, 1, 0, 4, 2, "0.025", "0.03"),
    # task 1: running before the window (timestamp 0): start unknown, left out
    (0, 1, 1, 0, 2, "0.025", "0.03"),
    (0, 1, 1, 1, 2, "0.025", "0.03"),
    (800, 1, 1, 4, 2, "0.025", "0.03"),
    # task 2 fails, task 3 is killed: no duration
    (705, 1, 2, 0, 2, "0.025", "0.03"),
    (706, 1, 2, 1, 2, "0.025", "0.03"),
    (750, 1, 2, 3, 2, "0.025", "0.03"),
    (705, 1, 3, 0, 2, "0.025", "0.03"),
    (706, 1, 3, 1, 2, "0.025", "0.03"),
    (710, 1, 3, 5, 2, "0.025", "0.03"),
    # task 4: lost, request raised while pending, rescheduled, finishes after 20 s
    (705, 1, 4, 0, 2, "0.025", "0.03"),
    (706, 1, 4, 1, 2, "0.025", "0.03"),
    (720, 1, 4, 6, 2, "0.025", "0.03"),
    (721, 1, 4, 7, 2, "0.5", "0.11"),
    (722, 1, 4, 1, 2, "0.5", "0.11"),
    (742, 1, 4, 4, 2, "0.5", "0.11"),
    # job 2 has priority 9 (production): not best-effort
    (705, 2, 0, 0, 9, "0.025", "0.03"),
    (706, 2, 0, 1, 9, "0.025", "0.03"),
    (800, 2, 0, 4, 9, "0.025", "0.03"),
    # job 4 (priority 8) has no job_events row: submit from its task's SUBMIT
    (900, 4, 0, 0, 8, "", ""),
    (901, 4, 0, 1, 8, "", ""),
    (911, 4, 0, 4, 8, "", ""),
]


def _row(
    seconds: int, job: int, task: int, event: int, priority: int, cpu: str, memory: str
) -> str:
    micros = seconds * 1_000_000
    return f"{micros},,{job},{task},77,{event},{USER},0,{priority},{cpu},{memory},0.0001,0\n"


def _write_events(directory: Path) -> Path:
    with gzip.open(directory / "task_events-part-00000-of-00500.csv.gz", "wt") as tasks:
        tasks.writelines(_row(*row) for row in sorted(TASK_ROWS, key=lambda r: r[0]))
    with gzip.open(directory / "job_events-part-00000-of-00500.csv.gz", "wt") as jobs:
        jobs.write(f"650000000,,1,0,{USER},0,name1,app-A\n")
    return directory


def test_event_rules(tmp_path: Path) -> None:
    workload = load_google(_write_events(tmp_path))
    assert [job.id for job in workload.jobs] == ["1", "4"]
    job1, job4 = workload.jobs
    assert (job1.submit_s, job1.name, job1.user) == (50.0, "app-A", USER)
    assert [t.duration_s for t in job1.tasks] == [60.0, 20.0]
    # 0.5 of a 12-core, 32 GiB reference machine: 6 vcores; 0.11 * 32768 MiB -> 4096 MiB
    assert [t.resources for t in job1.tasks] == [Resources(1024, 1), Resources(4096, 6)]
    assert (job4.submit_s, job4.queue, [t.duration_s for t in job4.tasks]) == (300.0, "q2", [10.0])
    assert job4.tasks[0].resources == Resources(1024, 1)


def test_priority_filter_and_queue_mapping_are_options(tmp_path: Path) -> None:
    workload = load_google(
        _write_events(tmp_path),
        priorities=range(0, 12),
        queues=QueueMapping.parse("0-8:batch,9-11:prod"),
    )
    assert {job.id: job.queue for job in workload.jobs} == {"1": "batch", "2": "prod", "4": "batch"}


@pytest.mark.parametrize(
    ("cpu", "memory", "container"),
    [
        (None, None, Resources(1024, 1)),
        (0.0, 0.0, Resources(1024, 1)),
        (1.0, 1.0, Resources(32768, 12)),
        (0.09, 0.0313, Resources(2048, 2)),
    ],
)
def test_resource_mapping_rounds_up_to_the_allocation_increment(
    cpu: float | None, memory: float | None, container: Resources
) -> None:
    assert GoogleResourceMapping().container(cpu, memory) == container


# --------------------------------------------------------------------------- the real part


def test_full_part_best_effort_jobs(google_part: Workload) -> None:
    assert (len(google_part), sum(len(j.tasks) for j in google_part.jobs)) == (397, 36_056)
    assert {j.features.priority for j in google_part.jobs} == {2, 8}
    assert {j.queue for j in google_part.jobs} == {"q1", "q2"}
    assert all(t.duration_s > 0 for j in google_part.jobs for t in j.tasks)
    assert max(j.submit_s for j in google_part.jobs) < 5_611 - 600
    assert len(group_by_application(google_part)) == 308


def test_full_part_loads_in_under_five_cpu_seconds(shared_traces: Path) -> None:
    # CPU time of this process, so that other work on the machine does not count.
    started = time.process_time()
    load_google(shared_traces / "google-2011")
    assert time.process_time() - started < 5.0
