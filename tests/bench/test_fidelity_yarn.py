"""One tiny scenario end to end: real YARN, the logs' timelines, the simulator."""

from __future__ import annotations

import pytest

from yarn_adapt.bench.sim_fidelity.compare import compare
from yarn_adapt.bench.sim_fidelity.real import run_on_cluster
from yarn_adapt.bench.sim_fidelity.scenarios import Scenario, SleepApp, capacity_xml
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.sim.calibration import RECORDED_OVERHEADS, estimate_overheads

pytestmark = pytest.mark.alone  # the RM's timings against the simulator's

TINY = Scenario(
    "tiny",
    "capacity",
    capacity_xml(
        {
            "a": {"capacity": "50", "maximum-capacity": "100", "user-limit-factor": "2"},
            "b": {"capacity": "50", "maximum-capacity": "100", "user-limit-factor": "2"},
        }
    ),
    (SleepApp(0.0, "a", 2, 3.0, 256), SleepApp(1.0, "b", 1, 4.0, 512)),
)


def test_a_tiny_scenario_runs_on_yarn_and_in_the_simulator(capacity_cluster: MiniCluster) -> None:
    run = run_on_cluster(capacity_cluster, TINY)

    assert [real.app.name for real in run.apps] == ["tiny-00", "tiny-01"]
    for real in run.apps:
        assert real.app.queue == f"root.{real.spec.queue}"
        assert real.latency_s > real.spec.sleep_s
        assert real.am_granted_s is not None
        assert real.submitted_s <= real.am_granted_s
        timeline = real.timeline
        assert timeline is not None, f"{real.app.id}: incomplete timeline in the logs"
        assert len(timeline.tasks) == real.spec.containers
        for task in timeline.tasks:
            assert timeline.am_registered_s <= task.granted_s <= task.started_s
            assert task.exited_s - task.started_s >= real.spec.sleep_s
        assert max(t.exited_s for t in timeline.tasks) <= timeline.finished_s
    assert run.cluster.total.memory_mb == capacity_cluster.spec.nm_memory_mb

    measured = estimate_overheads([r.timeline for r in run.apps if r.timeline], 0.5)
    assert 0 < measured.am_startup_s < 30
    assert 0 < measured.container_launch_s < 10
    assert 0 <= measured.am_teardown_s < 10

    for comparison in compare(run, RECORDED_OVERHEADS, seed=1):
        assert comparison.sim_wait_s is not None and comparison.real_wait_s is not None
        assert comparison.rel_err < 0.5, comparison
