"""TopoSch §4.2.1 eqs. 4-8 on table cases worked out by hand, through the reference
(plain records) and through the whole pipeline (spans -> critical paths -> risk)."""

from __future__ import annotations

import math
import random

import pytest

from tests.tracing.conftest import span
from tracing.convert import columns_from_spans
from tracing.fastpath import critical_paths
from tracing.forest import build_forest
from tracing.model import RiskSnapshot, Span, SpanKind
from tracing.risk import Request, RiskInputs, RiskSettings, assess, assess_paths, inputs_from_paths

SERVER = SpanKind.SERVER


def three_traces() -> list[Span]:
    """gw (node-1) serves every request in 300 µs and calls:
    t1: acct /u1 on node-1 for 100 µs (on the critical path)
    t2: acct /u1 on node-2 for 250 µs, failing (on the path)
    t3: acct /u2 on node-2 for 200 µs as follows-from (off the path), and db on node-3
        for 50 µs, failing (on the path)."""

    def trace(n: int) -> str:
        return f"{n:032x}"

    return [
        span("g1", None, 0, 300, service="gw", operation="/", kind=SERVER, trace=trace(1)),
        span("a1", "g1", 100, 200, service="acct", operation="/u1", kind=SERVER, trace=trace(1)),
        span("g2", None, 0, 300, service="gw", operation="/", kind=SERVER, trace=trace(2)),
        span(
            "a2",
            "g2",
            25,
            275,
            service="acct",
            operation="/u1",
            kind=SERVER,
            host="node-2",
            error=True,
            trace=trace(2),
        ),
        span("g3", None, 0, 300, service="gw", operation="/", kind=SERVER, trace=trace(3)),
        span(
            "a3",
            "g3",
            50,
            250,
            service="acct",
            operation="/u2",
            kind=SERVER,
            host="node-2",
            follows_from=True,
            trace=trace(3),
        ),
        span(
            "d3",
            "g3",
            10,
            60,
            service="db",
            operation="find",
            kind=SERVER,
            host="node-3",
            error=True,
            trace=trace(3),
        ),
    ]


# By hand, eq. 4: acct's /u1 has 2 of its 3 requests, geometric mean sqrt(100 * 250);
# /u2 has 1, geometric mean 200.
WST = {"gw": 300.0, "acct": 2 / 3 * math.sqrt(100 * 250) + 1 / 3 * 200, "db": 50.0}
WFP = {"gw": 0.0, "acct": 1 / 3, "db": 1.0}  # eq. 6
ON_PATH = {"gw": 3, "acct": 2, "db": 1}  # traces whose critical path has the service
NODES = {"node-1": {"gw", "acct"}, "node-2": {"acct"}, "node-3": {"db"}}


def expected(alpha: float, critical: set[str]) -> tuple[dict[str, float], dict[str, float]]:
    total = sum(WST[k] for k in critical)
    wsp = {k: WST[k] / total if k in critical else 0.0 for k in WST}  # eq. 5
    risk = {k: alpha * wsp[k] + (1 - alpha) * WFP[k] for k in WST}  # eq. 7
    raw = {n: sum(risk[k] for k in ks) for n, ks in NODES.items()}  # eq. 8
    low, high = min(raw.values()), max(raw.values())
    return risk, {n: (v - low) / (high - low) for n, v in raw.items()}


def pipeline(spans: list[Span], settings: RiskSettings) -> tuple[RiskSnapshot, RiskSnapshot]:
    columns, names = columns_from_spans(spans)
    paths = critical_paths(build_forest(columns, names))
    fast = assess_paths(paths, settings, 0, 1_000)
    reference = assess(inputs_from_paths(paths, 0, 1_000), settings)
    return fast, reference


