"""The ingest worker: span batches from the Redis stream -> assembled, stored traces.

Delivery is at-least-once and storage idempotent:

- The worker reads with a consumer group (XREADGROUP). An entry stays pending (in the
  group's PEL) until every trace with a span in it has been stored; only then is it
  XACKed. A worker that dies leaves its entries pending; another worker (or the same
  one restarted) takes them over with XAUTOCLAIM once they have been idle for
  ``claim_idle_s``. At start a worker first re-reads its own pending entries.
- A trace is complete when none of its spans arrived for ``quiet_s`` (the worker's
  clock). Complete traces are assembled (:func:`tracing.columns.assemble`: a span
  received twice counts once) and written as one segment per flush.
- A span that arrives after its trace was stored, or an entry processed twice (a worker
  died between writing a segment and acknowledging), only adds another piece of the
  trace: the store merges pieces when it reads them, counting each span once.
- An entry that is not a valid batch is logged (one line: entry id, size, problem),
  recorded in the dead-letter stream (bounded: the problem, the size and the first
  bytes, see :meth:`tracing.store.TraceStore.dead_letter`) and acknowledged; it never
  stops the others.
- Spans of a host whose clock runs more than ``max_clock_ahead_s`` ahead of the moment
  Redis added their entry are moved back (:mod:`tracing.clocks`), flagged, counted
  (``clock_ahead_spans``) and logged once a minute per host: a stored span never ends
  in the future, so it cannot drag a reader's window there.
- Names are interned in the worker's own memory and written with each segment
  (:mod:`tracing.names`); past ``max_names`` the worker forgets those no held span uses.
- Acknowledged entries are trimmed from the stream (XTRIM MINID up to the oldest entry
  still pending or undelivered), so the stream holds only work in progress.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import redis

from tracing.batch import NAME_CACHE_SIZE, BatchError, DecodedBatch, decode_batch
from tracing.clocks import HostAhead, entry_stamp_us, pull_back
from tracing.columns import TRACE_ID_DTYPE, RawSpans, assemble, split_columns
from tracing.names import NameIndex, endpoint_text, placement_text
from tracing.npkit import distinct
from tracing.redisconn import Keys, is_transient, store_errors
from tracing.store import TraceStore
from tracing.wire import FIELD

log = logging.getLogger("tracing.ingest")
SEGMENT_SPANS = 32_768  # about 1 MB a segment: small reads, little allocator slack
CLOCK_WARNING_EVERY_S = 60.0  # per host


def default_consumer() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True, kw_only=True)
class IngestConfig:
    consumer: str = field(default_factory=default_consumer)
    quiet_s: float = 5.0
    read_entries: int = 64
    block_ms: int = 200
    # Quiet traces are stored at most this often: storing after every read of a few
    # entries cost the worker 5.7 µs a span at 87,000 spans/s (3.4 µs so), and a trace
    # is stored at most this much later than its quiet period.
    flush_every_s: float = 0.1
    claim_idle_s: float = 60.0
    claim_every_s: float = 10.0
    maintain_every_s: float = 10.0
    max_held_spans: int = 2_000_000
    # Spans may end this long after Redis added their entry before they count as coming
    # from a clock that runs ahead (tracing.clocks): beyond an exporter's flush delay
    # (0.2 s) and NTP's error (ms), room for a host that syncs rarely or a VM just
    # resumed; a twelfth of the guard's default 60 s window, which ends at the clock.
    max_clock_ahead_s: float = 5.0
    max_names: int = 100_000  # interned names kept in memory before unused ones go

    def __post_init__(self) -> None:
        if self.quiet_s < 0 or self.read_entries < 1 or self.block_ms < 0 or self.flush_every_s < 0:
            raise ValueError(
                "quiet_s >= 0, read_entries >= 1, block_ms >= 0 and flush_every_s >= 0 are required"
            )
        if self.max_clock_ahead_s < 0 or self.max_names < 1:
            raise ValueError("max_clock_ahead_s >= 0 and max_names >= 1 are required")
        if self.claim_idle_s <= self.quiet_s:
            # Otherwise a healthy worker's entries, held while their traces go quiet,
            # would be claimed away by the others.
            raise ValueError("claim_idle_s must be longer than quiet_s")


@dataclass
class IngestCounters:
    entries: int = 0
    spans: int = 0  # received, duplicates included
    duplicates: int = 0
    dead_entries: int = 0
    claimed_entries: int = 0
    traces_stored: int = 0
    spans_stored: int = 0
    segments: int = 0
    acked: int = 0
    clock_ahead_spans: int = 0  # moved back: their host's clock ran ahead (tracing.clocks)
    clock_ahead_max_s: float = 0.0  # the furthest ahead a host was seen
    busy_s: float = 0.0  # time spent reading, assembling and writing (not waiting)


@dataclass
class _Chunk:
    """The spans of one stream entry: the wire records (zero-copy), each span's trace
    slot and its interned endpoint and placement ids."""

    entry: int
    records: np.ndarray  # WIRE_DTYPE
    trace: np.ndarray  # int64 slot
    endpoint: np.ndarray  # uint32
    placement: np.ndarray  # uint32

    def renamed(self, lookup: np.ndarray) -> _Chunk:
        return _Chunk(
            self.entry, self.records, self.trace, lookup[self.endpoint], lookup[self.placement]
        )

    def take(self, keep: np.ndarray, renumber: np.ndarray, entry: int) -> _Chunk:
        return _Chunk(
            entry,
            self.records[keep],
            renumber[self.trace[keep]],
            self.endpoint[keep],
            self.placement[keep],
        )


class _Traces:
    """Trace slots of the spans held: id -> slot, and when each was last seen."""

    def __init__(self) -> None:
        self.slots: dict[bytes, int] = {}
        self.ids: list[bytes] = []
        self.last_seen = np.zeros(1024)

    def __len__(self) -> int:
        return len(self.ids)

    def touch(self, trace_ids: np.ndarray, now: float) -> np.ndarray:
        """Slots of ``trace_ids`` (new ones added), all marked seen ``now``."""
        keys = trace_ids.tolist()
        get = self.slots.get
        slots = [get(k) for k in keys]
        for i, slot in enumerate(slots):
            if slot is None:
                slot = self.slots.setdefault(keys[i], len(self.ids))
                if slot == len(self.ids):
                    self.ids.append(keys[i])
                slots[i] = slot
        if len(self.ids) > len(self.last_seen):
            grown = np.zeros(max(2 * len(self.last_seen), len(self.ids)))
            grown[: len(self.last_seen)] = self.last_seen
            self.last_seen = grown
        found = np.array(slots, np.int64)
        self.last_seen[found] = now
        return found

    def seen(self) -> np.ndarray:
        return self.last_seen[: len(self.ids)]

    def id_array(self) -> np.ndarray:
        return (
            np.frombuffer(b"".join(self.ids), TRACE_ID_DTYPE)
            if self.ids
            else np.zeros(0, TRACE_ID_DTYPE)
        )

    def keep(self, open_slots: np.ndarray) -> None:
        last_seen = self.seen()[open_slots]
        self.ids = [self.ids[int(s)] for s in open_slots]
        self.slots = {trace_id: i for i, trace_id in enumerate(self.ids)}
        self.last_seen = np.zeros(max(1024, 2 * len(self.ids)))
        self.last_seen[: len(self.ids)] = last_seen


class IngestWorker:
    def __init__(
        self,
        store: TraceStore,
        config: IngestConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.client: redis.Redis = store.client
        self.keys: Keys = store.keys
        self.config = config or IngestConfig()
        self.clock = clock
        self.counters = IngestCounters()
        self._chunks: list[_Chunk] = []
        self._traces = _Traces()
        self._name_cache: dict[bytes, list[str]] = {}
        self._names = NameIndex()
        self._pair_ids: dict[tuple[bytes, str], np.ndarray] = {}  # (name table, kind) -> ids
        self._clock_warned: dict[str, float] = {}  # host -> when it was last logged
        self._entry_ids: list[bytes] = []
        self._outstanding: list[int] = []
        self._held: set[bytes] = set()
        self._group_ready = False
        self._own_pending_read = False
        self._pending_cursor = "0"
        self._last_flush = -1e18
        self._last_claim = -1e18
        self._last_maintain = -1e18

    # ------------------------------------------------------------------ group

    def ensure_group(self) -> None:
        with store_errors(self.store.config, "creating the consumer group"):
            try:
                self.client.xgroup_create(self.keys.stream, self.keys.group, id="0", mkstream=True)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
        self._group_ready = True

    # ------------------------------------------------------------------ reading

    def poll(self, block_ms: int | None = None) -> int:
        """Read one round of entries (own pending first, then new ones); spans read."""
        if not self._group_ready:
            self.ensure_group()
        began = time.perf_counter()
        if not self._own_pending_read:
            entries = self._read_own_pending()
        else:
            block = self.config.block_ms if block_ms is None else block_ms
            entries = self._read(">", block or None)  # BLOCK 0 would wait forever
        spans = self._accept(entries)
        if entries:
            self.counters.busy_s += time.perf_counter() - began
        return spans

    def _read_own_pending(self) -> list[tuple[bytes, dict[bytes, bytes]]]:
        """The next entries this consumer had read before (e.g. before a restart) and
        not acknowledged; reading them does not advance the group."""
        entries = self._read(self._pending_cursor, None)
        if not entries:
            self._own_pending_read = True
            return []
        self._pending_cursor = _text(entries[-1][0])
        return [(i, f) for i, f in entries if i not in self._held]

    def _read(self, start: str, block_ms: int | None) -> list[tuple[bytes, dict[bytes, bytes]]]:
        with store_errors(self.store.config, "reading the span stream"):
            try:
                reply = self.client.xreadgroup(
                    self.keys.group,
                    self.config.consumer,
                    {self.keys.stream: start},
                    count=self.config.read_entries,
                    block=block_ms,
                )
            except redis.ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                # Redis lost its data (restarted without persistence): the group is gone.
                self.ensure_group()  # from the stream's start: nothing written is skipped
                return self._read(start, block_ms)
        if not reply:
            return []
        streams = cast(list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]], reply)
        entries = streams[0][1]
        if start == ">":
            return [(i, f) for i, f in entries if i not in self._held]
        return entries

    def claim(self) -> int:
        """Take over entries other consumers left pending too long; spans taken."""
        if not self._group_ready:
            self.ensure_group()
        idle_ms = int(self.config.claim_idle_s * 1000)
        cursor = "0-0"
        taken = 0
        while True:
            with store_errors(self.store.config, "claiming pending entries"):
                reply = self.client.xautoclaim(
                    self.keys.stream,
                    self.keys.group,
                    self.config.consumer,
                    idle_ms,
                    start_id=cursor,
                    count=self.config.read_entries,
                )
            cursor, entries = reply[0], reply[1]
            fresh = [(i, f) for i, f in entries if i not in self._held and f]
            self.counters.claimed_entries += len(fresh)
            taken += self._accept(fresh)
            if cursor in (b"0-0", "0-0"):
                return taken

    def _accept(self, entries: Sequence[tuple[bytes, dict[bytes, bytes]]]) -> int:
        now = self.clock()
        spans = 0
        dead: list[tuple[bytes, bytes, str]] = []
        vanished: list[bytes] = []
        for entry_id, fields in entries:
            self.counters.entries += 1
            if not fields:  # trimmed while pending: nothing left to read
                vanished.append(entry_id)
                continue
            payload = fields.get(FIELD)
            try:
                if payload is None:
                    raise BatchError(f"the entry has no span batch field {_text(FIELD)!r}")
                batch = decode_batch(payload, self._name_cache)
            except BatchError as exc:
                dead.append((entry_id, payload or b"", str(exc)))
                continue
            spans += self._hold(entry_id, self._pulled_back(entry_id, batch), now)
        if dead:
            self._dead_letter(dead)
        if vanished:
            with store_errors(self.store.config, "acknowledging vanished entries"):
                self.client.xack(self.keys.stream, self.keys.group, *vanished)
        self.counters.spans += spans
        return spans

    def _pulled_back(self, entry_id: bytes, batch: DecodedBatch) -> DecodedBatch:
        tolerance_us = int(self.config.max_clock_ahead_s * 1e6)
        batch, hosts = pull_back(batch, entry_stamp_us(entry_id), tolerance_us)
        for host in hosts:
            self.counters.clock_ahead_spans += host.spans
            ahead_s = host.ahead_us / 1e6
            self.counters.clock_ahead_max_s = max(self.counters.clock_ahead_max_s, ahead_s)
            self._warn_clock_ahead(entry_id, host)
        return batch

    def _warn_clock_ahead(self, entry_id: bytes, host: HostAhead) -> None:
        now = self.clock()
        if now - self._clock_warned.get(host.host, -1e18) < CLOCK_WARNING_EVERY_S:
            return
        if len(self._clock_warned) > 10_000:
            self._clock_warned.clear()
        self._clock_warned[host.host] = now
        log.warning(
            "span stream entry %s: %d spans from host %r end %.1f s after Redis added the "
            "entry (its clock runs ahead, tolerance %g s): moved back by that much "
            "(logged once a minute per host)",
            _text(entry_id),
            host.spans,
            host.host,
            host.ahead_us / 1e6,
            self.config.max_clock_ahead_s,
        )

    def _hold(self, entry_id: bytes, batch: DecodedBatch, now: float) -> int:
        records = batch.records
        entry = len(self._entry_ids)
        self._entry_ids.append(entry_id)
        self._outstanding.append(len(records))
        self._held.add(entry_id)
        if not len(records):
            return 0
        slots = self._traces.touch(batch.trace_ids, now)
        self._chunks.append(
            _Chunk(
                entry=entry,
                records=records,
                trace=slots[records["trace"]],
                endpoint=self._interned(batch, "service", "operation", True),
                placement=self._interned(batch, "host", "container", False),
            )
        )
        return len(records)

    def _interned(self, batch: DecodedBatch, first: str, second: str, endpoint: bool) -> np.ndarray:
        """Global ids of the (first, second) name pairs of a batch's records; the table
        for a name list (cached per encoded list) fills in as pairs turn up."""
        records, names = batch.records, batch.names
        width = len(names)
        key = (batch.name_table, first)
        table = self._pair_ids.get(key)
        if table is None or len(table) != width * width:
            if len(self._pair_ids) > 2 * NAME_CACHE_SIZE:
                self._pair_ids.clear()
            table = self._pair_ids[key] = np.zeros(width * width, np.int64)
        pairs = records[first].astype(np.int64) * width + records[second]
        ids = table[pairs]
        if bool((ids == 0).any()):
            missing = distinct(pairs[ids == 0], width * width)
            make = endpoint_text if endpoint else placement_text
            texts = [make(names[int(p) // width], names[int(p) % width]) for p in missing]
            table[missing] = self._names.ids(texts)
            ids = table[pairs]
        interned: np.ndarray = ids.astype(np.uint32)
        return interned

    def _dead_letter(self, dead: list[tuple[bytes, bytes, str]]) -> None:
        with store_errors(self.store.config, "moving bad entries to the dead-letter stream"):
            pipe = self.client.pipeline(transaction=False)
            for entry_id, payload, problem in dead:
                log.warning(
                    "span stream %s, entry %s (%d bytes) is not a span batch: %s",
                    self.keys.stream,
                    _text(entry_id),
                    len(payload),
                    problem,
                )
                self.store.dead_letter(pipe, entry_id, payload, problem)
            pipe.xack(self.keys.stream, self.keys.group, *[d[0] for d in dead])
            pipe.execute()
        self.counters.dead_entries += len(dead)

    # ------------------------------------------------------------------ storing

    @property
    def held_spans(self) -> int:
        return sum(len(c.trace) for c in self._chunks)

    def flush(self, force: bool = False) -> int:
        """Store the traces that went quiet (all of them if ``force``); traces stored."""
        if not self._entry_ids:
            return 0
        began = time.perf_counter()
        last_seen = self._traces.seen()
        done = np.ones(len(last_seen), bool) if force else self._quiet(last_seen)
        outstanding = np.array(self._outstanding, np.int64)
        if not bool(done.any()):
            if bool((outstanding == 0).any()):  # entries that held no spans
                self._settle(outstanding, done, np.zeros(self.held_spans, bool))
            return 0
        chunks = self._chunks
        trace = np.concatenate([c.trace for c in chunks]) if chunks else np.zeros(0, np.int64)
        leaving = done[trace]
        stored = self._store(chunks, leaving)
        entry = np.repeat(
            np.array([c.entry for c in chunks], np.int64), [len(c.trace) for c in chunks]
        )
        outstanding -= np.bincount(entry[leaving], minlength=len(outstanding))
        self._settle(outstanding, done, leaving)
        self._compact_names()
        self.counters.busy_s += time.perf_counter() - began
        return stored

    def _quiet(self, last_seen: np.ndarray) -> np.ndarray:
        done: np.ndarray = last_seen <= self.clock() - self.config.quiet_s
        if self.held_spans > self.config.max_held_spans:  # memory guard: oldest traces out
            done |= last_seen <= np.median(last_seen)
        return done

    def _store(self, chunks: list[_Chunk], leaving: np.ndarray) -> int:
        if not bool(leaving.any()):
            return 0
        every = bool(leaving.all())

        def joined(parts: list[np.ndarray]) -> np.ndarray:
            whole = np.concatenate(parts)
            return whole if every else whole[leaving]

        records = joined([c.records for c in chunks])
        raw = RawSpans(
            self._traces.id_array(),
            joined([c.trace for c in chunks]),
            records["span"],
            records["parent"],
            records["start"],
            records["end"],
            joined([c.endpoint for c in chunks]),
            joined([c.placement for c in chunks]),
            records["kind"],
            records["flags"],
        )
        assembled = assemble(raw)
        for part in split_columns(assembled.columns, SEGMENT_SPANS):
            self.store.write(part, self._names)
            self.counters.segments += 1
        self.counters.duplicates += assembled.duplicates
        self.counters.traces_stored += assembled.columns.n_traces
        self.counters.spans_stored += assembled.columns.n_spans
        return assembled.columns.n_traces

    def _settle(self, outstanding: np.ndarray, done: np.ndarray, leaving: np.ndarray) -> None:
        """Acknowledge the entries with no span left to store; keep the open traces."""
        self._ack(np.flatnonzero(outstanding <= 0))
        open_slots = np.flatnonzero(~done)
        renumber = np.full(len(done), -1, np.int64)
        renumber[open_slots] = np.arange(len(open_slots))
        open_entries = np.flatnonzero(outstanding > 0)
        entry_renumber = np.full(len(outstanding), -1, np.int64)
        entry_renumber[open_entries] = np.arange(len(open_entries))
        kept: list[_Chunk] = []
        at = 0
        for chunk in self._chunks:
            size = len(chunk.trace)
            stay = ~leaving[at : at + size]
            at += size
            if bool(stay.any()):
                kept.append(chunk.take(stay, renumber, int(entry_renumber[chunk.entry])))
        self._chunks = kept
        self._traces.keep(open_slots)
        gone = [self._entry_ids[int(e)] for e in np.flatnonzero(outstanding <= 0)]
        self._held.difference_update(gone)
        self._entry_ids = [self._entry_ids[int(e)] for e in open_entries]
        self._outstanding = [int(outstanding[e]) for e in open_entries]

    @property
    def interned_names(self) -> int:
        return len(self._names)

    def _compact_names(self) -> None:
        """Past ``max_names``: keep only the names held spans use (the rest were written
        with their segments), and renumber the held spans."""
        if len(self._names) <= self.config.max_names:
            return
        held = [c.endpoint for c in self._chunks] + [c.placement for c in self._chunks]
        used = np.concatenate(held) if held else np.zeros(0, np.uint32)
        lookup, self._names = self._names.compacted(used)
        self._chunks = [c.renamed(lookup) for c in self._chunks]
        self._pair_ids.clear()  # their ids were the old ones

    def _ack(self, entries: np.ndarray) -> None:
        if not len(entries):
            return
        ids = [self._entry_ids[int(e)] for e in entries]
        with store_errors(self.store.config, "acknowledging stream entries"):
            pipe = self.client.pipeline(transaction=False)
            for first in range(0, len(ids), 1000):
                pipe.xack(self.keys.stream, self.keys.group, *ids[first : first + 1000])
            pipe.execute()
        self.counters.acked += len(ids)

    # ------------------------------------------------------------------ upkeep

    def trim(self) -> None:
        """Drop acknowledged entries from the stream."""
        with store_errors(self.store.config, "trimming the span stream"):
            groups = self.client.xinfo_groups(self.keys.stream)
            ours = [g for g in groups if _text(g["name"]) == self.keys.group]
            if not ours:
                return
            summary = self.client.xpending(self.keys.stream, self.keys.group)
            if summary["pending"]:
                keep_from = _text(summary["min"])
            else:
                keep_from = _successor(_text(ours[0]["last-delivered-id"]))
            self.client.xtrim(self.keys.stream, minid=keep_from, approximate=False)

    def tick(self) -> None:
        """The periodic work between polls: flush, claim, trim, maintain."""
        now = self.clock()
        if now - self._last_flush >= self.config.flush_every_s:
            self._last_flush = now
            self.flush()
        if now - self._last_claim >= self.config.claim_every_s:
            self._last_claim = now
            self.claim()
        if now - self._last_maintain >= self.config.maintain_every_s:
            self._last_maintain = now
            self.trim()
            self.store.maintain()

    def read_available(self) -> int:
        """Read (without waiting) until the stream has nothing new for this consumer;
        spans read. Stores only when more than ``max_held_spans`` are held."""
        spans = 0
        while True:
            before = self.counters.entries
            reading_own = not self._own_pending_read
            spans += self.poll(block_ms=0)
            if self.held_spans > self.config.max_held_spans:
                self.flush(force=True)
            if not reading_own and self.counters.entries == before:
                return spans

    def drain(self) -> IngestCounters:
        """Read everything the stream holds for this group, store every trace now (no
        quiet period), acknowledge and trim. For imports and the benchmark."""
        self.read_available()
        self.flush(force=True)
        self.trim()
        return self.counters

    def run(self, stop: threading.Event) -> None:
        """Poll and tick until ``stop`` is set; Redis outages are waited out."""
        delay = 0.1
        while not stop.is_set():
            try:
                self.poll()
                self.tick()
                delay = 0.1
            except Exception as exc:
                if not is_transient(exc.__cause__ or exc):
                    raise
                log.warning("trace store unavailable, retrying in %.1fs: %s", delay, exc)
                stop.wait(delay)
                delay = min(delay * 2, 5.0)
        self.flush(force=True)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _successor(entry_id: str) -> str:
    ms, _, seq = entry_id.partition("-")
    return f"{ms}-{int(seq or 0) + 1}"
