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
- An entry that is not a valid batch goes to the dead-letter stream and is acknowledged;
  it never stops the others.
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

import numpy as np
import redis

from tracing.batch import BatchError, DecodedBatch, decode_batch
from tracing.columns import TRACE_ID_DTYPE, RawSpans, assemble
from tracing.names import endpoint_text, placement_text
from tracing.redisconn import Keys, is_transient, store_errors
from tracing.store import TraceStore
from tracing.wire import FIELD

log = logging.getLogger("tracing.ingest")


def default_consumer() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True, kw_only=True)
class IngestConfig:
    consumer: str = field(default_factory=default_consumer)
    quiet_s: float = 5.0
    read_entries: int = 64
    block_ms: int = 200
    claim_idle_s: float = 60.0
    claim_every_s: float = 10.0
    maintain_every_s: float = 10.0
    max_held_spans: int = 2_000_000

    def __post_init__(self) -> None:
        if self.quiet_s < 0 or self.read_entries < 1 or self.block_ms < 0:
            raise ValueError("quiet_s >= 0, read_entries >= 1 and block_ms >= 0 are required")
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
    busy_s: float = 0.0  # time spent reading, assembling and writing (not waiting)


@dataclass
class _Chunk:
    """The spans of one stream entry, with global ids and trace slots."""

    entry: int
    trace: np.ndarray
    span: np.ndarray
    parent: np.ndarray
    start: np.ndarray
    end: np.ndarray
    endpoint: np.ndarray
    placement: np.ndarray
    kind: np.ndarray
    flags: np.ndarray


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
        self._slots: dict[bytes, int] = {}
        self._last_seen: list[float] = []
        self._entry_ids: list[bytes] = []
        self._outstanding: list[int] = []
        self._held: set[bytes] = set()
        self._group_ready = False
        self._own_pending_read = False
        self._pending_cursor = "0"
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
                self.ensure_group()  # Redis lost the group (restarted without persistence)
                return []
        if not reply:
            return []
        entries: list[tuple[bytes, dict[bytes, bytes]]] = reply[0][1]
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
                    raise BatchError("the entry has no span batch field")
                batch = decode_batch(payload)
            except BatchError as exc:
                dead.append((entry_id, payload or b"", str(exc)))
                continue
            spans += self._hold(entry_id, batch, now)
        if dead:
            self._dead_letter(dead)
        if vanished:
            with store_errors(self.store.config, "acknowledging vanished entries"):
                self.client.xack(self.keys.stream, self.keys.group, *vanished)
        self.counters.spans += spans
        return spans

    def _hold(self, entry_id: bytes, batch: DecodedBatch, now: float) -> int:
        records = batch.records
        entry = len(self._entry_ids)
        self._entry_ids.append(entry_id)
        self._outstanding.append(len(records))
        self._held.add(entry_id)
        if not len(records):
            return 0
        slots = np.array([self._slot(t, now) for t in batch.trace_ids], np.int64)
        self._chunks.append(
            _Chunk(
                entry=entry,
                trace=slots[records["trace"]],
                span=records["span"],
                parent=records["parent"],
                start=records["start"],
                end=records["end"],
                endpoint=self._interned(records, batch.names, "service", "operation", True),
                placement=self._interned(records, batch.names, "host", "container", False),
                kind=records["kind"],
                flags=records["flags"],
            )
        )
        return len(records)

    def _slot(self, trace_id: bytes, now: float) -> int:
        slot = self._slots.get(trace_id)
        if slot is None:
            slot = self._slots[trace_id] = len(self._last_seen)
            self._last_seen.append(now)
        else:
            self._last_seen[slot] = now
        return slot

    def _interned(
        self, records: np.ndarray, names: list[str], first: str, second: str, endpoint: bool
    ) -> np.ndarray:
        pairs = records[first].astype(np.uint32) << 16 | records[second].astype(np.uint32)
        unique, inverse = np.unique(pairs, return_inverse=True)
        make = endpoint_text if endpoint else placement_text
        texts = [make(names[int(p) >> 16], names[int(p) & 0xFFFF]) for p in unique]
        ids = np.array(self.store.names.ids(texts), np.uint32)
        return ids[inverse.reshape(-1)]

    def _dead_letter(self, dead: list[tuple[bytes, bytes, str]]) -> None:
        with store_errors(self.store.config, "moving bad entries to the dead-letter stream"):
            pipe = self.client.pipeline(transaction=False)
            for entry_id, payload, problem in dead:
                log.warning("span stream entry %s is not a span batch: %s", entry_id, problem)
                pipe.xadd(
                    self.keys.dead, {b"entry": entry_id, b"problem": problem, b"payload": payload}
                )
            pipe.xack(self.keys.stream, self.keys.group, *[d[0] for d in dead])
            pipe.execute()
        self.counters.dead_entries += len(dead)

    # ------------------------------------------------------------------ storing

    @property
    def held_spans(self) -> int:
        return sum(len(c.span) for c in self._chunks)

    def flush(self, force: bool = False) -> int:
        """Store the traces that went quiet (all of them if ``force``); traces stored."""
        if not self._entry_ids:
            return 0
        began = time.perf_counter()
        last_seen = np.array(self._last_seen)
        done = np.ones(len(last_seen), bool) if force else self._quiet(last_seen)
        if not bool(done.any()):
            self._ack_empty_entries()
            return 0
        chunks = self._chunks
        trace = np.concatenate([c.trace for c in chunks]) if chunks else np.zeros(0, np.int64)
        entry = (
            np.concatenate([np.full(len(c.span), c.entry, np.int64) for c in chunks])
            if chunks
            else np.zeros(0, np.int64)
        )
        leaving = done[trace]
        stored = self._store(chunks, leaving)
        self._settle(entry[leaving], done, chunks, leaving)
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
        trace_ids = np.zeros(len(self._last_seen), TRACE_ID_DTYPE)
        for trace_id, slot in self._slots.items():
            trace_ids[slot] = np.frombuffer(trace_id, TRACE_ID_DTYPE)[0]

        def column(name: str) -> np.ndarray:
            return np.concatenate([getattr(c, name) for c in chunks])[leaving]

        raw = RawSpans(
            trace_ids,
            column("trace"),
            column("span"),
            column("parent"),
            column("start"),
            column("end"),
            column("endpoint"),
            column("placement"),
            column("kind"),
            column("flags"),
        )
        assembled = assemble(raw)
        self.store.write(assembled.columns)
        self.counters.segments += 1
        self.counters.duplicates += assembled.duplicates
        self.counters.traces_stored += assembled.columns.n_traces
        self.counters.spans_stored += assembled.columns.n_spans
        return assembled.columns.n_traces

    def _settle(
        self, entries_done: np.ndarray, done: np.ndarray, chunks: list[_Chunk], leaving: np.ndarray
    ) -> None:
        """Count the stored spans off their entries, acknowledge the finished entries and
        keep only the traces still open."""
        finished = np.bincount(entries_done, minlength=len(self._entry_ids))
        outstanding = np.array(self._outstanding, np.int64) - finished
        self._ack(np.flatnonzero(outstanding == 0))
        self._keep_open(done, chunks, leaving, outstanding)

    def _ack_empty_entries(self) -> None:
        outstanding = np.array(self._outstanding, np.int64)
        if bool((outstanding == 0).any()):
            self._ack(np.flatnonzero(outstanding == 0))
            self._keep_open(
                np.zeros(len(self._last_seen), bool),
                self._chunks,
                np.zeros(self.held_spans, bool),
                outstanding,
            )

    def _ack(self, entries: np.ndarray) -> None:
        if not len(entries):
            return
        ids = [self._entry_ids[int(e)] for e in entries]
        with store_errors(self.store.config, "acknowledging stream entries"):
            for first in range(0, len(ids), 1000):
                self.client.xack(self.keys.stream, self.keys.group, *ids[first : first + 1000])
        self.counters.acked += len(ids)

    def _keep_open(
        self,
        done: np.ndarray,
        chunks: list[_Chunk],
        leaving: np.ndarray,
        outstanding: np.ndarray,
    ) -> None:
        open_slots = np.flatnonzero(~done)
        renumber = np.full(len(done), -1, np.int64)
        renumber[open_slots] = np.arange(len(open_slots))
        open_entries = np.flatnonzero(outstanding > 0)
        entry_renumber = np.full(len(outstanding), -1, np.int64)
        entry_renumber[open_entries] = np.arange(len(open_entries))
        kept: list[_Chunk] = []
        at = 0
        for chunk in chunks:
            size = len(chunk.span)
            stay = ~leaving[at : at + size]
            at += size
            if bool(stay.any()):
                kept.append(_rekeyed(chunk, stay, renumber, int(entry_renumber[chunk.entry])))
        self._chunks = kept
        by_slot = {slot: trace_id for trace_id, slot in self._slots.items()}
        self._slots = {by_slot[int(s)]: i for i, s in enumerate(open_slots)}
        self._last_seen = [self._last_seen[int(s)] for s in open_slots]
        gone = [self._entry_ids[int(e)] for e in np.flatnonzero(outstanding <= 0)]
        self._held.difference_update(gone)
        self._entry_ids = [self._entry_ids[int(e)] for e in open_entries]
        self._outstanding = [int(outstanding[e]) for e in open_entries]

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
        self.flush()
        now = self.clock()
        if now - self._last_claim >= self.config.claim_every_s:
            self._last_claim = now
            self.claim()
        if now - self._last_maintain >= self.config.maintain_every_s:
            self._last_maintain = now
            self.trim()
            self.store.maintain()

    def drain(self, *, max_idle_polls: int = 1) -> IngestCounters:
        """Read everything the stream holds for this group, store every trace now (no
        quiet period), acknowledge and trim. For imports and the benchmark."""
        idle = 0
        while idle < max_idle_polls:
            before = self.counters.entries
            reading_own = not self._own_pending_read
            self.poll(block_ms=0)
            idle = 0 if reading_own or self.counters.entries > before else idle + 1
            if self.held_spans > self.config.max_held_spans:
                self.flush(force=True)
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


def _rekeyed(chunk: _Chunk, stay: np.ndarray, renumber: np.ndarray, entry: int) -> _Chunk:
    return _Chunk(
        entry=entry,
        trace=renumber[chunk.trace[stay]],
        span=chunk.span[stay],
        parent=chunk.parent[stay],
        start=chunk.start[stay],
        end=chunk.end[stay],
        endpoint=chunk.endpoint[stay],
        placement=chunk.placement[stay],
        kind=chunk.kind[stay],
        flags=chunk.flags[stay],
    )


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _successor(entry_id: str) -> str:
    ms, _, seq = entry_id.partition("-")
    return f"{ms}-{int(seq or 0) + 1}"
