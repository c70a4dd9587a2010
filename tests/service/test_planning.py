"""The configurator plans on each node's real capacity, never on a total the
co-location guard lowered: the guard's journalled original while the RM reports a
total the guard set, the RM's own total otherwise, minus what the guard reserves for
latency-critical services, never below what the node's containers hold. On the real
mini YARN: the guard lowers a node, and the proposer still reads its whole capacity."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from tests.service.factories import settings_for
from tests.service.live import api, live_service, live_settings, reported_capacities
from yarn_adapt.colocation.actuate import Result, RmNodeTotals
from yarn_adapt.colocation.guard import NodeAllowance
from yarn_adapt.colocation.model import Action, GuardMode, NodeDecision, NodeDemand
from yarn_adapt.colocation.originals import NodeOriginal
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.model import (
    CapacitySchedulerConfig,
    ClusterSnapshot,
    Node,
    NodeState,
    Percentage,
    Resources,
)
from yarn_adapt.service.backend import Observed, YarnBackend
from yarn_adapt.service.proposers.choose import snapshot_proposer
from yarn_adapt.service.proposers.planning import (
    GuardCapacity,
    GuardOwned,
    OnRealCapacity,
    no_reservation,
    planning_nodes,
    services_reserved,
)
from yarn_adapt.service.runner import serving
from yarn_adapt.service.service import Service
from yarn_adapt.service.state.records import Suggestion
from yarn_adapt.service.state.store import SqliteJournal
from yarn_adapt.yarn.apply import PollSettings
from yarn_adapt.yarn.confxml import diff_configs, parse_capacity_xml
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


# --------------------------------------------------------------------------- the guard's setting


def test_a_proposal_made_before_the_guard_caps_the_batch_queue_still_applies_and_keeps_the_cap(
    capacity_cluster: MiniCluster, tmp_path: Path
) -> None:
    """The queue-cap actuator owns the batch queue's maximum-capacity: a cap set after a
    proposal was made neither makes the proposal stale nor is undone by applying it
    (or by rolling it back)."""
    service = live_service(capacity_cluster, tmp_path)  # proposes default 20, a 50, b 30
    service.desk.guard_owned = GuardOwned("b")  # [colocation] actuator = "queue-cap", b batch
    assert service.start() == []
    try:
        with serving(service) as server:
            assert server is not None
            reply = api(server.url, "POST", "/api/rounds")
            assert reply.json()["decisions"][0]["kind"] == "proposed", reply.text
            cap_batch_queue(service, 45.0)  # the guard's cycle, between proposal and approval
            assert maximum_of(capacity_cluster, "b") == 45.0
            approved = api(server.url, "POST", "/api/proposals/1/approve")
            assert approved.json()["state"] == "applied", approved.text  # was: superseded
            assert reported_capacities(capacity_cluster)["a"] == 50.0
            assert maximum_of(capacity_cluster, "b") == 45.0  # the cap stays the guard's
            rolled = api(server.url, "POST", "/api/proposals/1/rollback")
            assert rolled.json()["state"] == "rolled-back", rolled.text
            assert reported_capacities(capacity_cluster)["a"] == 30.0
            assert maximum_of(capacity_cluster, "b") == 45.0
    finally:
        service.close()


def cap_batch_queue(service: Service, percent: float) -> None:
    """What the queue-cap actuator writes: b's maximum-capacity, through the service's
    own applier and journal."""
    document = service.backend.document()
    config = document.config
    assert isinstance(config, CapacitySchedulerConfig)
    queue = config.find("root.b")
    assert queue is not None
    capped = config.with_queue(replace(queue, maximum_capacity=Percentage(percent)))
    service.backend.applier(SqliteJournal(service.store)).apply(capped)


def maximum_of(cluster: MiniCluster, queue: str) -> float:
    queues = cluster.rm_get("scheduler")["scheduler"]["schedulerInfo"]["queues"]["queue"]
    return float(next(q for q in queues if q["queueName"] == queue)["maxCapacity"])


def test_the_guards_setting_is_apart_from_the_configurators_changes() -> None:
    base = parse_capacity_xml(CAPACITY_XML).config
    assert isinstance(base, CapacitySchedulerConfig)
    b = base.find("root.b")
    assert b is not None
    capped = base.with_queue(replace(b, maximum_capacity=Percentage(45.0)))
    owned = GuardOwned("b")
    changes = diff_configs(base, capped)
    assert len(changes) == 1 and owned.apart(changes, base) == []
    assert GuardOwned().apart(changes, base) == changes  # the default actuator owns nothing
    a = base.find("root.a")
    assert a is not None
    moved = base.with_queue(replace(a, capacity=Percentage(40.0)))
    assert owned.apart(diff_configs(base, moved), base) == diff_configs(base, moved)
    rebased = owned.rebased(moved, capped)
    assert rebased.find("root.b").maximum_capacity == Percentage(45.0)  # type: ignore[union-attr]
    assert rebased.find("root.a").capacity == Percentage(40.0)  # type: ignore[union-attr]
    grown = base.with_queue(replace(b, capacity=Percentage(60.0)))
    raised = owned.rebased(grown, capped)  # YARN refuses a maximum under the capacity
    assert raised.find("root.b").maximum_capacity == Percentage(60.0)  # type: ignore[union-attr]


CAPACITY_XML = """<configuration>
<property><name>yarn.scheduler.capacity.root.queues</name><value>a,b</value></property>
<property><name>yarn.scheduler.capacity.root.a.capacity</name><value>70</value></property>
<property><name>yarn.scheduler.capacity.root.b.capacity</name><value>30</value></property>
</configuration>"""


def test_what_services_keep_is_the_guards_demand_bound_rounded_up() -> None:
    class LastCycle:
        def allowances(self) -> dict[str, NodeAllowance]:
            def allowance(node_id: str, demand: NodeDemand | None) -> NodeAllowance:
                return NodeAllowance(node_id, WHOLE, LOWERED, LOWERED, demand, 0.0,
                                     GuardMode.AUTO)  # fmt: skip

            return {
                "a:1": allowance("a:1", NodeDemand("a:1", 1.2, 700.5, "observed")),
                "b:1": allowance("b:1", None),  # no demand known: nothing kept back
                "c:1": allowance("c:1", NodeDemand("c:1", math.nan, 1.0, "learned")),
            }

    reserved = services_reserved(LastCycle())()  # type: ignore[arg-type]
    assert reserved == {"a:1": Resources(701, 2)}


def test_the_service_plans_on_what_its_guard_keeps_for_services(tmp_path: Path) -> None:
    settings = settings_for(
        tmp_path,
        yarn={"rm": ["http://127.0.0.1:1"]},
        scheduler={"via": "mutation"},
        colocation={"enabled": True, "mode": "recommend", "demand": "none"},
    )
    proposer = snapshot_proposer(settings)
    assert isinstance(proposer, OnRealCapacity)
    service = Service.build(settings, YarnBackend(settings), proposer, token=None)
    try:
        assert proposer.capacity.reserved is not no_reservation
        assert proposer.capacity.reserved() == {}  # no cycle yet
    finally:
        service.close()
