"""The Redis trace store: segments of assembled traces, read back by time window.

Writing (the ingest worker): a segment (:mod:`tracing.segment`) goes in with its index
entry in one MULTI/EXEC, so a reader never sees an unindexed or half-written segment. A
segment carries the names its spans use (:mod:`tracing.names`), so there is no name
table to grow or to read whole: names expire with their segment.

Memory: each segment key expires after ``retention_s``; :meth:`TraceStore.maintain`
drops index entries of expired segments and, while the store's memory exceeds
``memory_budget_bytes``, deletes the oldest segments. The store's memory is the
segments' bytes plus the dead-letter stream (at most ``dead_letter_entries`` records of
bad entries, each the problem, the size and the first ``DEAD_LETTER_EXCERPT_BYTES``
bytes, never the whole entry), measured with ``MEMORY USAGE``. The name hashes earlier
versions shared (``Keys.shared_names``) are read only for segments of that version and
deleted as soon as none is left; they are not in the budget, which would otherwise
evict new traces to make room for names on their way out.

Reading: :meth:`TraceStore.load` fetches the segments that may hold traces ending in the
window, concatenates them, and merges the traces that arrived in more than one piece
(late spans, redelivered entries) by assembling their spans again: a span stored twice
counts once. Traces are then kept when their end falls in the window.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import redis
import redis.client
from redis.typing import EncodableT

from tracing.columns import (
    RawSpans,
    TraceColumns,
    assemble,
    concat_columns,
    select_traces,
)
from tracing.errors import TraceNotFound
from tracing.names import NameIndex, NameTable, localise, used_ids
from tracing.redisconn import Keys, RedisConfig, as_bytes, as_text, store_errors
from tracing.segment import (
    SHARED_NAMES_MAGIC,
    Segment,
    SegmentError,
    decode_segment,
    encode_segment,
    segment_bounds,
    segment_trace_ids,
)

log = logging.getLogger(__name__)

_FETCH_CHUNK = 64
_LOOKUP_CHUNK = 1000
SEGMENT_OVERHEAD_BYTES = 200  # key, index entry and size entry, roughly
DEAD_LETTER_EXCERPT_BYTES = 256  # enough to recognise what sent a bad entry
DEAD_LETTER_PROBLEM_CHARS = 300


@dataclass(frozen=True, kw_only=True)
class StoreLimits:
    retention_s: float = 3600.0
    memory_budget_bytes: int = 256 << 20  # segments + dead-letter stream (module docstring)
    dead_letter_entries: int = 1000  # the dead-letter stream's MAXLEN (exact)

    def __post_init__(self) -> None:
        if self.dead_letter_entries < 1:
            raise ValueError(
                f"dead_letter_entries must be at least 1, got {self.dead_letter_entries}"
            )


@dataclass(frozen=True)
class StoreUsage:
    segments: int
    bytes: int  # the segments, their names included
    dead_letter_bytes: int = 0

    @property
    def total_bytes(self) -> int:
        """What counts against the memory budget (besides per-segment overhead)."""
        return self.bytes + self.dead_letter_bytes


@dataclass(frozen=True)
class LoadedTraces:
    columns: TraceColumns
    names: NameTable
    segments: int
    merged_traces: int  # traces that were stored in more than one piece
    unreadable_segments: int = 0  # stored bytes that are not a segment: skipped, logged


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

    @property
    def sizes_key(self) -> str:
        return f"{self.keys.prefix}:segsize"

    # ------------------------------------------------------------------ writing

    def write(self, columns: TraceColumns, names: NameIndex) -> str:
        """Store ``columns`` (endpoint and placement ids of ``names``) as one new
        segment, with the names it uses; its key."""
        payload = encode_segment(*localise(columns, names))
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

    def dead_letter(
        self, pipe: redis.client.Pipeline, entry_id: bytes, payload: bytes, problem: str
    ) -> None:
        """Queue on ``pipe`` the record of a stream entry that is not a span batch: its
        id, the problem, its size and its first bytes, never the whole entry."""
        pipe.xadd(
            self.keys.dead,
            dead_letter_fields(entry_id, payload, problem),
            maxlen=self.limits.dead_letter_entries,
            approximate=False,
        )

    def maintain(self) -> int:
        """Forget expired segments, then delete the oldest while over budget; how many
        segments were deleted for the budget."""
        with store_errors(self.config, "maintaining the trace store"):
            keys = [as_text(k) for k in self.client.zrange(self.keys.segments, 0, -1)]
            magics = self._magics(keys)
            gone = [k for k, magic in zip(keys, magics, strict=True) if not magic]
            if gone:
                self._forget(gone)
            if SHARED_NAMES_MAGIC not in magics:
                self.client.unlink(*self.keys.shared_names)  # no segment needs them now
            return self._enforce_budget([k for k in keys if k not in set(gone)])

    def _magics(self, keys: list[str]) -> list[bytes]:
        """Each segment's format (its first 4 bytes; empty: expired)."""
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.getrange(key, 0, len(SHARED_NAMES_MAGIC) - 1)
        return [as_bytes(x) for x in pipe.execute()]

    def _forget(self, keys: list[str]) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.zrem(self.keys.segments, *keys)
        pipe.hdel(self.sizes_key, *keys)
        pipe.unlink(*keys)
        pipe.execute()

    def _enforce_budget(self, oldest_first: list[str]) -> int:
        sizes = self.client.hgetall(self.sizes_key)
        size_of = {as_text(k): int(v) + SEGMENT_OVERHEAD_BYTES for k, v in sizes.items()}
        total = sum(size_of.get(k, 0) for k in oldest_first) + self._dead_letter_bytes()
        doomed: list[str] = []
        for key in oldest_first:
            if total <= self.limits.memory_budget_bytes:
                break
            doomed.append(key)
            total -= size_of.get(key, 0)
        if doomed:
            self._forget(doomed)
        return len(doomed)

    def _dead_letter_bytes(self) -> int:
        """MEMORY USAGE of the dead-letter stream (an estimate from a few samples)."""
        return int(self.client.memory_usage(self.keys.dead) or 0)

    def usage(self) -> StoreUsage:
        with store_errors(self.config, "reading the trace store's size"):
            sizes = self.client.hvals(self.sizes_key)
            dead_letter = self._dead_letter_bytes()
        return StoreUsage(len(sizes), sum(int(s) for s in sizes), dead_letter)

    # ------------------------------------------------------------------ reading

    def load(self, start_us: int | None = None, end_us: int | None = None) -> LoadedTraces:
        """Traces whose last span ends in [start_us, end_us] (None: unbounded)."""
        with store_errors(self.config, "reading trace segments"):
            low = "-inf" if start_us is None else start_us
            keys = [as_bytes(k) for k in self.client.zrangebyscore(self.keys.segments, low, "+inf")]
            payloads = self._fetch(keys)
        segments, unreadable = _readable(zip(keys, payloads, strict=True), end_us)
        parts, names = self._named(segments)
        columns, merged = merge_duplicates(concat_columns(parts))
        columns = within(columns, start_us, end_us)
        return LoadedTraces(columns, names, len(parts), merged, unreadable)

    def _named(self, segments: Sequence[Segment]) -> tuple[list[TraceColumns], NameTable]:
        """The segments' columns with their names merged into one table."""
        index = NameIndex()
        shared = self._shared_names([s.columns for s in segments if s.names is None])
        parts = [
            index.adopt(s.columns, s.names)
            if s.names is not None
            else index.adopt_shared(s.columns, shared)
            for s in segments
        ]
        return parts, index.table()

    def _shared_names(self, parts: Sequence[TraceColumns]) -> dict[int, str]:
        """The texts of the ids that YTG1 segments use (only those: HMGET)."""
        if not parts:
            return {}
        ids = used_ids(np.concatenate([c for p in parts for c in (p.endpoint, p.placement)]))
        fields = [str(int(i)) for i in ids]
        texts: list[object] = []
        with store_errors(self.config, "reading the names of old trace segments"):
            for first in range(0, len(fields), _LOOKUP_CHUNK):
                chunk = fields[first : first + _LOOKUP_CHUNK]
                texts += self.client.hmget(self.keys.names_rev, chunk)
        return {
            int(field): as_text(text)
            for field, text in zip(fields, texts, strict=True)
            if text is not None
        }

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
        pieces: list[Segment] = []
        with store_errors(self.config, "looking for a trace"):
            keys = [as_bytes(k) for k in self.client.zrange(self.keys.segments, 0, -1)]
            for first in range(0, len(keys), _FETCH_CHUNK):
                chunk = keys[first : first + _FETCH_CHUNK]
                for key, payload in zip(chunk, self._fetch(chunk), strict=True):
                    piece = _piece_of(key, payload, wanted)
                    if piece is not None:
                        pieces.append(piece)
        if not pieces:
            raise TraceNotFound(f"no stored trace has id {trace_id}")
        parts, names = self._named(pieces)
        columns, merged = merge_duplicates(concat_columns(parts))
        return LoadedTraces(columns, names, len(pieces), merged)

    def close(self) -> None:
        """Release the connection."""
        self.client.close()

    def newest_end_us(self) -> int | None:
        with store_errors(self.config, "reading the trace index"):
            newest = self.client.zrange(self.keys.segments, -1, -1, withscores=True)
        return int(newest[0][1]) if newest else None


