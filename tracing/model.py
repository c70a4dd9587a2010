"""The frozen data the tracing package hands around: spans, critical paths and risk.

Pure stdlib, no I/O: yarn-adapt's decision code imports :class:`RiskSnapshot` from here
(``from tracing.model import RiskSnapshot``) without pulling in Redis, numpy or
networkx.

A :class:`Span` is the one normalised form every source produces (the instrumentation,
the OTLP / Jaeger / Zipkin / Alibaba importers): ids as lowercase hex (trace 32 digits,
span 16), times in microseconds since the epoch (or since the trace file's own origin for
traces that carry relative times), the microservice and operation (API url), where it
ran (host = YARN node, container id), its kind and status, and how it relates to its
parent: a blocking child, or a non-blocking follows-from child (async work, messages).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

TRACE_ID_DIGITS = 32
SPAN_ID_DIGITS = 16
_HEX = frozenset("0123456789abcdef")


class SpanKind(IntEnum):
    """OpenTelemetry's span kinds (the numbering is ours, not OTLP's)."""

    INTERNAL = 0
    SERVER = 1
    CLIENT = 2
    PRODUCER = 3
    CONSUMER = 4


class Status(IntEnum):
    OK = 0
    ERROR = 1


@dataclass(frozen=True, slots=True)
class SpanRef:
    """A link to another span (possibly in another trace)."""

    trace_id: str
    span_id: str


@dataclass(frozen=True, slots=True)
class Span:
    """One timed operation of one request in one microservice."""

    trace_id: str
    span_id: str
    parent_id: str | None
    service: str
    operation: str
    start_us: int
    end_us: int
    kind: SpanKind = SpanKind.INTERNAL
    status: Status = Status.OK
    host: str = ""
    container: str = ""
    # True: the parent does not wait for this span (FOLLOWS_FROM, a consumed message).
    follows_from: bool = False
    links: tuple[SpanRef, ...] = ()

    @property
    def duration_us(self) -> int:
        return self.end_us - self.start_us

    @property
    def error(self) -> bool:
        return self.status is Status.ERROR


def is_hex_id(text: str, digits: int) -> bool:
    """``text`` is ``digits`` lowercase hex digits and not all zero (W3C / OTLP rule)."""
    return len(text) == digits and _HEX.issuperset(text) and text.strip("0") != ""


def span_problem(span: Span) -> str | None:
    """Why ``span`` is not a valid span, or None. Importers call it at the edge."""
    if not is_hex_id(span.trace_id, TRACE_ID_DIGITS):
        return f"trace id {span.trace_id!r} is not {TRACE_ID_DIGITS} hex digits (non-zero)"
    if not is_hex_id(span.span_id, SPAN_ID_DIGITS):
        return f"span id {span.span_id!r} is not {SPAN_ID_DIGITS} hex digits (non-zero)"
    if span.parent_id is not None and not is_hex_id(span.parent_id, SPAN_ID_DIGITS):
        return f"parent span id {span.parent_id!r} is not {SPAN_ID_DIGITS} hex digits"
    if span.parent_id == span.span_id:
        return f"span {span.span_id} is its own parent"
    if span.end_us < span.start_us:
        return f"span {span.span_id} ends before it starts ({span.end_us} < {span.start_us})"
    if not span.service:
        return f"span {span.span_id} has no service name"
    return None


# --------------------------------------------------------------------------- critical path


@dataclass(frozen=True, slots=True)
class PathSegment:
    """A stretch of time on the critical path, spent in one span (its self time:
    none of its blocking children was running then)."""

    span_id: str
    service: str
    operation: str
    start_us: int
    end_us: int

    @property
    def duration_us(self) -> int:
        return self.end_us - self.start_us


@dataclass(frozen=True)
class CriticalPath:
    """The chain of spans that bounded one trace's end-to-end latency.

    ``segments`` run from the root's start to its end without gaps or overlap, so their
    durations add up to ``latency_us``. ``notes`` counts what sanitising the trace had to
    do (orphans adopted, clock skew corrected, children truncated or dropped, async
    children left off the path).
    """

    trace_id: str
    latency_us: int
    segments: tuple[PathSegment, ...]
    notes: Mapping[str, int] = field(default_factory=dict)

    def service_time_us(self) -> dict[str, int]:
        """Per service, its self time on the path."""
        totals: dict[str, int] = {}
        for segment in self.segments:
            totals[segment.service] = totals.get(segment.service, 0) + segment.duration_us
        return totals

    def span_time_us(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for segment in self.segments:
            totals[segment.span_id] = totals.get(segment.span_id, 0) + segment.duration_us
        return totals


# --------------------------------------------------------------------------- risk


@dataclass(frozen=True, slots=True)
class ApiSojourn:
    """One API (url) of a microservice: its share of the microservice's requests (v_u)
    and the geometric mean of their sojourn times (fST(u)_k, eq. 4)."""

    api: str
    requests: int
    share: float
    geo_mean_us: float


@dataclass(frozen=True, slots=True)
class ServiceRisk:
    """A microservice's risk (TopoSch §4.2.1) with the numbers that produced it."""

    service: str
    requests: int  # |G_k|
    errors: int  # |E_k|
    apis: tuple[ApiSojourn, ...]
    wst_us: float  # eq. 4
    on_critical_path: bool  # k in S
    critical_share: float  # share of the window's traces whose critical path has k
    critical_self_us: float  # mean self time of k on those traces' critical paths
    wsp: float  # eq. 5 (0 when k is not in S)
    wfp: float  # eq. 6
    risk: float  # r_k, eq. 7


