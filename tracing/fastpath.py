"""Critical paths of every trace at once, with numpy (the fast path).

Same semantics as the networkx reference (:mod:`tracing.graph`, which documents them),
computed level by level over all traces together instead of span by span:

1. Spans are ordered by depth (a stable radix sort); each level is a handful of vector
   operations.
2. Top-down, a child's window is fixed against its parent's: a server span whose
   client parent runs on another host and does not fit in it is shifted, with its
   whole subtree, to sit centred in the client (clock skew); then it is truncated to
   the parent's window, or dropped with its subtree when it lies wholly outside.
   Follows-from children (and a CONSUMER under a PRODUCER) are not blocking.
3. Per parent, the blocking children are ordered by end (latest first; ties: earlier
   start, then smaller span id) and the *last-finishing-child chain* is picked: the
   first child, then each next child that ended no later than the previous pick started.
4. A span is on the critical path when its parent is and it is in its parent's chain;
   its self time on the path is its window minus its chain children's windows. The
   self times of a trace add up to its root's duration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracing.forest import UNKNOWN_HOST, Forest
from tracing.model import SpanKind
from tracing.wire import FLAG_FOLLOWS_FROM

_END_BITS = 32
_END_LIMIT = (1 << _END_BITS) - 1


@dataclass(frozen=True)
class PathTable:
    """Per span of ``forest``: its window after skew correction and truncation, whether
    it blocks its parent, whether it is on the critical path and its self time there."""

    forest: Forest
    start: np.ndarray
    end: np.ndarray
    blocking: np.ndarray  # bool
    on_path: np.ndarray  # bool
    self_us: np.ndarray  # int64
    latency_us: np.ndarray  # int64 per trace
    skew_corrected: int
    truncated: int
    dropped: int
    non_blocking: int

    def notes(self) -> dict[str, int]:
        return {
            "orphans_adopted": self.forest.orphans,
            "cycles_cut": self.forest.cycles_cut,
            "skew_corrected": self.skew_corrected,
            "truncated": self.truncated,
            "dropped": self.dropped,
            "non_blocking": self.non_blocking,
        }


def critical_paths(forest: Forest) -> PathTable:
    n = forest.n_spans
    deepest = int(forest.depth.max(initial=0))
    narrow = forest.depth.astype(np.uint16) if deepest < 1 << 16 else forest.depth
    order = np.argsort(narrow, kind="stable")  # a radix sort for 16-bit keys
    bounds = np.searchsorted(narrow[order], np.arange(deepest + 2))
    position = np.empty(n, np.int64)  # each span's index within its level
    position[order] = np.arange(n) - bounds[narrow[order]]
    state = _State.begin(forest, n)
    chain = np.zeros(n, bool)
    for level in range(1, len(bounds) - 1):
        spans = order[bounds[level] : bounds[level + 1]]
        if len(spans):
            candidates = state.place(spans)
            width = int(bounds[level] - bounds[level - 1])
            chain[_chain(forest, state, candidates, position, width)] = True
    on_path = _on_path(forest, order, bounds, chain)
    return state.finish(forest, on_path)


def _edge_classes(forest: Forest) -> tuple[np.ndarray, np.ndarray]:
    """Per span: does it not block its parent (follows-from), and is it a server span
    under a client span on another (or an unknown) host (clock skew may apply)."""
    parent = np.maximum(forest.parent, 0)
    kind, parent_kind = forest.kind, forest.kind[parent]
    host, parent_host = forest.host, forest.host[parent]
    adopted = forest.adopted | (forest.parent < 0)
    follows = ((forest.flags & FLAG_FOLLOWS_FROM) != 0) | (
        (parent_kind == SpanKind.PRODUCER) & (kind == SpanKind.CONSUMER)
    )
    follows &= ~adopted  # an orphan's flag speaks of its lost parent, not the adopter
    cross_host = (parent_kind == SpanKind.CLIENT) & (kind == SpanKind.SERVER) & ~adopted
    cross_host &= (host != parent_host) | (host == UNKNOWN_HOST) | (parent_host == UNKNOWN_HOST)
    return follows, cross_host & ~follows


@dataclass
class _State:
    forest: Forest
    start: np.ndarray
    end: np.ndarray
    offset: np.ndarray
    dropped: np.ndarray
    blocking: np.ndarray
    follows: np.ndarray
    cross_host: np.ndarray
    skew_corrected: int = 0
    truncated: int = 0

    @classmethod
    def begin(cls, forest: Forest, n: int) -> _State:
        follows, cross_host = _edge_classes(forest)
        return cls(
            forest=forest,
            start=forest.start.copy(),
            end=forest.end.copy(),
            offset=np.zeros(n, np.int64),
            dropped=np.zeros(n, bool),
            blocking=np.zeros(n, bool),
            follows=follows,
            cross_host=cross_host,
        )

    def place(self, spans: np.ndarray) -> np.ndarray:
        """Fix the windows of one level of spans; the ones that may join a chain."""
        parent = self.forest.parent[spans]
        shift = self.offset[parent]
        child_start = self.forest.start[spans] + shift
        child_end = self.forest.end[spans] + shift
        parent_start, parent_end = self.start[parent], self.end[parent]
        self._correct_skew(spans, child_start, child_end, parent_start, parent_end, shift)
        self.offset[spans] = shift
        new_start = np.maximum(child_start, parent_start)
        new_end = np.minimum(child_end, parent_end)
        dropped = (child_end < parent_start) | (child_start > parent_end)
        follows = np.flatnonzero(self.follows[spans])
        if len(follows):  # not truncated, never dropped for lying outside
            new_start[follows] = child_start[follows]
            new_end[follows] = child_end[follows]
            dropped[follows] = False
        dropped |= self.dropped[parent]
        self.start[spans] = new_start
        self.end[spans] = new_end
        self.dropped[spans] = dropped
        blocking = ~dropped
        blocking[follows] = False
        self.blocking[spans] = blocking
        moved = (new_start != child_start) | (new_end != child_end)
        self.truncated += int(np.count_nonzero(blocking & moved))
        candidates: np.ndarray = spans[blocking & (new_end > new_start)]
        return candidates

    def _correct_skew(
        self,
        spans: np.ndarray,
        child_start: np.ndarray,
        child_end: np.ndarray,
        parent_start: np.ndarray,
        parent_end: np.ndarray,
        shift: np.ndarray,
    ) -> None:
        """Shift (in place) cross-host server spans that do not fit in their client."""
        at = np.flatnonzero(self.cross_host[spans])
        if not len(at):
            return
        cs, ce, ps, pe = child_start[at], child_end[at], parent_start[at], parent_end[at]
        skewed = (cs < ps) | (ce > pe)
        at, cs, ce, ps, pe = at[skewed], cs[skewed], ce[skewed], ps[skewed], pe[skewed]
        child_span, parent_span = ce - cs, pe - ps
        delta = np.where(
            child_span <= parent_span, ps + (parent_span - child_span) // 2 - cs, ps - cs
        )
        child_start[at] += delta
        child_end[at] += delta
        shift[at] += delta
        self.skew_corrected += len(at)

    def finish(self, forest: Forest, on_path: np.ndarray) -> PathTable:
        duration = self.end - self.start
        self_us = np.where(on_path, duration, 0)
        on_children = np.flatnonzero(on_path & (forest.parent >= 0))
        np.subtract.at(self_us, forest.parent[on_children], duration[on_children])
        return PathTable(
            forest=forest,
            start=self.start,
            end=self.end,
            blocking=self.blocking,
            on_path=on_path,
            self_us=self_us,
            latency_us=duration[forest.root],
            skew_corrected=self.skew_corrected,
            truncated=self.truncated,
            dropped=int(np.count_nonzero(self.dropped)),
            non_blocking=int(np.count_nonzero(self.follows)),
        )


def _chain(
    forest: Forest, state: _State, spans: np.ndarray, position: np.ndarray, parents: int
) -> np.ndarray:
    """Of one level's candidate children, the ones on their parent's last-finishing-child
    chain. An only child always is (it ends within its parent). ``position`` places each
    parent within its level of ``parents`` spans."""
    if not len(spans):
        return spans
    parent_at = position[forest.parent[spans]]
    siblings = np.bincount(parent_at, minlength=parents)[parent_at]
    only = spans[siblings == 1]
    many = spans[siblings > 1]
    if not len(many):
        return np.asarray(only)
    ordered = _sorted_siblings(forest, state, many)
    parent = forest.parent[ordered]
    group_start = np.concatenate(([True], parent[1:] != parent[:-1]))
    group = np.cumsum(group_start) - 1
    firsts = np.flatnonzero(group_start)
    rank = np.arange(len(ordered)) - firsts[group]
    horizon = state.end[parent[firsts]]
    picked = np.zeros(len(ordered), bool)
    by_rank = np.argsort(rank.astype(np.uint16) if len(rank) < 1 << 16 else rank, kind="stable")
    rank_bounds = np.searchsorted(rank[by_rank], np.arange(int(rank.max()) + 2))
    starts, ends = state.start[ordered], state.end[ordered]
    for r in range(len(rank_bounds) - 1):
        at = by_rank[rank_bounds[r] : rank_bounds[r + 1]]
        owner = group[at]
        ok = ends[at] <= horizon[owner]
        picked[at[ok]] = True
        horizon[owner[ok]] = starts[at[ok]]
    return np.concatenate((only, ordered[picked]))


def _sorted_siblings(forest: Forest, state: _State, spans: np.ndarray) -> np.ndarray:
    """``spans`` ordered by (parent, end descending, start, span id)."""
    parent = forest.parent[spans]
    end = state.end[spans]
    if int(end.min()) >= 0 and int(end.max()) <= _END_LIMIT:
        key = (parent << _END_BITS) | (_END_LIMIT - end)
        order = np.argsort(key, kind="stable")
        ordered_key = key[order]
        tied = np.flatnonzero(ordered_key[1:] == ordered_key[:-1])
        if not len(tied):
            return np.asarray(spans[order])
        fixed = _break_ties(order, ordered_key, tied, state.start[spans], forest.span_id[spans])
        return np.asarray(spans[fixed])
    return spans[np.lexsort((forest.span_id[spans], state.start[spans], -end, parent))]


def _break_ties(
    order: np.ndarray, key: np.ndarray, tied: np.ndarray, start: np.ndarray, span_id: np.ndarray
) -> np.ndarray:
    """Within runs of equal keys, order by start, then span id."""
    involved = np.unique(np.concatenate((tied, tied + 1)))
    rows = order[involved]
    fixed = np.lexsort((span_id[rows], start[rows], key[involved]))
    order = order.copy()
    order[involved] = rows[fixed]
    return order


def _on_path(
    forest: Forest, order: np.ndarray, bounds: np.ndarray, chain: np.ndarray
) -> np.ndarray:
    on_path = np.zeros(forest.n_spans, bool)
    on_path[forest.root] = True
    for level in range(1, len(bounds) - 1):
        spans = order[bounds[level] : bounds[level + 1]]
        on_path[spans] = chain[spans] & on_path[forest.parent[spans]]
    return on_path
