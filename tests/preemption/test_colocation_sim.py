"""The node co-location simulation: its model, and the agent's code acting in it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from preemption.cgroups.base import Cgroup
from preemption.model import Amount, ReclaimTarget
from preemption.reclaim import ReclaimSettings
from preemption.strategies import Strategy
from yarn_adapt.bench import BenchOptions
from yarn_adapt.bench.preemption import preemption_bench
from yarn_adapt.cosim.colocation import (
    ColocatedNode,
    NodeModel,
    SimCgroups,
    SimJob,
    batch_jobs,
    lc_p95_ms,
)
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.workload import JobSpec, TaskSpec, Workload

FIFTY_JOBS = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "workload"
    / "FB-2009_samples_24_times_1hr_0_first50jobs.tsv"
)
MODEL = NodeModel(cores=4.0, batch_slots=3, lc_vcores=1, lc_cores_at_median=1.0,
                  target_p95_ms=14.0, noise_sigma=0.0, cpu_fraction=(1.0, 1.0),
                  falter_cores=(0.05, 0.05), load_interval_s=10.0)  # fmt: skip
RECLAIM = ReclaimSettings(per_task=Amount(1000, 0), mini_step=Amount(500, 0),
                          floor=Amount(100, 0), grace_period_s=600.0, settle_s=0.0)  # fmt: skip


def test_latency_grows_as_the_capacity_left_to_the_service_shrinks() -> None:
    latencies = [lc_p95_ms(2.0, c, 0.5, MODEL) for c in (8.0, 4.0, 3.0, 2.2, 2.0)]
    assert latencies == sorted(latencies, reverse=True)[::-1]
    assert latencies[-1] == MODEL.lc_service_ms * MODEL.max_latency_factor  # overloaded
    assert lc_p95_ms(1.0, 16.0, 0.0, MODEL) == pytest.approx(MODEL.lc_service_ms, rel=0.01)


def test_the_simulated_backend_speaks_the_agents_cgroup_interface() -> None:
    cgroups = SimCgroups()
    cgroups.add("c1", 1024, 1 << 30)
    group = Cgroup("c1")
    assert cgroups.cap_cores("c1") == float("inf")
    values = cgroups.desired_values(Amount(500, 0), Amount(1000, 0),
                                    {k: cgroups.read(group, k) for k in cgroups.read_keys},
                                    cgroups.usage(group))  # fmt: skip
    assert values == {"cpu.cfs_quota_us": "50000", "cpu.shares": "512"}
    for key, value in values.items():
        cgroups.write(group, key, value)
    assert cgroups.cap_cores("c1") == 0.5


def one_job_workload(tasks: int, duration: float) -> Workload:
    specs = tuple(TaskSpec(TaskType.MAP, duration) for _ in range(tasks))
    return Workload((JobSpec("j0", 0.0, "q", specs), JobSpec("j1", 1.0, "q", specs)))


def test_batch_jobs_fill_the_slots_at_the_asked_utilization() -> None:
    jobs = batch_jobs(one_job_workload(3, 20.0), MODEL, window_s=400.0, seed=1)
    offered = sum(t.duration_s for j in jobs for t in [*j.maps, *j.reduces])
    assert offered == pytest.approx(MODEL.utilization * MODEL.batch_slots * 400.0, rel=0.15)
    assert all(isinstance(job, SimJob) for job in jobs)


class SpikeNode(ColocatedNode):
    """The service side replaced by a fixed spike: 1.5 cores asked for 60 s."""

    def _target(self, measured_p95: float) -> ReclaimTarget:
        spike = 20.0 <= self.now < 80.0
        return ReclaimTarget(reclaim=Amount(1500 if spike else 0, 0), generation=int(spike))


def run(strategy: Strategy | None) -> tuple[float, int, int]:
    jobs = batch_jobs(one_job_workload(3, 30.0), MODEL, window_s=120.0, seed=2)
    node = SpikeNode(MODEL, jobs, [1.0] * 12, strategy=strategy, reclaim=RECLAIM,
                     qos_model=None, seed=2)  # fmt: skip
    result = node.run(120.0)
    assert len(result.jct_s) == len(jobs)  # every job finished
    jct = sum(result.jct_s) / len(result.jct_s)
    return jct, result.tasks_killed, result.tasks_squeezed


def test_kill_loses_progress_and_gradual_reclaim_keeps_every_task_alive() -> None:
    kill_jct, killed, _ = run(Strategy.KILL)
    ntf_jct, ntf_killed, squeezed = run(Strategy.NTF)
    assert killed > 0 and ntf_killed == 0 and squeezed > 0
    assert ntf_jct < kill_jct


def test_the_bench_reports_every_figure_the_issue_asks_for_on_another_trace() -> None:
    # A SWIM file the bench was not built on (the first 50 jobs of an FB-2009 sample).
    options = BenchOptions(
        quick=True, seed=1, trace=FIFTY_JOBS,
        extra={"load_points": "6", "profile_samples": "40"},
    )  # fmt: skip
    result = preemption_bench(options)
    figures = json.loads(json.dumps(result.figures, default=str))
    strategies = {"none", "Kill", "LP", "RB", "LTF", "NTF", "NLTF"}
    for key in ("jct_by_strategy", "qos_recovery_s", "tasks_killed", "jct_worst_by_strategy"):
        assert set(figures[key]) == strategies, key
    assert isinstance(figures["jct_vs_kill"], float) and isinstance(figures["jct_vs_lp"], float)
    assert set(figures["qos_model"]) == {"gbrt", "linear", "elasticnet"}
    assert figures["tasks_killed"]["none"] == 0
    assert [row["strategy"] for row in result.rows] == [
        "none",
        "Kill",
        "LP",
        "RB",
        "LTF",
        "NTF",
        "NLTF",
    ]
