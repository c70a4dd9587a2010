"""The Redis trace store: segments of assembled traces, read back by time window.

Writing (the ingest worker): a segment (:mod:`tracing.segment`) goes in with its index
entry in one MULTI/EXEC, so a reader never sees an unindexed or half-written segment.
Each segment key expires after ``retention_s``; :meth:`TraceStore.maintain` drops index
entries of expired segments and, while the stored segments exceed
``memory_budget_bytes``, deletes the oldest ones.

Reading: :meth:`TraceStore.load` fetches the segments that may hold traces ending in the
window, concatenates them, and merges the traces that arrived in more than one piece
(late spans, redelivered entries) by assembling their spans again: a span stored twice
counts once. Traces are then kept when their end falls in the window.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import redis

from tracing.columns import (
    RawSpans,
    TraceColumns,
    assemble,
    concat_columns,
    select_traces,
)
from tracing.errors import TraceNotFound
from tracing.names import NameBook, NameTable
from tracing.redisconn import Keys, RedisConfig, as_bytes, as_text, store_errors
from tracing.segment import decode_segment, encode_segment, segment_bounds, segment_trace_ids

_FETCH_CHUNK = 64
SEGMENT_OVERHEAD_BYTES = 200  # key, index entry and size entry, roughly


@dataclass(frozen=True, kw_only=True)
class StoreLimits:
    retention_s: float = 3600.0
    memory_budget_bytes: int = 256 << 20


@dataclass(frozen=True)
class StoreUsage:
    segments: int
    bytes: int


@dataclass(frozen=True)
class LoadedTraces:
    columns: TraceColumns
    names: NameTable
    segments: int
    merged_traces: int  # traces that were stored in more than one piece


class TraceStore:
    def __init__(
        self,
        client: redis.Redis,
        config: RedisConfig,
        limits: StoreLimits | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self.keys = Keys(config.prefix)
        self.limits = limits or StoreLimits()
        self.names = NameBook(client, self.keys)

    @property
    def sizes_key(self) -> str:
        return f"{self.keys.prefix}:segsize"

    # ------------------------------------------------------------------ writing

    def write(self, columns: TraceColumns) -> str:
        """Store ``columns`` as one new segment; its key."""
        payload = encode_segment(columns)
        _, max_end = segment_bounds(payload)
        with store_errors(self.config, "writing a trace segment"):
            number = int(self.client.incr(self.keys.seq))
            key = self.keys.segment(number)
            pipe = self.client.pipeline(transaction=True)
            pipe.set(key, payload, px=int(self.limits.retention_s * 1000))
            pipe.zadd(self.keys.segments, {key: max_end})
            pipe.hset(self.sizes_key, key, len(payload))
            pipe.execute()
        return key

    def maintain(self) -> int:
        """Forget expired segments, then delete the oldest while over budget; how many
        segments were deleted for the budget."""
        with store_errors(self.config, "maintaining the trace store"):
            keys = [as_text(k) for k in self.client.zrange(self.keys.segments, 0, -1)]
            exists = self._exists(keys)
            gone = [k for k, alive in zip(keys, exists, strict=True) if not alive]
            if gone:
                self._forget(gone)
            return self._enforce_budget([k for k in keys if k not in set(gone)])

    def _exists(self, keys: list[str]) -> list[bool]:
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.exists(key)
        return [bool(x) for x in pipe.execute()]

    def _forget(self, keys: list[str]) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.zrem(self.keys.segments, *keys)
        pipe.hdel(self.sizes_key, *keys)
        pipe.unlink(*keys)
        pipe.execute()

    def _enforce_budget(self, oldest_first: list[str]) -> int:
        sizes = self.client.hgetall(self.sizes_key)
        size_of = {as_text(k): int(v) + SEGMENT_OVERHEAD_BYTES for k, v in sizes.items()}
        total = sum(size_of.get(k, 0) for k in oldest_first)
        doomed: list[str] = []
        for key in oldest_first:
            if total <= self.limits.memory_budget_bytes:
                break
            doomed.append(key)
            total -= size_of.get(key, 0)
        if doomed:
            self._forget(doomed)
        return len(doomed)

    def usage(self) -> StoreUsage:
        with store_errors(self.config, "reading the trace store's size"):
            sizes = self.client.hvals(self.sizes_key)
        return StoreUsage(len(sizes), sum(int(s) for s in sizes))

    # ------------------------------------------------------------------ reading

    def load(self, start_us: int | None = None, end_us: int | None = None) -> LoadedTraces:
        """Traces whose last span ends in [start_us, end_us] (None: unbounded)."""
        with store_errors(self.config, "reading trace segments"):
            low = "-inf" if start_us is None else start_us
            keys = [as_bytes(k) for k in self.client.zrangebyscore(self.keys.segments, low, "+inf")]
            payloads = self._fetch(keys)
            names = self.names.table()
        parts = [
            decode_segment(p)
            for p in payloads
            if p is not None and (end_us is None or segment_bounds(p)[0] <= end_us)
        ]
        columns, merged = merge_duplicates(concat_columns(parts))
        columns = within(columns, start_us, end_us)
        return LoadedTraces(columns, names, len(parts), merged)

    def _fetch(self, keys: list[bytes]) -> list[bytes | None]:
        payloads: list[bytes | None] = []
        for first in range(0, len(keys), _FETCH_CHUNK):
            got = self.client.mget(keys[first : first + _FETCH_CHUNK])
            payloads += [as_bytes(p) if p is not None else None for p in got]
        return payloads

    def find(self, trace_id: str) -> LoadedTraces:
        """The stored trace with this id (all its pieces, merged). Scans every segment's
        trace ids (a few segments at a time) and decodes only those that hold it."""
        wanted = np.frombuffer(bytes.fromhex(trace_id), dtype="V16")[0]
        pieces: list[TraceColumns] = []
        with store_errors(self.config, "looking for a trace"):
            keys = [as_bytes(k) for k in self.client.zrange(self.keys.segments, 0, -1)]
            for first in range(0, len(keys), _FETCH_CHUNK):
                for payload in self._fetch(keys[first : first + _FETCH_CHUNK]):
                    if payload is not None and bool((segment_trace_ids(payload) == wanted).any()):
                        columns = decode_segment(payload)
                        hits = np.flatnonzero(columns.trace_ids == wanted)
                        pieces.append(select_traces(columns, hits))
            names = self.names.table()
        if not pieces:
            raise TraceNotFound(f"no stored trace has id {trace_id}")
        columns, merged = merge_duplicates(concat_columns(pieces))
        return LoadedTraces(columns, names, len(pieces), merged)

    def newest_end_us(self) -> int | None:
        with store_errors(self.config, "reading the trace index"):
            newest = self.client.zrange(self.keys.segments, -1, -1, withscores=True)
        return int(newest[0][1]) if newest else None


def trace_ends(columns: TraceColumns) -> np.ndarray:
    """Per trace, the end of its last span (absolute µs)."""
    if not columns.n_traces:
        return np.zeros(0, np.int64)
    starts = columns.offsets[:-1]
    nonempty = np.diff(columns.offsets) > 0
    ends = np.zeros(columns.n_traces, np.int64)
    ends[nonempty] = np.maximum.reduceat(columns.end, starts[nonempty])
    absolute: np.ndarray = ends + columns.base
    return absolute


def within(columns: TraceColumns, start_us: int | None, end_us: int | None) -> TraceColumns:
    if start_us is None and end_us is None:
        return columns
    ends = trace_ends(columns)
    keep = np.ones(len(ends), bool)
    if start_us is not None:
        keep &= ends >= start_us
    if end_us is not None:
        keep &= ends <= end_us
    if bool(keep.all()):
        return columns
    return select_traces(columns, np.flatnonzero(keep))


def merge_duplicates(columns: TraceColumns) -> tuple[TraceColumns, int]:
    """Traces stored in several pieces become one (each span counted once); how many."""
    if columns.n_traces < 2:
        return columns, 0
    halves = columns.trace_ids.view("<u8").reshape(-1, 2)
    order = np.lexsort((halves[:, 1], halves[:, 0]))
    ordered = halves[order]
    same = np.all(ordered[1:] == ordered[:-1], axis=1)
    if not bool(same.any()):
        return columns, 0
    repeated = np.zeros(columns.n_traces, bool)
    repeated[order[1:][same]] = True
    repeated[order[:-1][same]] = True
    pieces = np.flatnonzero(repeated)
    raw = select_traces(columns, pieces).to_raw()
    _, slot = np.unique(halves[pieces], axis=0, return_inverse=True)
    slot = slot.reshape(-1)
    first_piece = np.zeros(slot.max() + 1, np.int64)
    first_piece[slot[::-1]] = pieces[::-1]
    merged_raw = RawSpans(
        columns.trace_ids[first_piece],
        slot[raw.trace],
        raw.span,
        raw.parent,
        raw.start,
        raw.end,
        raw.endpoint,
        raw.placement,
        raw.kind,
        raw.flags,
    )
    merged = assemble(merged_raw).columns
    rest = select_traces(columns, np.flatnonzero(~repeated))
    return concat_columns([rest, merged]), merged.n_traces


def now_us() -> int:
    return time.time_ns() // 1000
