"""Stored traces made ready for the critical path: one rooted tree per trace.

The rules (the networkx reference in :mod:`tracing.graph` follows the same ones):

- A *top-level* span has no parent in the trace. It is a *true root* when it never had
  one, an *orphan* when its parent is missing (lost, or not arrived yet).
- Parent links that form a cycle (corrupt input) are cut: every span on the cycle
  becomes an orphan.
- A trace with exactly one true root: the orphans are adopted by it. Every span of a
  trace descends from its root, so the root is the nearest ancestor known for certain;
  the missing spans' time counts as the root's own time.
- Otherwise (no true root, or several): a virtual root spanning all top-level spans
  (service ``(missing root)``) is added and adopts them all. Its self time is the time
  no span of the trace was running.

Dense ids are assigned per table: services and hosts by name (host 0 is "unknown").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracing.columns import TraceColumns
from tracing.names import NameTable
from tracing.npkit import distinct
from tracing.tree import depths
from tracing.wire import FLAG_CYCLE_CUT

MISSING_ROOT = "(missing root)"
UNKNOWN_HOST = 0
VIRTUAL_ENDPOINT = 0  # interned ids start at 1


@dataclass(frozen=True)
class Forest:
    """Per span (stored spans first, then one virtual root per trace that needs one)."""

    columns: TraceColumns
    trace: np.ndarray  # int64
    parent: np.ndarray  # int64, global index, -1 for the root
    adopted: np.ndarray  # bool: the parent link was made here (orphan or virtual root)
    start: np.ndarray  # int64 µs from the trace base
    end: np.ndarray
    kind: np.ndarray  # uint8
    flags: np.ndarray  # uint8
    span_id: np.ndarray  # uint64 (0 for virtual roots)
    service: np.ndarray  # int32, index into service_names
    operation: np.ndarray  # int32, index into operation_names
    host: np.ndarray  # int32, index into host_names (0: unknown)
    root: np.ndarray  # int64 per trace: its root span
    depth: np.ndarray  # int64: distance from the root
    service_names: list[str]
    operation_names: list[str]
    host_names: list[str]
    cycles_cut: int
    orphans: int

    @property
    def n_spans(self) -> int:
        return len(self.parent)

    @property
    def n_stored(self) -> int:
        return self.columns.n_spans


def build_forest(columns: TraceColumns, names: NameTable) -> Forest:
    n = columns.n_spans
    trace = columns.trace_of_span()
    first = columns.offsets[:-1][trace]
    parent = np.where(columns.parent >= 0, columns.parent.astype(np.int64) + first, -1)
    cut = (columns.flags & FLAG_CYCLE_CUT) != 0  # cut at assembly (tracing.columns)
    top = parent < 0
    orphan = top & ((columns.missing_parent != 0) | cut)
    true_root = top & ~orphan
    roots_per_trace = np.bincount(trace[true_root], minlength=columns.n_traces)
    single = roots_per_trace == 1
    root = np.full(columns.n_traces, -1, np.int64)
    root[trace[true_root & single[trace]]] = np.flatnonzero(true_root & single[trace])
    adopt = orphan & single[trace]
    parent[adopt] = root[trace[adopt]]
    adopted = adopt.copy()
    needs_virtual = np.flatnonzero(~single)
    endpoint = columns.endpoint
    start, end = columns.start, columns.end
    kind, flags, span_id = columns.kind, columns.flags, columns.span
    placement = columns.placement
    adopted_top = adopt | (top & ~single[trace])  # re-parented top-level spans
    depth = _depth_after_adoption(columns, parent, trace, adopted_top)
    if len(needs_virtual):
        depth = np.concatenate([depth, np.zeros(len(needs_virtual), np.int64)])
        (trace, parent, adopted, start, end, kind, flags, span_id, endpoint, placement, root) = (
            _add_virtual_roots(columns, needs_virtual, trace, parent, adopted, top, root, n)
        )
    service, operation, service_names, operation_names = _endpoint_ids(endpoint, names)
    host, host_names = _host_ids(placement, names)
    return Forest(
        columns=columns,
        trace=trace,
        parent=parent,
        adopted=adopted,
        start=start,
        end=end,
        kind=kind,
        flags=flags,
        span_id=span_id,
        service=service,
        operation=operation,
        host=host,
        root=root,
        depth=depth,
        service_names=service_names,
        operation_names=operation_names,
        host_names=host_names,
        cycles_cut=int(cut.sum()),
        orphans=int(orphan.sum()),
    )


def _depth_after_adoption(
    columns: TraceColumns, parent: np.ndarray, trace: np.ndarray, adopted_top: np.ndarray
) -> np.ndarray:
    """Stored depths, one deeper under every re-parented top-level span. Only the traces
    with such a span are walked (a trace usually has none)."""
    depth = columns.depth.astype(np.int64)
    if not bool(adopted_top.any()):
        return depth
    affected = np.zeros(columns.n_traces, bool)
    affected[trace[adopted_top]] = True
    rows = np.flatnonzero(affected[trace])
    local = np.full(len(parent), -1, np.int64)
    local[rows] = np.arange(len(rows))
    stored_parent = parent[rows].copy()
    stored_parent[adopted_top[rows]] = -1  # the links as stored, before adoption
    found = depths(np.where(stored_parent >= 0, local[np.maximum(stored_parent, 0)], -1))
    assert found is not None  # assembled links are acyclic
    depth[rows] += adopted_top[rows[found[1]]]
    return depth


def _add_virtual_roots(
    columns: TraceColumns,
    traces: np.ndarray,
    trace: np.ndarray,
    parent: np.ndarray,
    adopted: np.ndarray,
    top: np.ndarray,
    root: np.ndarray,
    n: int,
) -> tuple[np.ndarray, ...]:
    virtual = n + np.arange(len(traces))
    needs = np.zeros(columns.n_traces, bool)
    needs[traces] = True
    top_rows = np.flatnonzero(top & needs[trace])
    slot = np.full(columns.n_traces, -1, np.int64)
    slot[traces] = np.arange(len(traces))
    v_start = np.full(len(traces), np.iinfo(np.int64).max)
    v_end = np.full(len(traces), np.iinfo(np.int64).min)
    np.minimum.at(v_start, slot[trace[top_rows]], columns.start[top_rows])
    np.maximum.at(v_end, slot[trace[top_rows]], columns.end[top_rows])
    parent = parent.copy()
    parent[top_rows] = virtual[slot[trace[top_rows]]]
    adopted = adopted.copy()
    adopted[top_rows] = True
    root = root.copy()
    root[traces] = virtual
    count = len(traces)

    def grow(column: np.ndarray, fill: np.ndarray | int) -> np.ndarray:
        extra = np.broadcast_to(np.asarray(fill, dtype=column.dtype), (count,))
        return np.concatenate([column, extra])

    return (
        grow(trace, traces),
        grow(parent, -1),
        grow(adopted, False),
        grow(columns.start, v_start),
        grow(columns.end, v_end),
        grow(columns.kind, 0),
        grow(columns.flags, 0),
        grow(columns.span, 0),
        grow(columns.endpoint, VIRTUAL_ENDPOINT),
        grow(columns.placement, 0),
        root,
    )


def _endpoint_ids(
    endpoint: np.ndarray, names: NameTable
) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    used = distinct(endpoint, int(endpoint.max(initial=0)) + 1)
    service_index: dict[str, int] = {}
    operation_index: dict[str, int] = {}
    size = int(used.max()) + 1 if len(used) else 1
    service_of = np.zeros(size, np.int32)
    operation_of = np.zeros(size, np.int32)
    for ident in used:
        if int(ident) == VIRTUAL_ENDPOINT:
            service, operation = MISSING_ROOT, ""
        else:
            service, operation = names.endpoint(int(ident))
        service_of[ident] = service_index.setdefault(service, len(service_index))
        operation_of[ident] = operation_index.setdefault(operation, len(operation_index))
    return service_of[endpoint], operation_of[endpoint], list(service_index), list(operation_index)


def _host_ids(placement: np.ndarray, names: NameTable) -> tuple[np.ndarray, list[str]]:
    used = distinct(placement, int(placement.max(initial=0)) + 1)
    host_index: dict[str, int] = {"": UNKNOWN_HOST}
    size = int(used.max()) + 1 if len(used) else 1
    host_of = np.zeros(size, np.int32)
    for ident in used:
        host, _ = names.placement(int(ident)) if int(ident) else ("", "")
        host_of[ident] = host_index.setdefault(host, len(host_index))
    return host_of[placement], list(host_index)
