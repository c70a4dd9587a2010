"""The slack policy on table cases: SLO slack decides whether batch gives way,
critical-path self time per node where and how much, with hysteresis between the
watermarks -- and, end to end from spans, the example that TopoSch's min-max rank
gets wrong (a caller's 0.2 ms of own work outranking its slow callee's 4 ms)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

import pytest

from tests.colocation.factories import NOW_S, demand, inputs, node, qos, risk
from tracing.convert import columns_from_spans
from tracing.fastpath import critical_paths
from tracing.forest import build_forest
from tracing.model import Span, SpanKind
from tracing.risk import RiskSettings, assess_paths
from yarn_adapt.colocation.decide import decide
from yarn_adapt.colocation.model import (
    Action,
    GuardPolicy,
    GuardSettings,
    NodeMemory,
    NodeView,
    SlackState,
)
from yarn_adapt.colocation.observe import qos_readings
from yarn_adapt.colocation.slack import slack_state
from yarn_adapt.model import Resources

R = Resources
FULL = R(8192, 8)
QUARTER = R(2048, 2)  # the default floor
A, B, C = "a:1", "b:1", "c:1"  # frontend's node, pricing's node, a third node
TARGET_MS = 20.0
# frontend does 0.2 ms of its own work on A and waits for pricing's 4 ms on B
PATHS = {("frontend", A): 0.2, ("frontend", B): 4.0}
PRICING_STEP = R(8192 - 1639, 8 - 2)  # a 20 % step down: 4 ms of a 20 ms target


@dataclass(frozen=True)
class Case:
    name: str
    p95_ms: float
    expected: dict[str, tuple[Resources, Action, SlackState]]
    reason: dict[str, str]  # per node, a fragment its reason must contain
    totals: dict[str, Resources] = field(default_factory=dict)
    used: dict[str, Resources] = field(default_factory=dict)
    lowered_ago_s: dict[str, float] = field(default_factory=dict)
    paths: dict[tuple[str, str], float] = field(default_factory=lambda: dict(PATHS))
    settings: GuardSettings = field(default_factory=GuardSettings)


CASES = [
    Case("low slack throttles pricing's node, not the frontend's", 19.0,
         {A: (FULL, Action.HOLD, SlackState.HOLD),
          B: (PRICING_STEP, Action.LOWER, SlackState.THROTTLE),
          C: (FULL, Action.HOLD, SlackState.GROW)},
         {A: "under 5%: not where its latency goes", B: "step down 20% of the node",
          C: "no latency-critical critical path runs here"}),
    Case("a miss: zero-violation on pricing's node only", 25.0,
         {A: (FULL, Action.HOLD, SlackState.HOLD),
          B: (R(4096, 4), Action.LOWER, SlackState.EMERGENCY),
          C: (FULL, Action.HOLD, SlackState.GROW)},
         {B: "zero-violation: frontend over target", A: "frontend slack -25% (emergency)"},
         used={B: R(4096, 4)}),
    Case("a miss on an idle node: down to the floor", 25.0,
         {B: (QUARTER, Action.LOWER, SlackState.EMERGENCY)}, {B: "floor 25%"}),
    Case("every slack comfortable: nothing throttled", 10.0,
         {A: (FULL, Action.HOLD, SlackState.GROW), B: (FULL, Action.HOLD, SlackState.GROW),
          C: (FULL, Action.HOLD, SlackState.GROW)},
         {B: "every latency-critical slack is comfortable"}),
    Case("every slack comfortable: a lowered node grows back a step", 10.0,
         {B: (R(6144 + 2048, 6 + 2), Action.RESTORE, SlackState.GROW)}, {},
         totals={B: R(6144, 6)}, lowered_ago_s={B: 100.0}),
    Case("comfortable, but growth waits for the cool-down", 10.0,
         {B: (QUARTER, Action.HOLD, SlackState.GROW)}, {B: "cool-down"},
         totals={B: QUARTER}, lowered_ago_s={B: 10.0}),
    Case("between the watermarks after a throttle: held, neither way", 16.0,
         {A: (FULL, Action.HOLD, SlackState.HOLD),
          B: (PRICING_STEP, Action.HOLD, SlackState.HOLD)},
         {B: "hold: no slack below the low watermark"},
         totals={B: PRICING_STEP}, lowered_ago_s={B: 100.0}),
    Case("still low, but the last step is settling", 19.0,
         {B: (PRICING_STEP, Action.HOLD, SlackState.THROTTLE)}, {B: "settling: lowered 5 s ago"},
         totals={B: PRICING_STEP}, lowered_ago_s={B: 5.0}),
    Case("still low after settling: the next step", 19.0,
         {B: (R(6553 - 1639, 6 - 2), Action.LOWER, SlackState.THROTTLE)}, {},
         totals={B: PRICING_STEP}, lowered_ago_s={B: 20.0}),
    Case("a miss waits for no settling: the next step and nothing new at once", 25.0,
         {B: (R(3000, 3), Action.LOWER, SlackState.EMERGENCY)}, {B: "step down 20%"},
         totals={B: PRICING_STEP}, used={B: R(3000, 3)}, lowered_ago_s={B: 5.0}),
    Case("a miss steps down below what batch uses: the agent squeezes", 25.0,
         {B: (R(6553 - 1639, 6 - 2), Action.LOWER, SlackState.EMERGENCY)}, {},
         totals={B: PRICING_STEP}, used={B: R(8192, 8)}, lowered_ago_s={B: 5.0}),
    Case("one traced node acts when its service misses", 30.0,
         {A: (QUARTER, Action.LOWER, SlackState.EMERGENCY)},
         {A: "19.0 ms of its 20 ms target on its critical path here (95%)"},
         paths={("frontend", A): 19.0}),
    Case("one traced node with low slack takes a bounded step", 19.0,
         {A: (R(8192 - 2048, 8 - 2), Action.LOWER, SlackState.THROTTLE)},
         {A: "step down 25% of the node"}, paths={("frontend", A): 19.0}),
    Case("nu scales the step", 19.0,
         {B: (R(8192 - 820, 8 - 1), Action.LOWER, SlackState.THROTTLE)}, {B: "nu 0.5"},
         settings=GuardSettings(nu=0.5)),
    Case("a wider gate leaves pricing's node alone", 19.0,
         {B: (FULL, Action.HOLD, SlackState.HOLD)}, {},
         settings=GuardSettings(min_path_fraction=0.25)),
]  # fmt: skip


def _views(case: Case) -> list[NodeView]:
    return [node(n, total=case.totals.get(n, FULL), used=case.used.get(n, R(0, 0)))
            for n in (A, B, C)]  # fmt: skip


def _memory(case: Case) -> dict[str, NodeMemory]:
    return {n: NodeMemory(last_lowered_at_s=NOW_S - ago) for n, ago in case.lowered_ago_s.items()}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_slack_decides_whether_and_self_time_where(case: Case) -> None:
    views = _views(case)
    reading = qos(case.p95_ms, TARGET_MS, [A, B])
    snapshot = risk({}, paths=case.paths)
    plan = decide(inputs(views, snapshot, qos=[reading]), _memory(case), case.settings)
    assert plan.policy is GuardPolicy.SLACK
    for node_id, (target, action, state) in case.expected.items():
        decision = plan.decision(node_id)
        assert decision is not None
        assert (decision.target, decision.action, decision.state) == (target, action, state), (
            decision.reason
        )
        assert case.reason.get(node_id, "") in decision.reason
        assert decision.target.fits_in(decision.capacity)


SLACK_ONLY = GuardSettings(policy=GuardPolicy.SLACK_ONLY)
FULL_STEP = R(8192 - 2048, 8 - 2)  # max_step_down_fraction, 25 %


@pytest.mark.parametrize(
    ("p95_ms", "expected"),
    [
        # low slack: the frontend's node gives way too, though 0.2 ms of the path is there
        (19.0, {A: (FULL_STEP, Action.LOWER), B: (FULL_STEP, Action.LOWER),
                C: (FULL, Action.HOLD)}),
        (10.0, {A: (FULL, Action.HOLD), B: (FULL, Action.HOLD), C: (FULL, Action.HOLD)}),
    ],
)  # fmt: skip
def test_slack_only_throttles_every_node_on_the_path_by_the_full_step(
    p95_ms: float, expected: dict[str, tuple[Resources, Action]]
) -> None:
    case = Case("slack-only", p95_ms, {}, {})
    reading = qos(p95_ms, TARGET_MS, [A, B])
    plan = decide(inputs(_views(case), risk({}, paths=PATHS), qos=[reading]), {}, SLACK_ONLY)
    assert plan.policy is GuardPolicy.SLACK_ONLY
    for node_id, (target, action) in expected.items():
        decision = plan.decision(node_id)
        assert decision is not None
        assert (decision.target, decision.action) == (target, action), decision.reason
    if p95_ms == 19.0:
        assert "slack-only: the full step" in plan.decision(A).reason  # type: ignore[union-attr]


def test_states_follow_the_watermarks() -> None:
    settings = GuardSettings(low_slack_ratio=0.1, high_slack_ratio=0.25)
    expected = {-0.01: SlackState.EMERGENCY, 0.0: SlackState.THROTTLE, 0.09: SlackState.THROTTLE,
                0.1: SlackState.HOLD, 0.25: SlackState.HOLD, 0.26: SlackState.GROW}  # fmt: skip
    assert {s: slack_state(s, settings) for s in expected} == expected


def test_a_hold_sequence_never_moves_a_node() -> None:
    """Throttle once, then readings anywhere between the watermarks: the node keeps
    its total round after round, whatever the cool-down and settle times."""
    views = _views(Case("", 0.0, {}, {}))
    memory: dict[str, NodeMemory] = {}
    plan = decide(inputs(views, risk({}, paths=PATHS), qos=[qos(19.0, TARGET_MS, [A, B])]),
                  memory, GuardSettings())  # fmt: skip
    lowered = plan.decision(B)
    assert lowered is not None and lowered.action is Action.LOWER
    memory[B] = NodeMemory().after(lowered, NOW_S - 1000.0)
    views = [replace(v, total=lowered.target) if v.node_id == B else v for v in views]
    for p95 in (15.0, 17.9, 15.1, 16.5):
        again = decide(inputs(views, risk({}, paths=PATHS), qos=[qos(p95, TARGET_MS, [A, B])]),
                       memory, GuardSettings())  # fmt: skip
        held = again.decision(B)
        assert held is not None and (held.action, held.target) == (Action.HOLD, lowered.target)


def test_without_a_latency_critical_application_nothing_is_throttled() -> None:
    views = _views(Case("", 0.0, {}, {}))
    untargeted = replace(qos(500.0, TARGET_MS, [A, B]), target_ms=None)
    plan = decide(inputs(views, risk({}, paths=PATHS), qos=[untargeted]), {}, GuardSettings())
    assert plan.applications == ()
    assert all(d.action is Action.HOLD and d.target == FULL for d in plan.decisions)
    assert all("no latency-critical application" in d.reason for d in plan.decisions)


def test_demand_bounds_what_a_throttled_node_sees_but_not_a_comfortable_one() -> None:
    views = _views(Case("", 0.0, {}, {}))
    bound = [demand(B, 5.0, 4096.0)]
    low = decide(inputs(views, risk({}, paths=PATHS), qos=[qos(19.0, TARGET_MS, [A, B])],
                        demands=bound), {}, GuardSettings())  # fmt: skip
    throttled = low.decision(B)
    assert throttled is not None and throttled.target == R(4096, 3)
    assert "demand 5.00 vcores" in throttled.reason
    assert throttled.reserved == R(4096, 5)
    fine = decide(inputs(views, risk({}, paths=PATHS), qos=[qos(5.0, TARGET_MS, [A, B])],
                         demands=bound), {}, GuardSettings())  # fmt: skip
    assert fine.decision(B).target == FULL  # type: ignore[union-attr]


def test_unusable_evidence_gives_the_node_back_at_once_in_the_slack_policy_too() -> None:
    lowered = node(B, total=QUARTER)
    stale = risk({}, paths=PATHS, age_s=1000.0)
    plan = decide(inputs([lowered], stale, qos=[qos(30.0, TARGET_MS, [B])]),
                  {B: NodeMemory(last_lowered_at_s=NOW_S - 1.0)}, GuardSettings())  # fmt: skip
    decision = plan.decision(B)
    assert decision is not None and (decision.action, decision.target) == (Action.RESTORE, FULL)
    assert "risk stale" in decision.reason


def test_the_slack_policy_never_empties_a_node_nor_asks_for_everything() -> None:
    for p95, share, total, used, ago in itertools.product(
        [5.0, 16.0, 19.0, 25.0, 400.0], [0.0, 0.01, 0.3, 5.0], [FULL, R(4096, 4), QUARTER,
        R(1024, 1), R(0, 0)], [R(0, 0), R(1024, 1), FULL], [None, 1.0, 1000.0],
    ):  # fmt: skip
        view = node(B, total=total, used=used)
        memory = {} if ago is None else {B: NodeMemory(last_lowered_at_s=NOW_S - ago)}
        snapshot = risk({}, paths={("frontend", B): share * TARGET_MS})
        plan = decide(inputs([view], snapshot, qos=[qos(p95, TARGET_MS, [B])]), memory,
                      GuardSettings())  # fmt: skip
        decision = plan.decision(B)
        assert decision is not None
        case = f"{p95=} {share=} {total=} {used=} {ago=}"
        assert decision.target.memory_mb > 0 and decision.target.vcores > 0, case
        assert decision.reclaim.fits_in((used - decision.target).clamped()), case
        if used != R(0, 0):
            assert decision.reclaim != used, case


# --------------------------------------------------------------------------- from spans


def _span(trace: str, span: str, parent: str | None, service: str, host: str,
          start: int, end: int) -> Span:  # fmt: skip
    return Span(trace_id=trace, span_id=span.encode().hex().rjust(16, "0"),
                parent_id=parent.encode().hex().rjust(16, "0") if parent else None,
                service=service, operation="GET /", start_us=start, end_us=end,
                kind=SpanKind.SERVER, host=host)  # fmt: skip


def _three_node_window(p95_us: int) -> list[Span]:
    """frontend on A: 0.2 ms of its own work around pricing's 4 ms on B (the rest of a
    slow request is pricing's); C carries nothing on the path."""
    spans = []
    for t in range(40):
        trace = f"{t + 1:032x}"
        pricing_us = 4_000 if t < 36 else p95_us - 200  # the slow tail is pricing's
        base = 1_000_000 + t * 100_000
        spans += [
            _span(trace, "f", None, "frontend", A, base, base + pricing_us + 200),
            _span(trace, "p", "f", "pricing", B, base + 100, base + 100 + pricing_us),
        ]
    return spans


