"""The demo's simulated co-location sources, each through the interface the real one
fills: a node total set through the guard's own actuator makes the simulated
scheduler place fewer batch containers there; the services' latency rises with batch
on their node; their traces, in the in-process store, read by the guard's
TraceStoreRisk, give the QoS and the critical path's nodes; the simulated agents
squeeze what the guard asks and report it in the agent's words."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.service.factories import CONTAINER, demo_file, small_workload
from tracing.memstore import MemoryTraceStore
from tracing.risk import RiskSettings
from yarn_adapt.colocation.actuate import RmNodeTotals
from yarn_adapt.colocation.model import Action, GuardPlan, GuardPolicy, NodeDecision
from yarn_adapt.colocation.observe import TraceStoreRisk
from yarn_adapt.cosim.lc_services import (
    HostModel,
    LcApplication,
    LcService,
    LcTraffic,
    percentile_ms,
    service_p95_ms,
)
from yarn_adapt.model import Resources
from yarn_adapt.service.demo.simcluster import SimulatedCluster
from yarn_adapt.service.demo.simcoloc import SimulatedAgents, SimulatedResourceManager
from yarn_adapt.sim import ClusterSpec
from yarn_adapt.yarn.apply import PollSettings
from yarn_adapt.yarn.confxml import load_scheduler_config

CONFIG = load_scheduler_config(demo_file())
APP = LcApplication(
    LcService("frontend", "node-0001", 2.0),
    (LcService("cart", "node-0002", 10.0),),
    rate_per_s=200.0,
    traced_per_s=20.0,
    target_ms=25.0,
)
WHOLE = CONTAINER * 8


def busy_cluster() -> SimulatedCluster:
    """Two nodes of 8 containers and more work than they hold."""
    return SimulatedCluster(small_workload(40, spacing_s=1.0), ClusterSpec.uniform(2, WHOLE),
                            CONFIG)  # fmt: skip


def lower(rm: SimulatedResourceManager, state_dir: Path, node_id: str, to: Resources) -> None:
    """Through the guard's own actuator (journal, POST, verify)."""
    current = rm.node(node_id).total
    decision = NodeDecision(node_id=node_id, capacity=current, current=current, target=to,
                            wanted=to, used=rm.node(node_id).used, reclaim=Resources(0, 0),
                            action=Action.LOWER, reason="test")  # fmt: skip
    actuator = RmNodeTotals(rm, state_dir, verify=PollSettings(timeout_s=1.0, interval_s=0.01))
    plan = GuardPlan(decided_at_s=0.0, decisions=(decision,), policy=GuardPolicy.SLACK)
    [outcome] = actuator.act(plan).values()
    assert outcome.ok, outcome.status
    assert actuator.pending_nodes() == [node_id]


def test_a_total_set_through_the_guards_actuator_holds_batch_below_it(tmp_path: Path) -> None:
    cluster = busy_cluster()
    rm = SimulatedResourceManager(cluster, APP, {}, started_ms=0)
    lower(rm, tmp_path, "node-0002", CONTAINER * 2)
    assert rm.node("node-0002").total == CONTAINER * 2 and rm.updates == 1
    for _ in range(6):
        cluster.advance(10.0)
        used = cluster.used()
        assert used["node-0002"].memory_mb <= (CONTAINER * 2).memory_mb
        assert used["node-0001"].memory_mb > (CONTAINER * 2).memory_mb
    listed = {node.id: node for node in rm.nodes()}
    assert listed["node-0002"].total == CONTAINER * 2
    assert listed["node-0001"].utilization is not None
    assert listed["node-0001"].utilization.node_cpu > listed["node-0001"].utilization.containers_cpu


def test_a_twin_replays_the_same_totals_at_the_same_times() -> None:
    cluster = busy_cluster()
    cluster.advance(20.0)
    cluster.set_total("node-0002", CONTAINER * 2)
    cluster.advance(40.0)
    twin = SimulatedCluster(small_workload(40, spacing_s=1.0), cluster.cluster, CONFIG,
                            capacity_plan=cluster.capacity_log)  # fmt: skip
    twin.advance(60.0)  # one segment: the change comes inside it, at 20 s
    assert twin.totals()["node-0002"] == CONTAINER * 2
    assert twin.totals(twin.started_s + 10.0)["node-0002"] == WHOLE
    assert twin.used()["node-0002"].memory_mb <= (CONTAINER * 2).memory_mb


