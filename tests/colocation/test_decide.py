"""The visibility decision of the ``toposch-paper`` policy on table cases: risk and nu,
demand, floors, zero-violation, the dead-band, step limits and cool-down, and bad or
stale risk data. (The default ``slack`` policy: ``test_slack.py``; the safety steps
are the same code.)"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace

import pytest

from tests.colocation.factories import NOW_S, demand, inputs, node, qos, risk
from yarn_adapt.colocation.decide import decide, decide_node
from yarn_adapt.colocation.model import (
    Action,
    GuardInputs,
    GuardPolicy,
    GuardSettings,
    NodeMemory,
    NodeView,
)
from yarn_adapt.model import Resources
from yarn_adapt.service.guard.build import decision_settings
from yarn_adapt.service.settings import ColocationSection

R = Resources
FULL = R(8192, 8)


def paper(**settings: object) -> GuardSettings:
    """Settings of the published TopoSch policy (the default policy is slack)."""
    return GuardSettings(policy=GuardPolicy.TOPOSCH_PAPER, **settings)  # type: ignore[arg-type]


NOTHING = R(0, 0)


@dataclass(frozen=True)
class Case:
    name: str
    risk: float | None  # None: the snapshot has no entry for the node
    expected: Resources
    action: Action
    reason: str  # a fragment the reason must contain
    settings: GuardSettings = field(default_factory=paper)
    total: Resources = FULL
    used: Resources = NOTHING
    demand_vcores: float | None = None
    demand_mb: float = 0.0
    lowered_ago_s: float | None = None
    qos_latency_ms: float | None = None
    raw: float | None = None  # the raw risk (before normalising); None: above the gate


NO_FLOOR = paper(min_visible_fraction=0.0, min_total_memory_mb=0, min_total_vcores=0)
QUARTER = R(2048, 2)  # the default floor of an 8 GB / 8 vcore node

CASES = [
    Case("no risk: whole node", 0.0, FULL, Action.HOLD, "reserve 0%"),
    Case("full risk, nu 1: down to the floor", 1.0, QUARTER, Action.LOWER, "floor 25%"),
    Case("full risk without a floor: nothing visible", 1.0, R(0, 0), Action.LOWER,
         "reserve 100%", NO_FLOOR),
    Case("half risk", 0.5, R(4096, 4), Action.LOWER, "risk 0.50 x nu 1"),
    Case("nu*R clipped to 1", 0.5, QUARTER, Action.LOWER, "reserve 100%",
         paper(nu=3.0)),
    Case("nu 0 switches the guard off", 0.9, FULL, Action.HOLD, "reserve 0%",
         paper(nu=0.0)),
    Case("small nu", 0.5, R(6144, 6), Action.LOWER, "reserve 25%", paper(nu=0.5)),
    Case("demand caps visibility", 0.0, R(6144, 5), Action.LOWER, "demand 3.00 vcores",
         demand_vcores=3.0, demand_mb=2048.0),
    Case("the lower of risk and demand", 0.25, R(6144, 5), Action.LOWER, "demand",
         demand_vcores=3.0, demand_mb=1024.0),
    Case("demand above capacity: down to the floor", 0.0, QUARTER, Action.LOWER, "floor",
         demand_vcores=12.0, demand_mb=9000.0),
    Case("non-finite demand is ignored", 0.0, FULL, Action.HOLD, "demand ignored",
         demand_vcores=math.nan),
    Case("floor keeps some for batch", 1.0, R(2048, 2), Action.LOWER, "floor 25%",
         paper(min_visible_fraction=0.25)),
    Case("floor rounds up", 1.0, R(820, 1), Action.LOWER, "floor",
         paper(min_visible_fraction=0.1, min_total_memory_mb=512)),
    Case("never below the RM's minimum allocation (it shuts a NodeManager with less down)",
         1.0, R(1024, 1), Action.LOWER, "at least the RM's minimum allocation 1024 MB / 1",
         paper(min_visible_fraction=0.1)),
    Case("zero-violation: nothing new while QoS is missed", 0.0, R(4096, 4), Action.LOWER,
         "zero-violation", paper(zero_violation=True), used=R(4096, 4),
         qos_latency_ms=250.0),
    Case("zero-violation never goes below the floor", 0.0, R(4096, 4), Action.LOWER,
         "floor 50%", paper(zero_violation=True, min_visible_fraction=0.5),
         qos_latency_ms=250.0),
    Case("zero-violation on an idle node keeps the default floor", 0.0, QUARTER, Action.LOWER,
         "zero-violation", paper(zero_violation=True), qos_latency_ms=250.0),
    Case("zero-violation: QoS met, no effect", 0.0, FULL, Action.HOLD, "reserve 0%",
         paper(zero_violation=True), qos_latency_ms=80.0),
    Case("zero-violation off: a miss changes nothing", 0.0, FULL, Action.HOLD, "reserve 0%",
         qos_latency_ms=250.0),
    Case("dead-band skips a small change", 0.1, FULL, Action.HOLD, "dead-band",
         paper(dead_band_fraction=0.2)),
    Case("dead-band never blocks giving the node back", 0.0, FULL, Action.RESTORE,
         "reserve 0%", paper(dead_band_fraction=0.2), total=R(8000, 8)),
    Case("growth limited per round", 0.0, R(4096, 4), Action.RAISE, "step limit",
         total=QUARTER),
    Case("growth waits for the cool-down", 0.0, QUARTER, Action.HOLD, "cool-down",
         total=QUARTER, lowered_ago_s=10.0),
    Case("after the cool-down it grows", 0.0, R(4096, 4), Action.RAISE, "step limit",
         total=QUARTER, lowered_ago_s=100.0),
    Case("decreases never wait", 1.0, QUARTER, Action.LOWER, "reserve 100%",
         total=R(4096, 4), lowered_ago_s=5.0),
    Case("a total below the floor is raised to it at once", 1.0, QUARTER, Action.RAISE,
         "below the floor 25% of the node: raised to it at once", total=R(0, 0), lowered_ago_s=5.0),
    Case("last step reaches the whole node", 0.0, FULL, Action.RESTORE, "reserve 0%",
         total=R(7000, 7)),
    Case("raw risk below the gate: not throttled", 1.0, FULL, Action.HOLD,
         "raw risk 0.0011 below the gate 0.05: not throttled", raw=0.0011),
    Case("below the gate, demand and QoS misses do not throttle either", 1.0, FULL,
         Action.HOLD, "not throttled", paper(zero_violation=True), raw=0.01,
         demand_vcores=6.0, qos_latency_ms=250.0),
    Case("below the gate a lowered node grows back gradually", 1.0, R(4096, 4), Action.RAISE,
         "step limit", total=QUARTER, raw=0.001),
    Case("below the gate growth still waits for the cool-down", 1.0, QUARTER, Action.HOLD,
         "cool-down", total=QUARTER, raw=0.001, lowered_ago_s=10.0),
    Case("at the gate the normalised risk counts", 1.0, QUARTER, Action.LOWER,
         "reserve 100%", raw=0.05),
    Case("gate 0: any raw risk counts", 1.0, QUARTER, Action.LOWER, "reserve 100%",
         paper(min_raw_risk=0.0), raw=0.0011),
    Case("no traces from the node: whole again", None, FULL, Action.RESTORE,
         "no traces from this node", total=R(0, 0), lowered_ago_s=1.0),
    Case("no traces from a whole node: left whole", None, FULL, Action.HOLD, "left whole"),
    Case("NaN risk", math.nan, FULL, Action.RESTORE, "not a number", total=R(2048, 2)),
    Case("risk above 1", 1.5, FULL, Action.RESTORE, "not a number", total=R(2048, 2)),
    Case("negative risk", -0.2, FULL, Action.RESTORE, "not a number", total=R(2048, 2)),
    Case("NaN raw risk", 1.0, FULL, Action.RESTORE, "raw risk nan is not a number",
         total=R(2048, 2), raw=math.nan),
]  # fmt: skip


def _inputs_for(case: Case, view: NodeView) -> GuardInputs:
    values = {} if case.risk is None else {view.node_id: case.risk}
    raw = {} if case.raw is None else {view.node_id: case.raw}
    demands = (
        [demand(view.node_id, case.demand_vcores, case.demand_mb)]
        if case.demand_vcores is not None
        else []
    )
    readings = (
        [qos(case.qos_latency_ms, 100.0, [view.node_id])] if case.qos_latency_ms is not None else []
    )
    return inputs([view], risk(values, raw=raw), demands=demands, qos=readings)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_visibility_decision(case: Case) -> None:
    view = node(total=case.total, used=case.used)
    memory = (
        NodeMemory(last_lowered_at_s=NOW_S - case.lowered_ago_s)
        if case.lowered_ago_s is not None
        else NodeMemory()
    )
    decision = decide_node(view, _inputs_for(case, view), memory, case.settings)
    assert (decision.target, decision.action) == (case.expected, case.action), decision.reason
    assert case.reason in decision.reason
    assert decision.target.fits_in(view.capacity)


@pytest.mark.parametrize(
    ("snapshot_age_s", "traces", "problem", "reason"),
    [
        (300.0, 100, "", "risk stale: newest traces 5 m old"),
        (5.0, 0, "", "no traces in the window"),
        (None, 0, "Redis at redis://127.0.0.1:1 unreachable", "risk unavailable (Redis at"),
    ],
)
def test_stale_or_missing_risk_gives_the_node_back_at_once(
    snapshot_age_s: float | None, traces: int, problem: str, reason: str
) -> None:
    view = node(total=R(0, 0))
    snapshot = None if snapshot_age_s is None else risk({view.node_id: 1.0}, age_s=snapshot_age_s,
                                                        traces=traces)  # fmt: skip
    memory = NodeMemory(last_lowered_at_s=NOW_S - 1.0)  # cool-down and step limits ignored
    decision = decide_node(view, inputs([view], snapshot, problem=problem), memory, paper())
    assert decision.action is Action.RESTORE
    assert decision.target == FULL
    assert reason in decision.reason


def test_a_node_not_running_is_skipped_and_left_as_it_is() -> None:
    view = node(total=R(2048, 2), state="LOST")
    decision = decide_node(view, inputs([view], risk({view.node_id: 1.0})), NodeMemory(),
                           paper())  # fmt: skip
    assert decision.action is Action.SKIP
    assert not decision.changes
    assert "LOST" in decision.reason


def test_reclaim_is_what_batch_uses_above_what_it_may_see() -> None:
    view = node(used=R(6144, 6))
    decision = decide_node(view, inputs([view], risk({view.node_id: 0.5})), NodeMemory(),
                           paper(millicores_per_vcore=1000))  # fmt: skip
    assert decision.target == R(4096, 4)
    assert decision.reclaim == R(2048, 2)
    assert decision.reclaim_millicores(1000) == 2000


def test_no_reclaim_while_the_node_is_given_back() -> None:
    view = node(total=R(0, 0), used=R(4096, 4))
    decision = decide_node(view, inputs([view], None, problem="down"), NodeMemory(),
                           paper())  # fmt: skip
    assert decision.reclaim == R(0, 0)


def test_risk_found_by_host_name_only_when_the_host_is_one_node() -> None:
    alone = node("worker-7:8041", total=FULL)
    by_host = risk({"worker-7": 1.0})
    decision = decide_node(alone, inputs([alone], by_host), NodeMemory(), paper())
    assert decision.target == QUARTER
    first, second = node("localhost:1", host="localhost"), node("localhost:2", host="localhost")
    shared = risk({"localhost": 1.0})
    plan = decide(inputs([first, second], shared), {}, paper())
    assert [d.action for d in plan.decisions] == [Action.HOLD, Action.HOLD]
    assert all("no traces from this node" in d.reason for d in plan.decisions)


def test_risk_found_through_a_configured_trace_host() -> None:
    view = node("localhost:45454", host="localhost")
    snapshot = risk({"node-a": 1.0})
    mapped = inputs([view], snapshot, node_hosts={"node-a": "localhost:45454"})
    assert decide_node(view, mapped, NodeMemory(), paper()).target == QUARTER


def test_zero_violation_only_on_nodes_the_application_runs_on() -> None:
    hosting, other = node("a:1"), node("b:1")
    missed = qos(300.0, 100.0, ["a:1"])
    plan = decide(
        inputs([hosting, other], risk({"a:1": 0.0, "b:1": 0.0}), qos=[missed]),
        {},
        paper(zero_violation=True),
    )
    assert plan.decision("a:1").target == QUARTER  # type: ignore[union-attr]
    assert plan.decision("b:1").target == FULL  # type: ignore[union-attr]


def test_every_decision_says_why() -> None:
    views = [node("a:1"), node("b:1", total=R(0, 0)), node("c:1", state="UNHEALTHY")]
    plan = decide(inputs(views, risk({"a:1": 0.7})), {}, paper())
    assert all(d.reason for d in plan.decisions)
    assert "a:1: lower" in plan.summary()


def test_settings_refuse_impossible_values() -> None:
    for bad in ({"nu": -1.0}, {"min_visible_fraction": 1.5}, {"max_step_up_fraction": 0.0},
                {"stale_after_s": 0.0}, {"nu": math.inf}, {"min_raw_risk": -0.1},
                {"min_raw_risk": math.nan}, {"low_slack_ratio": 0.3, "high_slack_ratio": 0.2},
                {"high_slack_ratio": 1.0}, {"max_step_down_fraction": 0.0},
                {"min_path_fraction": -1.0}, {"throttle_settle_s": -1.0},
                {"policy": "rank"}):  # fmt: skip
        with pytest.raises(ValueError):
            GuardSettings(**bad)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- safe defaults


def test_two_nodes_with_crumbs_of_risk_are_not_throttled() -> None:
    """Raw risk 0.0011 and 0.0010: min-max normalising makes the first 1.0; the gate
    (before normalising) keeps both whole."""
    first, second = node("a:1"), node("b:1")
    snapshot = risk({"a:1": 1.0, "b:1": 0.0}, raw={"a:1": 0.0011, "b:1": 0.0010})
    plan = decide(inputs([first, second], snapshot), {}, paper())
    for decision in plan.decisions:
        assert (decision.target, decision.action) == (FULL, Action.HOLD), decision.reason
        assert decision.reclaim == NOTHING
        assert "below the gate" in decision.reason


def _default_guard_settings() -> GuardSettings:
    return replace(decision_settings(ColocationSection()), policy=GuardPolicy.TOPOSCH_PAPER)


WALK_TOTALS = [FULL, R(4096, 4), QUARTER, R(1024, 1), NOTHING]
WALK_USED = [NOTHING, R(1024, 1), R(8192, 8)]


@pytest.mark.parametrize("settings", [paper(), _default_guard_settings()],
                         ids=["model defaults", "service defaults"])  # fmt: skip
def test_no_default_configuration_empties_a_node_or_asks_for_everything(
    settings: GuardSettings,
) -> None:
    """Every risk, raw risk, demand, QoS miss, current total, use and cool-down: the
    default settings never decide a zero total, and the reclaim request never asks
    for everything batch runs (nor more than it uses above the target)."""
    for normalized, raw, demand_vcores, missed, total, used, lowered_ago_s in itertools.product(
        [0.0, 0.5, 1.0], [0.0011, 0.05, 1.0], [None, 3.0, 64.0], [False, True], WALK_TOTALS,
        WALK_USED, [None, 1.0],
    ):  # fmt: skip
        view = node(total=total, used=used)
        snapshot = risk({view.node_id: normalized}, raw={view.node_id: raw})
        demands = [] if demand_vcores is None else [demand(view.node_id, demand_vcores, 1e6)]
        readings = [qos(250.0 if missed else 50.0, 100.0, [view.node_id])]
        memory = NodeMemory(last_lowered_at_s=None if lowered_ago_s is None else NOW_S - 1.0)
        decision = decide_node(view, inputs([view], snapshot, demands=demands, qos=readings),
                               memory, replace(settings, zero_violation=True))  # fmt: skip
        case = f"{normalized=} {raw=} {demand_vcores=} {missed=} {total=} {used=}"
        assert decision.target.memory_mb > 0 and decision.target.vcores > 0, case
        assert decision.reclaim.fits_in((used - decision.target).clamped()), case
        if used != NOTHING:
            assert decision.reclaim != used, case
