"""Names in segments (tracing.names): the ingest worker keeps only the names its held
spans use, and segments of the first format (names in shared Redis hashes) still read,
by the ids they use, while those hashes expire. Against a real redis-server."""

from __future__ import annotations

import redis

from tests.tracing.test_store_bounds import commands_during, request
from tests.tracing.test_store_ingest import stored_ids
from tracing.convert import columns_from_spans, spans_of_trace
from tracing.importers import publish
from tracing.ingest import IngestConfig, IngestWorker
from tracing.names import NameIndex
from tracing.redisconn import Keys, RedisConfig
from tracing.segment import encode_segment
from tracing.store import LoadedTraces, TraceStore


def test_a_worker_keeps_only_the_names_its_held_spans_use(
    client: redis.Redis, store_config: RedisConfig
) -> None:
    """Past max_names the worker forgets the names of stored traces; the traces it
    still holds are renumbered and stored later under their own names."""
    keys = Keys(store_config.prefix)
    store = TraceStore(client, store_config)
    now = [0.0]
    worker = IngestWorker(
        store,
        IngestConfig(consumer="w", quiet_s=5.0, claim_idle_s=60.0, max_names=20),
        clock=lambda: now[0],
    )
    early = [s for n in range(30) for s in request(n, 1_000_000 + n, f"early-{n}")]
    publish(early, client, keys.stream)
    worker.read_available()
    now[0] = 10.0  # the early traces went quiet
    late = [s for n in range(3) for s in request(100 + n, 2_000_000 + n, f"late-{n}")]
    publish(late, client, keys.stream)
    worker.read_available()
    assert worker.flush() == 30  # the early ones stored; the late ones held
    assert worker.interned_names <= 8  # the late ones' names: 2 endpoints, 6 placements
    now[0] = 20.0
    assert worker.flush() == 3
    loaded = store.load()
    assert sorted(stored_ids(loaded)) == sorted((s.trace_id, s.span_id) for s in early + late)
    for t in range(loaded.columns.n_traces):
        for stored in spans_of_trace(loaded.columns, loaded.names, t):
            number = int(stored.trace_id, 16) - 1
            first = f"early-{number}" if number < 100 else f"late-{number - 100}"
            assert stored.container in (first, f"{first}-db")
            assert stored.service == ("gw" if stored.container == first else "db")


def test_segments_of_the_first_format_still_read_and_their_shared_names_then_go(
    client: redis.Redis, store_config: RedisConfig
) -> None:
    """A store written by the previous version: YTG1 segments whose ids are in the
    shared hash names:rev. They still read (by HMGET of the ids they use, not the
    whole hash); the hashes go as soon as no such segment is left."""
    keys = Keys(store_config.prefix)
    spans = request(1, 1_000_000, "old-container")
    index = NameIndex()
    columns, _ = columns_from_spans(spans, index)
    texts = [index.text(i) for i in range(1, len(index) + 1)]
    client.hset(keys.names_rev, mapping={str(i): t for i, t in enumerate(texts, start=1)})
    client.hset(keys.names_rev, "999", "e\0someone\0else")  # not read
    client.hset(keys.names, mapping={t: i for i, t in enumerate(texts, start=1)})
    payload = encode_segment(columns, texts)
    names_section = 8 + 4 * len(texts) + sum(len(t.encode()) for t in texts)
    first_format = b"YTG1" + payload[4:-names_section]
    client.set(keys.segment(1), first_format, px=60_000)
    client.zadd(keys.segments, {keys.segment(1): 1_000_000})
    client.hset(f"{store_config.prefix}:segsize", keys.segment(1), len(first_format))
    store = TraceStore(client, store_config)
    found: list[LoadedTraces] = []
    ran = commands_during(client, lambda: found.append(store.load()))
    loaded = found[0]
    assert set(ran) == {"zrangebyscore", "mget", "hmget"}, ran
    got = spans_of_trace(loaded.columns, loaded.names, 0)
    assert {(s.service, s.host, s.container) for s in got} == {
        ("gw", "node-1", "old-container"),
        ("db", "node-2", "old-container-db"),
    }
    assert len(loaded.names.endpoints) + len(loaded.names.placements) == 4
    store.maintain()
    assert client.exists(*keys.shared_names) == 2  # still needed
    client.delete(keys.segment(1))  # it expired
    store.maintain()
    assert client.exists(*keys.shared_names) == 0


def test_ticks_store_quiet_traces_at_most_every_flush_every_s(
    client: redis.Redis, store_config: RedisConfig
) -> None:
    """Storing after every read of a few entries cost the worker most of its CPU at
    high rates (bench trace-risk); a tick stores at most every ``flush_every_s``."""
    keys = Keys(store_config.prefix)
    store = TraceStore(client, store_config)
    now = [100.0]
    config = IngestConfig(consumer="w", quiet_s=0.0, flush_every_s=0.1, claim_idle_s=60.0)
    worker = IngestWorker(store, config, clock=lambda: now[0])
    stored = lambda: store.load().columns.n_traces  # noqa: E731
    publish(request(1, 1_000_000, "a"), client, keys.stream)
    worker.read_available()
    worker.tick()
    assert stored() == 1
    publish(request(2, 2_000_000, "b"), client, keys.stream)
    worker.read_available()
    now[0] += 0.05
    worker.tick()  # within flush_every_s of the last store: held
    assert stored() == 1
    now[0] += 0.06
    worker.tick()
    assert stored() == 2
