"""The event core: heartbeats, stages, AM timing, measuring, determinism."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest

from tests.sim.factories import (
    capacity_leaf,
    capacity_tree,
    cluster,
    fair_leaf,
    fair_tree,
    job,
    run,
    workload,
)
from yarn_adapt.model import JobSpec, Resources
from yarn_adapt.sim import (
    ClusterSpec,
    HeartbeatMode,
    JobStatus,
    SimulationOptions,
    latency_stats_by_queue,
    simulate,
)

ONE_QUEUE = capacity_tree(capacity_leaf("a", 100))
CONTINUOUS = SimulationOptions(
    am_containers=False, heartbeat_mode=HeartbeatMode.CONTINUOUS, record_allocations=True
)


def grant_times(result_allocations: tuple[object, ...]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = defaultdict(list)
    for allocation in result_allocations:
        times[allocation.node_id].append(allocation.time_s)  # type: ignore[attr-defined]
    return times


def test_grants_happen_only_at_each_nodes_heartbeats() -> None:
    jobs = [job(f"j{i}", "a", maps=3, duration=7.3, submit=i * 2.1) for i in range(30)]
    options = SimulationOptions(am_containers=False, record_allocations=True, seed=4)
    result = run(jobs, ONE_QUEUE, nodes=4, containers_per_node=2, options=options)
    for times in grant_times(result.allocations).values():
        phases = {round(t % 1.0, 6) for t in times}
        assert len(phases) == 1  # one phase per node: every grant on a heartbeat
    waits = [j.wait_s for j in result.jobs if j.wait_s is not None]
    assert waits and min(waits) > 0


def test_idle_cluster_grants_within_one_heartbeat() -> None:
    options = SimulationOptions(am_containers=False, heartbeat_interval_s=3.0)
    result = run([job("x", "a", submit=10.0)], ONE_QUEUE, nodes=3, options=options)
    wait = result.job("x").wait_s
    assert wait is not None and 0 < wait < 3.0


def test_continuous_mode_grants_at_once() -> None:
    result = run([job("x", "a", submit=10.0)], ONE_QUEUE, options=CONTINUOUS)
    assert result.job("x").start_s == 10.0


@pytest.mark.parametrize(
    ("maps", "containers", "expected_finish"),
    [
        (3, 10, 15.0),  # maps in parallel (10 s), then the reduces (5 s)
        (4, 2, 25.0),  # two waves of maps, then the reduces
    ],
)
def test_reduces_start_when_all_maps_finish(
    maps: int, containers: int, expected_finish: float
) -> None:
    x = job("x", "a", maps=maps, duration=10, reduces=2, reduce_duration=5)
    result = run([x], ONE_QUEUE, containers_per_node=containers, options=CONTINUOUS)
    assert result.job("x").finish_s == expected_finish


def test_job_without_maps_runs_its_reduces() -> None:
    x = job("x", "a", maps=0, reduces=2, reduce_duration=5)
    assert run([x], ONE_QUEUE, options=CONTINUOUS).job("x").finish_s == 5.0


def test_job_without_tasks_ends_when_its_am_starts() -> None:
    empty = JobSpec("x", 3.0, "a", ())
    options = SimulationOptions(heartbeat_mode=HeartbeatMode.CONTINUOUS, am_teardown_s=1.5)
    result = run([empty], ONE_QUEUE, options=options)
    assert (result.job("x").start_s, result.job("x").finish_s) == (3.0, 4.5)


def test_am_startup_and_teardown_are_added() -> None:
    options = SimulationOptions(
        heartbeat_mode=HeartbeatMode.CONTINUOUS, am_startup_s=2.0, am_teardown_s=3.0
    )
    result = run([job("x", "a", duration=10)], ONE_QUEUE, options=options)
    assert (result.job("x").start_s, result.job("x").finish_s) == (0.0, 15.0)


def test_am_occupies_a_container() -> None:
    options = SimulationOptions(heartbeat_mode=HeartbeatMode.CONTINUOUS)
    # 2 containers: the AM takes one, so 3 maps of 10 s run in 3 waves
    result = run([job("x", "a", maps=3, duration=10)], ONE_QUEUE, 1, 2, options)
    assert result.job("x").finish_s == 30.0


@pytest.mark.parametrize(
    ("globals_", "options", "heartbeats"),
    [
        ([], SimulationOptions(am_containers=False), 1),  # up to 100 per heartbeat
        (
            [("yarn.scheduler.capacity.per-node-heartbeat.maximum-container-assignments", "3")],
            SimulationOptions(am_containers=False),
            3,
        ),
        (
            [("yarn.scheduler.capacity.per-node-heartbeat.multiple-assignments-enabled", "false")],
            SimulationOptions(am_containers=False),
            8,
        ),
        # ANY-only requests: maximum-offswitch-assignments (1) per heartbeat
        ([], SimulationOptions(am_containers=False, off_switch_requests=True), 8),
    ],
)
def test_capacity_assignments_per_heartbeat(
    globals_: list[tuple[str, str]], options: SimulationOptions, heartbeats: int
) -> None:
    config = capacity_tree(capacity_leaf("a", 100), globals_=globals_)
    options = SimulationOptions(
        am_containers=False,
        off_switch_requests=options.off_switch_requests,
        record_allocations=True,
    )
    result = run([job("x", "a", maps=8)], config, containers_per_node=8, options=options)
    assert len({a.time_s for a in result.allocations}) == heartbeats


@pytest.mark.parametrize(
    ("options", "per_heartbeat"),
    [
        (SimulationOptions(am_containers=False, record_allocations=True), [1, 1, 1, 1]),
        # dynamic.max.assign: grant until half of what was free is handed out
        (
            SimulationOptions(
                am_containers=False, record_allocations=True, fair_assign_multiple=True
            ),
            [3, 1],
        ),
        (
            SimulationOptions(
                am_containers=False,
                record_allocations=True,
                fair_assign_multiple=True,
                fair_dynamic_max_assign=False,
                fair_max_assign=2,
            ),
            [2, 2],
        ),
    ],
)
def test_fair_assignments_per_heartbeat(
    options: SimulationOptions, per_heartbeat: list[int]
) -> None:
    result = run([job("x", "a", maps=4)], fair_tree(fair_leaf("a")), 1, 4, options)
    counts: dict[float, int] = defaultdict(int)
    for allocation in result.allocations:
        counts[allocation.time_s] += allocation.count
    assert [counts[t] for t in sorted(counts)] == per_heartbeat


def test_requests_are_rounded_up_to_the_minimum_allocation() -> None:
    x = job("x", "a", maps=4, duration=10, container=Resources(1500, 1))
    result = run([x], ONE_QUEUE, 1, 4, CONTINUOUS)  # 4 GiB: two 2 GiB containers
    assert result.job("x").finish_s == 20.0


def test_a_container_that_fits_no_heartbeating_node_goes_where_it_fits() -> None:
    jobs = [
        job("small", "a", duration=1000, container=Resources(1024, 1)),
        job("big", "a", duration=10, submit=5, container=Resources(4096, 4)),
    ]
    options = SimulationOptions(am_containers=False)
    result = run(jobs, ONE_QUEUE, nodes=2, containers_per_node=4, options=options)
    start = result.job("big").start_s
    assert start is not None and start < 5 + 1.0


def test_same_seed_same_result_other_seed_other_phases() -> None:
    jobs = [
        job(f"j{i}", "a", maps=1 + i % 5, duration=3 + i % 7, submit=i * 1.3) for i in range(60)
    ]
    config = capacity_tree(capacity_leaf("a", 100))

    def once(seed: int) -> tuple[object, ...]:
        options = SimulationOptions(seed=seed, record_allocations=True)
        result = simulate(workload(*jobs), config, cluster(3, 4), options)
        return (result.jobs, result.allocations, result.events)

    assert once(7) == once(7)
    assert once(7) != once(8)


def test_horizon_leaves_running_jobs_unfinished() -> None:
    options = SimulationOptions(am_containers=False, horizon_s=50.0)
    result = run(
        [job("short", "a", duration=10), job("long", "a", duration=100)], ONE_QUEUE, options=options
    )
    assert result.job("short").status is JobStatus.FINISHED
    assert result.job("long").status is JobStatus.UNFINISHED
    assert result.job("long").latency_s is None
    assert result.end_s == 50.0


def test_utilisation_is_time_averaged_share_of_capacity() -> None:
    # 5 of 10 containers busy for the whole run: half the memory, half the vcores
    result = run([job("x", "a", maps=5, duration=100)], ONE_QUEUE, 1, 10, CONTINUOUS)
    assert result.utilisation.memory == pytest.approx(0.5)
    assert result.utilisation.vcores == pytest.approx(0.5)


def test_queue_usage_series_and_latency_stats() -> None:
    config = capacity_tree(
        capacity_leaf("a", 50, 100, user_limit_factor=10), capacity_leaf("b", 50)
    )
    jobs = [
        job("x", "a", maps=3, duration=10),
        job("y", "a", duration=30),
        job("z", "b", duration=20),
    ]
    options = SimulationOptions(
        am_containers=False, heartbeat_mode=HeartbeatMode.CONTINUOUS, sample_interval_s=5.0
    )
    result = run(jobs, config, 1, 10, options)
    usage = result.queue_usage["root.a"]
    assert list(usage.times_s[:3]) == [0.0, 5.0, 10.0]
    assert list(usage.memory_mb[:3]) == [0.0, 4096.0, 1024.0]  # x+y, then y alone
    stats = latency_stats_by_queue(result)
    assert stats["root.a"].count == 2
    assert stats["root.a"].mean_s == pytest.approx(20.0)
    assert stats["root.a"].median_s == pytest.approx(20.0)
    assert stats["root.a"].p95_s == pytest.approx(10 + 0.95 * 20)
    assert stats["root.b"].mean_s == pytest.approx(20.0)


def test_empty_queue_has_nan_latency_stats() -> None:
    config = capacity_tree(capacity_leaf("a", 50), capacity_leaf("b", 50))
    stats = latency_stats_by_queue(run([job("x", "a")], config))
    assert stats["root.b"].count == 0 and math.isnan(stats["root.b"].mean_s)


def test_capacity_limits_hold_on_a_busy_mixed_run() -> None:
    config = capacity_tree(
        capacity_leaf("a", 30, 50, user_limit_factor=5),
        capacity_leaf("b", 70, 90, user_limit_factor=5, ordering_policy="fair"),
    )
    jobs = [
        job(f"j{i}", "ab"[i % 2], maps=1 + (i * 7) % 23, duration=5 + i % 11, submit=i * 0.7)
        for i in range(200)
    ]
    options = SimulationOptions(sample_interval_s=1.0)
    result = simulate(workload(*jobs), config, ClusterSpec.of_containers(4, 5), options)
    capacity = 20 * 1024
    assert max(result.queue_usage["root.a"].memory_mb) <= 0.5 * capacity
    assert max(result.queue_usage["root.b"].memory_mb) <= 0.9 * capacity
    assert max(result.cluster_usage.memory_mb) <= capacity
    assert all(j.status is JobStatus.FINISHED for j in result.jobs)


def test_a_container_larger_than_every_node_is_refused() -> None:
    huge = job("huge", "a", container=Resources(8192, 1))
    result = run([huge, job("fine", "a")], ONE_QUEUE, nodes=2, containers_per_node=4)
    assert result.job("huge").status is JobStatus.REJECTED
    assert "fits no node" in result.job("huge").reason
    assert result.job("fine").status is JobStatus.FINISHED
