"""The configurator plans on each node's real capacity, never on a total the
co-location guard lowered: the guard's journalled original while the RM reports a
total the guard set, the RM's own total otherwise, minus what the guard reserves for
latency-critical services, never below what the node's containers hold. On the real
mini YARN: the guard lowers a node, and the proposer still reads its whole capacity."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.service.live import live_settings
from yarn_adapt.colocation.actuate import Result, RmNodeTotals
from yarn_adapt.colocation.model import Action, NodeDecision
from yarn_adapt.colocation.originals import NodeOriginal
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.model import ClusterSnapshot, Node, NodeState, Resources
from yarn_adapt.service.backend import Observed, YarnBackend
from yarn_adapt.service.planning import GuardCapacity, OnRealCapacity, planning_nodes
from yarn_adapt.service.proposer import snapshot_proposer
from yarn_adapt.service.records import Suggestion
from yarn_adapt.yarn.apply import PollSettings
from yarn_adapt.yarn.http import HttpSettings
from yarn_adapt.yarn.rm import ResourceManagerClient

WHOLE = Resources(8192, 8)
LOWERED = Resources(2048, 2)


NONE = Resources(0, 0)


def node(node_id: str, total: Resources, used: Resources = NONE) -> Node:
    return Node(node_id, node_id.split(":")[0], "/default", NodeState.RUNNING, total, used)


def lowered_by_guard(node_id: str) -> NodeOriginal:
    return NodeOriginal(node_id, WHOLE, since_s=0.0, last_set=LOWERED)


@pytest.mark.parametrize(
    ("case", "total", "journal", "reserved", "used", "planned"),
    [
        ("never touched by the guard", WHOLE, None, None, Resources(0, 0), WHOLE),
        ("lowered by the guard: its original", LOWERED, "lowered", None, Resources(0, 0), WHOLE),
        ("changed outside the guard: what it has now", Resources(4096, 4), "lowered", None,
         Resources(0, 0), Resources(4096, 4)),
        ("minus what services keep", LOWERED, "lowered", Resources(1024, 1), Resources(0, 0),
         Resources(7168, 7)),
        ("never below what runs there", WHOLE, None, Resources(8192, 8), Resources(3072, 3),
         Resources(3072, 3)),
    ],
)  # fmt: skip
def test_a_node_is_planned_on_its_real_capacity(
    case: str,
    total: Resources,
    journal: str | None,
    reserved: Resources | None,
    used: Resources,
    planned: Resources,
) -> None:
    nodes = [node("a:1", total, used)]
    journalled = {"a:1": lowered_by_guard("a:1")} if journal else {}
    (seen,) = planning_nodes(nodes, journalled, {"a:1": reserved} if reserved else {})
    assert seen.total == planned, case
    assert replace(seen, total=total) == nodes[0]  # nothing else changes


class Seen:
    """The proposer behind the wrapper: records what it was shown."""

    def __init__(self) -> None:
        self.views: list[object] = []

    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        self.views.append(observed.view)
        return None


@pytest.mark.yarn
def test_the_proposer_plans_on_the_capacity_the_guard_lowered_on_the_real_rm(
    colocation_cluster: MiniCluster, tmp_path: Path
) -> None:
    settings = live_settings(
        colocation_cluster, tmp_path, colocation={"enabled": True, "mode": "recommend"}
    )
    assert isinstance(snapshot_proposer(settings), OnRealCapacity)  # the service's proposer
    state_dir = Path(settings.state.dir)
    backend = YarnBackend(settings)
    rm = ResourceManagerClient([colocation_cluster.rm_url], HttpSettings(retries=0))
    with rm:
        actuator = RmNodeTotals(rm, state_dir, verify=PollSettings(timeout_s=15.0))
        first = rm.nodes()[0]
        whole = first.total
        floor = Resources(whole.memory_mb // 4, max(1, whole.vcores // 4))
        decision = NodeDecision(
            node_id=first.id, capacity=whole, current=whole, target=floor, wanted=floor,
            used=Resources(0, 0), reclaim=Resources(0, 0), action=Action.LOWER, reason="test",
        )  # fmt: skip
        try:
            assert actuator.apply(decision).result is Result.DONE
            observed = backend.observe()
            snapshot = observed.view
            assert isinstance(snapshot, ClusterSnapshot)
            assert {n.id: n.total for n in snapshot.nodes}[first.id] == floor  # the RM's view
            seen = Seen()
            OnRealCapacity(seen, GuardCapacity(state_dir / "guard")).propose(observed, frozenset())
            (view,) = seen.views
            assert isinstance(view, ClusterSnapshot)
            assert {n.id: n.total for n in view.nodes} == {n.id: whole for n in snapshot.nodes}
        finally:
            actuator.restore_all()
            backend.close()
