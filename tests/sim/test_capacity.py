"""Capacity Scheduler semantics, one small hand-checked scenario per rule."""

from __future__ import annotations

import pytest

from tests.sim.factories import (
    NO_AMS,
    capacity_leaf,
    capacity_tree,
    granted_by,
    job,
    run,
)
from yarn_adapt.model import AbsoluteCapacity, CapacityQueue, QueueState, Resources, Weight
from yarn_adapt.sim import HeartbeatMode, JobStatus, SimulationOptions

CONTINUOUS = SimulationOptions(
    am_containers=False, heartbeat_mode=HeartbeatMode.CONTINUOUS, record_allocations=True
)
WITH_AMS = SimulationOptions(heartbeat_mode=HeartbeatMode.CONTINUOUS, record_allocations=True)


@pytest.mark.parametrize(
    ("maximum", "user_limit_factor", "granted"),
    [
        (50, 10.0, 5),  # no elasticity: maximum = capacity
        (70, 10.0, 7),  # elastic up to maximum-capacity
        (100, 10.0, 10),
        # user-limit-factor 1: one user may pass the queue's capacity by one
        # container only (canAssignToUser checks used > limit before the grant)
        (100, 1.0, 6),
        (100, 2.0, 10),
    ],
)
def test_elasticity_up_to_maximum_capacity(
    maximum: float, user_limit_factor: float, granted: int
) -> None:
    config = capacity_tree(
        capacity_leaf("a", 50, maximum, user_limit_factor=user_limit_factor),
        capacity_leaf("b", 50),
    )
    result = run([job("x", "a", maps=10)], config, containers_per_node=10)
    assert granted_by(result, 5.0) == {"x": granted}


def test_least_served_queue_gets_the_freed_container() -> None:
    # b runs at 5/4 of its guarantee; when b0's container frees at t=50 the next
    # container goes to a (0 % used), not to b2 although b2 asked earlier.
    config = capacity_tree(
        capacity_leaf("a", 20, 100, user_limit_factor=10.0),
        capacity_leaf("b", 80, 100, user_limit_factor=10.0),
    )
    jobs = [
        job("b1", "b", maps=4, duration=100),
        job("b0", "b", maps=1, duration=50),
        job("b2", "b", maps=1, submit=20),
        job("a1", "a", maps=1, submit=30),
    ]
    result = run(jobs, config, options=CONTINUOUS)
    assert result.job("a1").start_s == 50.0
    assert result.job("b2").start_s == 100.0


def test_equal_demand_splits_by_guarantee() -> None:
    config = capacity_tree(
        capacity_leaf("a", 40, 100, user_limit_factor=10.0),
        capacity_leaf("b", 60, 100, user_limit_factor=10.0),
    )
    jobs = [job("x", "a", maps=20), job("y", "b", maps=20)]
    result = run(jobs, config, containers_per_node=10, options=CONTINUOUS)
    assert granted_by(result, 1.0) == {"x": 4, "y": 6}


@pytest.mark.parametrize(
    ("policy", "granted"),
    [("fifo", {"x": 4}), ("fair", {"x": 2, "y": 2})],
)
def test_leaf_ordering_policy(policy: str, granted: dict[str, int]) -> None:
    config = capacity_tree(capacity_leaf("a", 100, ordering_policy=policy))
    jobs = [job("x", "a", maps=10), job("y", "a", maps=10)]
    result = run(jobs, config, containers_per_node=4, options=CONTINUOUS)
    assert granted_by(result, 1.0) == granted


@pytest.mark.parametrize(
    ("minimum_user_limit", "granted"),
    [
        (100.0, {"u1-job": 10}),
        # 50 %: each of two active users is held at half the queue (+1 container)
        (50.0, {"u1-job": 6, "u2-job": 4}),
    ],
)
def test_minimum_user_limit_percent(minimum_user_limit: float, granted: dict[str, int]) -> None:
    config = capacity_tree(capacity_leaf("a", 100, minimum_user_limit_percent=minimum_user_limit))
    jobs = [job("u1-job", "a", maps=10, user="u1"), job("u2-job", "a", maps=10, user="u2")]
    result = run(jobs, config, containers_per_node=10, options=CONTINUOUS)
    assert granted_by(result, 1.0) == granted


@pytest.mark.parametrize(
    ("am_percent", "started_at_once"),
    [
        (0.0, 1),  # too low for any AM: YARN still activates one app per queue
        (0.1, 1),  # 10 % of 10 GiB = one 1 GiB AM
        (0.2, 2),
        (0.5, 4),
    ],
)
def test_maximum_am_resource_percent_limits_running_apps(
    am_percent: float, started_at_once: int
) -> None:
    config = capacity_tree(capacity_leaf("a", 100, maximum_am_resource_percent=am_percent))
    jobs = [job(f"j{i}", "a", maps=1, duration=100) for i in range(4)]
    result = run(jobs, config, containers_per_node=10, options=WITH_AMS)
    starts = sorted(j.start_s or 0.0 for j in result.jobs)
    assert starts[:started_at_once] == [0.0] * started_at_once
    assert all(s >= 100.0 for s in starts[started_at_once:])


