"""The guard's observe step: the RM's nodes, the trace store's risk and tail latency,
and the demand bound, into one frozen :class:`~yarn_adapt.colocation.model.GuardInputs`.

Risk is read from the Redis trace store over the last ``window_s`` before the newest
stored trace, or before now when that is earlier (so staleness is visible: the window's
end is how fresh the evidence is, and it is never later than the clock, whatever a host
claims), through ``tracing.analysis.analyse`` -- the same code ``yarn-adapt trace risk``
runs. Spans from hosts whose clock runs ahead were moved back when they arrived
(``tracing.clocks``); the snapshot counts them and the reading's ``problem`` says so
(the risk is still used). The tail latency of each latency-critical application is the
chosen percentile of its entry service's request spans (the traces' roots) that ended
in the last ``slo_window_s`` of the window (the SLO window: shorter, so the slack
follows the service; the whole window when not set). Each read also tallies the
requests that ended since the previous read (per entry service: how many, how many
within its target), the feedback of the demand learners; a provider that learns
(:class:`~yarn_adapt.colocation.demand.FedDemandProvider`) is fed the reading and the
nodes before it is asked for the demand. A store that cannot
be read is not an error of the round: the reading carries the problem, and the decision
gives every node back (``decide``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np

from tracing.analysis import analyse
from tracing.errors import TracingError
from tracing.forest import MISSING_ROOT, UNKNOWN_HOST, Forest
from tracing.risk import RiskSettings
from tracing.store import LoadedTraces
from yarn_adapt.colocation.demand import DemandProvider, FedDemandProvider
from yarn_adapt.colocation.model import GuardInputs, NodeView, QosReading, RequestTally, RiskReading
from yarn_adapt.colocation.originals import NodeOriginal
from yarn_adapt.model import Node, NodeState, Resources


class TraceReader(Protocol):
    """What the guard reads of a trace store: the Redis one (:class:`tracing.store.TraceStore`)
    or the demo's in-process one (:class:`tracing.memstore.MemoryTraceStore`)."""

    def newest_end_us(self) -> int | None: ...

    def load(self, start_us: int | None = None, end_us: int | None = None) -> LoadedTraces: ...

    def close(self) -> None: ...


class RiskSource(Protocol):
    def read(self, now_s: float) -> RiskReading: ...

    def close(self) -> None: ...


class TraceStoreRisk:
    """Risk and QoS over the newest ``window_s`` of the trace store."""

    def __init__(
        self,
        open_store: Callable[[], TraceReader],
        *,
        window_s: float,
        risk_settings: RiskSettings,
        percentile: float = 95.0,
        targets_ms: Mapping[str, float] | None = None,
        slo_window_s: float | None = None,
    ) -> None:
        self._open_store = open_store
        self._store: TraceReader | None = None
        self.window_s = window_s
        self.slo_window_s = min(slo_window_s or window_s, window_s)
        self.risk_settings = risk_settings
        self.percentile = percentile
        self.targets_ms = dict(targets_ms or {})
        self._tallied_to_us: int | None = None

    def read(self, now_s: float) -> RiskReading:
        try:
            store = self._store or self._open_store()
            self._store = store
            end_us = window_end_us(store.newest_end_us(), now_s)
            start_us = end_us - int(self.window_s * 1e6)
            loaded = store.load(start_us, end_us)
        except TracingError as exc:
            self._store = None  # reconnect next round
            return RiskReading(None, (), f"trace store: {exc.one_line()}")
        analysis = analyse(loaded, self.risk_settings, start_us, end_us)
        qos = qos_readings(
            analysis.forest, self.percentile, self.slo_window_s, end_us / 1e6, self.targets_ms
        )
        since_us = max(start_us, self._tallied_to_us or start_us)
        tallies = request_tallies(analysis.forest, self.targets_ms, since_us, end_us)
        self._tallied_to_us = max(end_us, self._tallied_to_us or end_us)
        notes = [analysis.risk.clock_note(), unreadable_note(loaded.unreadable_segments)]
        return RiskReading(analysis.risk, qos, "; ".join(n for n in notes if n), tallies)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def unreadable_note(count: int) -> str:
    return f"{count} stored trace segment(s) unreadable and skipped" if count else ""


def window_end_us(newest_us: int | None, now_s: float) -> int:
    """The newest stored trace's end, but never after now (nor without traces)."""
    now_us = int(now_s * 1e6)
    return now_us if newest_us is None else min(newest_us, now_us)