@pytest.mark.parametrize("policy", list(GuardPolicy))
def test_from_spans_the_slack_policy_throttles_the_callee_the_paper_the_caller(
    policy: GuardPolicy,
) -> None:
    columns, names = columns_from_spans(_three_node_window(p95_us=19_000))
    forest = build_forest(columns, names)
    paths = critical_paths(forest)
    end_us = 1_000_000 + 40 * 100_000
    snapshot = assess_paths(paths, RiskSettings(), 0, end_us)
    readings = qos_readings(forest, 95.0, 60.0, end_us / 1e6, {"frontend": TARGET_MS})
    views = [node(n) for n in (A, B, C)]
    batch = replace(inputs(views, snapshot, qos=readings), now_s=end_us / 1e6)
    plan = decide(batch, {}, GuardSettings(policy=policy))
    lowered = [d.node_id for d in plan.decisions if d.action is Action.LOWER]
    if policy is GuardPolicy.SLACK:
        assert lowered == [B]  # pricing's node: 4 ms (and the slow tail) of the path
        frontend = plan.decision(A)
        assert frontend is not None and frontend.risk == pytest.approx(0.01)
    elif policy is GuardPolicy.SLACK_ONLY:
        assert lowered == [A, B]  # no "where": every node the path crosses
    else:
        assert lowered == [A]  # min-max of inclusive sojourn: the caller ranks first


def test_one_traced_node_the_paper_never_acts_on_and_the_slack_policy_does() -> None:
    """TopoSch's min-max normalising makes one node's risk 0 whatever its latency."""
    view = node(A)
    snapshot = risk({A: 0.0}, paths={("frontend", A): 19.0})  # normalised: 0, alone
    missed = [qos(30.0, TARGET_MS, [A])]
    paper = decide(inputs([view], snapshot, qos=missed), {},
                   GuardSettings(policy=GuardPolicy.TOPOSCH_PAPER))  # fmt: skip
    assert paper.decisions[0].action is Action.HOLD
    slack = decide(inputs([view], snapshot, qos=missed), {}, GuardSettings())
    assert slack.decisions[0].action is Action.LOWER
