"""The simulated cluster carries its state from one segment to the next: replayed
in segments it gives what one whole run gives (exactly when the cluster is light,
within a few percent when jobs queue, as heartbeat phases restart per segment)."""

from __future__ import annotations

import pytest

from tests.service.factories import CONTAINER, demo_file, small_workload, with_capacities
from yarn_adapt.service.demo.simcluster import SimulatedCluster
from yarn_adapt.sim import ClusterSpec, latency_stats, simulate
from yarn_adapt.yarn.confxml import load_scheduler_config

CONFIG = load_scheduler_config(demo_file())


def replay_in_segments(nodes: int, jobs: int, segment_s: float) -> SimulatedCluster:
    cluster = SimulatedCluster(
        small_workload(jobs, spacing_s=10.0), ClusterSpec.uniform(nodes, CONTAINER * 8), CONFIG
    )
    while not cluster.done:
        cluster.advance(segment_s)
    return cluster


@pytest.mark.parametrize(("nodes", "tolerance"), [(8, 1e-9), (1, 0.05)])
def test_segments_reproduce_the_whole_run(nodes: int, tolerance: float) -> None:
    whole = simulate(
        small_workload(40, spacing_s=10.0), CONFIG, ClusterSpec.uniform(nodes, CONTAINER * 8)
    )
    segmented = replay_in_segments(nodes, 40, 45.0)
    assert len(segmented.finished) == 40
    expected = latency_stats(whole.jobs).mean_s
    assert latency_stats(segmented.finished).mean_s == pytest.approx(expected, rel=tolerance)


def test_a_configuration_loaded_between_segments_applies_from_then_on() -> None:
    nodes = ClusterSpec.uniform(1, CONTAINER * 8)
    cluster = SimulatedCluster(small_workload(30, spacing_s=5.0), nodes, CONFIG)
    cluster.advance(60.0)
    running_before = len(cluster.view().start.jobs)
    assert running_before > 0
    cluster.load(with_capacities(CONFIG, q1=90, q2=10))
    while not cluster.done:
        cluster.advance(60.0)
    assert len(cluster.finished) == 30
    assert cluster.elapsed_s > 60.0
