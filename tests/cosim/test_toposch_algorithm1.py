"""Algorithm 1 (TopoSch §4.2.2) on the paper's cases: visibility, retry, locality,
lowest-risk node, zero-violation, and bad risk; the pass's shortcut against offering
every container."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from yarn_adapt.cosim.toposch import (
    ALGORITHM1,
    YARN,
    Algorithm1Placement,
    NodeState,
    Placer,
    SchedulePass,
    ToposchSettings,
    WaitingContainer,
    schedule,
    visible_available,
)
from yarn_adapt.errors import InputError
from yarn_adapt.model.resources import Resources
from yarn_adapt.sim.hooks import PlacementRequest

ONE = Resources(1024, 1)


def node(name: str, vcores: int, risk: float, **kw: object) -> NodeState:
    return NodeState(name, Resources(1024 * vcores, vcores), risk, **kw)  # type: ignore[arg-type]


def test_visible_is_real_times_one_minus_nu_risk() -> None:
    settings = ToposchSettings(nu=0.5)
    assert visible_available(node("a", 8, 0.5), settings) == Resources(6144, 6)
    assert visible_available(node("a", 8, 1.0), ToposchSettings(nu=2.0)) == Resources(0, 0)
    assert visible_available(node("a", 8, 1.0), ToposchSettings(nu=0.0)) == Resources(8192, 8)


def test_container_goes_to_first_node_whose_visible_resources_cover_it() -> None:
    nodes = [node("risky", 4, 1.0), node("calm", 4, 0.2)]
    result = schedule([WaitingContainer("c1", ONE, 0.0)], nodes, ToposchSettings())
    assert [(p.node_id, p.reason) for p in result.placements] == [("calm", "visible")]


def test_held_back_until_max_retry_time_then_lowest_risk_node() -> None:
    # every node too risky to show a vcore: held once, then placed on the calmest
    nodes = [node("a", 2, 0.9), node("b", 2, 0.6), node("c", 2, 0.8)]
    settings = ToposchSettings(nu=1.0, max_retry_time=1)
    first = schedule([WaitingContainer("c1", ONE, 0.0)], nodes, settings)
    assert first.placements == () and first.held[0].retry == 1
    second = schedule(first.held, nodes, settings)
    assert [(p.node_id, p.reason) for p in second.placements] == [
        ("b", "lowest risk after retries")
    ]


def test_locality_is_kept_after_retries_even_on_a_risky_node() -> None:
    nodes = [node("calm", 2, 0.6), node("data", 2, 1.0)]
    container = WaitingContainer("c1", ONE, 0.0, retry=1, local_nodes=("data",))
    result = schedule([container], nodes, ToposchSettings(max_retry_time=1))
    assert [(p.node_id, p.reason) for p in result.placements] == [
        ("data", "locality after retries")
    ]
    # before its retries run out the local node is not forced
    early = schedule(
        [WaitingContainer("c2", ONE, 0.0, local_nodes=("data",))],
        nodes,
        ToposchSettings(max_retry_time=1),
    )
    assert early.placements == ()


def test_local_node_first_when_visible() -> None:
    nodes = [node("other", 4, 0.0), node("data", 4, 0.0)]
    container = WaitingContainer("c1", ONE, 0.0, local_nodes=("data",))
    assert schedule([container], nodes, ToposchSettings()).placements[0].node_id == "data"


def test_longest_waiting_first_and_real_resources_consumed() -> None:
    nodes = [node("a", 1, 0.0)]
    queue = [WaitingContainer("young", ONE, 5.0), WaitingContainer("old", ONE, 1.0)]
    result = schedule(queue, nodes, ToposchSettings(max_retry_time=0))
    assert [p.container_id for p in result.placements] == ["old"]
    assert [c.id for c in result.held] == ["young"]


def test_zero_violation_hides_the_node_whole() -> None:
    nodes = [node("a", 8, 0.0, qos_violated=True), node("b", 8, 0.0)]
    settings = ToposchSettings(zero_violation=True)
    assert visible_available(nodes[0], settings) == Resources(0, 0)
    assert schedule([WaitingContainer("c", ONE, 0.0)], nodes, settings).placements[0].node_id == "b"


def test_guard_visibility_replaces_the_linear_rule() -> None:
    guarded = node("a", 8, 1.0, visible=Resources(2048, 2))
    assert visible_available(guarded, ToposchSettings(nu=1.0)) == Resources(2048, 2)


def test_nan_risk_and_bad_settings_are_one_line_errors() -> None:
    with pytest.raises(InputError, match="risk nan"):
        node("a", 2, math.nan)
    with pytest.raises(InputError, match="nu"):
        ToposchSettings(nu=-1.0)


class _View:
    def __init__(self, free: dict[str, Resources]) -> None:
        self._free = free

    @property
    def node_ids(self) -> list[str]:
        return list(self._free)

    def free(self, node_id: str) -> Resources:
        return self._free[node_id]

    def fits(self, node_id: str, resources: Resources) -> bool:
        return resources.fits_in(self._free[node_id])


def test_placement_policy_declines_then_picks_lowest_risk() -> None:
    risk = {"n0": 1.0, "n1": 0.7}
    policy = Algorithm1Placement(lambda: risk, ToposchSettings(max_retry_time=1))
    view = _View({"n0": Resources(2048, 2), "n1": Resources(2048, 2)})
    request = PlacementRequest("job_1", "root.a", ONE, False)
    rng = random.Random(0)
    assert policy.choose_node(request, "n0", view, rng) is None
    assert policy.choose_node(request, "n0", view, rng) == "n1"
    risk["n1"] = 0.0
    assert policy.choose_node(request, "n0", view, rng) == "n1"


def test_algorithm1_in_the_engine_keeps_batch_off_the_risky_node() -> None:
    from tests.sim.factories import CONTAINER, capacity_leaf, capacity_tree, job, workload
    from yarn_adapt.sim import ClusterSpec, SimulationHooks, SimulationOptions, simulate

    cluster = ClusterSpec.of_containers(3, 4, CONTAINER)
    risky = cluster.nodes[0].id
    risk = {n.id: (1.0 if n.id == risky else 0.0) for n in cluster.nodes}
    policy = Algorithm1Placement(lambda: risk, ToposchSettings(nu=1.0, max_retry_time=10_000))
    jobs = [job(f"j{i}", "root.a", maps=4, duration=20.0, submit=float(i)) for i in range(6)]
    options = SimulationOptions(
        am_containers=False, record_allocations=True, hooks=SimulationHooks(placement=policy)
    )
    result = simulate(workload(*jobs), capacity_tree(capacity_leaf("a", 100)), cluster, options)
    assert all(j.finish_s is not None for j in result.jobs)
    nodes = {a.node_id for a in result.allocations}
    assert risky not in nodes and len(nodes) == 2


def one_by_one(
    queue: list[WaitingContainer], nodes: list[NodeState], settings: ToposchSettings, placer: Placer
) -> SchedulePass:
    """The pass without its shortcut: every container is offered to the nodes."""
    free = {n.node_id: n for n in nodes}
    placements, held = [], []
    for container in sorted(queue, key=lambda c: c.waiting_since_s):
        placed = placer.place(container, [free[n.node_id] for n in nodes], settings)
        if placed is None:
            held.append(replace(container, retry=container.retry + 1))
            continue
        placements.append(placed)
        taken, node = container.request, free[placed.node_id]
        visible = None if node.visible is None else (node.visible - taken).clamped()
        free[placed.node_id] = replace(node, available=node.available - taken, visible=visible)
    return SchedulePass(tuple(placements), tuple(held))


@pytest.mark.parametrize("placer", [ALGORITHM1, YARN], ids=["algorithm1", "yarn"])
def test_the_pass_holds_what_no_node_has_room_for_as_offering_each_container_would(
    placer: Placer,
) -> None:
    """A request no node had room for is not offered again in the pass (nor a larger
    one): the result is the one-by-one pass's, on full and half-full clusters, mixed
    sizes, retries past the limit, locality and visible totals below the real room."""
    rng = random.Random(11)
    sizes = [Resources(1024, 1), Resources(2048, 1), Resources(1024, 2), Resources(3072, 3)]
    for _ in range(300):
        nodes = []
        for index in range(rng.randint(1, 5)):
            vcores = rng.randint(0, 4)
            real = Resources(1024 * vcores + rng.choice((0, 512)), vcores)
            shown = rng.choice([None, Resources(1024 * rng.randint(0, 4), rng.randint(0, 4))])
            nodes.append(NodeState(f"n{index}", real, rng.random(), rng.random() < 0.2, shown))
        queue = [
            WaitingContainer(
                f"c{index}",
                rng.choice(sizes),
                rng.uniform(0, 10),
                rng.randint(0, 3),
                tuple(n.node_id for n in nodes if rng.random() < 0.3),
            )
            for index in range(rng.randint(0, 25))
        ]
        settings = ToposchSettings(nu=rng.choice((0.0, 0.5, 1.0)), max_retry_time=2,
                                   zero_violation=rng.random() < 0.5)  # fmt: skip
        assert schedule(queue, nodes, settings, placer) == one_by_one(
            queue, nodes, settings, placer
        )
