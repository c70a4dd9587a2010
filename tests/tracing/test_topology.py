"""The service topology (who calls whom, how often, how many errors) on hand-built traces
with known call frequencies: in the pure aggregation, and over a window of stored traces
through ``yarn-adapt trace topology``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.tracing.conftest import span
from tests.tracing.test_store_ingest import worker_for
from tracing.convert import columns_from_spans
from tracing.fastpath import critical_paths
from tracing.forest import build_forest
from tracing.graph import service_topology
from tracing.importers import publish
from tracing.model import Span, SpanKind
from tracing.redisconn import RedisConfig
from tracing.store import TraceStore
from yarn_adapt.cli import main

SERVER, INTERNAL = SpanKind.SERVER, SpanKind.INTERNAL
BASE_US = 1_700_000_000_000_000


def shop_trace(number: int, at_us: int) -> list[Span]:
    """frontend -> orders -> db (twice), frontend -> auth (-> auth, same service), and in
    trace 0 only orders -> payments. db's second call fails in traces 0-2, auth in 4."""
    trace = f"{number + 1:032x}"

    def call(
        name: str, parent: str | None, start: int, end: int, service: str, **extra: Any
    ) -> Span:
        kind = extra.pop("kind", SERVER)
        first, last = at_us + start, at_us + end
        return span(name, parent, first, last, service=service, kind=kind, trace=trace, **extra)

    spans = [
        call("f", None, 0, 100, "frontend"),
        call("o", "f", 10, 80, "orders"),
        call("d1", "o", 20, 30, "db"),
        call("d2", "o", 40, 60, "db", error=number < 3),
        call("a", "f", 5, 15, "auth", error=number == 4),
        call("a2", "a", 6, 9, "auth", kind=INTERNAL),
    ]
    if number == 0:
        spans.append(call("p", "o", 50, 70, "payments"))
    return spans


EXPECTED_EDGES = {  # (caller, callee): (calls, errors, mean µs)
    ("frontend", "orders"): (5, 0, 70.0),
    ("frontend", "auth"): (5, 1, 10.0),
    ("orders", "db"): (10, 3, 15.0),
    ("orders", "payments"): (1, 0, 20.0),
}


def edges_of(rows: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[int, int, float]]:
    return {(r["caller"], r["callee"]): (r["calls"], r["errors"], r["mean_us"]) for r in rows}


def test_calls_and_errors_per_edge_are_exact() -> None:
    spans = [s for n in range(5) for s in shop_trace(n, BASE_US + n * 1000)]
    columns, names = columns_from_spans(spans)
    graph = service_topology(critical_paths(build_forest(columns, names)))
    rows = [{"caller": a, "callee": b, **data} for a, b, data in graph.edges(data=True)]
    assert edges_of(rows) == EXPECTED_EDGES  # no auth -> auth: same-service spans
    nodes = dict(graph.nodes(data=True))
    assert {n: (d["spans"], d["requests"], d["errors"]) for n, d in nodes.items()} == {
        "frontend": (5, 5, 0),
        "orders": (5, 5, 0),
        "db": (10, 10, 3),
        "auth": (10, 5, 1),  # the internal auth span is no request
        "payments": (1, 1, 0),
    }
    assert sum(d["critical_self_us"] for d in nodes.values()) == 5 * 100


def test_the_window_counts_only_its_traces(
    client: redis.Redis,
    store_config: RedisConfig,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    recent = [s for n in range(5) for s in shop_trace(n, BASE_US + n * 1000)]
    old = [s for n in range(5, 8) for s in shop_trace(n, BASE_US - 3_600_000_000)]
    store = TraceStore(client, store_config)
    publish(recent + old, client, store.keys.stream)
    assert worker_for(store).drain().traces_stored == 8
    config = tmp_path / "yarn-adapt.toml"
    config.write_text(
        f'[tracing]\nredis_url = "{store_config.url}"\nprefix = "{store_config.prefix}"\n'
    )
    end = f"{(BASE_US + 10_000) / 1e6:.6f}"

    def topology(window: str) -> dict[str, Any]:
        args = ["trace", "--config", str(config), "topology", "--window", window, "--end", end]
        assert main([*args, "--json"]) == 0
        result: dict[str, Any] = json.loads(capsys.readouterr().out)
        return result

    assert edges_of(topology("60")["calls"]) == EXPECTED_EDGES
    wide = topology("7200")  # + the 3 old traces (no errors, no payments call)
    assert edges_of(wide["calls"]) == {
        ("frontend", "orders"): (8, 0, 70.0),
        ("frontend", "auth"): (8, 1, 10.0),
        ("orders", "db"): (16, 3, 15.0),
        ("orders", "payments"): (1, 0, 20.0),
    }
    assert main(["trace", "--config", str(config), "topology", "--window", "60", "--end", end]) == 0
    text = capsys.readouterr().out
    assert "orders -> db: 10 calls, 3 errors, mean 0.015 ms" in text