def test_global_am_percent_applies_when_queue_sets_none() -> None:
    config = capacity_tree(
        capacity_leaf("a", 100),
        globals_=[("yarn.scheduler.capacity.maximum-am-resource-percent", "0.2")],
    )
    jobs = [job(f"j{i}", "a", maps=1, duration=100) for i in range(4)]
    result = run(jobs, config, containers_per_node=10, options=WITH_AMS)
    assert sum(1 for j in result.jobs if j.start_s == 0.0) == 2


@pytest.mark.parametrize(
    ("state_at", "rejected"),
    [("leaf", {"x"}), ("parent", {"x"}), (None, set())],
)
def test_stopped_queue_refuses_new_apps(state_at: str | None, rejected: set[str]) -> None:
    leaf_state = QueueState.STOPPED if state_at == "leaf" else None
    parent_state = QueueState.STOPPED if state_at == "parent" else None
    stopped_branch = CapacityQueue(
        "root.p",
        capacity=AbsoluteCapacity(Resources(2048, 2)),
        state=parent_state,
        children=(CapacityQueue("root.p.a", capacity=Weight(1), state=leaf_state),),
    )
    config = capacity_tree(stopped_branch, CapacityQueue("root.b", capacity=Weight(1)))
    result = run([job("x", "a"), job("y", "b")], config)
    refused = {j.id for j in result.jobs if j.status is JobStatus.REJECTED}
    assert refused == rejected
    assert all(j.status is JobStatus.FINISHED for j in result.jobs if j.id not in rejected)


def test_unknown_queue_is_rejected_with_a_reason() -> None:
    config = capacity_tree(capacity_leaf("a", 100))
    result = run([job("x", "nope")], config)
    assert result.job("x").status is JobStatus.REJECTED
    assert "nope" in result.job("x").reason


@pytest.mark.parametrize(
    ("capacity", "maximum", "granted"),
    [
        (AbsoluteCapacity(Resources(3072, 3)), AbsoluteCapacity(Resources(3072, 3)), 3),
        (Weight(1), None, 2),  # 1w of 1w+3w = 25 % of 8 containers, maximum 25 %
    ],
)
def test_absolute_and_weight_capacities(
    capacity: AbsoluteCapacity | Weight, maximum: AbsoluteCapacity | None, granted: int
) -> None:
    from yarn_adapt.model import Percentage

    leaf = CapacityQueue(
        "root.a",
        capacity=capacity,
        maximum_capacity=maximum or Percentage(25),
        user_limit_factor=10.0,
    )
    other = CapacityQueue(
        "root.b", capacity=Weight(3) if isinstance(capacity, Weight) else Percentage(0)
    )
    result = run([job("x", "a", maps=8)], capacity_tree(leaf, other), containers_per_node=8)
    assert granted_by(result, 5.0) == {"x": granted}


def test_maximum_applications_refuses_the_excess() -> None:
    config = capacity_tree(
        capacity_leaf("a", 100),
        globals_=[("yarn.scheduler.capacity.maximum-applications", "2")],
    )
    result = run([job(f"j{i}", "a", duration=10) for i in range(3)], config)
    statuses = [j.status for j in result.jobs]
    assert statuses.count(JobStatus.REJECTED) == 1


@pytest.mark.parametrize(
    ("calculator", "granted"),
    [
        ("org.apache.hadoop.yarn.util.resource.DefaultResourceCalculator", 4),  # memory only
        ("org.apache.hadoop.yarn.util.resource.DominantResourceCalculator", 2),
    ],
)
def test_resource_calculator_decides_whether_vcores_count(calculator: str, granted: int) -> None:
    config = capacity_tree(
        capacity_leaf("a", 100),
        globals_=[("yarn.scheduler.capacity.resource-calculator", calculator)],
    )
    two_vcores = Resources(1024, 2)
    result = run(
        [job("x", "a", maps=4, container=two_vcores)],
        config,
        containers_per_node=4,  # 4 GiB, 4 vcores: two 2-vcore containers by vcores
        options=NO_AMS,
    )
    assert granted_by(result, 5.0) == {"x": granted}


def test_the_guarantee_is_floored_to_whole_mib_as_yarn_holds_it() -> None:
    # 66.67 % of 12 GiB is 8192.4 MiB: YARN holds 8192, so with user-limit-factor 1
    # the user limit is 8 containers and the user may go one past it (9); rounding
    # the guarantee up to the 1 GiB allocation would give 9216 and 10 containers
    config = capacity_tree(
        capacity_leaf("a", 66.67, 100, user_limit_factor=1.0), capacity_leaf("b", 33.33)
    )
    result = run([job("x", "a", maps=20)], config, containers_per_node=12, options=CONTINUOUS)
    assert granted_by(result, 1.0) == {"x": 9}


def test_an_app_waiting_for_activation_makes_its_user_active() -> None:
    # the AM limit (10 % of 10 GiB) activates u1's app only; u2's waits with its
    # AM's ask pending, so u2 counts as active: u1's limit is 50 % (5 GiB), which
    # its AM and 4 tasks reach and one task more passes (canAssignToUser)
    config = capacity_tree(
        capacity_leaf("a", 100, maximum_am_resource_percent=0.1, minimum_user_limit_percent=50)
    )
    jobs = [job("u1-job", "a", maps=20, user="u1"), job("u2-job", "a", maps=20, user="u2")]
    result = run(jobs, config, containers_per_node=10, options=WITH_AMS)
    assert granted_by(result, 50.0) == {"u1-job": 5}
