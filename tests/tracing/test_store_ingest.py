"""The exporter, the ingest worker and the store against a real redis-server: ingest,
idempotence, a consumer killed with entries pending, Redis killed and restarted
mid-stream (AOF), the exporter while Redis is down, bad entries, retention and budget."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from prometheus_client import CollectorRegistry

from tests.tracing.conftest import span, start_server
from tracing.convert import spans_of_trace
from tracing.exporter import ExporterConfig, RedisStreamExporter, prometheus_collector
from tracing.graph import critical_path
from tracing.importers import publish
from tracing.ingest import IngestConfig, IngestWorker
from tracing.model import Span, SpanKind
from tracing.redisconn import Keys, RedisConfig, make_client
from tracing.store import LoadedTraces, StoreLimits, TraceStore
from yarn_adapt.minicluster.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]


def make_traces(count: int, first: int = 0) -> list[list[Span]]:
    """Small traces: a server span, a client call and its server on another node."""
    traces = []
    for t in range(first, first + count):
        trace = f"{t + 1:032x}"
        base = 1_700_000_000_000_000 + t * 1_000
        traces.append(
            [
                span("r", None, base, base + 500, service="gw", kind=SpanKind.SERVER, trace=trace),
                span(
                    "c", "r", base + 10, base + 400, service="gw", kind=SpanKind.CLIENT, trace=trace
                ),
                span(
                    "s",
                    "c",
                    base + 20,
                    base + 380,
                    service="db",
                    kind=SpanKind.SERVER,
                    host="node-2",
                    error=t % 10 == 0,
                    trace=trace,
                ),
            ]
        )
    return traces


def ids(spans: list[Span]) -> set[tuple[str, str]]:
    return {(s.trace_id, s.span_id) for s in spans}


def stored_ids(loaded: LoadedTraces) -> list[tuple[str, str]]:
    out = []
    for t in range(loaded.columns.n_traces):
        out += [(s.trace_id, s.span_id) for s in spans_of_trace(loaded.columns, loaded.names, t)]
    return out


def worker_for(store: TraceStore, name: str = "w1", **config: float) -> IngestWorker:
    options = {"quiet_s": 0.0, "claim_idle_s": 60.0, **config}
    return IngestWorker(store, IngestConfig(consumer=name, **options))  # type: ignore[arg-type]


def test_exported_spans_are_ingested_and_stored_once(
    client: redis.Redis, store_config: RedisConfig
) -> None:
    traces = make_traces(300)
    exporter = RedisStreamExporter(
        client, Keys(store_config.prefix).stream, ExporterConfig(batch_spans=64)
    )
    for trace in traces:
        for s in trace:
            exporter.export(s)
    assert exporter.flush(30)
    exporter.close()
    store = TraceStore(client, store_config)
    counters = worker_for(store).drain()
    assert (counters.spans, counters.spans_stored, counters.traces_stored) == (900, 900, 300)
    loaded = store.load()
    got = stored_ids(loaded)
    assert len(got) == 900 and set(got) == ids([s for t in traces for s in t])
    original = {t[0].trace_id: t for t in traces}
    for t in range(0, 300, 37):
        spans = spans_of_trace(loaded.columns, loaded.names, t)
        assert critical_path(spans) == critical_path(original[spans[0].trace_id])
    keys = Keys(store_config.prefix)
    assert client.xlen(keys.stream) == 0  # acknowledged entries are trimmed
    assert client.xpending(keys.stream, keys.group)["pending"] == 0


def test_a_span_delivered_twice_and_late_spans_count_once(
    client: redis.Redis, store_config: RedisConfig
) -> None:
    traces = make_traces(20)
    spans = [s for t in traces for s in t]
    keys = Keys(store_config.prefix)
    store = TraceStore(client, store_config)
    worker = worker_for(store)
    publish(spans[:40], client, keys.stream)
    publish(spans[:40], client, keys.stream)  # the same entries again (a resent batch)
    worker.drain()
    publish(spans[30:], client, keys.stream)  # late: some already stored, some new
    worker.drain()
    loaded = store.load()
    assert loaded.columns.n_traces == 20 and loaded.columns.n_spans == 60
    assert sorted(stored_ids(loaded)) == sorted(ids(spans))
    assert loaded.merged_traces >= 1
    assert not loaded.columns.missing_parent.any()  # late parents were joined up
    split = traces[10][0].trace_id  # spans 30-32: sent again later, stored in two pieces
    found = store.find(split)
    assert found.columns.n_traces == 1 and found.columns.n_spans == 3
    assert found.segments == 2 and found.merged_traces == 1


def test_a_dead_consumers_pending_entries_are_reclaimed(
    client: redis.Redis, store_config: RedisConfig, redis_server: RedisServer
) -> None:
    """Consumer a reads every entry, stores one segment, and is killed (-9) before it
    acknowledges anything; consumer b claims the entries and stores every span once."""
    traces = make_traces(200)
    spans = [s for t in traces for s in t]
    keys = Keys(store_config.prefix)
    publish(spans, client, keys.stream, batch=50)
    script = textwrap.dedent(
        f"""
        import os, sys
        from tracing.redisconn import RedisConfig, make_client
        from tracing.store import TraceStore
        from tracing.ingest import IngestConfig, IngestWorker
        config = RedisConfig(url={redis_server.url!r}, prefix={store_config.prefix!r})
        worker = IngestWorker(TraceStore(make_client(config), config),
                              IngestConfig(consumer="a", quiet_s=0.0, claim_idle_s=60))
        worker.read_available()
        worker._ack = lambda entries: os._exit(9)  # die after storing, before acking
        worker.flush(force=True)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", script], env=env, timeout=120, check=False)
    assert done.returncode == 9
    pending = client.xpending(keys.stream, keys.group)
    assert pending["pending"] > 0 and {c["name"] for c in pending["consumers"]} == {b"a"}
    store = TraceStore(client, store_config)
    assert store.load().columns.n_spans == 600  # a's segment made it before it died
    reclaimer = worker_for(store, "b", claim_idle_s=0.2)
    time.sleep(0.3)
    assert reclaimer.claim() == 600
    reclaimer.flush(force=True)
    assert client.xpending(keys.stream, keys.group)["pending"] == 0
    loaded = store.load()  # a's and b's copies of every trace, merged
    assert loaded.columns.n_traces == 200 and sorted(stored_ids(loaded)) == sorted(ids(spans))


