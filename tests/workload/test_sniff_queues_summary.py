"""Format detection and load_trace, queue mappings, the workload summary."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from yarn_adapt.errors import InputError, TraceError
from yarn_adapt.model.workload import JobFeatures, JobSpec, Workload
from yarn_adapt.workload import (
    PriorityRange,
    QueueMapping,
    assign_queues,
    detect_format,
    leaf_queue_name,
    load_google,
    load_rumen,
    load_sls,
    load_swim,
    load_trace,
    random_priorities,
    summarize,
)

from .conftest import FB_FIRST50, GOOGLE_SAMPLE, RUMEN_SAMPLE, SLS_DAG_SAMPLE, SLS_SAMPLE

SAMPLES = [
    (FB_FIRST50, "swim", load_swim),
    (GOOGLE_SAMPLE, "google", load_google),
    (GOOGLE_SAMPLE / "task_events-part-00000-of-00500.csv.gz", "google", load_google),
    (SLS_SAMPLE, "sls", load_sls),
    (SLS_DAG_SAMPLE, "sls", load_sls),
    (RUMEN_SAMPLE, "rumen", load_rumen),
]


@pytest.mark.parametrize(
    ("path", "fmt", "loader"),
    SAMPLES,
    ids=lambda v: getattr(v, "name", None) or getattr(v, "__name__", str(v)),
)
def test_detect_and_load_every_sample(path: Path, fmt: str, loader: object) -> None:
    assert detect_format(path) == fmt
    assert load_trace(path) == loader(path)  # type: ignore[operator]


def test_content_decides_when_the_name_does_not(tmp_path: Path) -> None:
    renamed = {
        "a.dat": FB_FIRST50.read_bytes(),
        "b.dat": RUMEN_SAMPLE.read_bytes(),
        "c.dat.gz": gzip.compress(SLS_SAMPLE.read_bytes()),
    }
    for name, data in renamed.items():
        (tmp_path / name).write_bytes(data)
    assert [detect_format(tmp_path / name) for name in renamed] == ["swim", "rumen", "sls"]
    assert load_trace(tmp_path / "c.dat.gz").jobs == load_sls(SLS_SAMPLE).jobs


def test_synth_descriptions_and_unknown_files_are_refused(tmp_path: Path) -> None:
    synth = tmp_path / "syn.json"
    synth.write_text(
        json.dumps({"description": "x", "num_nodes": 20, "num_jobs": 10, "workloads": []})
    )
    with pytest.raises(InputError, match="SYNTH"):
        load_trace(synth)
    unknown = tmp_path / "notes.txt"
    unknown.write_text("hello world\n")
    with pytest.raises(TraceError, match="cannot tell the trace format"):
        load_trace(unknown)
    with pytest.raises(InputError, match="unknown trace format"):
        load_trace(SLS_SAMPLE, fmt="parquet")


def test_load_trace_passes_seed_and_queues() -> None:
    four = QueueMapping.paper_four_queues()
    assert load_trace(FB_FIRST50, seed=3, queues=four) == load_swim(FB_FIRST50, seed=3, queues=four)
    # SLS jobs have priority 0; mapping it replaces the trace's own queues.
    assert {j.queue for j in load_trace(SLS_SAMPLE, queues=QueueMapping.single("batch")).jobs} == {
        "batch"
    }


# --------------------------------------------------------------------------- queues


@pytest.mark.parametrize(
    ("mapping", "expected"),
    [
        (QueueMapping.paper_two_queues(), ["q1", "q1", "q1", "q1", "q2", "q2", "q2"]),
        (QueueMapping.paper_four_queues(), ["q1", "q1", "q2", "q2", "q3", "q3", "q4"]),
        (QueueMapping.parse("2-3:a, 4-8:b"), ["a", "a", "b", "b", "b", "b", "b"]),
        (QueueMapping.parse("8:top,2-7:rest"), ["rest"] * 6 + ["top"]),
    ],
)
def test_priority_ranges_choose_queues(mapping: QueueMapping, expected: list[str]) -> None:
    assert [mapping.queue_for(p) for p in range(2, 9)] == expected


def test_mapping_text_round_trips_and_lists_queues_once() -> None:
    mapping = QueueMapping.parse("2-5:q1,6-8:q2,9:q1")
    assert QueueMapping.parse(str(mapping)) == mapping
    assert mapping.queues == ("q1", "q2")


@pytest.mark.parametrize("text", ["", "2-5", "x-5:q1", "5-2:q1", "2-5:"])
def test_bad_mappings_are_refused(text: str) -> None:
    with pytest.raises(InputError):
        QueueMapping.parse(text)


def test_an_unmapped_priority_is_an_input_error() -> None:
    with pytest.raises(InputError, match="priority 9"):
        QueueMapping.paper_two_queues().queue_for(9)
    assert 5 in PriorityRange(2, 5, "q")
    assert 6 not in PriorityRange(2, 5, "q")


def test_random_priorities_are_seeded_and_in_range() -> None:
    draws = random_priorities(2000, seed=1)
    assert draws == random_priorities(2000, seed=1) != random_priorities(2000, seed=2)
    assert set(draws) == set(range(2, 9))


@pytest.mark.parametrize(
    ("queue", "leaf"),
    [("root.a.b", "b"), ("default", "default"), ("root", "root"), ("", "default")],
)
def test_leaf_queue_names(queue: str, leaf: str) -> None:
    assert leaf_queue_name(queue) == leaf


def test_assign_queues_uses_each_jobs_priority() -> None:
    jobs = tuple(
        JobSpec(f"j{p}", float(p), "old", (), features=JobFeatures(priority=p)) for p in (2, 6)
    )
    assert [
        j.queue for j in assign_queues(Workload(jobs), QueueMapping.paper_two_queues()).jobs
    ] == ["q1", "q2"]


# --------------------------------------------------------------------------- summary


def test_summary_of_the_sls_sample() -> None:
    summary = summarize(load_sls(SLS_SAMPLE))
    assert (summary.jobs, summary.tasks, summary.maps, summary.reduces) == (2, 5, 5, 0)
    assert summary.span_s == pytest.approx(105.204)
    assert summary.jobs_per_queue == (("sls_queue_1", 1), ("sls_queue_2", 1))
    assert summary.task_seconds == pytest.approx(17.043 + 14.928 + 17.843 + 22.163 + 19.589)
    assert summary.median_task_s == pytest.approx(17.843)
    lines = summary.lines()
    assert lines[0] == "workload sls:inputsls.json: 2 jobs, 5 tasks (5 maps, 0 reduces)"
    assert lines[2] == "jobs per queue: sls_queue_1=1, sls_queue_2=1"


def test_summary_of_an_empty_workload() -> None:
    summary = summarize(Workload(()))
    assert (summary.jobs, summary.tasks, summary.span_s, summary.median_task_s) == (0, 0, 0.0, 0.0)
    assert summary.lines()[2] == "jobs per queue: -"
