"""The simulator mechanisms the fidelity bench needed, each on a hand-checked case:
out-of-band NodeManager heartbeats, AM allocate calls with stale asks (surplus
containers), and the Capacity Scheduler's head-of-line blocking at a queue limit."""

from __future__ import annotations

import pytest

from tests.sim.factories import capacity_leaf, capacity_tree, job, workload
from yarn_adapt.errors import SettingsError
from yarn_adapt.model import Resources
from yarn_adapt.sim import ClusterSpec, SimulationOptions, simulate

ONE_CONTAINER_NODE = ClusterSpec.of_containers(1, 1, Resources(1024, 1))
TWO_QUEUES = capacity_tree(
    capacity_leaf("a", 50, 50),
    capacity_leaf("b", 50, 100),
    globals_=[("yarn.scheduler.capacity.maximum-am-resource-percent", "0.5")],
)


def first_grant_phase(options: SimulationOptions) -> float:
    """When the single node first heartbeats (the seed draws its phase)."""
    probe = simulate(workload(job("p", "b", 1, 1.0)), TWO_QUEUES, ONE_CONTAINER_NODE, options)
    start = probe.jobs[0].start_s
    assert start is not None
    return start


@pytest.mark.parametrize(
    ("out_of_band", "gap"),
    [(True, 0.0), (False, 0.7)],  # 5.3 s task: the next regular heartbeat is 0.7 s on
)
def test_a_container_end_frees_the_node_at_once_only_out_of_band(
    out_of_band: bool, gap: float
) -> None:
    options = SimulationOptions(
        am_containers=False, heartbeat_interval_s=1.0, out_of_band_heartbeats=out_of_band
    )
    phase = first_grant_phase(options)
    jobs = workload(job("first", "b", 1, 5.3), job("second", "b", 1, 5.0, submit=0.01))
    result = simulate(jobs, TWO_QUEUES, ONE_CONTAINER_NODE, options)
    second = next(j for j in result.jobs if j.id == "second")
    assert second.start_s == pytest.approx(phase + 5.3 + gap)


def ds_options(am_calls: float | None) -> SimulationOptions:
    return SimulationOptions(
        heartbeat_interval_s=0.5,
        off_switch_requests=True,  # one grant per heartbeat, as for distributed shell
        am_allocate_interval_s=am_calls,
        record_allocations=True,
        seed=3,
    )


BIG_NODE = ClusterSpec.uniform(1, Resources(8192, 8), minimum_allocation=Resources(256, 1))


def test_stale_asks_grant_surplus_containers_that_are_released() -> None:
    """Grants every 0.5 s, AM calls every 1.2 s from its first ask (AM startup 0):
    2 tasks granted before call 1, 2 more before call 2; call 2 re-sends the ask as
    of call 1 (4 - 2 = 2), so the RM grants 2 surplus containers, released by the
    call after the one that returns them."""
    four_tasks = workload(job("ds", "b", 4, 20.0, container=Resources(512, 1)))
    exact = simulate(four_tasks, TWO_QUEUES, BIG_NODE, ds_options(None))
    stale = simulate(four_tasks, TWO_QUEUES, BIG_NODE, ds_options(1.2))
    granted = sum(a.count for a in stale.allocations if not a.is_am)
    assert granted == 6
    assert sum(a.count for a in exact.allocations if not a.is_am) == 4
    assert stale.jobs == exact.jobs  # a lone app's own times do not change


def test_surplus_containers_take_grants_from_the_next_app() -> None:
    """The surplus asks (added at the AM's second call) come before a later app of
    the same leaf, and each takes a heartbeat's one grant: the later app's AM
    container comes two heartbeats late."""
    phase = (
        simulate(workload(job("p", "b", 1, 1.0)), TWO_QUEUES, BIG_NODE, ds_options(None))
        .jobs[0]
        .start_s
    )
    assert phase is not None
    jobs = workload(
        job("ds", "b", 4, 20.0, container=Resources(512, 1)),
        job("later", "b", 1, 20.0, submit=phase + 2.45, container=Resources(512, 1)),
    )
    exact = {j.id: j for j in simulate(jobs, TWO_QUEUES, BIG_NODE, ds_options(None)).jobs}
    stale = {j.id: j for j in simulate(jobs, TWO_QUEUES, BIG_NODE, ds_options(1.2)).jobs}
    assert exact["later"].start_s == pytest.approx(phase + 2.5)
    assert stale["later"].start_s == pytest.approx(phase + 3.5)


def test_am_call_interval_must_be_positive() -> None:
    with pytest.raises(SettingsError, match="am_allocate_interval_s"):
        SimulationOptions(am_allocate_interval_s=0.0)


def test_an_ask_over_the_queue_limit_blocks_later_apps_of_the_leaf() -> None:
    """Queue a may use 2 GiB. "big" (2 GiB) cannot start while "holder" (1 GiB)
    runs; "small" (512 MiB) would fit, but the Capacity Scheduler returns from the
    leaf at the first app its headroom refuses, so small waits behind big."""
    cluster = ClusterSpec.uniform(1, Resources(4096, 4), minimum_allocation=Resources(512, 1))
    options = SimulationOptions(am_containers=False, heartbeat_interval_s=1.0)
    jobs = workload(
        job("holder", "a", 1, 50.0, container=Resources(1024, 1)),
        job("big", "a", 1, 10.0, submit=1.0, container=Resources(2048, 1)),
        job("small", "a", 1, 10.0, submit=2.0, container=Resources(512, 1)),
    )
    result = {j.id: j for j in simulate(jobs, TWO_QUEUES, cluster, options).jobs}
    holder_end = result["holder"].finish_s
    big_start, small_start = result["big"].start_s, result["small"].start_s
    assert holder_end is not None and big_start is not None and small_start is not None
    assert big_start >= holder_end
    assert small_start >= holder_end
