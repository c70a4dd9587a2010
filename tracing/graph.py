"""Latency trace graphs with networkx: one trace's spans as a DAG, its critical path, and
the service topology over a window.

This is the reference the fast path (:mod:`tracing.fastpath`) is tested against, and the
graph API (``trace critical-path`` prints from it). The critical path is the chain of
spans that bounded the trace's end-to-end latency: starting from the root's end, walk
back through the last-finishing child, whose own time is walked the same way, then on
to the child that finished before that one started, and so on (Jaeger UI's algorithm;
colocation.md §4.1). Edge cases, in the order they are handled:

- **Duplicates**: a span id seen twice in a trace counts once (the first copy).
- **Missing parents, orphans, cycles, several roots**: see :mod:`tracing.forest`
  (orphans adopted by the single true root, otherwise by a virtual root; cycles cut).
- **Async children**: a follows-from child, or a CONSUMER under a PRODUCER, does not
  block its parent: it is never on the parent's path, and may end after the parent.
- **Clock skew**: a SERVER span under a CLIENT span on another host (or an unknown one)
  that does not fit in the client's window is shifted, with its subtree, to sit centred
  in it (if it is longer, it is aligned to the client's start), as Jaeger's skew adjuster
  does: the client's own clock is the one trusted.
- **Overflowing children**: a blocking child is truncated to its parent's window; one
  wholly outside is dropped with its subtree (not on the path).
- **Overlapping and parallel children**: only the chain of last-finishing children is on
  the path; a child overlapping the chosen one is off it. Ties on the end time go to
  the earlier start, then the smaller span id.
- **Zero-length spans** are never on the path (they bound nothing).

The path's segments cover the root's window exactly, so their durations add up to the
trace's end-to-end latency.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np

from tracing.fastpath import PathTable
from tracing.forest import MISSING_ROOT, Forest
from tracing.model import CriticalPath, PathSegment, Span, SpanKind
from tracing.npkit import grouped

VIRTUAL = "virtual-root"
CHILD, FOLLOWS_FROM, ADOPTED = "child", "follows_from", "adopted"


@dataclass
class _Node:
    span: Span | None  # None for the virtual root
    start: int
    end: int
    offset: int = 0
    blocking: bool = True
    dropped: bool = False
    on_path: bool = False
    self_us: int = 0

    @property
    def ident(self) -> int:
        return int(self.span.span_id, 16) if self.span else 0

    @property
    def kind(self) -> SpanKind:
        return self.span.kind if self.span else SpanKind.INTERNAL

    @property
    def host(self) -> str:
        return self.span.host if self.span else ""

    @property
    def service(self) -> str:
        return self.span.service if self.span else MISSING_ROOT

    @property
    def operation(self) -> str:
        return self.span.operation if self.span else ""


def latency_trace_graph(spans: Iterable[Span]) -> nx.DiGraph:
    """One trace as a rooted DAG of spans (node key: span id, or VIRTUAL), edges parent
    -> child with ``relation`` child / follows_from / adopted; node attribute ``node``
    holds the corrected window, blocking, on-path and self time after
    :func:`critical_path_of_graph`. ``graph.graph`` holds ``root``, ``trace_id`` and
    ``notes``."""
    unique: dict[str, Span] = {}
    for span in spans:
        unique.setdefault(span.span_id, span)
    graph = nx.DiGraph()
    notes = dict.fromkeys(("orphans_adopted", "cycles_cut"), 0)
    trace_id = next(iter(unique.values())).trace_id if unique else ""
    for span_id, span in unique.items():
        graph.add_node(span_id, node=_Node(span, span.start_us, span.end_us))
    for span_id, span in unique.items():
        if span.parent_id is not None and span.parent_id in unique:
            relation = FOLLOWS_FROM if _follows(unique[span.parent_id], span) else CHILD
            graph.add_edge(span.parent_id, span_id, relation=relation)
    cut = _cut_cycles(graph)
    notes["cycles_cut"] = len(cut)
    top = [s for s in graph.nodes if graph.in_degree(s) == 0]
    orphans = [s for s in top if unique[s].parent_id is not None or s in cut]
    roots = [s for s in top if s not in set(orphans)]
    notes["orphans_adopted"] = len(orphans)
    if len(roots) == 1:
        root = roots[0]
        adoptees = orphans
    else:
        root = VIRTUAL
        adoptees = top
        starts = [unique[s].start_us for s in top]
        ends = [unique[s].end_us for s in top]
        graph.add_node(VIRTUAL, node=_Node(None, min(starts, default=0), max(ends, default=0)))
    for orphan in adoptees:
        graph.add_edge(root, orphan, relation=ADOPTED)
    graph.graph.update(root=root, trace_id=trace_id, notes=notes)
    return graph


def _follows(parent: Span, child: Span) -> bool:
    return child.follows_from or (
        parent.kind is SpanKind.PRODUCER and child.kind is SpanKind.CONSUMER
    )


def _cut_cycles(graph: nx.DiGraph) -> set[str]:
    """Remove the parent edge of every span on a cycle; those spans."""
    on_cycle: set[str] = set()
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            on_cycle |= component
    on_cycle |= {s for s in graph.nodes if graph.has_edge(s, s)}
    for span_id in on_cycle:
        for parent in list(graph.predecessors(span_id)):
            graph.remove_edge(parent, span_id)
    return on_cycle


def critical_path(spans: Iterable[Span]) -> CriticalPath:
    return critical_path_of_graph(latency_trace_graph(spans))


def critical_path_of_graph(graph: nx.DiGraph) -> CriticalPath:
    root = graph.graph["root"]
    notes = dict(graph.graph["notes"])
    notes.update(skew_corrected=0, truncated=0, dropped=0, non_blocking=0)
    _place(graph, root, notes)
    chains = {s: _chain(graph, s) for s in graph.nodes}
    segments = _segments(graph, root, chains)
    root_node: _Node = graph.nodes[root]["node"]
    return CriticalPath(
        trace_id=graph.graph["trace_id"],
        latency_us=root_node.end - root_node.start,
        segments=tuple(segments),
        notes=notes,
    )


def _place(graph: nx.DiGraph, root: str, notes: dict[str, int]) -> None:
    """Top-down: skew correction, truncation, dropping (breadth first, iterative)."""
    queue = deque([root])
    while queue:
        parent_key = queue.popleft()
        parent: _Node = graph.nodes[parent_key]["node"]
        for child_key in graph.successors(parent_key):
            relation = graph.edges[parent_key, child_key]["relation"]
            _place_child(parent, graph.nodes[child_key]["node"], relation, notes)
            queue.append(child_key)


def _place_child(parent: _Node, child: _Node, relation: str, notes: dict[str, int]) -> None:
    follows = relation == FOLLOWS_FROM
    start, end = child.start + parent.offset, child.end + parent.offset
    cross_host = (
        relation == CHILD
        and parent.kind is SpanKind.CLIENT
        and child.kind is SpanKind.SERVER
        and (child.host != parent.host or not child.host or not parent.host)
    )
    fits = parent.start <= start and end <= parent.end
    delta = 0
    if cross_host and not fits and not follows:
        if end - start <= parent.end - parent.start:
            delta = parent.start + ((parent.end - parent.start) - (end - start)) // 2 - start
        else:
            delta = parent.start - start
        notes["skew_corrected"] += 1
    start, end = start + delta, end + delta
    child.offset = parent.offset + delta
    outside = end < parent.start or start > parent.end
    child.dropped = parent.dropped or (not follows and outside)
    child.blocking = not follows and not child.dropped
    notes["dropped"] += child.dropped
    if follows:
        child.start, child.end = start, end
        notes["non_blocking"] += 1
        return
    child.start, child.end = max(start, parent.start), min(end, parent.end)
    if child.blocking and (child.start, child.end) != (start, end):
        notes["truncated"] += 1


def _chain(graph: nx.DiGraph, parent_key: str) -> list[str]:
    parent: _Node = graph.nodes[parent_key]["node"]
    candidates = []
    for child_key in graph.successors(parent_key):
        child: _Node = graph.nodes[child_key]["node"]
        if child.blocking and child.end > child.start:
            candidates.append((-child.end, child.start, child.ident, child_key))
    horizon = parent.end
    chain = []
    for neg_end, start, _, child_key in sorted(candidates):
        if -neg_end <= horizon:
            chain.append(child_key)
            horizon = start
    return chain


def _segments(graph: nx.DiGraph, root: str, chains: dict[str, list[str]]) -> list[PathSegment]:
    """The path in time order, without recursion (a trace may be 10,000 spans deep)."""
    segments: list[PathSegment] = []
    # A frame: (span, its chain children in start order, index of the next child, time
    # up to which the span's own time has been emitted)
    root_node: _Node = graph.nodes[root]["node"]
    stack: list[tuple[str, list[str], int, int]] = [(root, chains[root][::-1], 0, root_node.start)]
    _mark(graph, root)
    while stack:
        key, children, index, cursor = stack.pop()
        node: _Node = graph.nodes[key]["node"]
        if index < len(children):
            child_key = children[index]
            child: _Node = graph.nodes[child_key]["node"]
            _emit(segments, node, cursor, child.start)
            stack.append((key, children, index + 1, child.end))
            _mark(graph, child_key)
            stack.append((child_key, chains[child_key][::-1], 0, child.start))
        else:
            _emit(segments, node, cursor, node.end)
    return segments


def _mark(graph: nx.DiGraph, key: str) -> None:
    graph.nodes[key]["node"].on_path = True


def _emit(segments: list[PathSegment], node: _Node, start: int, end: int) -> None:
    if end <= start:
        return
    node.self_us += end - start
    span_id = node.span.span_id if node.span else VIRTUAL
    segments.append(PathSegment(span_id, node.service, node.operation, start, end))


# --------------------------------------------------------------------------- topology


@dataclass(frozen=True)
class ServiceEdge:
    caller: str
    callee: str
    calls: int
    errors: int
    mean_us: float


def service_topology(paths: PathTable) -> nx.DiGraph:
    """Services over a window: nodes with ``requests``, ``errors``, ``spans`` and
    ``critical_self_us`` (total self time on critical paths); an edge caller -> callee
    for every parent/child span pair that crosses services, with ``calls``, ``errors``
    and ``mean_us`` (mean duration of the callee's spans on that edge)."""
    forest = paths.forest
    graph = nx.DiGraph()
    names = forest.service_names
    service = forest.service
    error = (forest.flags & 1) != 0
    spans = np.bincount(service, minlength=len(names))
    errors = np.bincount(service[error], minlength=len(names))
    critical = np.bincount(service, weights=paths.self_us, minlength=len(names))
    requests = np.bincount(service[request_mask(forest)], minlength=len(names))
    for index, name in enumerate(names):
        if spans[index]:
            graph.add_node(
                name,
                spans=int(spans[index]),
                requests=int(requests[index]),
                errors=int(errors[index]),
                critical_self_us=float(critical[index]),
            )
    for edge in _edges(forest):
        graph.add_edge(
            edge.caller, edge.callee, calls=edge.calls, errors=edge.errors, mean_us=edge.mean_us
        )
    return graph


def _edges(forest: Forest) -> Sequence[ServiceEdge]:
    child = np.flatnonzero(forest.parent >= 0)
    caller = forest.service[forest.parent[child]]
    callee = forest.service[child]
    crossing = caller != callee
    child, caller, callee = child[crossing], caller[crossing], callee[crossing]
    if not len(child):
        return []
    size = len(forest.service_names)
    pair = caller.astype(np.int64) * size + callee
    unique, inverse = grouped(pair, size * size)
    calls = np.bincount(inverse)
    errors = np.bincount(inverse, weights=(forest.flags[child] & 1) != 0)
    total = np.bincount(inverse, weights=forest.end[child] - forest.start[child])
    return [
        ServiceEdge(
            forest.service_names[int(p) // size],
            forest.service_names[int(p) % size],
            int(calls[i]),
            int(errors[i]),
            float(total[i] / calls[i]),
        )
        for i, p in enumerate(unique)
    ]


def request_mask(forest: Forest) -> np.ndarray:
    """Spans that are requests *to* their service (G_k of TopoSch eq. 3): SERVER and
    CONSUMER spans, and entry spans of other kinds (no parent, or a parent in another
    service). CLIENT and PRODUCER spans are a service's calls out, never its requests."""
    kind = forest.kind
    entry_kind = (kind == SpanKind.SERVER) | (kind == SpanKind.CONSUMER)
    other_kind = (kind == SpanKind.INTERNAL) & (forest.span_id != 0)
    parent = forest.parent
    has_parent = parent >= 0
    parent_service = forest.service[np.maximum(parent, 0)]
    parent_virtual = forest.span_id[np.maximum(parent, 0)] == 0
    entry = ~has_parent | parent_virtual | (parent_service != forest.service)
    mask: np.ndarray = entry_kind | (other_kind & entry)
    return mask
