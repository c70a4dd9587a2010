"""Fixtures for the guard's live tests: a real redis-server for the trace store, and
helpers that put traces into it through the tracing package's exporter and worker."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.service.conftest import chromium  # noqa: F401  (the headless browser fixture)
from tracing.exporter import RedisStreamExporter
from tracing.ingest import IngestConfig, IngestWorker
from tracing.model import Span, SpanKind
from tracing.redisconn import Keys, RedisConfig, make_client
from tracing.store import TraceStore
from yarn_adapt.minicluster.errors import MiniClusterError
from yarn_adapt.minicluster.redis_server import RedisServer, find_redis_server


def unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def guard_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if find_redis_server() is None:
        unavailable("redis-server is not installed (tests/setup.sh installs it)")
    try:
        server = RedisServer(tmp_path_factory.mktemp("guard-redis")).start()
    except MiniClusterError as exc:
        unavailable(f"redis-server could not start: {exc.one_line()}")
        raise
    yield server
    server.kill()


@pytest.fixture
def trace_config(guard_redis: RedisServer) -> RedisConfig:
    return RedisConfig(url=guard_redis.url, prefix=f"g{uuid.uuid4().hex[:10]}")


def open_store(config: RedisConfig) -> TraceStore:
    return TraceStore(make_client(config), config)


def write_traces(
    config: RedisConfig,
    sojourn_us: Mapping[str, int],
    *,
    traces: int = 40,
    end_s: float | None = None,
) -> None:
    """``traces`` requests of an entry service on the first host calling one service
    per host, each taking ``sojourn_us[host]``; through the real exporter and worker."""
    exporter = RedisStreamExporter(make_client(config), Keys(config.prefix).stream)
    end_us = int((end_s if end_s is not None else time.time()) * 1e6)
    hosts = list(sojourn_us)
    for number in range(traces):
        trace = uuid.uuid4().hex
        start = end_us - (traces - number) * 20_000 - sum(sojourn_us.values()) - 1000
        total = sum(sojourn_us.values()) + 500
        exporter.export(_span(trace, "r", None, "frontend", hosts[0], start, start + total,
                              SpanKind.SERVER))  # fmt: skip
        at = start + 200
        for index, host in enumerate(hosts):
            exporter.export(_span(trace, f"c{index}", "r", f"svc-{index}", host, at,
                                  at + sojourn_us[host], SpanKind.SERVER))  # fmt: skip
            at += sojourn_us[host]
    assert exporter.flush(10.0)
    exporter.close()
    IngestWorker(open_store(config), IngestConfig(quiet_s=0.0)).drain()


def _span(
    trace: str, span: str, parent: str | None, service: str, host: str, start: int, end: int,
    kind: SpanKind,
) -> Span:  # fmt: skip
    return Span(
        trace_id=trace,
        span_id=span.encode().hex().rjust(16, "0"),
        parent_id=parent.encode().hex().rjust(16, "0") if parent else None,
        service=service,
        operation="GET /",
        start_us=start,
        end_us=end,
        kind=kind,
        host=host,
    )


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"
