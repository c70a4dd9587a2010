"""Each seam is honoured: batch-visible node capacity, placement, LRAs beside batch."""

from __future__ import annotations

import random

import pytest

from tests.sim.factories import capacity_leaf, capacity_tree, job, run
from yarn_adapt.model import Resources
from yarn_adapt.sim import (
    CapacityChange,
    ClusterView,
    FixedLongRunning,
    HeartbeatMode,
    LongRunningContainer,
    PlacementRequest,
    ScheduledNodeCapacity,
    SimulationHooks,
    SimulationOptions,
)

ONE_QUEUE = capacity_tree(capacity_leaf("a", 100))
NODE = "node-0001"


def continuous(hooks: SimulationHooks, **fields: object) -> SimulationOptions:
    return SimulationOptions(
        am_containers=False,
        heartbeat_mode=HeartbeatMode.CONTINUOUS,
        record_allocations=True,
        hooks=hooks,
        **fields,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("provider", "x_finish", "y_finish"),
    [
        (ScheduledNodeCapacity(), 10.0, 20.0),  # whole node: x in one wave, y at once
        # batch sees half the node from the start: x needs two waves
        (ScheduledNodeCapacity(initial=((NODE, Resources(2048, 2)),)), 20.0, 30.0),
        # shrunk to one container at t=5: running x keeps its containers, y then
        # gets one container at a time
        (
            ScheduledNodeCapacity(changes=(CapacityChange(5.0, NODE, Resources(1024, 1)),)),
            10.0,
            30.0,
        ),
    ],
)
def test_node_capacity_provider_limits_what_batch_sees(
    provider: ScheduledNodeCapacity, x_finish: float, y_finish: float
) -> None:
    jobs = [job("x", "a", maps=4, duration=10), job("y", "a", maps=2, duration=10, submit=6)]
    options = continuous(SimulationHooks(node_capacity=provider))
    result = run(jobs, ONE_QUEUE, 1, 4, options)
    assert (result.job("x").finish_s, result.job("y").finish_s) == (x_finish, y_finish)


class PackFirstNode:
    """Places every container on the first node (by id) where it fits."""

    def choose_node(
        self,
        request: PlacementRequest,
        heartbeat_node: str,
        cluster: ClusterView,
        rng: random.Random,
    ) -> str | None:
        return next((n for n in cluster.node_ids if cluster.fits(n, request.resources)), None)


class Decline:
    def choose_node(
        self,
        request: PlacementRequest,
        heartbeat_node: str,
        cluster: ClusterView,
        rng: random.Random,
    ) -> str | None:
        return None


def test_placement_policy_chooses_the_node() -> None:
    jobs = [job(f"j{i}", "a", duration=1000, submit=i * 10.0) for i in range(5)]
    options = SimulationOptions(
        am_containers=False,
        record_allocations=True,
        seed=11,
        hooks=SimulationHooks(placement=PackFirstNode()),
    )
    result = run(jobs, ONE_QUEUE, nodes=4, containers_per_node=2, options=options)
    nodes = [a.node_id for a in result.allocations]
    assert nodes == ["node-0001", "node-0001", "node-0002", "node-0002", "node-0003"]


def test_default_placement_uses_the_heartbeating_nodes() -> None:
    jobs = [job(f"j{i}", "a", duration=1000, submit=i * 10.0) for i in range(5)]
    options = SimulationOptions(am_containers=False, record_allocations=True, seed=11)
    result = run(jobs, ONE_QUEUE, nodes=4, containers_per_node=2, options=options)
    assert len({a.node_id for a in result.allocations}) > 2


def test_declining_placement_grants_nothing() -> None:
    options = SimulationOptions(
        am_containers=False, horizon_s=100.0, hooks=SimulationHooks(placement=Decline())
    )
    result = run([job("x", "a")], ONE_QUEUE, options=options)
    assert result.job("x").start_s is None


def lras(*items: LongRunningContainer) -> SimulationHooks:
    return SimulationHooks(long_running=FixedLongRunning(items))


def test_long_running_containers_take_node_resources() -> None:
    service = LongRunningContainer("svc", NODE, Resources(2048, 2), 0.0, 50.0)
    result = run([job("x", "a", maps=4, duration=10)], ONE_QUEUE, 1, 4, continuous(lras(service)))
    assert result.job("x").finish_s == 20.0  # two waves beside the service


def test_waiting_long_running_container_goes_before_batch() -> None:
    # the node is full of x when the service arrives at t=5; when x ends at t=10 the
    # service takes the node, and y (t=6) waits for the service to end at t=50
    service = LongRunningContainer("svc", NODE, Resources(2048, 2), 5.0, 50.0)
    jobs = [job("x", "a", maps=2, duration=10), job("y", "a", duration=10, submit=6)]
    result = run(jobs, ONE_QUEUE, 1, 2, continuous(lras(service)))
    assert result.job("y").start_s == 50.0


def test_waiting_long_running_container_is_served_at_a_heartbeat() -> None:
    service = LongRunningContainer("svc", NODE, Resources(2048, 2), 5.0, 50.0)
    jobs = [job("x", "a", maps=2, duration=10), job("y", "a", duration=10, submit=6)]
    options = SimulationOptions(am_containers=False, hooks=lras(service))
    result = run(jobs, ONE_QUEUE, 1, 2, options)
    start = result.job("y").start_s
    assert start is not None and 50.0 <= start < 51.0


def test_hooks_naming_unknown_nodes_are_refused() -> None:
    from yarn_adapt.errors import SettingsError

    service = LongRunningContainer("svc", "nowhere", Resources(1024, 1), 0.0)
    with pytest.raises(SettingsError, match="nowhere"):
        run([job("x", "a")], ONE_QUEUE, options=continuous(lras(service)))
