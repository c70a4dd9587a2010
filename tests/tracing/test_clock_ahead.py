"""A host whose clock runs ahead (issue 23, item 5): its spans are moved back when they
arrive, counted and named, and the guard's window ends at the clock -- against a real
redis-server, through the real worker, the guard's observe step and its decision."""

from __future__ import annotations

import logging
import re
import time
import uuid

import pytest
import redis

from tests.colocation.factories import node
from tests.tracing.conftest import span
from tests.tracing.test_store_ingest import worker_for
from tracing.analysis import window_bounds
from tracing.convert import spans_of_trace
from tracing.importers import publish
from tracing.model import Span, SpanKind
from tracing.redisconn import Keys, RedisConfig
from tracing.risk import RiskSettings
from tracing.store import TraceStore, trace_ends
from tracing.wire import FIELD, encode_batch
from yarn_adapt.colocation.decide import node_risk
from yarn_adapt.colocation.model import GuardInputs, GuardSettings, RiskReading
from yarn_adapt.colocation.observe import TraceStoreRisk

AHEAD_US = 50 * 60 * 1_000_000  # node-3's clock: 50 minutes fast
SERVER = SpanKind.SERVER

STALE_TEN_MINUTES = re.compile(r"risk stale: newest traces (9 m 5\d s|10 m( \d+ s)?) old")


def request(end_us: int) -> list[Span]:
    """gw on node-1 calls db on node-2, ending at ``end_us``."""
    trace = uuid.uuid4().hex
    start = end_us - 900
    return [
        span("r", None, start, end_us, service="gw", kind=SERVER, trace=trace),
        span("d", "r", start + 100, start + 400, service="db", kind=SERVER, host="node-2",
             trace=trace),
    ]  # fmt: skip


def fast_span(end_us: int) -> Span:
    """One request to pricing on node-3, whose clock is 50 minutes fast."""
    start = end_us - 350 + AHEAD_US
    return span("p", None, start, start + 350, service="pricing", kind=SERVER, host="node-3",
                trace=uuid.uuid4().hex)  # fmt: skip


def by_host(spans: list[Span]) -> dict[str, list[Span]]:
    """One stream entry per host, as each service's exporter sends them."""
    hosts: dict[str, list[Span]] = {}
    for s in spans:
        hosts.setdefault(s.host, []).append(s)
    return hosts


def reading_at(config: RedisConfig, client: redis.Redis, now_s: float) -> RiskReading:
    source = TraceStoreRisk(
        lambda: TraceStore(client, config), window_s=60.0, risk_settings=RiskSettings()
    )
    return source.read(now_s)


def guard_view(reading: RiskReading, now_s: float, host: str) -> tuple[bool, str]:
    """Whether the guard would use the node's risk, and why not."""
    inputs = GuardInputs(
        now_s=now_s,
        nodes=(node(f"{host}:8041"),),
        risk=reading.snapshot,
        risk_problem=reading.problem,
    )
    risk, why = node_risk(inputs.nodes[0], inputs, GuardSettings())
    return risk is not None, why


def test_a_span_from_a_host_50_minutes_ahead_does_not_move_the_window(
    client: redis.Redis, store_config: RedisConfig, caplog: pytest.LogCaptureFixture
) -> None:
    now_us = int(time.time() * 1e6)
    spans = [s for n in range(20) for s in request(now_us - 1_000_000 - n * 1000)]
    spans.append(fast_span(now_us - 1_000_000))
    for host_spans in by_host(spans).values():
        publish(host_spans, client, Keys(store_config.prefix).stream, batch=10)
    store = TraceStore(client, store_config)
    with caplog.at_level(logging.WARNING, logger="tracing.ingest"):
        counters = worker_for(store).drain()
    read_at = time.time()
    reading = reading_at(store_config, client, read_at)
    snapshot = reading.snapshot
    assert snapshot is not None and snapshot.traces == 21  # every trace is in the window
    for host in ("node-1", "node-2", "node-3"):
        assert guard_view(reading, read_at, host) == (True, ""), host
    assert snapshot.window_end_us <= read_at * 1e6
    # counted where the other ingest counters are, and in the snapshot and the reading
    assert counters.clock_ahead_spans == 1 and 2990 < counters.clock_ahead_max_s <= 3000
    assert (snapshot.clock_ahead_spans, snapshot.clock_ahead_hosts) == (1, ("node-3",))
    assert "1 span(s)" in reading.problem and "node-3" in reading.problem
    (warning,) = [r.getMessage() for r in caplog.records if "ahead" in r.getMessage()]
    said = re.search(r"end (\d+\.\d) s after Redis added the entry", warning)
    assert "'node-3'" in warning and said is not None and "\n" not in warning, warning
    # 50 minutes ahead, less the time from the span's end to Redis's entry (the
    # request is written 1 s before now, a loaded machine adds some)
    assert 2990 < float(said.group(1)) <= 3000, warning
    # nothing stored ends in the future; node-3's duration is what it measured
    loaded = store.load()
    assert int(trace_ends(loaded.columns).max()) <= read_at * 1e6
    stored = [s for t in range(21) for s in spans_of_trace(loaded.columns, loaded.names, t)]
    (pricing,) = [s for s in stored if s.service == "pricing"]
    assert pricing.duration_us == 350 and pricing.host == "node-3"


def test_a_future_trace_already_in_the_store_does_not_move_the_window_either(
    client: redis.Redis, store_config: RedisConfig
) -> None:
    """Stored as it came (by an earlier version, or a worker told to tolerate any clock):
    the guard's read and ``trace risk`` still end their window at the clock."""
    now_us = int(time.time() * 1e6)
    spans = [s for n in range(5) for s in request(now_us - 1_000_000 - n * 1000)]
    spans.append(fast_span(now_us - 1_000_000))
    publish(spans, client, Keys(store_config.prefix).stream)
    store = TraceStore(client, store_config)
    counters = worker_for(store, max_clock_ahead_s=1e9).drain()
    newest = store.newest_end_us()
    assert counters.clock_ahead_spans == 0 and newest is not None and newest > now_us + 2e9
    read_at = time.time()
    reading = reading_at(store_config, client, read_at)
    assert reading.snapshot is not None and reading.snapshot.traces == 5
    assert guard_view(reading, read_at, "node-2") == (True, "")
    assert window_bounds(store, 60.0, None)[1] <= time.time() * 1e6


def test_staleness_is_judged_against_the_clock_not_a_future_span(
    client: redis.Redis, store_config: RedisConfig
) -> None:
    """Every entry was written ten minutes ago (Redis stamped it then), node-3's span
    claiming to end 40 minutes from now: the evidence is ten minutes old."""
    then_us = int(time.time() * 1e6) - 600_000_000
    spans = [s for n in range(10) for s in request(then_us - 1_000_000 - n * 1000)]
    spans.append(fast_span(then_us - 1_000_000))
    stream = Keys(store_config.prefix).stream
    for seq, host_spans in enumerate(by_host(spans).values(), start=1):
        client.xadd(stream, {FIELD: encode_batch(host_spans)}, id=f"{then_us // 1000}-{seq}")
    worker_for(TraceStore(client, store_config)).drain()
    read_at = time.time()
    reading = reading_at(store_config, client, read_at)
    assert reading.snapshot is not None
    assert read_at - reading.snapshot.window_end_us / 1e6 >= 599
    for host in ("node-1", "node-2", "node-3"):
        usable, why = guard_view(reading, read_at, host)
        assert not usable and STALE_TEN_MINUTES.match(why), why
