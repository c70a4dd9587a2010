"""What the trace store keeps in Redis stays bounded (issue 23, item 6), against a real
redis-server: the dead-letter stream (a bounded record per bad entry, MAXLEN, in the
memory budget) and the interned names (they live in the segments that use them: they
expire with them, and a read fetches only its window's)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

import pytest
import redis

from tests.tracing.conftest import span
from tests.tracing.test_store_ingest import make_traces, worker_for
from tracing.importers import publish
from tracing.model import Span, SpanKind
from tracing.redisconn import Keys, RedisConfig, as_text
from tracing.risk import RiskSettings
from tracing.store import SEGMENT_OVERHEAD_BYTES, LoadedTraces, StoreLimits, TraceStore
from tracing.wire import FIELD
from yarn_adapt.colocation.model import RiskReading
from yarn_adapt.colocation.observe import TraceStoreRisk

BIG = 16 << 20
DEFAULT_DEAD_LETTERS = 1000


def bad_batch(size: int) -> bytes:
    """The magic of a span batch, then ``size`` bytes that are not one."""
    return b"YTS1" + bytes(size)


def command_calls(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


def commands_during(client: redis.Redis, action: Callable[[], object]) -> dict[str, int]:
    """The commands Redis ran while ``action()`` ran (INFO commandstats deltas)."""
    before = command_calls(client)
    action()
    after = command_calls(client)
    ran = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    ran.pop("info", None)
    return ran


# --------------------------------------------------------------------------- dead letters


def test_fifty_bad_16_mb_entries_cost_kilobytes_and_the_dead_letters_are_bounded(
    client: redis.Redis, store_config: RedisConfig, caplog: pytest.LogCaptureFixture
) -> None:
    keys = Keys(store_config.prefix)
    store = TraceStore(client, store_config)
    worker = worker_for(store, read_entries=5)
    publish([s for t in make_traces(5) for s in t], client, keys.stream)
    with caplog.at_level(logging.WARNING, logger="tracing.ingest"):
        for _ in range(10):  # five at a time: the test's Redis holds 80 MB, not 800
            for _ in range(5):
                client.xadd(keys.stream, {FIELD: bad_batch(BIG)})
            worker.drain()
    assert worker.counters.dead_entries == 50 and worker.counters.traces_stored == 5
    assert client.xlen(keys.dead) == 50
    assert client.memory_usage(keys.dead) < 64 << 10  # kilobytes, not 800 MB
    record = client.xrevrange(keys.dead, count=1)[0][1]
    assert int(record[b"size"]) == BIG + 4 and len(record[b"excerpt"]) == 256
    assert record[b"excerpt"].startswith(b"YTS1") and b"spans announced" in record[b"problem"]
    warning = next(r.getMessage() for r in caplog.records if "not a span batch" in r.getMessage())
    assert f"{keys.stream}, entry " in warning and f"({BIG + 4} bytes)" in warning
    assert "spans announced" in warning and "\n" not in warning
    assert client.xlen(keys.stream) == 0  # the bad entries themselves are gone
    pipe = client.pipeline(transaction=False)
    for _ in range(DEFAULT_DEAD_LETTERS):
        pipe.xadd(keys.stream, {b"other": b"field"})
    pipe.execute()
    worker.drain()
    assert worker.counters.dead_entries == 50 + DEFAULT_DEAD_LETTERS
    assert client.xlen(keys.dead) == DEFAULT_DEAD_LETTERS  # the newest; the oldest went
    newest = client.xrevrange(keys.dead, count=1)[0][1]
    assert newest[b"problem"] == b"the entry has no span batch field 'b'"


def test_the_dead_letter_stream_counts_in_the_memory_budget(
    client: redis.Redis, store_config: RedisConfig
) -> None:
    keys = Keys(store_config.prefix)
    store = TraceStore(client, store_config)
    worker = worker_for(store)
    for first in range(0, 30, 10):
        publish([s for t in make_traces(10, first) for s in t], client, keys.stream)
        worker.drain()
    for _ in range(5):
        client.xadd(keys.stream, {FIELD: bad_batch(4096)})
    worker.drain()
    segments = store.usage()
    dead_letters = int(client.memory_usage(keys.dead))
    assert segments.segments == 3 and dead_letters > 0
    # one byte less than everything: the oldest segment makes room for the dead letters
    budget = segments.bytes + 3 * SEGMENT_OVERHEAD_BYTES + dead_letters - 1
    tight = TraceStore(client, store_config, StoreLimits(memory_budget_bytes=budget))
    assert tight.maintain() == 1
    left = tight.usage()
    assert left.segments == 2 and left.dead_letter_bytes == dead_letters
    assert left.total_bytes + 2 * SEGMENT_OVERHEAD_BYTES <= budget


# --------------------------------------------------------------------------- names


def request(number: int, end_us: int, container: str) -> list[Span]:
    trace = f"{number + 1:032x}"
    return [
        replace(span("r", None, end_us - 500, end_us, service="gw", kind=SpanKind.SERVER,
                     trace=trace), container=container),
        replace(span("d", "r", end_us - 400, end_us - 100, service="db", kind=SpanKind.SERVER,
                     host="node-2", trace=trace), container=f"{container}-db"),
    ]  # fmt: skip


def test_names_expire_with_their_traces_and_a_guard_round_reads_only_its_windows(
    client: redis.Redis, store_config: RedisConfig
) -> None:
    """2,000 containers came and went five minutes ago; ten requests in the last
    minute ran in one. A read of the window fetches that one's names and no table;
    once the retention has passed no name is left in Redis."""
    keys = Keys(store_config.prefix)
    store = TraceStore(client, store_config, StoreLimits(retention_s=4.0))
    worker = worker_for(store)
    now_us = int(time.time() * 1e6)
    churn = [s for n in range(2000) for s in request(n, now_us - 300_000_000 + n, f"c-{n:04d}")]
    publish(churn, client, keys.stream)
    worker.drain()
    recent = [s for n in range(10) for s in request(5000 + n, now_us - 1_000_000 - n, "steady")]
    publish(recent, client, keys.stream)
    worker.drain()
    loaded: list[LoadedTraces] = []
    ran = commands_during(client, lambda: loaded.append(store.load(now_us - 60_000_000, now_us)))
    assert loaded[0].columns.n_traces == 10
    assert sorted(c for _, c in loaded[0].names.placements.values()) == ["steady", "steady-db"]
    assert not {"hgetall", "hvals", "hscan", "hmget"} & set(ran)
    source = TraceStoreRisk(lambda: store, window_s=60.0, risk_settings=RiskSettings())
    readings: list[RiskReading] = []
    ran = commands_during(client, lambda: readings.append(source.read(now_us / 1e6)))
    assert readings[0].snapshot is not None and readings[0].snapshot.traces == 10
    assert set(ran) <= {"zrange", "zrangebyscore", "mget"}, ran  # the index, the segments
    time.sleep(4.5)
    store.maintain()
    left = {as_text(k) for k in client.scan_iter(f"{store_config.prefix}:*")}
    assert left <= {keys.stream, keys.seq}, left  # no name survives its traces


# --------------------------------------------------------------------------- damaged values


def test_a_damaged_segment_is_skipped_and_counted_not_a_failed_read(
    client: redis.Redis, store_config: RedisConfig, caplog: pytest.LogCaptureFixture
) -> None:
    keys = Keys(store_config.prefix)
    store = TraceStore(client, store_config)
    publish([s for t in make_traces(4) for s in t], client, keys.stream)
    worker_for(store).drain()
    damaged = keys.segment(10_000)
    client.set(damaged, b"YTG2 not a segment at all")
    client.zadd(keys.segments, {damaged: 1_700_000_000_000_000})
    with caplog.at_level(logging.WARNING, logger="tracing.store"):
        loaded = store.load()
        found = store.find(f"{1:032x}")
    assert loaded.unreadable_segments == 1 and loaded.segments >= 1
    assert len(set(loaded.columns.trace_ids.tolist())) == 4  # every good trace still read
    assert found.segments >= 1
    assert any(damaged in record.getMessage() for record in caplog.records)