@pytest.mark.parametrize(
    ("alpha", "min_share", "critical"),
    [
        (0.5, 0.0, {"gw", "acct", "db"}),
        (1.0, 0.0, {"gw", "acct", "db"}),  # sojourn only
        (0.0, 0.0, {"gw", "acct", "db"}),  # failures only
        (0.3, 0.5, {"gw", "acct"}),  # db is on 1 path in 3: below the share
        (0.5, 1.0, {"gw"}),
    ],
)
def test_eqs_4_to_8_on_a_hand_worked_window(
    alpha: float, min_share: float, critical: set[str]
) -> None:
    settings = RiskSettings(alpha=alpha, min_share=min_share)
    risk, node_risk = expected(alpha, critical)
    for snapshot in pipeline(three_traces(), settings):
        assert snapshot.traces == 3 and snapshot.spans == 7
        for name in WST:
            service = snapshot.service(name)
            assert service is not None
            assert service.wst_us == pytest.approx(WST[name])
            assert service.wfp == pytest.approx(WFP[name])
            assert service.on_critical_path == (name in critical)
            assert service.critical_share == pytest.approx(ON_PATH[name] / 3)
            assert service.risk == pytest.approx(risk[name])
        for node, value in node_risk.items():
            found = snapshot.node(node)
            assert found is not None and found.normalized == pytest.approx(value)
            assert set(found.services) == NODES[node]


def test_the_api_breakdown_names_the_numbers_behind_wst() -> None:
    fast, _ = pipeline(three_traces(), RiskSettings())
    acct = fast.service("acct")
    assert acct is not None and acct.requests == 3 and acct.errors == 1
    apis = {a.api: a for a in acct.apis}
    assert apis["/u1"].requests == 2 and apis["/u1"].share == pytest.approx(2 / 3)
    assert apis["/u1"].geo_mean_us == pytest.approx(math.sqrt(100 * 250))
    assert apis["/u2"].geo_mean_us == pytest.approx(200)


def test_plain_records_reference() -> None:
    """Eqs. 4-7 straight from records: 2 APIs, one failing request."""
    inputs = RiskInputs(
        requests=(
            Request("a", "/x", 10.0, False),
            Request("a", "/x", 1000.0, True),
            Request("a", "/y", 0.0, False),  # under 1 µs: counts as 1 µs
            Request("b", "/z", 50.0, False),
        ),
        placements=frozenset({("a", "n1"), ("b", "n1"), ("b", "n2")}),
        critical_traces={"a": 1, "b": 1},
        critical_self_us={"a": 5.0, "b": 7.0},
        traces=1,
        spans=4,
        window_start_us=0,
        window_end_us=10,
    )
    snapshot = assess(inputs, RiskSettings(alpha=0.25))
    wst_a = 2 / 3 * math.sqrt(10 * 1000) + 1 / 3 * 1.0
    wsp_a = wst_a / (wst_a + 50.0)
    a = snapshot.service("a")
    assert a is not None
    assert a.wst_us == pytest.approx(wst_a)
    assert a.wsp == pytest.approx(wsp_a)
    assert a.risk == pytest.approx(0.25 * wsp_a + 0.75 * (1 / 3))
    n1, n2 = snapshot.node("n1"), snapshot.node("n2")
    assert n1 is not None and n2 is not None
    assert n1.normalized == 1.0 and n2.normalized == 0.0
    assert n1.raw == pytest.approx(a.risk + (snapshot.service("b") or a).risk)


def test_equal_nodes_normalise_to_zero_and_an_empty_window_is_no_evidence() -> None:
    spans = [
        span("g", None, 0, 10, service="s", kind=SERVER, host=h, trace=f"{i + 1:032x}")
        for i, h in enumerate(["n1", "n2"])
    ]
    fast, _ = pipeline(spans, RiskSettings())
    assert {n.node: n.normalized for n in fast.nodes} == {"n1": 0.0, "n2": 0.0}
    empty = assess(RiskInputs((), frozenset(), {}, {}, 0, 0, 0, 10), RiskSettings())
    assert empty.traces == 0 and not empty.services and not empty.nodes


