"""Real trace samples through the real loaders into the simulator."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.sim.factories import capacity_leaf, capacity_tree, fair_leaf, fair_tree
from yarn_adapt.model import CapacitySchedulerConfig, FairSchedulerConfig, JobSpec, TaskType
from yarn_adapt.sim import ClusterSpec, JobStatus, SimulationOptions, run_speed_benchmark, simulate
from yarn_adapt.sim.bench import typical_container
from yarn_adapt.workload import load_swim, load_trace

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "workload"
FB_SAMPLE = FIXTURES / "FB-2009_samples_24_times_1hr_0_first50jobs.tsv"
TRACES = Path(os.environ.get("YARN_ADAPT_TRACES", "/work/shared/data/traces"))
FB_DAY = TRACES / "FB-2009_samples_24_times_1hr_0.tsv"

CAPACITY = capacity_tree(capacity_leaf("q1", 50), capacity_leaf("q2", 50))
FAIR = fair_tree(fair_leaf("q1"), fair_leaf("q2"))


def critical_path_s(job: JobSpec) -> float:
    """No job can end sooner than its longest map plus its longest reduce."""
    maps = [t.duration_s for t in job.tasks if t.kind is TaskType.MAP]
    reduces = [t.duration_s for t in job.tasks if t.kind is TaskType.REDUCE]
    return max(maps, default=0.0) + max(reduces, default=0.0)


@pytest.mark.parametrize("config", [CAPACITY, FAIR], ids=["capacity", "fair"])
def test_fb_sample_runs_to_completion_within_physical_bounds(
    config: CapacitySchedulerConfig | FairSchedulerConfig,
) -> None:
    workload = load_swim(str(FB_SAMPLE))
    cluster = ClusterSpec.uniform(2, typical_container(workload) * 8)
    result = simulate(workload, config, cluster)
    specs = {job.id: job for job in workload.jobs}
    assert len(result.jobs) == 50
    for job in result.jobs:
        assert job.status is JobStatus.FINISHED
        assert job.wait_s is not None and job.wait_s >= 0
        assert job.latency_s is not None
        assert job.latency_s >= critical_path_s(specs[job.id]) - 1e-9


def test_sls_sample_runs_in_its_own_queues() -> None:
    workload = load_trace(str(FIXTURES / "inputsls.json"))
    config = capacity_tree(capacity_leaf("sls_queue_1", 50), capacity_leaf("sls_queue_2", 50))
    result = simulate(workload, config, ClusterSpec.uniform(2, typical_container(workload) * 4))
    assert {j.queue for j in result.jobs} == {"root.sls_queue_1", "root.sls_queue_2"}
    assert all(j.status is JobStatus.FINISHED for j in result.jobs)


def test_speed_benchmark_reports_its_figures() -> None:
    workload = load_swim(str(FB_SAMPLE))
    figures = run_speed_benchmark(workload, nodes=10, containers_per_node=8)
    assert figures["jobs"] == 50 and figures["finished"] == 50
    assert figures["wall_s"] > 0 and figures["events_per_s"] > 0


@pytest.mark.slow
def test_fb_day_on_600_nodes_finishes_every_job() -> None:
    if not FB_DAY.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{FB_DAY} is missing")
        pytest.skip(f"full trace not available: {FB_DAY}")
    workload = load_swim(str(FB_DAY))
    options = SimulationOptions(sample_interval_s=600.0)
    result = simulate(
        workload, CAPACITY, ClusterSpec.uniform(600, typical_container(workload) * 8), options
    )
    assert len(result.finished()) == 5894
    assert 0 < result.utilisation.memory < 1