@pytest.fixture
def aof_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = start_server(tmp_path / "aof", appendonly=True, appendfsync="always")
    yield server
    server.kill()


def test_redis_killed_and_restarted_mid_stream_loses_and_doubles_nothing(
    aof_server: RedisServer,
) -> None:
    config = RedisConfig(url=aof_server.url, prefix="aof", timeout_s=1.0)
    producer_client, worker_client = make_client(config, retries=0), make_client(config)
    store = TraceStore(worker_client, config)
    worker = worker_for(
        store, quiet_s=0.2, claim_idle_s=1.0, claim_every_s=0.3, maintain_every_s=0.5
    )
    exporter = RedisStreamExporter(
        producer_client,
        Keys("aof").stream,
        ExporterConfig(
            batch_spans=32, retry_initial_s=0.05, retry_max_s=0.2, flush_interval_s=0.02
        ),
    )
    stop = threading.Event()
    failures: list[BaseException] = []

    def run_worker() -> None:
        try:
            worker.run(stop)
        except BaseException as exc:  # surfaced below
            failures.append(exc)

    thread = threading.Thread(target=run_worker)
    thread.start()
    traces = make_traces(1500)
    try:
        for number, trace in enumerate(traces):
            for s in trace:
                exporter.export(s)
            if number % 100 == 0:
                time.sleep(0.02)
            if number == 700:
                aof_server.kill()  # SIGKILL mid-stream ...
            if number == 900:
                time.sleep(1.0)  # ... down long enough for every client to notice ...
                aof_server.start()  # ... and back from its AOF
        assert exporter.flush(60)
        exporter.close()
        deadline = time.monotonic() + 60
        while worker.counters.spans_stored < 4500 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join(60)
    assert not failures
    stats = exporter.stats()
    assert sum(stats.dropped.values()) == 0 and stats.send_failures >= 1
    loaded = TraceStore(make_client(config), config).load()
    assert loaded.columns.n_traces == 1500
    assert sorted(stored_ids(loaded)) == sorted(ids([s for t in traces for s in t]))


