"""Small factories for the guard's inputs (table-driven decision tests)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tracing.model import NodeRisk, PathTime, RiskSnapshot
from yarn_adapt.colocation.model import GuardInputs, NodeDemand, NodeView, QosReading
from yarn_adapt.model import Resources

NOW_S = 1_800_000_000.0
FULL = Resources(8192, 8)
NOTHING = Resources(0, 0)
ABOVE_GATE = 0.5  # a raw risk the default gate (min_raw_risk) lets through


def node(
    node_id: str = "n1:8041",
    *,
    total: Resources = FULL,
    capacity: Resources = FULL,
    used: Resources = NOTHING,
    state: str = "RUNNING",
    host: str | None = None,
) -> NodeView:
    return NodeView(
        node_id=node_id,
        host=host if host is not None else node_id.split(":")[0],
        running=state == "RUNNING",
        state=state,
        capacity=capacity,
        total=total,
        used=used,
    )


def risk(
    values: dict[str, float],
    *,
    raw: Mapping[str, float] | None = None,
    age_s: float = 5.0,
    traces: int = 100,
    paths: Mapping[tuple[str, str], float] | None = None,
) -> RiskSnapshot:
    """Normalised risk per node; raw risk per node from ``raw``, else above the gate;
    ``paths``: (entry service, trace host) -> mean critical-path self time in ms."""
    raws = raw or {}
    end_us = int((NOW_S - age_s) * 1e6)
    return RiskSnapshot(
        window_start_us=end_us - 60_000_000,
        window_end_us=end_us,
        alpha=0.5,
        traces=traces,
        spans=traces * 3,
        services=(),
        nodes=tuple(
            NodeRisk(name, ("svc",), raws.get(name, ABOVE_GATE), value)
            for name, value in values.items()
        ),
        path_times=tuple(
            PathTime(entry, host, traces, self_ms * 1000.0, ("svc",))
            for (entry, host), self_ms in (paths or {}).items()
        ),
    )


def inputs(
    nodes: Sequence[NodeView],
    snapshot: RiskSnapshot | None,
    *,
    demands: Sequence[NodeDemand] = (),
    qos: Sequence[QosReading] = (),
    problem: str = "",
    node_hosts: dict[str, str] | None = None,
) -> GuardInputs:
    return GuardInputs(
        now_s=NOW_S,
        nodes=tuple(nodes),
        risk=snapshot,
        risk_problem=problem,
        demands=tuple(demands),
        qos=tuple(qos),
        node_hosts=node_hosts or {},
    )


def demand(node_id: str, vcores: float, memory_mb: float = 0.0) -> NodeDemand:
    return NodeDemand(node_id, vcores, memory_mb, "learned upper bound")


def qos(
    latency_ms: float, target_ms: float, nodes: Sequence[str], application: str = "frontend"
) -> QosReading:
    return QosReading(
        application=application,
        latency_ms=latency_ms,
        percentile=95.0,
        requests=500,
        load_rps=50.0,
        nodes=tuple(nodes),
        measured_at_s=NOW_S,
        target_ms=target_ms,
    )