def test_vectorised_risk_equals_the_reference_on_random_windows() -> None:
    rng = random.Random(7)
    spans = []
    for t in range(200):
        trace = f"{t + 1:032x}"
        spans.append(span("r", None, 0, 1_000, service="gw", kind=SERVER, trace=trace))
        for c in range(rng.randint(0, 6)):
            start = rng.randint(0, 900)
            spans.append(
                span(
                    f"c{c}",
                    "r",
                    start,
                    start + rng.randint(0, 100),
                    service=rng.choice("abcd"),
                    operation=rng.choice(["/1", "/2", "/3"]),
                    kind=rng.choice([SERVER, SpanKind.CLIENT, SpanKind.CONSUMER]),
                    host=rng.choice(["n1", "n2", "n3", ""]),
                    error=rng.random() < 0.1,
                    trace=trace,
                )
            )
    fast, reference = pipeline(spans, RiskSettings(alpha=0.7, min_share=0.05))
    assert [s.service for s in fast.services] == [s.service for s in reference.services]
    for x, y in zip(fast.services, reference.services, strict=True):
        assert (x.requests, x.errors, x.on_critical_path) == (
            y.requests,
            y.errors,
            y.on_critical_path,
        )
        for name in ("wst_us", "wsp", "wfp", "risk", "critical_share", "critical_self_us"):
            assert getattr(x, name) == pytest.approx(getattr(y, name))
    assert [(n.node, n.services) for n in fast.nodes] == [
        (n.node, n.services) for n in reference.nodes
    ]
    for x, y in zip(fast.nodes, reference.nodes, strict=True):
        assert x.normalized == pytest.approx(y.normalized)
    assert fast.path_times and len(fast.path_times) == len(reference.path_times)
    for p, q in zip(fast.path_times, reference.path_times, strict=True):
        same = (p.entry, p.node, p.requests, p.services)
        assert same == (q.entry, q.node, q.requests, q.services)
        assert p.self_us == pytest.approx(q.self_us)


@pytest.mark.parametrize("alpha", [-0.1, 1.5])
def test_alpha_outside_0_1_is_refused(alpha: float) -> None:
    with pytest.raises(ValueError, match="alpha"):
        RiskSettings(alpha=alpha)


def test_the_snapshot_is_plain_data_for_decision_code() -> None:
    fast, _ = pipeline(three_traces(), RiskSettings())
    data = fast.to_dict()
    assert data["traces"] == 3 and {s["service"] for s in data["services"]} == set(WST)
    assert fast.node_risk()["node-1"] == 1.0


# --------------------------------------------------------------------------- path times


def caller_and_slow_callee(traces: int = 10) -> list[Span]:
    """frontend (node-a) does 0.2 ms of its own work and waits 4 ms on pricing (node-b);
    node-c runs an audit call that nobody waits for (follows-from: off the path)."""
    spans = []
    for t in range(traces):
        trace = f"{t + 1:032x}"
        spans += [
            span("f", None, 0, 4_200, service="frontend", kind=SERVER, host="node-a", trace=trace),
            span("p", "f", 100, 4_100, service="pricing", kind=SERVER, host="node-b",
                 trace=trace),
            span("a", "f", 150, 3_150, service="audit", kind=SERVER, host="node-c",
                 follows_from=True, trace=trace),
        ]  # fmt: skip
    return spans


def test_path_times_are_self_time_per_node_so_a_caller_never_outranks_its_callee() -> None:
    for snapshot in pipeline(caller_and_slow_callee(), RiskSettings()):
        times = {p.node: p for p in snapshot.paths_of("frontend")}
        assert set(times) == {"node-a", "node-b"}  # node-c's work is off the path
        assert times["node-b"].self_us == pytest.approx(4_000.0)
        assert times["node-a"].self_us == pytest.approx(200.0)
        assert times["node-b"].services == ("pricing",) and times["node-a"].requests == 10
        # the paper's sojourn (inclusive of callees) ranks the caller first
        frontend, pricing = snapshot.service("frontend"), snapshot.service("pricing")
        assert frontend is not None and pricing is not None
        assert frontend.wst_us > pricing.wst_us
        assert snapshot.to_dict()["path_times"][0]["node"] == "node-b"


def test_traces_without_a_known_entry_or_host_add_no_path_time() -> None:
    spans = [
        span("x", None, 0, 1_000, service="frontend", kind=SERVER, host="", trace=f"{1:032x}"),
        span("o", "gone", 0, 500, service="pricing", kind=SERVER, host="node-b",
             trace=f"{2:032x}"),
        span("q", "gone2", 600, 900, service="pricing", kind=SERVER, host="node-b",
             trace=f"{2:032x}"),
    ]  # fmt: skip
    for snapshot in pipeline(spans, RiskSettings()):
        assert snapshot.path_times == ()  # unknown host; an entry under a virtual root
