"""A non-blocking span exporter: a bounded buffer and one sender thread that XADDs
batches to the Redis stream.

``export(span)`` never touches the network and never blocks a request: it appends to a
buffer of at most ``max_buffered_spans`` spans, or drops the span and counts the drop
(``reason="buffer_full"``) when the buffer is full. The sender thread takes up to
``batch_spans`` spans per stream entry (:mod:`tracing.wire`), pipelines the entries of
one round, and on any Redis failure keeps those entries, backs off (doubling up to
``retry_max_s``) and sends them again, so while Redis is down memory stays bounded
(buffer + one round in flight), drops are counted, and everything still buffered goes
out when Redis returns. A batch Redis may have stored before the connection broke can be
sent twice; the ingest worker counts every span once (at-least-once delivery,
idempotent ingest).

Counters: :meth:`RedisStreamExporter.stats`; for Prometheus, register
:func:`prometheus_collector` (``tracing_exporter_spans_dropped_total{reason}`` and
friends) in the service's registry.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import redis

from tracing.model import Span
from tracing.wire import FIELD, MAX_SPANS_PER_BATCH, encode_batch

log = logging.getLogger("tracing.exporter")


class SpanSink(Protocol):
    """Where a tracer sends finished spans."""

    def export(self, span: Span) -> None: ...


@dataclass(frozen=True, kw_only=True)
class ExporterConfig:
    max_buffered_spans: int = 20_000
    batch_spans: int = 512
    batches_per_round: int = 16
    flush_interval_s: float = 0.2
    stream_max_entries: int = 200_000  # XADD MAXLEN ~ (entries, not spans)
    retry_initial_s: float = 0.1
    retry_max_s: float = 5.0

    def __post_init__(self) -> None:
        if not 1 <= self.batch_spans <= MAX_SPANS_PER_BATCH:
            raise ValueError(f"batch_spans must be in 1..{MAX_SPANS_PER_BATCH}")
        if self.max_buffered_spans < self.batch_spans:
            raise ValueError("max_buffered_spans must be at least batch_spans")
        if self.flush_interval_s <= 0 or self.retry_initial_s <= 0:
            raise ValueError("intervals must be positive")


@dataclass(frozen=True)
class ExporterStats:
    exported: int  # spans Redis acknowledged
    dropped: dict[str, int]  # by reason
    send_failures: int  # rounds that failed and were retried
    buffered: int  # spans waiting (buffer + in flight)
    redis_up: bool


class RedisStreamExporter:
    """Ships spans to ``stream`` on ``client``; see the module docstring."""

    def __init__(
        self, client: redis.Redis, stream: str, config: ExporterConfig | None = None
    ) -> None:
        self.client = client
        self.stream = stream
        self.config = config or ExporterConfig()
        self._buffer: deque[Span] = deque()
        self._inflight: list[tuple[bytes, int]] = []  # (payload, spans)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        self._encoding = 0  # spans taken from the buffer, not yet in flight
        self._closing = False
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._exported = 0
        self._dropped: dict[str, int] = {"buffer_full": 0, "closed": 0, "invalid": 0}
        self._failures = 0
        self._redis_up = True

    # ------------------------------------------------------------------ callers

    def export(self, span: Span) -> None:
        """Queue ``span``; never blocks, never raises (a full buffer drops and counts)."""
        with self._lock:
            if self._closing:
                self._dropped["closed"] += 1
                return
            if len(self._buffer) >= self.config.max_buffered_spans:
                self._dropped["buffer_full"] += 1
                return
            self._buffer.append(span)
            if len(self._buffer) >= self.config.batch_spans:
                self._wake.notify()
        self._ensure_sender()

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every queued span was acknowledged by Redis; False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            self._wake.notify()
            while self._buffer or self._inflight or self._encoding:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._wake.notify()
                self._idle.wait(min(remaining, 0.05))
        return True

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is queued (up to ``timeout_s``), then stop; the rest is dropped and
        counted as ``closed``."""
        self.flush(timeout_s)
        with self._lock:
            self._closing = True
            self._wake.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=max(self.config.retry_max_s, 1.0) + 1.0)
        with self._lock:
            left = len(self._buffer) + sum(n for _, n in self._inflight)
            self._dropped["closed"] += left
            self._buffer.clear()
            self._inflight.clear()

    def stats(self) -> ExporterStats:
        with self._lock:
            return ExporterStats(
                exported=self._exported,
                dropped=dict(self._dropped),
                send_failures=self._failures,
                buffered=len(self._buffer) + self._encoding + sum(n for _, n in self._inflight),
                redis_up=self._redis_up,
            )

    # ------------------------------------------------------------------ sender

    def _ensure_sender(self) -> None:
        thread = self._thread
        if thread is not None and thread.is_alive() and self._pid == os.getpid():
            return
        with self._lock:
            if self._thread is not None and self._thread.is_alive() and self._pid == os.getpid():
                return
            self._pid = os.getpid()  # after a fork the child needs its own sender
            self._thread = threading.Thread(
                target=self._run, name=f"tracing-exporter-{self.stream}", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        delay = self.config.retry_initial_s
        while True:
            if not self._take_round():
                return
            if self._send_inflight():
                delay = self.config.retry_initial_s
                continue
            with self._lock:
                if self._closing:
                    return
                self._wake.wait(delay)  # close() interrupts the back-off
            delay = min(delay * 2, self.config.retry_max_s)

    def _take_round(self) -> bool:
        """Move up to one round of spans into flight (waiting for enough of them, or for
        the flush interval). False when closing with nothing left to do."""
        with self._lock:
            if self._inflight:
                return True
            if len(self._buffer) < self.config.batch_spans and not self._closing:
                self._idle.notify_all()
                self._wake.wait(self.config.flush_interval_s)
            if not self._buffer:
                self._idle.notify_all()
                return not self._closing
            spans = self._pop_round()
            self._encoding = sum(len(batch) for batch in spans)
        self._encode(spans)
        return True

    def _pop_round(self) -> list[list[Span]]:
        size = self.config.batch_spans
        batches: list[list[Span]] = []
        while self._buffer and len(batches) < self.config.batches_per_round:
            count = min(size, len(self._buffer))
            batches.append([self._buffer.popleft() for _ in range(count)])
        return batches

    def _encode(self, batches: Sequence[Sequence[Span]]) -> None:
        encoded: list[tuple[bytes, int]] = []
        for batch in batches:
            try:
                encoded.append((encode_batch(batch), len(batch)))
            except (ValueError, OverflowError, TypeError) as exc:
                encoded += self._encode_one_by_one(batch, exc)
        with self._lock:
            self._inflight = encoded
            self._encoding = 0

    def _encode_one_by_one(
        self, batch: Sequence[Span], exc: Exception
    ) -> Iterator[tuple[bytes, int]]:
        log.warning("span batch does not encode (%s); sending its spans one by one", exc)
        for span in batch:
            try:
                yield encode_batch([span]), 1
            except (ValueError, OverflowError, TypeError):
                with self._lock:
                    self._dropped["invalid"] += 1

    def _send_inflight(self) -> bool:
        with self._lock:
            payloads = list(self._inflight)
        if not payloads:
            return True
        try:
            pipe = self.client.pipeline(transaction=False)
            for payload, _ in payloads:
                pipe.xadd(
                    self.stream,
                    {FIELD: payload},
                    maxlen=self.config.stream_max_entries,
                    approximate=True,
                )
            pipe.execute()
        except (redis.RedisError, OSError) as exc:
            with self._lock:
                self._failures += 1
                if self._redis_up:
                    log.warning("trace store unreachable, buffering spans: %s", exc)
                self._redis_up = False
            return False
        with self._lock:
            self._exported += sum(n for _, n in payloads)
            self._inflight = []
            if not self._redis_up:
                log.warning("trace store reachable again")
            self._redis_up = True
            self._idle.notify_all()
        return True


def prometheus_collector(exporter: RedisStreamExporter, prefix: str = "tracing_exporter") -> Any:
    """A Prometheus collector reading ``exporter.stats()`` at scrape time. Register it:
    ``registry.register(prometheus_collector(exporter))`` (prometheus-client needed)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    class _Collector:
        def collect(self) -> Iterator[Any]:
            stats = exporter.stats()
            dropped = CounterMetricFamily(
                f"{prefix}_spans_dropped", "Spans dropped before reaching Redis", labels=["reason"]
            )
            for reason, count in sorted(stats.dropped.items()):
                dropped.add_metric([reason], count)
            yield dropped
            yield CounterMetricFamily(
                f"{prefix}_spans_exported", "Spans Redis acknowledged", value=stats.exported
            )
            yield CounterMetricFamily(
                f"{prefix}_send_failures",
                "Rounds of XADDs that failed and were retried",
                value=stats.send_failures,
            )
            yield GaugeMetricFamily(
                f"{prefix}_buffered_spans", "Spans waiting to be sent", value=stats.buffered
            )
            yield GaugeMetricFamily(
                f"{prefix}_redis_up", "1 when the last send reached Redis", value=stats.redis_up
            )

        def describe(self) -> list[Any]:
            return []

    return _Collector()
