"""An in-process trace store: spans written in this process, read back exactly as the
Redis store is read (:meth:`~tracing.store.TraceStore.load`, ``newest_end_us``), for
``yarn-adapt demo``'s simulated services.

Spans are assembled as the ingest worker assembles them
(:func:`~tracing.convert.columns_from_spans`) with one name index for every segment,
so a load is the segments' columns concatenated, pieces of one trace merged
(:func:`~tracing.store.merge_duplicates`) and cut to the window
(:func:`~tracing.store.within`) -- the Redis store's own steps after its reads.
Segments whose traces all ended more than ``retention_s`` before the newest are
dropped at each write. Nothing is shared between processes and nothing survives one.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracing.columns import TraceColumns, concat_columns
from tracing.convert import columns_from_spans
from tracing.model import Span
from tracing.names import NameIndex
from tracing.store import LoadedTraces, merge_duplicates, trace_ends, within


class MemoryTraceStore:
    def __init__(self, *, retention_s: float = 3600.0) -> None:
        if not retention_s > 0:
            raise ValueError(f"retention_s must be positive, got {retention_s!r}")
        self.retention_s = retention_s
        self._names = NameIndex()
        self._segments: list[tuple[int, TraceColumns]] = []  # (newest end µs, columns)

    def write_spans(self, spans: Sequence[Span]) -> None:
        """Store ``spans`` (whole traces) as one segment."""
        if not spans:
            return
        columns, _ = columns_from_spans(spans, self._names)
        if not columns.n_traces:
            return
        self._segments.append((int(trace_ends(columns).max()), columns))
        oldest_kept_us = self._segments[-1][0] - int(self.retention_s * 1e6)
        self._segments = [(end, c) for end, c in self._segments if end >= oldest_kept_us]

    def load(self, start_us: int | None = None, end_us: int | None = None) -> LoadedTraces:
        """Traces whose last span ends in [start_us, end_us] (None: unbounded)."""
        parts = [c for end, c in self._segments if start_us is None or end >= start_us]
        columns, merged = merge_duplicates(concat_columns(parts))
        return LoadedTraces(within(columns, start_us, end_us), self._names.table(),
                            len(parts), merged)  # fmt: skip

    def newest_end_us(self) -> int | None:
        return max((end for end, _ in self._segments), default=None)

    def close(self) -> None:
        """Nothing to release (the Redis store closes its connection)."""