def qos_readings(
    forest: Forest,
    percentile: float,
    window_s: float,
    measured_at_s: float,
    targets_ms: Mapping[str, float],
) -> tuple[QosReading, ...]:
    """Per entry service (a trace's root): the percentile of the durations of its root
    spans that ended in the last ``window_s`` before ``measured_at_s``."""
    if forest.columns.n_traces == 0:
        return ()
    roots = forest.root
    ends_us = forest.end[roots] + forest.columns.base[forest.trace[roots]]
    recent = ends_us > int((measured_at_s - window_s) * 1e6)
    durations_ms = (forest.end[roots] - forest.start[roots]) / 1000.0
    entry = np.where(recent, forest.service[roots], -1)
    span_entry = entry[forest.trace]
    readings = []
    for service_id in np.unique(entry[recent]):
        name = forest.service_names[int(service_id)]
        if name == MISSING_ROOT:
            continue
        mine = durations_ms[entry == service_id]
        hosts = np.unique(forest.host[span_entry == service_id])
        readings.append(
            QosReading(
                application=name,
                latency_ms=float(np.percentile(mine, percentile)),
                percentile=percentile,
                requests=int(mine.size),
                load_rps=mine.size / window_s,
                nodes=tuple(forest.host_names[int(h)] for h in hosts if h != UNKNOWN_HOST),
                measured_at_s=measured_at_s,
                target_ms=targets_ms.get(name),
            )
        )
    return tuple(readings)


def request_tallies(
    forest: Forest, targets_ms: Mapping[str, float], since_us: int, until_us: int
) -> tuple[RequestTally, ...]:
    """Per entry service (a trace's root): its requests that ended in ``(since_us,
    until_us]`` and how many of them took at most the service's target."""
    if forest.columns.n_traces == 0 or until_us <= since_us:
        return ()
    roots = forest.root
    base = forest.columns.base[forest.trace[roots]]
    ends = forest.end[roots] + base
    durations_ms = (forest.end[roots] - forest.start[roots]) / 1000.0
    fresh = (ends > since_us) & (ends <= until_us)
    entry = forest.service[roots]
    span_entry = entry[forest.trace]
    tallies = []
    for service_id in np.unique(entry[fresh]):
        name = forest.service_names[int(service_id)]
        if name == MISSING_ROOT:
            continue
        mine = durations_ms[fresh & (entry == service_id)]
        target = targets_ms.get(name)
        hosts = np.unique(forest.host[span_entry == service_id])
        tallies.append(
            RequestTally(
                service=name,
                requests=int(mine.size),
                within_target=int(np.count_nonzero(mine <= target)) if target else 0,
                target_ms=target,
                since_us=since_us,
                until_us=until_us,
                hosts=tuple(forest.host_names[int(h)] for h in hosts if h != UNKNOWN_HOST),
            )
        )
    return tuple(tallies)


# --------------------------------------------------------------------------- nodes


def node_views(
    nodes: Sequence[Node], originals: Mapping[str, NodeOriginal]
) -> tuple[NodeView, ...]:
    """The RM's nodes (capacity = the journalled original, else the RM's total), then
    journalled nodes the RM no longer lists, as not running (nothing is done to them;
    their original total stays journalled)."""
    views = [
        NodeView(
            node_id=node.id,
            host=node.host,
            running=node.state is NodeState.RUNNING,
            state=str(node.state),
            capacity=originals[node.id].original if node.id in originals else node.total,
            total=node.total,
            used=node.used,
        )
        for node in nodes
    ]
    listed = {node.id for node in nodes}
    for node_id, entry in sorted(originals.items()):
        if node_id not in listed:
            views.append(_unlisted(entry))
    return tuple(views)


def _unlisted(entry: NodeOriginal) -> NodeView:
    last = entry.last_set or entry.intended or entry.original
    return NodeView(
        node_id=entry.node_id,
        host=entry.node_id.rsplit(":", 1)[0],
        running=False,
        state="NOT LISTED by the RM",
        capacity=entry.original,
        total=last,
        used=Resources(0, 0),
    )


class GuardObserver:
    """Builds a round's inputs from the nodes the loop observed."""

    def __init__(
        self,
        risk: RiskSource,
        demand: DemandProvider,
        *,
        node_hosts: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.risk = risk
        self.demand = demand
        self.node_hosts = dict(node_hosts or {})
        self.clock = clock

    def close(self) -> None:
        self.risk.close()

    def inputs(self, nodes: Sequence[Node], originals: Mapping[str, NodeOriginal]) -> GuardInputs:
        now_s = self.clock()
        reading = self.risk.read(now_s)
        views = node_views(nodes, originals)
        if isinstance(self.demand, FedDemandProvider):
            self.demand.feed(reading, views, nodes, now_s)  # the learners' feedback round
        return GuardInputs(
            now_s=now_s,
            nodes=views,
            risk=reading.snapshot,
            risk_problem=reading.problem,
            demands=self.demand.demands(nodes, reading.snapshot, now_s),
            qos=reading.qos,
            node_hosts=self.node_hosts,
        )
