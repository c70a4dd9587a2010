"""The yarn-adapt service in the cluster co-location simulator: YARN's placement over
the totals the guard sets (never beyond them), the retry row apart, the service's
own settings driving the row, the simulated traces and agent routes."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from preemption.model import NOTHING
from preemption.settings import AgentSection, AgentSettings
from preemption.strategies import Strategy
from tracing.risk import RiskSettings
from yarn_adapt.bench.colocation import (
    frontier,
    policies,
    service_defaults,
    service_guard_spec,
    service_settings,
)
from yarn_adapt.cosim.interference import CoreInterference
from yarn_adapt.cosim.lra_model import Cluster, ClusterModel, ClusterRun, Policy, app_target_ms
from yarn_adapt.cosim.service_guard import (
    SimulatedTraces,
    StepTrace,
    within_target_share,
)
from yarn_adapt.cosim.toposch import (
    YARN,
    NodeState,
    ToposchSettings,
    WaitingContainer,
    place_on_visible,
    place_one,
    schedule,
)
from yarn_adapt.model.resources import Resources
from yarn_adapt.service.settings import ColocationSection, Settings, TracingSection

from .test_lra_model import APP, RECLAIM, _jobs

ONE = Resources(2048, 1)
# interference the agents' low CPU weight does not take away (wake-ups, caches), so the
# service's guard and agents have something to act on
BITING = CoreInterference(cpu=0.3, presence=1.0)
MODEL = ClusterModel(nodes=3, interference=BITING, risk_interval_s=20.0)
LOADS = [100.0, 160.0, 120.0, 100.0] * 3


def _node(node_id: str, free: int, shown: int | None, risk: float = 0.0) -> NodeState:
    visible = None if shown is None else Resources(2048 * shown, shown)
    return NodeState(node_id, Resources(2048 * free, free), risk, False, visible)


@pytest.mark.parametrize(
    ("nodes", "retry", "placed_on"),
    [
        ([_node("a", 4, 0), _node("b", 4, 1)], 0, "b"),  # the first node that shows room
        ([_node("a", 4, 0), _node("b", 4, 0)], 99, None),  # waits, however long it waited
        ([_node("a", 0, 4), _node("b", 4, None)], 0, "b"),  # shown but not free: not there
        ([_node("a", 4, None)], 0, "a"),  # nothing lowered: the real free resources
    ],
)
def test_yarn_places_only_where_the_node_shows_room(
    nodes: list[NodeState], retry: int, placed_on: str | None
) -> None:
    container = WaitingContainer("c", ONE, 0.0, retry)
    placed = place_on_visible(container, nodes, ToposchSettings(nu=0.0, max_retry_time=0))
    assert (placed.node_id if placed else None) == placed_on


def test_algorithm1_retry_places_beyond_what_the_nodes_show() -> None:
    nodes = [_node("a", 4, 0, risk=0.9), _node("b", 4, 0, risk=0.1)]
    container = WaitingContainer("c", ONE, 0.0, retry=1)
    placed = place_one(container, nodes, ToposchSettings(nu=1.0, max_retry_time=1))
    assert placed is not None and placed.reason == "lowest risk after retries"
    yarn = schedule([container], nodes, ToposchSettings(), YARN)
    assert not yarn.placements and yarn.held[0].retry == 2


def _service_policy(name: str, placement: str, base: Settings | None = None) -> Policy:
    settings = service_settings(
        base or Settings(), APP.entry, [s.name for s in APP.services], app_target_ms(MODEL, APP)
    )
    toposch = ToposchSettings(nu=0.0 if placement == "yarn" else 1.0, max_retry_time=1)
    return Policy(name, toposch, agent="service", service=service_guard_spec(settings),
                  placement=placement)  # type: ignore[arg-type]  # fmt: skip


class _Checked(Cluster):
    """Checks after every pass that no node holds more than the total the guard left
    it, unless it held that much before the pass (the guard lowered it below)."""

    def _pass(self) -> None:
        before = {n.node_id: len(n.running) for n in self.nodes}
        capacity = self._capacity()
        self.lowered |= {n for n, total in self.visible_total.items() if total != capacity}
        super()._pass()
        for node in self.nodes:
            placed = len(node.running) > before[node.node_id]
            if placed and not self._used(node).fits_in(self.visible_total[node.node_id]):
                self.placed_beyond.append(node.node_id)

    placed_beyond: list[str]
    lowered: set[str]


def _checked_run(policy: Policy) -> tuple[_Checked, int]:
    cluster = _Checked(MODEL, APP, _jobs(8), LOADS, policy, reclaim=RECLAIM, qos_models={},
                       seed=1)  # fmt: skip
    cluster.placed_beyond, cluster.lowered = [], set()
    run = cluster.run(len(LOADS) * MODEL.node.load_interval_s)
    return cluster, run.beyond_visible


def test_the_service_row_never_places_beyond_the_guards_totals() -> None:
    cluster, counted = _checked_run(_service_policy("yarn-adapt", "yarn"))
    assert cluster.lowered  # the guard lowered nodes while batch was placed
    assert cluster.placed_beyond == [] and counted == 0
    assert cluster.placements and set(cluster.placements) == {"visible"}
    retry, counted = _checked_run(_service_policy("yarn-adapt+retry", "algorithm1"))
    assert retry.placed_beyond and counted >= len(retry.placed_beyond)  # per placement


def test_the_retry_row_is_named_apart() -> None:
    rows = {p.name: p for p in policies(ToposchSettings(), Strategy.NTF,
                                              service_guard_spec(service_defaults()))}  # fmt: skip
    assert rows["yarn-adapt"].placement == "yarn"
    assert rows["yarn-adapt+retry"].placement == "algorithm1"
    assert rows["yarn-adapt"].service == rows["yarn-adapt+retry"].service


def test_the_row_follows_the_services_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    def rounds_and_window() -> tuple[int, float, float]:
        policy = _service_policy("yarn-adapt", "yarn", service_defaults())
        cluster = Cluster(MODEL, APP, [], LOADS[:3], policy, reclaim=RECLAIM, qos_models={},
                          seed=1)  # fmt: skip
        run = cluster.run(30.0)
        assert cluster.service is not None
        return run.guard_rounds, cluster.service.traces.window_s, cluster._agent_interval_s()

    assert rounds_and_window() == (6, TracingSection().window_s, AgentSection().interval_s)
    monkeypatch.setitem(ColocationSection.__init__.__kwdefaults__, "period_s", 10.0)
    monkeypatch.setitem(TracingSection.__init__.__kwdefaults__, "window_s", 20.0)
    assert service_defaults().colocation.period_s == 10.0
    assert rounds_and_window()[:2] == (3, 20.0)


def test_the_agents_poll_the_guards_requests() -> None:
    policy = replace(
        _service_policy("yarn-adapt", "yarn"),
        agents=AgentSettings(agent=AgentSection(interval_s=2.0)),
    )
    cluster = Cluster(MODEL, APP, _jobs(8), LOADS, policy, reclaim=RECLAIM, qos_models={}, seed=1)
    assert cluster._agent_interval_s() == 2.0
    cluster.run(len(LOADS) * MODEL.node.load_interval_s)
    assert cluster.service is not None
    sources = [n.target_source for n in cluster.nodes]
    assert all(s is not None and s.url.endswith(f"/nodes/{n.node_id}/reclaim")
               for s, n in zip(sources, cluster.nodes, strict=True))  # fmt: skip
    # after the horizon the guard stops deciding: its requests expire, the agents get 404
    assert all(s is not None and s.fetch(cluster.now).reclaim == NOTHING for s in sources)
    assert sum(len(n.squeezed) for n in cluster.nodes) > 0


def test_traces_give_risk_path_times_qos_and_tallies() -> None:
    traces = SimulatedTraces(
        {"front": "n1", "db": "n2", "cache": "n3"},
        {"front": 200.0, "db": 400.0, "cache": 100.0},
        entry="front", target_ms=10.0, window_s=10.0, slo_window_s=5.0, percentile=95.0,
        risk_settings=RiskSettings(),
    )  # fmt: skip
    for step in range(40):  # 20 s of half-second steps; those after 10 s count
        at = step * 0.5
        latency = {"front": 2.0, "db": 6.0 if at >= 15 else 3.0, "cache": 1.0}
        traces.record(StepTrace(at, latency, ("front", "db"), latency["front"] + latency["db"],
                                100.0))  # fmt: skip
    reading = traces.read(20.0)
    assert reading.snapshot is not None and reading.snapshot.traces == 19
    paths = {p.node: p.self_us for p in reading.snapshot.path_times}
    assert paths["n1"] == pytest.approx(2000.0) and paths["n2"] > paths["n1"]
    assert "n3" not in paths  # never on the critical path
    (qos,) = reading.qos
    assert qos.latency_ms == pytest.approx(8.0) and qos.requests == 900 and qos.violated is False
    (tally,) = reading.tallies
    assert tally.requests == 1900 and 0 < tally.within_target < tally.requests
    assert traces.read(20.0).tallies == ()  # each request is counted once


def test_within_target_share_is_the_percentile_at_the_target() -> None:
    assert within_target_share(10.0, 10.0, 95.0) == pytest.approx(0.95)
    assert within_target_share(5.0, 10.0, 95.0) == pytest.approx(1 - 0.05**2)
    assert within_target_share(20.0, 10.0, 95.0) == pytest.approx(1 - math.sqrt(0.05))


def _run_of(policy: str, share: float, p95_ms: float) -> ClusterRun:
    return ClusterRun(policy, [p95_ms], {}, 0.0, 10.0, {}, 0, 0, batch_cpu_share=share)


def test_the_frontier_keeps_each_policys_points_nothing_beats() -> None:
    runs = [
        _run_of("a", 0.1, 12.0),
        _run_of("a", 0.2, 15.0),
        _run_of("a", 0.15, 16.0),  # beaten: 0.2 gives more batch at a lower P95
        _run_of("b", 0.3, 30.0),
    ]
    assert frontier(runs, _run_of("alone", 0.0, 10.0)) == {
        "a": [[0.1, 1.2], [0.2, 1.5]],
        "b": [[0.3, 3.0]],
    }