def test_the_exporter_while_redis_is_down(tmp_path: Path) -> None:
    server = start_server(tmp_path / "down")
    try:
        config = RedisConfig(url=server.url, prefix="down", timeout_s=0.5)
        client = make_client(config, retries=0)
        limits = ExporterConfig(
            max_buffered_spans=1000,
            batch_spans=100,
            batches_per_round=2,
            retry_initial_s=0.05,
            retry_max_s=0.2,
        )
        exporter = RedisStreamExporter(client, Keys("down").stream, limits)
        registry = CollectorRegistry()
        registry.register(prometheus_collector(exporter))
        server.stop()
        spans = [s for t in make_traces(2000) for s in t]
        began = time.monotonic()
        for s in spans:
            exporter.export(s)  # never waits for the dead server
        assert time.monotonic() - began < 5.0
        time.sleep(0.5)
        stats = exporter.stats()
        assert not stats.redis_up and stats.send_failures >= 1
        assert stats.buffered <= limits.max_buffered_spans + limits.batch_spans * 2
        accepted = len(spans) - stats.dropped["buffer_full"]
        assert stats.dropped["buffer_full"] >= len(spans) - 1200
        dropped_metric = registry.get_sample_value(
            "tracing_exporter_spans_dropped_total", {"reason": "buffer_full"}
        )
        assert dropped_metric == stats.dropped["buffer_full"]
        server.start()  # Redis is back: everything buffered goes out
        assert exporter.flush(30)
        stats = exporter.stats()
        assert stats.redis_up and stats.exported == accepted and stats.buffered == 0
        assert registry.get_sample_value("tracing_exporter_redis_up") == 1.0
        store = TraceStore(client, config)
        assert worker_for(store).drain().spans == accepted
        exporter.close()
    finally:
        server.kill()


def test_a_bad_entry_goes_to_the_dead_letter_stream_and_the_rest_is_stored(
    client: redis.Redis, store_config: RedisConfig
) -> None:
    keys = Keys(store_config.prefix)
    client.xadd(keys.stream, {b"b": b"YTS1 this is not a batch"})
    client.xadd(keys.stream, {b"other": b"field"})
    publish([s for t in make_traces(5) for s in t], client, keys.stream)
    store = TraceStore(client, store_config)
    counters = worker_for(store).drain()
    assert counters.dead_entries == 2 and counters.traces_stored == 5
    assert client.xlen(keys.dead) == 2
    assert client.xpending(keys.stream, keys.group)["pending"] == 0


def test_retention_and_the_memory_budget(client: redis.Redis, store_config: RedisConfig) -> None:
    keys = Keys(store_config.prefix)
    store = TraceStore(
        client, store_config, StoreLimits(retention_s=0.3, memory_budget_bytes=1 << 30)
    )
    publish([s for t in make_traces(10) for s in t], client, keys.stream)
    worker_for(store).drain()
    assert store.usage().segments == 1
    time.sleep(0.5)
    store.maintain()
    assert store.usage().segments == 0 and store.load().columns.n_traces == 0
    tight = TraceStore(client, store_config, StoreLimits(retention_s=60, memory_budget_bytes=1))
    worker = worker_for(tight)
    for first in range(0, 30, 10):
        publish([s for t in make_traces(10, first) for s in t], client, keys.stream)
        worker.drain()
    assert tight.usage().segments == 3
    assert tight.maintain() == 3 and tight.usage().segments == 0


def test_a_worker_survives_redis_losing_everything(tmp_path: Path) -> None:
    """A Redis without persistence restarts empty: the worker recreates its group and
    interns its names again, so later traces still carry the right names."""
    server = start_server(tmp_path / "volatile")
    try:
        config = RedisConfig(url=server.url, prefix="vol")
        store = TraceStore(make_client(config), config)
        worker = worker_for(store)
        publish([s for t in make_traces(5) for s in t], store.client, Keys("vol").stream)
        worker.drain()
        server.restart()
        later = make_traces(5, first=100)
        publish([s for t in later for s in t], store.client, Keys("vol").stream)
        worker.drain()
        loaded = store.load()
        assert loaded.columns.n_traces == 5
        services = {
            s.service for t in range(5) for s in spans_of_trace(loaded.columns, loaded.names, t)
        }
        assert services == {"gw", "db"}
    finally:
        server.kill()