@dataclass(frozen=True, slots=True)
class NodeRisk:
    """A node's risk: R_n = sum of r_k over the microservices seen on it (eq. 8),
    min-max normalised over the nodes seen in the window."""

    node: str
    services: tuple[str, ...]
    raw: float
    normalized: float


@dataclass(frozen=True, slots=True)
class PathTime:
    """Where one entry service's requests spend their critical path on one node: the
    self time there (each span's own work, its callees excluded) of the spans that
    were on the path, as a mean per request of the entry service in the window.
    ``self_us`` summed over an entry's nodes is its mean critical-path latency minus
    what ran on no known host."""

    entry: str  # the entry service (a trace's root)
    node: str  # a trace host
    requests: int  # the entry service's traces in the window
    self_us: float  # mean self time per request, on this node, on the critical path
    services: tuple[str, ...]  # whose self time it is


@dataclass(frozen=True)
class RiskSnapshot:
    """Microservice and node risk over one window of traces. Decision code reads this
    and nothing else of the tracing package.

    ``window_end_us`` says how fresh it is: a consumer treats a snapshot whose window
    ended long ago as stale. ``traces == 0`` means no evidence, not zero risk.
    ``clock_ahead_spans`` of the window's spans came from ``clock_ahead_hosts``, whose
    clocks ran ahead: the ingest worker moved them back to when they arrived
    (``tracing.clocks``), so their durations are measured but their times estimated.
    ``path_times`` say, per entry service and node, how much of the entry's critical
    path ran there (:class:`PathTime`): the co-location guard's "where".
    """

    window_start_us: int
    window_end_us: int
    alpha: float
    traces: int
    spans: int
    services: tuple[ServiceRisk, ...]
    nodes: tuple[NodeRisk, ...]
    critical_min_share: float = 0.0
    clock_ahead_spans: int = 0
    clock_ahead_hosts: tuple[str, ...] = ()
    path_times: tuple[PathTime, ...] = ()

    def clock_note(self) -> str:
        """A line on the spans whose clock ran ahead, or "" when there were none."""
        if not self.clock_ahead_spans:
            return ""
        return (
            f"{self.clock_ahead_spans} span(s) in the window came from host(s) whose clock "
            f"runs ahead ({', '.join(self.clock_ahead_hosts)}): moved back to when they arrived"
        )

    def service(self, name: str) -> ServiceRisk | None:
        return next((s for s in self.services if s.service == name), None)

    def node(self, name: str) -> NodeRisk | None:
        return next((n for n in self.nodes if n.node == name), None)

    def paths_of(self, entry: str) -> tuple[PathTime, ...]:
        """Where ``entry``'s critical path runs: one :class:`PathTime` per node."""
        return tuple(p for p in self.path_times if p.entry == entry)

    def node_risk(self) -> dict[str, float]:
        """Normalised risk per node (the number the co-location guard acts on)."""
        return {n.node: n.normalized for n in self.nodes}

    def to_dict(self) -> dict[str, Any]:
        return {
            "window_start_us": self.window_start_us,
            "window_end_us": self.window_end_us,
            "alpha": self.alpha,
            "critical_min_share": self.critical_min_share,
            "traces": self.traces,
            "spans": self.spans,
            "clock_ahead_spans": self.clock_ahead_spans,
            "clock_ahead_hosts": list(self.clock_ahead_hosts),
            "services": [_service_dict(s) for s in self.services],
            "nodes": [
                {
                    "node": n.node,
                    "services": list(n.services),
                    "raw": n.raw,
                    "normalized": n.normalized,
                }
                for n in self.nodes
            ],
            "path_times": [
                {
                    "entry": p.entry,
                    "node": p.node,
                    "requests": p.requests,
                    "self_us": p.self_us,
                    "services": list(p.services),
                }
                for p in self.path_times
            ],
        }


def _service_dict(risk: ServiceRisk) -> dict[str, Any]:
    return {
        "service": risk.service,
        "requests": risk.requests,
        "errors": risk.errors,
        "apis": [
            {"api": a.api, "requests": a.requests, "share": a.share, "geo_mean_us": a.geo_mean_us}
            for a in risk.apis
        ],
        "wst_us": risk.wst_us,
        "on_critical_path": risk.on_critical_path,
        "critical_share": risk.critical_share,
        "critical_self_us": risk.critical_self_us,
        "wsp": risk.wsp,
        "wfp": risk.wfp,
        "risk": risk.risk,
    }
