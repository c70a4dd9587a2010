"""Preemption: off by default; when on, a starved queue gets containers back from a
queue running over its share long before that queue's tasks end, and the killed
tasks run again."""

from __future__ import annotations

import pytest

from tests.sim.factories import capacity_leaf, capacity_tree, fair_leaf, fair_tree, job, run
from yarn_adapt.model import CapacitySchedulerConfig, FairSchedulerConfig
from yarn_adapt.sim import JobStatus, PreemptionOptions, SimulationOptions

# A fills the cluster with 1000 s tasks at t=0; B arrives at t=10 in the other queue.
JOBS = [job("A", "a", maps=10, duration=1000), job("B", "b", maps=5, duration=100, submit=10)]

CAPACITY = capacity_tree(
    capacity_leaf("a", 50, 100, user_limit_factor=10.0),
    capacity_leaf("b", 50, 100, user_limit_factor=10.0),
)
FAIR_BY_FAIR_SHARE = fair_tree(
    fair_leaf("a"), fair_leaf("b", other_elements=(("fairSharePreemptionTimeout", "5"),))
)
FAIR_BY_MIN_SHARE = fair_tree(
    fair_leaf("a"),
    fair_leaf(
        "b",
        min_resources=None,
        other_elements=(("minSharePreemptionTimeout", "5"),),
    ),
    defaults=[("defaultFairSharePreemptionTimeout", "100000")],
)


def options(enabled: bool) -> SimulationOptions:
    return SimulationOptions(am_containers=False, preemption=PreemptionOptions(enabled=enabled))


@pytest.mark.parametrize(
    "config", [CAPACITY, FAIR_BY_FAIR_SHARE], ids=["capacity", "fair-share-timeout"]
)
def test_preemption_off_by_default(config: CapacitySchedulerConfig | FairSchedulerConfig) -> None:
    result = run(
        JOBS, config, containers_per_node=10, options=SimulationOptions(am_containers=False)
    )
    start = result.job("B").start_s
    assert start is not None and start >= 1000.0
    assert result.preempted_containers == 0


@pytest.mark.parametrize(
    ("config", "b_done_before"),
    [
        # ProportionalCapacityPreemptionPolicy: one container per 3 s round (10 % of
        # the cluster, 20 % of the excess), each killed 15 s after its marking
        (CAPACITY, 300.0),
        # fair share 5 containers, starved after 5 s, all five killed 15 s later
        (FAIR_BY_FAIR_SHARE, 150.0),
    ],
    ids=["capacity", "fair-share-timeout"],
)
def test_preemption_serves_the_starved_queue(
    config: CapacitySchedulerConfig | FairSchedulerConfig, b_done_before: float
) -> None:
    result = run(JOBS, config, containers_per_node=10, options=options(True))
    b = result.job("B")
    a = result.job("A")
    assert b.finish_s is not None and b.finish_s < b_done_before
    assert result.preempted_containers > 0
    # killed tasks of A run again from the start, so A ends later than 1000 s
    assert a.status is JobStatus.FINISHED
    assert a.finish_s is not None and a.finish_s > 1000.0 + 100.0


def test_capacity_preemption_waits_before_killing() -> None:
    result = run(JOBS, CAPACITY, containers_per_node=10, options=options(True))
    start = result.job("B").start_s
    # first round after B's arrival marks at t=12; the kill comes 15 s later
    assert start is not None and 27.0 <= start < 35.0


def test_capacity_preemption_stops_at_the_ideal_share() -> None:
    result = run(JOBS, CAPACITY, containers_per_node=10, options=options(True))
    # B wants 5 = its guarantee; A never loses more than the 5 B can use
    assert result.preempted_containers <= 5


def test_fair_min_share_preemption() -> None:
    from yarn_adapt.model import Resources
    from yarn_adapt.model.fair import FairResources

    b = fair_leaf(
        "b",
        weight=0.01,  # fair share alone would leave b nearly nothing
        min_resources=FairResources.absolute(Resources(3072, 3)),
        other_elements=(("minSharePreemptionTimeout", "5"),),
    )
    config = fair_tree(fair_leaf("a"), b)
    result = run(JOBS, config, containers_per_node=10, options=options(True))
    assert result.preempted_containers == 3
    start = result.job("B").start_s
    assert start is not None and start < 40.0
