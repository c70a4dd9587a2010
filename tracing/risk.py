"""Microservice and node risk, TopoSch §4.2.1 eqs. 4-8 (pure: no Redis, no clock).

For a window of traces:

- G_k: the requests to microservice k (SERVER / CONSUMER spans, and entry spans; see
  :func:`tracing.graph.request_mask`); E_k: those with status error.
- Sojourn of a request (eq. 1): its span's own duration, inbound to outbound on k's
  clock (clock skew between hosts does not touch it).
- fST(u)_k: the geometric mean of the sojourns of the requests to API u of k (a sojourn
  under 1 µs counts as 1 µs, so the logarithm exists); v_u: u's share of k's requests.
- eq. 4: WST_k = sum_u v_u fST(u)_k / sum_u v_u.
- S, the microservices on the critical path: those with self time on the critical path
  of at least ``min_share`` of the window's traces (and of at least one). TopoSch takes
  the longest path of an aggregated latency graph; per-trace paths are the exact form
  of "the chain of invocations with the longest end-to-end latency" and need no
  averaging of nested times.
- eq. 5: WSP_k = WST_k / sum_{i in S} WST_i for k in S, 0 otherwise.
- eq. 6: WFP_k = |E_k| / |G_k|.
- eq. 7: r_k = alpha WSP_k + (1 - alpha) WFP_k.
- eq. 8: R_n = sum of r_k over M_n, the microservices with a span on node n in the
  window, then min-max normalised over those nodes (all 0 when they are equal).

The snapshot also counts the window's spans whose host clock ran ahead (moved back at
ingest, ``FLAG_CLOCK_AHEAD``) and names their hosts, so a consumer can say so.

Beside the paper's risk, the snapshot says where each entry service's critical path
runs (:class:`~tracing.model.PathTime`): per entry service (a trace's root; traces
under a virtual root have none) and node, the self time on the critical path of the
spans there -- each span's own work, its callees excluded, so a caller never
outranks its slow callee -- as a mean per request of the entry. WST above uses each
request's whole sojourn (eq. 1, callees included), as the paper does.

:func:`assess` is the equations written out over plain records, the reference;
:func:`assess_paths` computes the same from a :class:`~tracing.fastpath.PathTable` with
numpy, for whole windows at once.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from tracing.fastpath import PathTable
from tracing.forest import MISSING_ROOT, UNKNOWN_HOST, Forest
from tracing.graph import request_mask
from tracing.model import ApiSojourn, NodeRisk, PathTime, RiskSnapshot, ServiceRisk
from tracing.npkit import distinct, grouped
from tracing.wire import FLAG_CLOCK_AHEAD, FLAG_ERROR

MIN_SOJOURN_US = 1.0


@dataclass(frozen=True, kw_only=True)
class RiskSettings:
    alpha: float = 0.5
    min_share: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {self.alpha}")
        if not 0.0 <= self.min_share <= 1.0:
            raise ValueError(f"min_share must be in [0, 1], got {self.min_share}")


@dataclass(frozen=True)
class Request:
    """One request to a microservice: the input of eqs. 4 and 6."""

    service: str
    api: str
    sojourn_us: float
    error: bool


@dataclass(frozen=True)
class RiskInputs:
    """Everything eqs. 4-8 need about one window."""

    requests: tuple[Request, ...]
    placements: frozenset[tuple[str, str]]  # (service, node)
    critical_traces: Mapping[str, int]  # traces whose critical path has k
    critical_self_us: Mapping[str, float]  # k's total self time on those paths
    traces: int
    spans: int
    window_start_us: int
    window_end_us: int
    clock_ahead_spans: int = 0
    clock_ahead_hosts: tuple[str, ...] = ()
    # (entry service, node, service) -> total self time on the entry's critical paths
    path_self_us: Mapping[tuple[str, str, str], float] = field(default_factory=dict)
    entry_traces: Mapping[str, int] = field(default_factory=dict)  # traces per entry


# --------------------------------------------------------------------------- reference


def assess(inputs: RiskInputs, settings: RiskSettings) -> RiskSnapshot:
    """Eqs. 4-8 as written, over plain records."""
    by_api: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    errors: dict[str, int] = defaultdict(int)
    for request in inputs.requests:
        by_api[request.service][request.api].append(request.sojourn_us)
        errors[request.service] += request.error
    services = sorted(set(by_api) | {s for s, _ in inputs.placements})
    apis = {k: _apis(by_api.get(k, {})) for k in services}
    wst = {k: _wst(apis[k]) for k in services}
    critical = {k for k in services if _is_critical(k, inputs, settings)}
    critical_wst = sum(wst[k] for k in critical)
    risks = []
    for k in services:
        requests = sum(a.requests for a in apis[k])
        wsp = wst[k] / critical_wst if k in critical and critical_wst > 0 else 0.0
        wfp = errors[k] / requests if requests else 0.0
        risks.append(
            _service_risk(
                k,
                requests,
                errors[k],
                apis[k],
                wst[k],
                k in critical,
                inputs,
                wsp,
                wfp,
                settings.alpha,
            )
        )
    return _snapshot(inputs, settings, risks)


def _apis(sojourns: Mapping[str, list[float]]) -> tuple[ApiSojourn, ...]:
    total = sum(len(v) for v in sojourns.values())
    return tuple(
        ApiSojourn(
            api=api,
            requests=len(values),
            share=len(values) / total,
            geo_mean_us=math.exp(
                sum(math.log(max(v, MIN_SOJOURN_US)) for v in values) / len(values)
            ),
        )
        for api, values in sorted(sojourns.items())
    )


def _wst(apis: tuple[ApiSojourn, ...]) -> float:
    weight = sum(a.share for a in apis)
    return sum(a.share * a.geo_mean_us for a in apis) / weight if weight else 0.0


def _is_critical(service: str, inputs: RiskInputs, settings: RiskSettings) -> bool:
    count = inputs.critical_traces.get(service, 0)
    return count > 0 and inputs.traces > 0 and count / inputs.traces >= settings.min_share


def _service_risk(
    service: str,
    requests: int,
    errors: int,
    apis: tuple[ApiSojourn, ...],
    wst: float,
    critical: bool,
    inputs: RiskInputs,
    wsp: float,
    wfp: float,
    alpha: float,
) -> ServiceRisk:
    count = inputs.critical_traces.get(service, 0)
    return ServiceRisk(
        service=service,
        requests=requests,
        errors=errors,
        apis=apis,
        wst_us=wst,
        on_critical_path=critical,
        critical_share=count / inputs.traces if inputs.traces else 0.0,
        critical_self_us=inputs.critical_self_us.get(service, 0.0) / count if count else 0.0,
        wsp=wsp,
        wfp=wfp,
        risk=alpha * wsp + (1 - alpha) * wfp,
    )


def _snapshot(inputs: RiskInputs, settings: RiskSettings, risks: list[ServiceRisk]) -> RiskSnapshot:
    risk_of = {r.service: r.risk for r in risks}
    members: dict[str, set[str]] = defaultdict(set)
    for service, node in inputs.placements:
        members[node].add(service)
    raw = {node: sum(risk_of.get(k, 0.0) for k in ks) for node, ks in members.items()}
    low, high = min(raw.values(), default=0.0), max(raw.values(), default=0.0)
    nodes = [
        NodeRisk(
            node=node,
            services=tuple(sorted(members[node])),
            raw=value,
            normalized=(value - low) / (high - low) if high > low else 0.0,
        )
        for node, value in raw.items()
    ]
    return RiskSnapshot(
        window_start_us=inputs.window_start_us,
        window_end_us=inputs.window_end_us,
        alpha=settings.alpha,
        critical_min_share=settings.min_share,
        traces=inputs.traces,
        spans=inputs.spans,
        services=tuple(sorted(risks, key=lambda r: (-_ranked(r.risk), r.service))),
        nodes=tuple(sorted(nodes, key=lambda n: (-_ranked(n.normalized), -_ranked(n.raw), n.node))),
        clock_ahead_spans=inputs.clock_ahead_spans,
        clock_ahead_hosts=inputs.clock_ahead_hosts,
        path_times=path_times(inputs),
    )


def path_times(inputs: RiskInputs) -> tuple[PathTime, ...]:
    """Per entry service and node: the mean self time per request on its critical path
    (largest first within an entry)."""
    totals: dict[tuple[str, str], float] = defaultdict(float)
    services: dict[tuple[str, str], set[str]] = defaultdict(set)
    for (entry, node, service), self_us in inputs.path_self_us.items():
        if self_us > 0 and inputs.entry_traces.get(entry, 0) > 0:
            totals[entry, node] += self_us
            services[entry, node].add(service)
    times = [
        PathTime(entry, node, inputs.entry_traces[entry], total / inputs.entry_traces[entry],
                 tuple(sorted(services[entry, node])))
        for (entry, node), total in totals.items()
    ]  # fmt: skip
    return tuple(sorted(times, key=lambda p: (p.entry, -_ranked(p.self_us), p.node)))


def _ranked(value: float) -> float:
    """A risk as ranked: sums taken in another order differ in the last bits, and a
    tie must go to the name whatever the summation order (or the hash seed) was."""
    return round(value, 9)


# --------------------------------------------------------------------------- vectorised


def assess_paths(
    paths: PathTable, settings: RiskSettings, window_start_us: int, window_end_us: int
) -> RiskSnapshot:
    """:func:`assess` over every trace of ``paths`` at once."""
    forest = paths.forest
    requests = _request_stats(paths)
    critical_traces, critical_self = _critical_stats(paths)
    placements = _placements(paths)
    ahead_spans, ahead_hosts = _clock_ahead(forest)
    path_self, entry_traces = _path_stats(paths)
    inputs = RiskInputs(
        requests=(),
        placements=placements,
        critical_traces=critical_traces,
        critical_self_us=critical_self,
        traces=forest.columns.n_traces,
        spans=forest.n_stored,
        window_start_us=window_start_us,
        window_end_us=window_end_us,
        clock_ahead_spans=ahead_spans,
        clock_ahead_hosts=ahead_hosts,
        path_self_us=path_self,
        entry_traces=entry_traces,
    )
    services = sorted(set(requests) | {s for s, _ in placements})
    wst = {k: _wst(requests.get(k, ((), 0))[0]) for k in services}
    critical = {k for k in services if _is_critical(k, inputs, settings)}
    critical_wst = sum(wst[k] for k in critical)
    risks = []
    for k in services:
        apis, errors = requests.get(k, ((), 0))
        count = sum(a.requests for a in apis)
        wsp = wst[k] / critical_wst if k in critical and critical_wst > 0 else 0.0
        wfp = errors / count if count else 0.0
        risks.append(
            _service_risk(
                k, count, errors, apis, wst[k], k in critical, inputs, wsp, wfp, settings.alpha
            )
        )
    return _snapshot(inputs, settings, risks)


def _request_stats(paths: PathTable) -> dict[str, tuple[tuple[ApiSojourn, ...], int]]:
    """Per service: its APIs (eq. 4's v_u and fST(u)) and its error count."""
    forest = paths.forest
    mask = request_mask(forest) & _real(forest)
    service = forest.service[mask].astype(np.int64)
    operation = forest.operation[mask].astype(np.int64)
    sojourn = np.maximum((forest.end - forest.start)[mask], MIN_SOJOURN_US)
    error = (forest.flags[mask] & FLAG_ERROR) != 0
    if not len(service):
        return {}
    pair = service * len(forest.operation_names) + operation
    unique, inverse = grouped(pair, len(forest.service_names) * len(forest.operation_names))
    counts = np.bincount(inverse)
    geo = np.exp(np.bincount(inverse, weights=np.log(sojourn)) / counts)
    pair_service = unique // len(forest.operation_names)
    per_service = np.bincount(pair_service, weights=counts)
    errors = np.bincount(service[error], minlength=len(forest.service_names))
    result: dict[int, list[ApiSojourn]] = defaultdict(list)
    for index, p in enumerate(unique):
        k = int(pair_service[index])
        result[k].append(
            ApiSojourn(
                api=forest.operation_names[int(p) % len(forest.operation_names)],
                requests=int(counts[index]),
                share=float(counts[index] / per_service[k]),
                geo_mean_us=float(geo[index]),
            )
        )
    return {
        forest.service_names[k]: (tuple(sorted(apis, key=lambda a: a.api)), int(errors[k]))
        for k, apis in result.items()
    }


def _real(forest: Forest) -> np.ndarray:
    """Spans of real microservices (not virtual roots)."""
    virtual_service = (
        forest.service_names.index(MISSING_ROOT) if MISSING_ROOT in forest.service_names else -1
    )
    real: np.ndarray = (forest.span_id != 0) & (forest.service != virtual_service)
    return real


def _critical_stats(paths: PathTable) -> tuple[dict[str, int], dict[str, float]]:
    forest = paths.forest
    on = paths.on_path & (paths.self_us > 0) & _real(forest)
    service = forest.service[on].astype(np.int64)
    size = len(forest.service_names)
    pairs = distinct(forest.trace[on] * size + service, forest.columns.n_traces * size)
    traces = np.bincount(pairs % size, minlength=size)
    self_us = np.bincount(service, weights=paths.self_us[on], minlength=size)
    names = forest.service_names
    return (
        {names[k]: int(traces[k]) for k in range(size) if traces[k]},
        {names[k]: float(self_us[k]) for k in range(size) if traces[k]},
    )


def _entries(forest: Forest) -> tuple[np.ndarray, np.ndarray]:
    """Per trace: its entry service (the root's) and whether it has one (a virtual
    root stands for a trace whose entry is not known)."""
    entry = forest.service[forest.root].astype(np.int64)
    virtual = (
        forest.service_names.index(MISSING_ROOT) if MISSING_ROOT in forest.service_names else -1
    )
    known: np.ndarray = entry != virtual
    return entry, known


def _path_stats(
    paths: PathTable,
) -> tuple[dict[tuple[str, str, str], float], dict[str, int]]:
    """Total self time on the critical path per (entry service, node, service), and
    the traces per entry service."""
    forest = paths.forest
    entry, known = _entries(forest)
    on = paths.on_path & (paths.self_us > 0) & _real(forest) & (forest.host != UNKNOWN_HOST)
    on &= known[forest.trace]
    services, hosts = len(forest.service_names), len(forest.host_names)
    keys = (entry[forest.trace[on]] * hosts + forest.host[on]) * services + forest.service[on]
    unique, inverse = grouped(keys.astype(np.int64), services * hosts * services)
    sums = np.bincount(inverse, weights=paths.self_us[on], minlength=len(unique))
    names, host_names = forest.service_names, forest.host_names
    path_self = {
        (names[int(k) // services // hosts], host_names[int(k) // services % hosts],
         names[int(k) % services]): float(total)
        for k, total in zip(unique, sums, strict=True)
    }  # fmt: skip
    counts = np.bincount(entry[known], minlength=services)
    return path_self, {names[k]: int(counts[k]) for k in np.flatnonzero(counts)}


def _placements(paths: PathTable) -> frozenset[tuple[str, str]]:
    forest = paths.forest
    known = (forest.host != UNKNOWN_HOST) & _real(forest)
    size = len(forest.host_names)
    pairs = distinct(
        forest.service[known].astype(np.int64) * size + forest.host[known],
        len(forest.service_names) * size,
    )
    return frozenset(
        (forest.service_names[int(p) // size], forest.host_names[int(p) % size]) for p in pairs
    )


def _clock_ahead(forest: Forest) -> tuple[int, tuple[str, ...]]:
    """How many spans were moved back for a clock running ahead, and their hosts."""
    ahead = (forest.flags & FLAG_CLOCK_AHEAD) != 0
    hosts = distinct(forest.host[ahead].astype(np.int64), len(forest.host_names))
    return int(np.count_nonzero(ahead)), tuple(sorted(forest.host_names[int(h)] for h in hosts))


def inputs_from_paths(paths: PathTable, window_start_us: int, window_end_us: int) -> RiskInputs:
    """The plain records behind a PathTable, built span by span (slow; for checking
    :func:`assess_paths` against :func:`assess`)."""
    forest = paths.forest
    mask = request_mask(forest) & _real(forest)
    requests = tuple(
        Request(
            service=forest.service_names[int(forest.service[i])],
            api=forest.operation_names[int(forest.operation[i])],
            sojourn_us=float(forest.end[i] - forest.start[i]),
            error=bool(forest.flags[i] & FLAG_ERROR),
        )
        for i in np.flatnonzero(mask)
    )
    critical: dict[str, set[int]] = defaultdict(set)
    self_us: dict[str, float] = defaultdict(float)
    real = _real(forest)
    for i in np.flatnonzero(paths.on_path & (paths.self_us > 0) & real):
        name = forest.service_names[int(forest.service[i])]
        critical[name].add(int(forest.trace[i]))
        self_us[name] += float(paths.self_us[i])
    placements = frozenset(
        (forest.service_names[int(forest.service[i])], forest.host_names[int(forest.host[i])])
        for i in np.flatnonzero((forest.host != UNKNOWN_HOST) & real)
    )
    ahead = [i for i in range(forest.n_spans) if forest.flags[i] & FLAG_CLOCK_AHEAD]
    path_self, entry_traces = _path_records(paths)
    return RiskInputs(
        requests=requests,
        placements=placements,
        critical_traces={k: len(v) for k, v in critical.items()},
        critical_self_us=dict(self_us),
        traces=forest.columns.n_traces,
        spans=forest.n_stored,
        window_start_us=window_start_us,
        window_end_us=window_end_us,
        clock_ahead_spans=len(ahead),
        clock_ahead_hosts=tuple(sorted({forest.host_names[int(forest.host[i])] for i in ahead})),
        path_self_us=path_self,
        entry_traces=entry_traces,
    )


def _path_records(
    paths: PathTable,
) -> tuple[dict[tuple[str, str, str], float], dict[str, int]]:
    """:func:`_path_stats` span by span (the slow reference)."""
    forest = paths.forest
    names = forest.service_names
    entry_of = {t: names[int(forest.service[r])] for t, r in enumerate(forest.root)}
    path_self: dict[tuple[str, str, str], float] = defaultdict(float)
    for i in np.flatnonzero(paths.on_path & (paths.self_us > 0) & _real(forest)):
        entry, host = entry_of[int(forest.trace[i])], int(forest.host[i])
        if entry != MISSING_ROOT and host != UNKNOWN_HOST:
            key = (entry, forest.host_names[host], names[int(forest.service[i])])
            path_self[key] += float(paths.self_us[i])
    traces: dict[str, int] = defaultdict(int)
    for entry in entry_of.values():
        if entry != MISSING_ROOT:
            traces[entry] += 1
    return dict(path_self), dict(traces)
