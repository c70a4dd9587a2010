"""A trace row with absurd sizes is refused with one line naming the file and the
line, before any of its tasks is made: never an out-of-memory crash (issue 15)."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from yarn_adapt.cli import main
from yarn_adapt.errors import InputError, TraceError
from yarn_adapt.workload import SwimReplaySettings, load_swim, load_trace

from .conftest import FB_FIRST50

EXABYTE = 10**18
PARTITION = SwimReplaySettings().partition_bytes


def with_row(tmp_path: Path, row: str, at: int = 7) -> Path:
    """The first 50 FB-2009 jobs with ``row`` in place of line ``at``."""
    lines = FB_FIRST50.read_text().splitlines()
    lines[at - 1] = row
    path = tmp_path / "absurd.tsv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        (f"jobX\t300\t1\t{EXABYTE}\t100\t100", "would run 17,450,941,043 tasks"),
        (f"jobX\t300\t1\t{PARTITION * 1_000_000 + 1}\t100\t100", "would run 1,000,002 tasks"),
    ],
    ids=["exabyte-input", "a-million-maps"],
)
def test_a_row_of_absurd_size_is_refused_before_its_tasks_exist(
    row: str, problem: str, tmp_path: Path
) -> None:
    path = with_row(tmp_path, row)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(TraceError) as caught:
        load_swim(path)
    assert caught.value.line == 7
    assert problem in str(caught.value) and "max_tasks_per_job" in str(caught.value)
    assert str(caught.value).startswith(f"{path}:7: ") and "\n" not in str(caught.value)
    lenient = load_swim(path, lenient=True)
    assert len(lenient) == 49 and lenient.skipped_rows == 1
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 200_000  # the 17 billion tasks were never made


def test_a_job_at_the_limit_is_kept(tmp_path: Path) -> None:
    settings = SwimReplaySettings(max_tasks_per_job=2_000)
    path = with_row(tmp_path, f"jobX\t300\t1\t{PARTITION * 1_999}\t100\t100")
    workload = load_swim(path, settings=settings)
    (job,) = [j for j in workload.jobs if j.id == "jobX"]
    assert len(job.tasks) == 2_000  # 1,999 maps and one reduce


def test_a_trace_over_its_task_budget_is_refused_at_the_row_that_crosses_it(
    tmp_path: Path,
) -> None:
    settings = SwimReplaySettings(max_tasks_per_trace=60)
    with pytest.raises(TraceError, match="max_tasks_per_trace") as caught:
        load_swim(FB_FIRST50, settings=settings)
    assert caught.value.line > 1


def test_impossible_limits_are_refused() -> None:
    with pytest.raises(InputError, match="task limits must be positive"):
        SwimReplaySettings(max_tasks_per_job=0)


def test_the_cli_reports_it_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = with_row(tmp_path, f"jobX\t300\t1\t{EXABYTE}\t100\t100")
    assert main(["bench", "sim-speed", "--quiet", "--trace", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"yarn-adapt: {path}:7: job 'jobX' would run") and err.count("\n") == 1
    assert load_trace(path, lenient=True).skipped_rows == 1


def sls_trace(tmp_path: Path, task_count: int, job_count: int = 1) -> Path:
    """Two small SLS jobs with a third between them whose one task is repeated
    ``task_count`` times (``job.count`` copies of the job)."""

    def job(name: str, start_ms: int, count: int = 1, copies: int = 1) -> str:
        task = (
            f'{{"container.start.ms": {start_ms}, "container.end.ms": {start_ms + 5000}, '
            f'"container.type": "map", "count": {count}}}'
        )
        return (
            f'{{"job.id": "{name}", "job.start.ms": {start_ms}, "job.queue.name": "a", '
            f'"job.count": {copies},\n "job.tasks": [{task}]}}\n'
        )

    path = tmp_path / "absurd-sls.json"
    path.write_text(
        job("job_1", 0) + job("job_x", 1000, task_count, job_count) + job("job_2", 2000)
    )
    return path


@pytest.mark.parametrize(
    ("task_count", "job_count", "problem"),
    [
        (EXABYTE, 1, "would run 1,000,000,000,000,000,000 tasks"),
        (1_000_001, 1, "would run 1,000,001 tasks"),
        (1_000, EXABYTE, "more than the 50,000,000 a trace may have"),
    ],
    ids=["exa-count", "a-million-and-one", "exa-job-count"],
)
def test_an_sls_job_of_absurd_size_is_refused_before_its_tasks_exist(
    task_count: int, job_count: int, problem: str, tmp_path: Path
) -> None:
    path = sls_trace(tmp_path, task_count, job_count)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(TraceError) as caught:
        load_trace(path)
    message = str(caught.value)
    assert (
        message.startswith(f"{path}:3: job object #2: ")
        and problem in message
        and "\n" not in message
    )
    lenient = load_trace(path, lenient=True)
    assert [job.id for job in lenient.jobs] == ["job_1", "job_2"] and lenient.skipped_rows == 1
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 200_000  # the tasks were never made


def test_an_sls_job_at_the_limit_is_kept(tmp_path: Path) -> None:
    workload = load_trace(sls_trace(tmp_path, 1_000, job_count=3))
    repeated = [job for job in workload.jobs if job.id.startswith("job_x")]
    assert len(repeated) == 3 and all(len(job.tasks) == 1_000 for job in repeated)


def test_the_cli_reports_an_sls_job_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = sls_trace(tmp_path, EXABYTE)
    assert main(["bench", "sim-speed", "--quiet", "--trace", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"yarn-adapt: {path}:3: ") and err.count("\n") == 1
