"""``yarn-adapt bench trace-risk``: TopoSch's tracing overhead (§6.4), measured.

30,000 traces of a 12-service PiggyMetrics-like application (``piggymetrics.py``:
fan-out, parallel calls, 1% errors, skewed node clocks) are written through the real
exporter (one per service, as each service process would have) into a real
redis-server, ingested by the real worker, then the critical paths of every trace and
the risk over the window are computed by the code ``yarn-adapt trace risk`` runs.

Figures (last line): ``traces``, ``spans``, ``ingest_spans_per_s`` (stream drained,
assembled, stored, acknowledged), ``analyse_s`` (critical paths + risk for all traces:
the median of ``repeats`` runs, with ``analyse_worst_s`` and the CPU time, which a
loaded machine inflates less), ``load_s`` (reading the window back from Redis), and
``redis_mb`` (Redis's used memory after ingest, with the bench's connections closed,
minus before: the stored traces, the interned names and what is left of the stream;
``redis_peak_mb`` is the same with every span still in the stream).

The same traces are then sent again as OpenTelemetry exporters send them, to a real
OTLP/HTTP receiver on 127.0.0.1 (``otlp_load.py``: protobuf, gzip, 512 spans a request
per resource, 4 client connections), while an ingest worker polls as the service's does,
three times: ``otlp_spans_per_s`` is spans over the time from the first request until
the store holds every span (``otlp_spans_stored``), of the median run, with
``otlp_worst_spans_per_s`` and ``otlp_runs_spans_per_s`` beside it;
``otlp_receive_spans_per_s`` until the last answer (beside ``export_spans_per_s``, the
built-in exporter's path to the stream), ``otlp_request_mean_s`` / ``_p50_s`` /
``_p99_s`` / ``_worst_s`` each request's answer time, ``otlp_cpu_s`` /
``otlp_redis_cpu_s`` / ``otlp_spans_per_cpu_s`` the receiver's and worker's CPU (the
clients' subtracted) and Redis's.

On a shared machine wall times measure the neighbours too, so CPU seconds are reported
beside them: ``analyse_cpu_s``, and for the ingest the worker's and redis-server's
(``ingest_cpu_s``, ``ingest_redis_cpu_s``; ``ingest_spans_per_cpu_s`` = spans over
their sum, which is about the wall rate of the worker and Redis taking turns on an idle
machine). Anchor: TopoSch needs about 1.6 s and
126 MB for 30k traces. Targets: analyse_s <= 0.2, redis_mb <= 32, ingest >= 200,000/s,
otlp_spans_per_s >= 100,000 (issue 26).

Options: ``--quick`` (3,000 traces), ``--seed``, ``--trace FILE`` (any format
``trace import`` reads, instead of the generated application), ``--traces N[,N...]``
(repeatable; or ``--set traces=N[,N...]``: one scaling row per size, the JSON describes
the last), ``--set repeats=5``,
``--set redis_url=URL`` (an existing Redis; a key prefix of its own is used) and
``--set skew_us=3000``, ``--set error_rate=0.01``; for the OTLP run ``--set
otlp_clients=4``, ``--set otlp_batch_spans=512``, ``--set otlp_quiet_s=0`` (the
worker's quiet period: any more only adds a wait at the end) and ``--set
otlp_processes=2`` (the receiver's processes; the service's default), ``--set
otlp_repeats=3`` (whole OTLP runs).
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import redis

from tracing.analysis import analyse
from tracing.exporter import ExporterConfig, RedisStreamExporter
from tracing.importers import load_spans
from tracing.ingest import IngestConfig, IngestWorker
from tracing.model import Span
from tracing.receiver_process import RECEIVER_PROCESSES
from tracing.redisconn import Keys, RedisConfig, make_client
from tracing.risk import RiskSettings
from tracing.store import StoreLimits, TraceStore
from yarn_adapt.bench import BenchOptions, BenchResult, benchmark
from yarn_adapt.bench.otlp_load import SDK_BATCH_SPANS, OtlpLoad, measure_otlp, redis_cpu_s
from yarn_adapt.bench.piggymetrics import AppSettings, PiggyMetrics
from yarn_adapt.errors import SettingsError
from yarn_adapt.minicluster.redis_server import RedisServer
from yarn_adapt.progress import report
from yarn_adapt.set_keys import SetSpec, free_text, numeric, whole, wholes

FULL_TRACES = 30_000
QUICK_TRACES = 3_000
TARGETS = {
    "analyse_s": 0.2,
    "redis_mb": 32.0,
    "ingest_spans_per_s": 200_000.0,
    "otlp_spans_per_s": 100_000.0,  # issue 26
}
ANCHOR = {"analyse_s": 1.6, "redis_mb": 126.0}


class Knobs:
    traces = wholes("traces", (FULL_TRACES,), quick=(QUICK_TRACES,))
    repeats = whole("repeats", 5, low=1)
    redis_url = free_text("redis_url", None)
    skew_us = whole("skew_us", 3000)
    error_rate = numeric("error_rate", 0.01)
    otlp_clients = whole("otlp_clients", 4, low=1)
    otlp_batch_spans = whole("otlp_batch_spans", SDK_BATCH_SPANS, low=1)
    otlp_quiet_s = numeric("otlp_quiet_s", 0.0, low=0)
    otlp_processes = whole("otlp_processes", RECEIVER_PROCESSES, low=1)
    otlp_repeats = whole("otlp_repeats", 3, low=1)


SET_KEYS = SetSpec.of("trace-risk", Knobs)


@dataclass(frozen=True)
class _Settings:
    sizes: tuple[int, ...]
    repeats: int
    redis_url: str | None
    app: AppSettings
    otlp: OtlpLoad


@benchmark(
    "trace-risk", "TopoSch tracing: 30k traces through Redis, critical paths and risk", SET_KEYS
)
def trace_risk(options: BenchOptions) -> BenchResult:
    settings = _settings(options)
    with _RedisFor(settings) as (url, used_memory):
        rows = []
        for size in settings.sizes:
            rows.append(_measure(url, used_memory, size, settings, options))
            report("bench trace-risk size", len(rows), len(settings.sizes), f"{size} traces")
    figures = dict(rows[-1])
    figures["gap_to_target"] = {
        "analyse_s": round(figures["analyse_s"] - TARGETS["analyse_s"], 4),
        "redis_mb": round(figures["redis_mb"] - TARGETS["redis_mb"], 2),
        "ingest_spans_per_s": round(figures["ingest_spans_per_s"] - TARGETS["ingest_spans_per_s"]),
        "otlp_spans_per_s": round(figures["otlp_spans_per_s"] - TARGETS["otlp_spans_per_s"]),
    }
    figures["targets"] = TARGETS
    figures["anchor_toposch"] = ANCHOR
    return BenchResult(figures, [_table_row(r) for r in rows])


def _settings(options: BenchOptions) -> _Settings:
    values = SET_KEYS.read(options.extra, quick=options.quick)
    try:
        app = AppSettings(skew_us=values[Knobs.skew_us], error_rate=values[Knobs.error_rate])
        otlp = OtlpLoad(
            clients=values[Knobs.otlp_clients],
            batch_spans=values[Knobs.otlp_batch_spans],
            quiet_s=values[Knobs.otlp_quiet_s],
            processes=values[Knobs.otlp_processes],
            repeats=values[Knobs.otlp_repeats],
        )
    except ValueError as exc:
        raise SettingsError(f"trace-risk: {exc}") from exc
    return _Settings(
        values[Knobs.traces], values[Knobs.repeats], values[Knobs.redis_url], app, otlp
    )


class _RedisFor:
    """Our own redis-server in a temporary directory, or the one --set redis_url names."""

    def __init__(self, settings: _Settings) -> None:
        self.settings = settings
        self.server: RedisServer | None = None
        self.tmp: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> tuple[str, Any]:
        if self.settings.redis_url:
            url = self.settings.redis_url
            client = redis.Redis.from_url(url)
            return url, lambda: int(client.info("memory")["used_memory"])
        self.tmp = tempfile.TemporaryDirectory(prefix="yarn-adapt-trace-risk-")
        self.server = RedisServer(Path(self.tmp.name)).start()
        return self.server.url, self.server.used_memory

    def __exit__(self, *exc: object) -> None:
        if self.server is not None:
            self.server.kill()
        if self.tmp is not None:
            self.tmp.cleanup()


def _measure(
    url: str, used_memory: Any, size: int, settings: _Settings, options: BenchOptions
) -> dict[str, Any]:
    config = RedisConfig(url=url, prefix=f"bench-{uuid.uuid4().hex[:8]}")
    client = make_client(config)
    keys = Keys(config.prefix)
    before = used_memory()
    traces = _traces(size, settings, options)
    exported, export_s, dropped, (start_us, end_us) = _export(client, keys.stream, traces)
    peak = used_memory()
    store = TraceStore(client, config, StoreLimits(retention_s=3600, memory_budget_bytes=1 << 30))
    worker = IngestWorker(store, IngestConfig(quiet_s=0.0, claim_idle_s=60.0))
    redis_cpu = redis_cpu_s(client)
    began, cpu = time.perf_counter(), time.process_time()
    counters = worker.drain()
    ingest_s = time.perf_counter() - began
    ingest_cpu_s = time.process_time() - cpu
    ingest_redis_cpu_s = redis_cpu_s(client) - redis_cpu
    client.connection_pool.disconnect()  # a client's buffers are not stored traces
    after = used_memory()
    started = time.perf_counter()
    window = (start_us, end_us + 1)  # every trace written
    loaded = store.load(*window)
    load_s = time.perf_counter() - started
    walls, cpus, result = _analyse_repeatedly(loaded, window, settings.repeats)
    _check(result, loaded.columns.n_traces)
    client.close()
    otlp_traces = _traces(size, settings, options)  # the same workload, once more
    otlp = measure_otlp(url, f"{config.prefix}-otlp", otlp_traces, settings.otlp)
    return {
        "traces": loaded.columns.n_traces,
        "spans": loaded.columns.n_spans,
        "spans_exported": exported,
        "exporter_dropped": dropped,
        "export_spans_per_s": round(exported / export_s),
        "ingest_spans_per_s": round(counters.spans / ingest_s),
        "ingest_s": round(ingest_s, 3),
        "ingest_cpu_s": round(ingest_cpu_s, 3),
        "ingest_redis_cpu_s": round(ingest_redis_cpu_s, 3),
        "ingest_spans_per_cpu_s": round(counters.spans / (ingest_cpu_s + ingest_redis_cpu_s)),
        "ingest_duplicates": counters.duplicates,
        "analyse_s": round(statistics.median(walls), 4),
        "analyse_worst_s": round(max(walls), 4),
        "analyse_cpu_s": round(statistics.median(cpus), 4),
        "analyse_steps_s": {k: round(v, 4) for k, v in result.seconds.items()},
        "load_s": round(load_s, 3),
        "redis_mb": round((after - before) / 2**20, 2),
        "redis_peak_mb": round((peak - before) / 2**20, 2),
        "stored_bytes_per_span": round(store.usage().bytes / max(loaded.columns.n_spans, 1), 1),
        "repeats": settings.repeats,
        "critical_path_notes": result.paths.notes(),
        "top_services": [
            {"service": s.service, "risk": round(s.risk, 4)} for s in result.risk.services[:3]
        ],
        "top_nodes": [
            {"node": n.node, "risk": round(n.normalized, 3)} for n in result.risk.nodes[:3]
        ],
        **otlp,
    }


def _traces(size: int, settings: _Settings, options: BenchOptions) -> Iterator[list[Span]]:
    if options.trace is None:
        app = PiggyMetrics(options.seed, settings.app)
        return app.traces(size, time.time_ns() // 1000)
    return _file_traces(options.trace, size)


def _file_traces(path: Path, size: int) -> Iterator[list[Span]]:
    by_trace: dict[str, list[Span]] = defaultdict(list)
    for span in load_spans(path, lenient=True).spans:
        by_trace[span.trace_id].append(span)
    for index, spans in enumerate(by_trace.values()):
        if index >= size:
            return
        yield spans


def _export(
    client: redis.Redis, stream: str, traces: Iterator[list[Span]]
) -> tuple[int, float, int, tuple[int, int]]:
    """Every span through the exporter of its service; (spans, seconds, dropped,
    (oldest start, newest end) in µs)."""
    config = ExporterConfig(max_buffered_spans=200_000, batch_spans=512)
    exporters: dict[str, RedisStreamExporter] = {}
    count, oldest, newest = 0, 2**62, -(2**62)
    began = time.perf_counter()
    for number, spans in enumerate(traces, start=1):
        for span in spans:
            exporter = exporters.get(span.service)
            if exporter is None:
                exporter = exporters[span.service] = RedisStreamExporter(client, stream, config)
            exporter.export(span)
            oldest, newest = min(oldest, span.start_us), max(newest, span.end_us)
        count += len(spans)
        if number % 2000 == 0:  # keep the buffers from filling (a real service would pace)
            _wait_below(exporters.values(), config.max_buffered_spans // 4)
    for exporter in exporters.values():
        exporter.flush(120.0)
    elapsed = time.perf_counter() - began
    dropped = 0
    for exporter in exporters.values():
        exporter.close()
        dropped += sum(exporter.stats().dropped.values())
    return count, elapsed, dropped, (oldest, newest)


def _wait_below(exporters: Iterable[RedisStreamExporter], limit: int) -> None:
    for exporter in exporters:
        while exporter.stats().buffered > limit:
            time.sleep(0.005)


def _analyse_repeatedly(
    loaded: Any, window: tuple[int, int], repeats: int
) -> tuple[list[float], list[float], Any]:
    walls, cpus = [], []
    result = None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        result = analyse(loaded, RiskSettings(), *window)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return walls, cpus, result


def _check(result: Any, traces: int) -> None:
    """The path of every trace covers its latency (a wrong bench must not report)."""
    paths = result.paths
    per_trace = np.bincount(paths.forest.trace, weights=paths.self_us, minlength=traces).astype(
        np.int64
    )
    if not np.array_equal(per_trace, paths.latency_us):
        raise AssertionError("critical path lengths do not add up to the latencies")


def _table_row(row: Mapping[str, Any]) -> dict[str, Any]:
    keys: Sequence[str] = (
        "traces",
        "spans",
        "export_spans_per_s",
        "ingest_spans_per_s",
        "otlp_spans_per_s",
        "otlp_request_p99_s",
        "load_s",
        "analyse_s",
        "analyse_worst_s",
        "analyse_cpu_s",
        "redis_mb",
        "redis_peak_mb",
        "exporter_dropped",
    )
    return {k: row[k] for k in keys}