@pytest.mark.parametrize("service", APP.services)
def test_a_services_latency_rises_with_batch_on_its_node(service: LcService) -> None:
    host = HostModel()
    alone, half, full = (service_p95_ms(service, APP.rate_per_s, batch, host)
                         for batch in (0.0, 4.0, 8.0))  # fmt: skip
    assert service.service_ms <= alone < half < full
    assert full <= service.service_ms * host.max_latency_factor


def test_traces_in_the_memory_store_give_the_guard_qos_and_the_critical_path() -> None:
    store = MemoryTraceStore()
    traffic = LcTraffic(APP, HostModel(), seed=1)
    start_us = 1_700_000_000_000_000
    batch = {"node-0002": 8.0}
    traces = traffic.traces(start_us, start_us + 60_000_000, batch)
    assert len(traces) == 60 * 20
    store.write_spans([span for trace in traces for span in trace])
    risk = TraceStoreRisk(lambda: store, window_s=60.0, risk_settings=RiskSettings(),
                          targets_ms={"frontend": 25.0}, slo_window_s=30.0)  # fmt: skip
    reading = risk.read(start_us / 1e6 + 60.0)
    assert reading.problem == ""
    [qos] = reading.qos
    assert (qos.application, qos.target_ms, qos.requests) == ("frontend", 25.0, 600)
    expected = percentile_ms([(t[0].end_us - t[0].start_us) / 1000 for t in traces[-600:]])
    assert qos.latency_ms == pytest.approx(expected, rel=0.05)
    assert set(qos.nodes) == {"node-0001", "node-0002"}
    assert reading.snapshot is not None
    cart = service_p95_ms(APP.callees[0], APP.rate_per_s, 8.0, HostModel())
    assert cart > service_p95_ms(APP.entry, APP.rate_per_s, 0.0, HostModel())


def test_the_same_seed_gives_the_same_traces() -> None:
    def draw(seed: int) -> list[tuple[int, int]]:
        traces = LcTraffic(APP, HostModel(), seed).traces(0, 5_000_000, {"node-0002": 4.0})
        return [(s.start_us, s.end_us) for t in traces for s in t]

    assert draw(3) == draw(3) and draw(3) != draw(4)


class _Guard:
    def __init__(self, requests: dict[str, object]) -> None:
        self.requests = requests

    def reclaim_for(self, node_id: str) -> object:
        return self.requests.get(node_id)


class _Step:
    """What the agents use of a GuardStep: the guard's requests, the report path."""

    def __init__(self, requests: dict[str, object]) -> None:
        self.guard = _Guard(requests)
        self.reports: dict[str, list[str]] = {}

    def note_agent_report(self, node: str, report: object) -> None:
        self.reports[node] = list(report.lines)  # type: ignore[attr-defined]


def test_agents_squeeze_what_the_guard_asks_and_report_it() -> None:
    from yarn_adapt.colocation.guard import ReclaimRequest

    cluster = busy_cluster()
    cluster.advance(30.0)
    used = cluster.used()
    request = ReclaimRequest("node-0002", 7, 3000, 0, ttl_s=60.0, decided_at_s=100.0)
    step = _Step({"node-0002": request})
    agents = SimulatedAgents()
    agents.act(step, cluster, now_s=110.0)  # type: ignore[arg-type]
    assert agents.squeezed_cores == {"node-0001": 0.0,
                                     "node-0002": min(3.0, used["node-0002"].vcores)}  # fmt: skip
    squeeze = next(line for line in step.reports["node-0002"] if line.startswith("squeeze:"))
    assert "desired 3000m" in squeeze and "reclaimed 3000m" in squeeze
    assert any("desired 0m" in line for line in step.reports["node-0001"])
    step.guard.requests.clear()  # the guard asks nothing now (or its request expired)
    agents.act(step, cluster, now_s=200.0)  # type: ignore[arg-type]
    assert agents.squeezed_cores["node-0002"] == 0.0
