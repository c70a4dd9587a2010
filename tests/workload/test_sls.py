"""SLS JSON and Rumen traces: Hadoop's own samples, and the SLS key rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.resources import Resources
from yarn_adapt.workload import load_rumen, load_sls

from .conftest import RUMEN_SAMPLE, SLS_DAG_SAMPLE, SLS_SAMPLE


def test_inputsls_sample() -> None:
    workload = load_sls(SLS_SAMPLE)
    summary = [(j.id, j.submit_s, j.queue, [t.duration_s for t in j.tasks]) for j in workload.jobs]
    assert summary == [
        ("job_1", 0.0, "sls_queue_1", [17.043, 14.928, 17.843]),
        ("job_2", 105.204, "sls_queue_2", [22.163, 19.589]),
    ]
    assert {t.kind for j in workload.jobs for t in j.tasks} == {TaskType.MAP}
    assert {t.resources for j in workload.jobs for t in j.tasks} == {Resources(1024, 1)}
    assert workload.jobs[0].features.job_type == "mapreduce"


def test_dag_sample_keeps_its_am_type() -> None:
    workload = load_sls(SLS_DAG_SAMPLE)
    assert [j.features.job_type for j in workload.jobs] == ["dag", "dag"]
    assert [len(j.tasks) for j in workload.jobs] == [3, 2]


def test_rumen_sample() -> None:
    workload = load_rumen(RUMEN_SAMPLE)
    assert [(j.id, j.submit_s, j.queue, len(j.maps), len(j.reduces)) for j in workload.jobs] == [
        ("job_1369942127770_1205", 0.0, "sls_queue_1", 96, 0),
        ("job_1369942127770_1206", 105.204, "sls_queue_1", 96, 0),
    ]
    first = workload.jobs[0]
    assert (first.name, first.user, first.am_resources) == (
        "TeraGen",
        "jenkins",
        Resources(1536, 1),
    )
    assert first.tasks[0].resources == Resources(1024, 1)
    # 96 maps x 416,666,6xx bytes = 400 million 100-byte rows
    assert first.features.output_bytes == 40_000_000_000
    assert (first.features.priority, first.features.map_tasks, first.features.reduce_tasks) == (
        3,
        96,
        0,
    )
    assert 11 < min(t.duration_s for t in first.tasks) < max(t.duration_s for t in first.tasks) < 48


def test_rumen_and_its_sls_conversion_agree() -> None:
    # inputsls.json holds a few containers of this Rumen trace converted by rumen2sls.
    rumen, sls = load_rumen(RUMEN_SAMPLE), load_sls(SLS_SAMPLE)
    assert [j.submit_s for j in rumen.jobs] == [j.submit_s for j in sls.jobs]
    for rumen_job, sls_job in zip(rumen.jobs, sls.jobs, strict=True):
        rumen_durations = {t.duration_s for t in rumen_job.tasks}
        assert {t.duration_s for t in sls_job.tasks} <= rumen_durations


def _write(path: Path, *objects: object) -> Path:
    path.write_text("\n".join(json.dumps(o, indent=2) for o in objects))
    return path


def _job(**overrides: object) -> dict[str, object]:
    job: dict[str, object] = json.loads(SLS_SAMPLE.read_text().split("\n}\n")[0] + "\n}")
    job.update(overrides)
    return job


@pytest.mark.parametrize(
    ("task", "seconds"),
    [
        ({"container.duration.ms": 5000, "container.start.ms": 0, "container.end.ms": 9000}, 5.0),
        ({"duration.ms": "7000", "container.start.ms": 0, "container.end.ms": 9000}, 7.0),
        ({"container.start.ms": "1000", "container.end.ms": "9000"}, 8.0),
    ],
)
def test_task_duration_precedence(tmp_path: Path, task: dict[str, object], seconds: float) -> None:
    workload = load_sls(_write(tmp_path / "t.json", _job(**{"job.tasks": [task]})))
    assert [t.duration_s for t in workload.jobs[0].tasks] == [seconds]


def test_counts_types_resources_and_header(tmp_path: Path) -> None:
    header = {"num.nodes": 10, "num.racks": 2}
    tasks = [
        {
            "count": 3,
            "container.type": "map",
            "container.duration.ms": 1000,
            "container.memory-mb": 2048,
            "container.vcores": 2,
        },
        {"count": "2", "container.type": "reduce", "container.duration.ms": 4000},
    ]
    job = _job(
        **{
            "job.tasks": tasks,
            "job.count": 2,
            "am.memory-mb": 512,
            "job.queue.name": "root.prod.etl",
        }
    )
    workload = load_sls(_write(tmp_path / "t.json", header, job))
    assert [j.id for j in workload.jobs] == ["job_1#0", "job_1#1"]
    first = workload.jobs[0]
    assert [(t.kind, t.duration_s, t.resources) for t in first.tasks] == [
        (TaskType.MAP, 1.0, Resources(2048, 2))
    ] * 3 + [(TaskType.REDUCE, 4.0, Resources(1024, 1))] * 2
    assert (first.queue, first.am_resources) == ("etl", Resources(512, 1))
    assert (first.features.map_tasks, first.features.reduce_tasks) == (3, 2)


def test_a_json_array_of_jobs_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "array.json"
    path.write_text(json.dumps([_job(), _job(**{"job.id": "job_9"})]))
    assert [j.id for j in load_sls(path).jobs] == ["job_1", "job_9"]
