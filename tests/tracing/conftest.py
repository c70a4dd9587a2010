"""Fixtures for the tracing tests: a real redis-server (Debian's, installed by
tests/setup.sh) in a temporary directory on a free port, and helpers to build spans.

With ``CI=true`` a missing or broken redis-server fails the tests that need it; elsewhere
they are skipped with the reason.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from tracing.model import Span, SpanKind, Status
from tracing.redisconn import RedisConfig, make_client
from yarn_adapt.minicluster.errors import MiniClusterError
from yarn_adapt.minicluster.redis_server import RedisServer, find_redis_server

SAMPLES = Path(__file__).resolve().parent / "samples"
TRACE = "0af7651916cd43dd8448eb211c80319c"


def unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def start_server(directory: Path, **options: object) -> RedisServer:
    if find_redis_server() is None:
        unavailable("redis-server is not installed (tests/setup.sh installs it)")
    try:
        return RedisServer(directory, **options).start()  # type: ignore[arg-type]
    except MiniClusterError as exc:
        unavailable(f"redis-server could not start: {exc.one_line()}")
        raise


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server for the session; tests keep apart by key prefix."""
    server = start_server(tmp_path_factory.mktemp("redis"))
    yield server
    server.kill()


@pytest.fixture
def store_config(redis_server: RedisServer) -> RedisConfig:
    return RedisConfig(url=redis_server.url, prefix=f"t{uuid.uuid4().hex[:10]}")


@pytest.fixture
def client(store_config: RedisConfig) -> Iterator[redis.Redis]:
    connection = make_client(store_config)
    yield connection
    for key in connection.scan_iter(f"{store_config.prefix}:*"):
        connection.delete(key)
    connection.close()


@pytest.fixture
def settings_file(tmp_path: Path, store_config: RedisConfig) -> Path:
    """A yarn-adapt.toml whose [tracing] section names the test's store."""
    path = tmp_path / "yarn-adapt.toml"
    path.write_text(
        f'[tracing]\nredis_url = "{store_config.url}"\nprefix = "{store_config.prefix}"\n'
    )
    return path


def span(
    span_id: str,
    parent: str | None,
    start: int,
    end: int,
    *,
    service: str = "svc",
    operation: str = "op",
    kind: SpanKind = SpanKind.INTERNAL,
    host: str = "node-1",
    error: bool = False,
    follows_from: bool = False,
    trace: str = TRACE,
) -> Span:
    """A span with short readable ids: ``span("a", None, 0, 100)``; ids are padded."""
    return Span(
        trace_id=trace,
        span_id=_pad(span_id),
        parent_id=_pad(parent) if parent is not None else None,
        service=service,
        operation=operation,
        start_us=start,
        end_us=end,
        kind=kind,
        status=Status.ERROR if error else Status.OK,
        host=host,
        follows_from=follows_from,
    )


def _pad(short: str) -> str:
    return short.encode().hex().rjust(16, "0")[-16:]


def pad(short: str) -> str:
    return _pad(short)


def one_span_request() -> bytes:
    """An OTLP protobuf export of one server span of "frontend", ending now."""
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add()
    spans.resource.attributes.append(
        KeyValue(key="service.name", value=AnyValue(string_value="frontend"))
    )
    now_ns = time.time_ns()
    span = ProtoSpan(
        trace_id=bytes.fromhex("0af7651916cd43dd8448eb211c80319c"),
        span_id=bytes.fromhex("b7ad6b7169203331"),
        name="GET /",
        kind=ProtoSpan.SpanKind.SPAN_KIND_SERVER,
        start_time_unix_nano=now_ns - 5_000_000,
        end_time_unix_nano=now_ns,
    )
    spans.scope_spans.add().spans.append(span)
    return request.SerializeToString()
