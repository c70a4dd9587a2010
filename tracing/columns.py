"""Traces as columns: the compact form the ingest worker stores and the fast path reads.

:class:`RawSpans` is what arrives (one row per received span, duplicates and all).
:func:`assemble` groups rows into traces, counts each (trace, span id) once, and
resolves parent span ids into in-trace indices, all with numpy over every row at once:

1. rows are ordered by a 64-bit mix of (trace, span id); equal neighbours are the same
   span delivered twice (the first copy is kept). Two different spans with the same mix
   (about 1 in 10^7 for a million spans) send the batch down the exact, slower path.
2. each row's (trace, parent span id) is looked up with a binary search in that order;
   a parent the batch does not hold is recorded as ``missing_parent`` (an orphan: the
   parent may arrive later, or never).
3. rows are grouped per trace, times become offsets from the trace's first start.

:class:`TraceColumns` is the result: per trace an id, a base time and a run of spans;
per span its id, the in-trace index of its parent (-1: none), the missing parent's id
(0: none), start and end (µs from the base), endpoint and placement ids (interned
(service, operation) and (host, container) pairs, see :mod:`tracing.names`), kind, flags
and depth. Parent links that form a cycle (corrupt input) are cut at assembly: the
spans on it keep their parent's id as a missing parent and get ``FLAG_CYCLE_CUT``; so
the links of assembled columns are acyclic and their depths exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tracing.tree import cut_cycles
from tracing.wire import FLAG_CYCLE_CUT, FLAG_HAS_PARENT

TRACE_ID_DTYPE = np.dtype("V16")
_MIX_SPAN = np.uint64(0x9E3779B97F4A7C15)
_MIX_TRACE = np.uint64(0xC2B2AE3D27D4EB4F)


@dataclass(frozen=True)
class RawSpans:
    """Received spans, one row each. ``trace`` indexes ``trace_ids``; times absolute µs."""

    trace_ids: np.ndarray  # V16, one per trace slot
    trace: np.ndarray  # int64
    span: np.ndarray  # uint64
    parent: np.ndarray  # uint64, 0 = no parent
    start: np.ndarray  # int64
    end: np.ndarray  # int64
    endpoint: np.ndarray  # uint32
    placement: np.ndarray  # uint32
    kind: np.ndarray  # uint8
    flags: np.ndarray  # uint8

    def __len__(self) -> int:
        return len(self.span)

    def take(self, rows: np.ndarray) -> RawSpans:
        return RawSpans(
            self.trace_ids,
            self.trace[rows],
            self.span[rows],
            self.parent[rows],
            self.start[rows],
            self.end[rows],
            self.endpoint[rows],
            self.placement[rows],
            self.kind[rows],
            self.flags[rows],
        )


@dataclass(frozen=True)
class TraceColumns:
    """Assembled traces; spans of trace ``t`` are rows ``offsets[t]:offsets[t+1]``."""

    trace_ids: np.ndarray  # V16
    base: np.ndarray  # int64 µs, the trace's earliest span start
    offsets: np.ndarray  # int64, n_traces + 1
    span: np.ndarray  # uint64
    parent: np.ndarray  # int32, in-trace index, -1 = none
    missing_parent: np.ndarray  # uint64, the parent id when the parent is not held
    start: np.ndarray  # int64 µs from base
    end: np.ndarray  # int64 µs from base
    endpoint: np.ndarray  # uint32
    placement: np.ndarray  # uint32
    kind: np.ndarray  # uint8
    flags: np.ndarray  # uint8
    depth: np.ndarray  # int32: distance from the trace's top-level span (links acyclic)

    @property
    def n_traces(self) -> int:
        return len(self.trace_ids)

    @property
    def n_spans(self) -> int:
        return len(self.span)

    def trace_of_span(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_traces, dtype=np.int64), np.diff(self.offsets))

    def to_raw(self) -> RawSpans:
        """Back to received rows (parent indices become span ids again)."""
        trace = self.trace_of_span()
        first = self.offsets[:-1][trace]
        has_parent = self.parent >= 0
        parent_row = np.where(has_parent, first + self.parent, 0)
        parent = np.where(has_parent, self.span[parent_row], self.missing_parent)
        base = self.base[trace]
        return RawSpans(
            self.trace_ids,
            trace,
            self.span.copy(),
            parent.astype(np.uint64),
            self.start + base,
            self.end + base,
            self.endpoint.copy(),
            self.placement.copy(),
            self.kind.copy(),
            self.flags.copy(),
        )


def empty_columns() -> TraceColumns:
    return TraceColumns(
        np.zeros(0, TRACE_ID_DTYPE),
        np.zeros(0, np.int64),
        np.zeros(1, np.int64),
        np.zeros(0, np.uint64),
        np.zeros(0, np.int32),
        np.zeros(0, np.uint64),
        np.zeros(0, np.int64),
        np.zeros(0, np.int64),
        np.zeros(0, np.uint32),
        np.zeros(0, np.uint32),
        np.zeros(0, np.uint8),
        np.zeros(0, np.uint8),
        np.zeros(0, np.int32),
    )


@dataclass(frozen=True)
class Assembled:
    columns: TraceColumns
    rows: np.ndarray  # the RawSpans row each stored span came from
    duplicates: int  # rows dropped as a second copy of a span


def assemble(raw: RawSpans) -> Assembled:
    """Group ``raw`` into traces; see the module docstring."""
    if not len(raw):
        return Assembled(empty_columns(), np.zeros(0, np.int64), 0)
    unique_rows, keys, exact = _unique_rows(raw)
    parent_rows = _parent_rows(raw, unique_rows, keys, exact)
    return _grouped(raw, unique_rows, parent_rows, len(raw) - len(unique_rows))


def _mix(ids: np.ndarray, trace: np.ndarray) -> np.ndarray:
    return (ids * _MIX_SPAN) ^ (trace.astype(np.uint64) * _MIX_TRACE)


def _unique_rows(raw: RawSpans) -> tuple[np.ndarray, np.ndarray, bool]:
    """Rows to keep (first copy of each (trace, span)), ordered by their mixed key; the
    sorted keys; and whether the exact (lexicographic) order had to be used."""
    keys = _mix(raw.span, raw.trace)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    same_key = sorted_keys[1:] == sorted_keys[:-1]
    same_span = (raw.span[order][1:] == raw.span[order][:-1]) & (
        raw.trace[order][1:] == raw.trace[order][:-1]
    )
    if bool((same_key & ~same_span).any()):  # a collision of the mix: exact order instead
        order = np.lexsort((raw.span, raw.trace))
        same_span = (raw.span[order][1:] == raw.span[order][:-1]) & (
            raw.trace[order][1:] == raw.trace[order][:-1]
        )
        keep = np.concatenate(([True], ~same_span))
        return order[keep], np.zeros(0, np.uint64), True
    keep = np.concatenate(([True], ~same_span))
    return order[keep], sorted_keys[keep], False


def _parent_rows(
    raw: RawSpans, unique_rows: np.ndarray, keys: np.ndarray, exact: bool
) -> np.ndarray:
    """For each kept row, the kept row of its parent, or -1."""
    trace = raw.trace[unique_rows]
    parent = raw.parent[unique_rows]
    if exact:
        return _parent_rows_exact(raw, unique_rows)
    wanted = _mix(parent, trace)
    by_wanted = np.argsort(wanted)  # sorted queries search much faster (cache locality)
    pos = np.empty(len(wanted), np.int64)
    pos[by_wanted] = np.searchsorted(keys, wanted[by_wanted])
    pos = np.minimum(pos, len(keys) - 1)
    found = (
        (parent != 0)
        & (keys[pos] == wanted)
        & (raw.span[unique_rows][pos] == parent)
        & (raw.trace[unique_rows][pos] == trace)
    )
    return np.where(found, unique_rows[pos], -1)


def _parent_rows_exact(raw: RawSpans, unique_rows: np.ndarray) -> np.ndarray:
    where = {
        (int(t), int(s)): int(r)
        for t, s, r in zip(raw.trace[unique_rows], raw.span[unique_rows], unique_rows, strict=True)
    }
    return np.array(
        [
            where.get((int(t), int(p)), -1) if p else -1
            for t, p in zip(raw.trace[unique_rows], raw.parent[unique_rows], strict=True)
        ],
        dtype=np.int64,
    )


def _grouped(
    raw: RawSpans, unique_rows: np.ndarray, parent_rows: np.ndarray, duplicates: int
) -> Assembled:
    by_trace = np.argsort(raw.trace[unique_rows], kind="stable")
    rows = unique_rows[by_trace]
    parent_rows = parent_rows[by_trace]
    trace = raw.trace[rows]
    starts = np.flatnonzero(np.concatenate(([True], trace[1:] != trace[:-1])))
    offsets = np.append(starts, len(rows)).astype(np.int64)
    position = np.empty(len(raw), np.int64)
    position[rows] = np.arange(len(rows))
    trace_index = np.repeat(np.arange(len(starts)), np.diff(offsets))
    first = offsets[:-1][trace_index]
    has_parent = parent_rows >= 0
    parent_global = np.where(has_parent, position[np.maximum(parent_rows, 0)], -1)
    parent_global, cut, depth, _ = cut_cycles(parent_global)
    has_parent &= ~cut
    parent_local = np.where(has_parent, parent_global - first, -1)
    claimed_parent = (raw.flags[rows] & FLAG_HAS_PARENT).astype(bool)
    missing = np.where(claimed_parent & ~has_parent, raw.parent[rows], 0).astype(np.uint64)
    flags = raw.flags[rows] | np.where(cut, FLAG_CYCLE_CUT, 0).astype(np.uint8)
    start = raw.start[rows]
    base = np.minimum.reduceat(start, starts)
    base_of_span = base[trace_index]
    columns = TraceColumns(
        trace_ids=raw.trace_ids[trace[starts]],
        base=base.astype(np.int64),
        offsets=offsets,
        span=raw.span[rows],
        parent=parent_local.astype(np.int32),
        missing_parent=missing,
        start=start - base_of_span,
        end=raw.end[rows] - base_of_span,
        endpoint=raw.endpoint[rows],
        placement=raw.placement[rows],
        kind=raw.kind[rows],
        flags=flags,
        depth=depth.astype(np.int32),
    )
    return Assembled(columns, rows, duplicates)


def concat_columns(parts: Sequence[TraceColumns]) -> TraceColumns:
    """One TraceColumns holding every trace of ``parts`` (in order; no merging)."""
    parts = [p for p in parts if p.n_traces]
    if not parts:
        return empty_columns()
    if len(parts) == 1:
        return parts[0]
    sizes = np.array([p.n_spans for p in parts], np.int64)
    shifts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    offsets = np.concatenate(
        [p.offsets[:-1] + shift for p, shift in zip(parts, shifts, strict=True)]
        + [np.array([sizes.sum()], np.int64)]
    )

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(p, name) for p in parts])

    return TraceColumns(
        cat("trace_ids"),
        cat("base"),
        offsets,
        cat("span"),
        cat("parent"),
        cat("missing_parent"),
        cat("start"),
        cat("end"),
        cat("endpoint"),
        cat("placement"),
        cat("kind"),
        cat("flags"),
        cat("depth"),
    )


def select_traces(columns: TraceColumns, traces: np.ndarray) -> TraceColumns:
    """The traces at indices ``traces`` (in that order)."""
    counts = np.diff(columns.offsets)[traces]
    firsts = columns.offsets[:-1][traces]
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    rows = np.repeat(firsts - offsets[:-1], counts) + np.arange(offsets[-1])
    return TraceColumns(
        columns.trace_ids[traces],
        columns.base[traces],
        offsets,
        columns.span[rows],
        columns.parent[rows],
        columns.missing_parent[rows],
        columns.start[rows],
        columns.end[rows],
        columns.endpoint[rows],
        columns.placement[rows],
        columns.kind[rows],
        columns.flags[rows],
        columns.depth[rows],
    )


def split_columns(columns: TraceColumns, max_spans: int) -> list[TraceColumns]:
    """``columns`` cut into runs of whole traces of at most ``max_spans`` spans (a trace
    larger than that is a run of its own)."""
    if columns.n_spans <= max_spans:
        return [columns]
    parts: list[TraceColumns] = []
    first = 0
    while first < columns.n_traces:
        limit = columns.offsets[first] + max_spans
        last = int(np.searchsorted(columns.offsets, limit, side="right")) - 1
        last = max(last, first + 1)
        parts.append(select_traces(columns, np.arange(first, min(last, columns.n_traces))))
        first = last
    return parts
