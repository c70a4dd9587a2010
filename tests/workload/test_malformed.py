"""Broken copies of the real samples: strict loading names file and line, lenient
loading skips the bad row, counts it and logs a warning."""

from __future__ import annotations

import gzip
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from yarn_adapt.errors import TraceError
from yarn_adapt.model.workload import Workload
from yarn_adapt.workload import load_google, load_rumen, load_sls, load_swim

from .conftest import FB_FIRST50, GOOGLE_SAMPLE, RUMEN_SAMPLE, SLS_SAMPLE

TASK_EVENTS = "task_events-part-00000-of-00500.csv.gz"


def _edit_line(text: str, line: int, change: Callable[[str], str]) -> str:
    lines = text.split("\n")
    lines[line - 1] = change(lines[line - 1])
    return "\n".join(lines)


def swim_copy(line: int, change: Callable[[str], str]) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / "FB-2009_broken.tsv"
        path.write_text(_edit_line(FB_FIRST50.read_text(), line, change))
        return path

    return make


def _set_column(index: int, value: str, sep: str = "\t") -> Callable[[str], str]:
    def change(line: str) -> str:
        fields = line.split(sep)
        fields[index] = value
        return sep.join(fields)

    return change


def google_copy(line: int, change: Callable[[str], str]) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        shutil.copytree(GOOGLE_SAMPLE, tmp / "google")
        path = tmp / "google" / TASK_EVENTS
        text = gzip.decompress(path.read_bytes()).decode()
        path.write_bytes(gzip.compress(_edit_line(text, line, change).encode()))
        return path

    return make


def truncated_google(tmp: Path) -> Path:
    shutil.copytree(GOOGLE_SAMPLE, tmp / "google")
    path = tmp / "google" / TASK_EVENTS
    path.write_bytes(path.read_bytes()[:-600])
    return path


def truncated_swim_gzip(tmp: Path) -> Path:
    path = tmp / "FB-2009_first50.tsv.gz"
    path.write_bytes(gzip.compress(FB_FIRST50.read_bytes())[:-200])
    return path


def json_copy(source: Path, change: Callable[[str], str]) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / source.name
        path.write_text(change(source.read_text()))
        return path

    return make


def _second_object(text: str) -> int:
    """Line on which the second top-level object of a sample starts."""
    return text[: text.index("\n}\n") + 3].count("\n") + 1


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[Path], Path]
    load: Callable[..., Workload]
    line: int | None
    problem: str
    lenient_jobs: int | None


SLS_TEXT = SLS_SAMPLE.read_text()
ATTEMPT_FINISH = '"result" : "SUCCESS",\n      "finishTime" : 1371222078206,'
CASES = [
    Case(
        "swim missing column",
        swim_copy(3, lambda ln: ln.rsplit("\t", 1)[0]),
        load_swim,
        3,
        "expected 6 tab-separated columns, found 5",
        49,
    ),
    Case(
        "swim not a number",
        swim_copy(5, _set_column(3, "12x")),
        load_swim,
        5,
        "input '12x' is not a number",
        49,
    ),
    Case(
        "swim negative size",
        swim_copy(7, _set_column(4, "-5")),
        load_swim,
        7,
        "shuffle -5 is negative",
        49,
    ),
    Case(
        "swim duplicate id",
        swim_copy(9, _set_column(0, "job0")),
        load_swim,
        9,
        "duplicate job id 'job0'",
        49,
    ),
    Case("swim truncated gzip", truncated_swim_gzip, load_swim, None, "file ends early", None),
    Case(
        "google missing column",
        google_copy(10, lambda ln: ln.rsplit(",", 1)[0]),
        load_google,
        10,
        "expected 13 columns, found 12",
        6,
    ),
    Case(
        "google time not a number",
        google_copy(4, _set_column(0, "abc", ",")),
        load_google,
        4,
        "time 'abc' is not an integer",
        6,
    ),
    Case(
        "google bad event type",
        google_copy(12, _set_column(5, "42", ",")),
        load_google,
        12,
        "event type 42 is outside 0..8",
        6,
    ),
    Case(
        "google negative request",
        google_copy(5, _set_column(9, "-0.5", ",")),
        load_google,
        5,
        "CPU request -0.5 is negative",
        None,
    ),
    Case("google truncated gzip", truncated_google, load_google, None, "file ends early", None),
    Case(
        "sls bad JSON",
        json_copy(SLS_SAMPLE, lambda t: t.replace('"job.id": "job_2",', '"job.id": "job_2"')),
        load_sls,
        SLS_TEXT[: SLS_TEXT.index('"job.id": "job_2"')].count("\n") + 2,
        "object #2: invalid JSON: Expecting ',' delimiter",
        1,
    ),
    Case(
        "sls non-positive duration",
        json_copy(
            SLS_SAMPLE, lambda t: t.replace('"container.end.ms": 133985', '"container.end.ms": 1')
        ),
        load_sls,
        _second_object(SLS_TEXT),
        "job object #2: a task's duration -111821 ms is not positive",
        1,
    ),
    Case(
        "sls missing tasks",
        json_copy(SLS_SAMPLE, lambda t: t.replace('"job.tasks"', '"job.tasks.typo"', 1)),
        load_sls,
        1,
        "job object #1: job.tasks is missing or not a list of objects",
        1,
    ),
    Case(
        "rumen truncated",
        json_copy(RUMEN_SAMPLE, lambda t: t[:300_000]),
        load_rumen,
        None,
        "object #2: invalid JSON",
        1,
    ),
    Case(
        "rumen attempt without times",
        json_copy(RUMEN_SAMPLE, lambda t: t.replace(ATTEMPT_FINISH, '"result" : "SUCCESS",', 1)),
        load_rumen,
        1,
        "job object #1: attempt finishTime None is not an integer",
        1,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_strict_names_file_and_line(case: Case, tmp_path: Path) -> None:
    path = case.make(tmp_path)
    with pytest.raises(TraceError) as caught:
        case.load(path)
    error = caught.value
    assert error.path == str(path)
    assert case.problem in error.problem
    if case.line is not None:
        assert error.line == case.line
        assert str(error).startswith(f"{path}:{case.line}: ")
    assert error.one_line() == str(error)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_lenient_skips_counts_and_warns(
    case: Case, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = case.make(tmp_path)
    with caplog.at_level(logging.WARNING, logger="yarn_adapt.workload"):
        workload = case.load(path, lenient=True)
    assert workload.skipped_rows == 1
    if case.lenient_jobs is not None:
        assert len(workload) == case.lenient_jobs
    warnings = [
        r
        for r in caplog.records
        if r.levelno == logging.WARNING and r.name == "yarn_adapt.workload"
    ]
    assert len(warnings) == 1 and case.problem in warnings[0].getMessage()


def test_many_skipped_rows_end_in_one_summary_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "FB-2009_noise.tsv"
    path.write_text("not a row\n" * 12 + FB_FIRST50.read_text())
    with caplog.at_level(logging.WARNING, logger="yarn_adapt.workload"):
        workload = load_swim(path, lenient=True)
    assert (len(workload), workload.skipped_rows) == (50, 12)
    assert len(caplog.records) == 6
    assert "skipped 12 malformed rows in all" in caplog.records[-1].getMessage()


def test_missing_file_is_a_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot read"):
        load_swim(tmp_path / "nope.tsv")