def _readable(
    stored: Iterable[tuple[bytes, bytes | None]], end_us: int | None
) -> tuple[list[Segment], int]:
    """The segments that may hold traces ending by ``end_us``; bytes that are not a
    segment (another writer, a damaged value) are skipped, counted and logged by key,
    so one bad value never hides every other trace."""
    segments: list[Segment] = []
    unreadable = 0
    for key, payload in stored:
        if payload is None:
            continue  # expired between the index and the fetch
        try:
            if end_us is None or segment_bounds(payload)[0] <= end_us:
                segments.append(decode_segment(payload))
        except SegmentError as exc:
            unreadable += 1
            log.warning("trace store: %r is not a trace segment (%s); skipped", key, exc)
    return segments, unreadable


def _piece_of(key: bytes, payload: bytes | None, wanted: np.void) -> Segment | None:
    """The part of one stored segment that belongs to trace ``wanted``, if any."""
    if payload is None:
        return None
    try:
        if not bool((segment_trace_ids(payload) == wanted).any()):
            return None
        segment = decode_segment(payload)
    except SegmentError as exc:
        log.warning("trace store: %r is not a trace segment (%s); skipped", key, exc)
        return None
    hits = np.flatnonzero(segment.columns.trace_ids == wanted)
    return Segment(select_traces(segment.columns, hits), segment.names)


def dead_letter_fields(
    entry_id: bytes, payload: bytes, problem: str
) -> dict[EncodableT, EncodableT]:
    """A dead-letter record: bounded, whatever the entry's size."""
    return {
        b"entry": entry_id,
        b"problem": problem[:DEAD_LETTER_PROBLEM_CHARS].encode("utf-8", "replace"),
        b"size": str(len(payload)).encode(),
        b"excerpt": payload[:DEAD_LETTER_EXCERPT_BYTES],
    }


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
