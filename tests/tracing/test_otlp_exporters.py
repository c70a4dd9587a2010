"""Real OpenTelemetry exporters against the OTLP/HTTP receiver on a port, a real
redis-server behind it: the Python SDK's ``OTLPSpanExporter`` sends a multi-service call
tree, the ingest worker stores it, and ``yarn-adapt trace critical-path`` / ``trace
risk`` find the path worked out by hand. Then what goes over the wire: bad bodies,
refusals and the connection after them, chunked and 100-continue requests, the token,
a full backlog and the rate limit (with their Retry-After, which the exporter honours),
10,000 spans in one request, and ``python -m tracing ingest --otlp``."""

from __future__ import annotations

import gzip
import http.client
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import redis
import requests
from google.rpc.error_details_pb2 import BadRequest
from google.rpc.status_pb2 import Status as RpcStatus
from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind as OtelKind
from opentelemetry.trace import Status as OtelStatus
from opentelemetry.trace import StatusCode

from tests.tracing.test_otlp_receiver import CALLS, PROTOBUF, Sent, many, proto_request
from tests.tracing.test_store_ingest import ROOT
from tracing.convert import spans_of_trace
from tracing.ingest import IngestConfig, IngestWorker
from tracing.model import Span
from tracing.receiver import OtlpReceiver, ReceiverConfig, ReceiverServer
from tracing.redisconn import Keys, RedisConfig
from tracing.store import TraceStore
from yarn_adapt.cli import main
from yarn_adapt.minicluster.redis_server import RedisServer, free_port

# --------------------------------------------------------------------------- set-up


@pytest.fixture
def start_receiver(client: redis.Redis, store_config: RedisConfig) -> Iterator[Any]:
    """``start_receiver(**ReceiverConfig)``: a receiver on 127.0.0.1, a free port."""
    servers: list[ReceiverServer] = []

    def start(**config: Any) -> ReceiverServer:
        options = {"host": "127.0.0.1", "port": 0, **config}
        receiver = OtlpReceiver(client, Keys(store_config.prefix).stream, ReceiverConfig(**options))
        servers.append(ReceiverServer(receiver).start())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def ingested(client: redis.Redis, store_config: RedisConfig) -> list[Span]:
    """What the stream holds, ingested, and everything stored, read back."""
    store = TraceStore(client, store_config)
    IngestWorker(store, IngestConfig(consumer="test", quiet_s=0.0)).drain()
    loaded = store.load()
    return [
        s
        for t in range(loaded.columns.n_traces)
        for s in spans_of_trace(loaded.columns, loaded.names, t)
    ]


def ids(spans: Sequence[Span]) -> set[tuple[str, str]]:
    return {(s.trace_id, s.span_id) for s in spans}


def sdk_ids(spans: Sequence[ReadableSpan]) -> set[tuple[str, str]]:
    contexts = [s.get_span_context() for s in spans]
    return {(f"{c.trace_id:032x}", f"{c.span_id:016x}") for c in contexts if c is not None}


def status_of(response: requests.Response | http.client.HTTPResponse, body: bytes) -> RpcStatus:
    assert response.headers["Content-Type"] == PROTOBUF
    return RpcStatus.FromString(body)


def post(url: str, body: bytes, **headers: str) -> requests.Response:
    sent = {"Content-Type": PROTOBUF, **{k.replace("_", "-"): v for k, v in headers.items()}}
    return requests.post(url, data=body, headers=sent, timeout=30)


# --------------------------------------------------------------------------- the call tree

# One request, µs after its start: gw serves it and calls orders and, in parallel,
# stock; orders calls db. Service, host, span name, kind, start, end, parent.
TREE = {
    "root": ("gw", "node-1", "GET /checkout", OtelKind.SERVER, 0, 100_000, None),
    "to-orders": ("gw", "node-1", "GET /orders", OtelKind.CLIENT, 10_000, 70_000, "root"),
    "orders": ("orders", "node-2", "GET /orders", OtelKind.SERVER, 12_000, 68_000, "to-orders"),
    "to-db": ("orders", "node-2", "SELECT items", OtelKind.CLIENT, 20_000, 60_000, "orders"),
    "db": ("db", "node-3", "SELECT items", OtelKind.SERVER, 21_000, 59_000, "to-db"),
    "to-stock": ("gw", "node-1", "GET /stock", OtelKind.CLIENT, 10_000, 30_000, "root"),
    "stock": ("stock", "node-1", "GET /stock", OtelKind.SERVER, 11_000, 29_000, "to-stock"),
}
# By hand (Jaeger's walk back from the root's end through the last-finishing child):
# the stock call ends before the orders call and overlaps it, so it is off the path.
PATH = [
    ("gw", "GET /checkout", 0, 10_000),
    ("gw", "GET /orders", 10_000, 12_000),
    ("orders", "GET /orders", 12_000, 20_000),
    ("orders", "SELECT items", 20_000, 21_000),
    ("db", "SELECT items", 21_000, 59_000),
    ("orders", "SELECT items", 59_000, 60_000),
    ("orders", "GET /orders", 60_000, 68_000),
    ("gw", "GET /orders", 68_000, 70_000),
    ("gw", "GET /checkout", 70_000, 100_000),
]
TRACES = 3  # the second one's db request fails


class Services:
    """One TracerProvider per service (its own resource: service.name, host.name), each
    exporting through its own OTLPSpanExporter, as separate processes would."""

    def __init__(self, url: str, **exporter: Any) -> None:
        self.providers: dict[str, TracerProvider] = {}
        for service, host, *_ in TREE.values():
            if service in self.providers:
                continue
            resource = Resource.create({"service.name": service, "host.name": host})
            provider = TracerProvider(resource=resource)
            provider.add_span_processor(
                BatchSpanProcessor(OTLPSpanExporter(endpoint=url, timeout=30, **exporter))
            )
            self.providers[service] = provider

    def request(self, start_ns: int, db_fails: bool) -> str:
        """One request through the tree; its trace id."""
        spans: dict[str, otel_trace.Span] = {}
        for name, (service, _, operation, kind, start, _end, parent) in TREE.items():
            parent_context = (
                otel_trace.set_span_in_context(spans[parent]) if parent else otel_context.Context()
            )
            tracer = self.providers[service].get_tracer("test")
            spans[name] = tracer.start_span(
                operation, context=parent_context, kind=kind, start_time=start_ns + start * 1000
            )
        if db_fails:
            spans["db"].set_status(OtelStatus(StatusCode.ERROR, "deadlock"))
        for name, (*_, end, _parent) in reversed(list(TREE.items())):
            spans[name].end(end_time=start_ns + end * 1000)
        return f"{spans['root'].get_span_context().trace_id:032x}"

    def flush(self) -> None:
        for provider in self.providers.values():
            assert provider.force_flush(30_000)
            provider.shutdown()


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    code = main(["trace", *args, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def test_a_call_tree_exported_by_the_sdk_gives_the_critical_path_and_risk(
    start_receiver: Any,
    client: redis.Redis,
    store_config: RedisConfig,
    settings_file: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = start_receiver()
    services = Services(server.url, compression=Compression.Gzip)
    first_ns = (time.time_ns() // 1000 - 300_000_000) * 1000  # 5 minutes ago, whole µs
    trace_ids = [
        services.request(first_ns + n * 1_000_000_000, db_fails=n == 1) for n in range(TRACES)
    ]
    services.flush()
    stats = server.receiver.stats()
    assert set(stats.answers) == {200} and stats.spans_accepted == TRACES * len(TREE)
    assert len(ingested(client, store_config)) == TRACES * len(TREE)

    check_paths_and_risk(capsys, settings_file, trace_ids, first_ns)


def check_paths_and_risk(
    capsys: pytest.CaptureFixture[str], settings_file: Path, trace_ids: Sequence[str], first_ns: int
) -> None:
    """``trace critical-path`` of each of the TRACES requests through TREE (a second
    apart from ``first_ns``, the second one's db failing) is PATH, and ``trace risk``
    gives each service and node the risk worked out by hand."""
    for n, trace_id in enumerate(trace_ids):
        path = cli(capsys, "--config", str(settings_file), "critical-path", trace_id)
        start_us = first_ns // 1000 + n * 1_000_000
        found = [
            (s["service"], s["operation"], s["start_us"] - start_us, s["end_us"] - start_us)
            for s in path["segments"]
        ]
        assert found == PATH
        assert path["latency_us"] == 100_000
        assert path["service_time_us"] == {"gw": 44_000, "orders": 18_000, "db": 38_000}

    risk = cli(capsys, "--config", str(settings_file), "risk", "--window", "3600")
    assert (risk["traces"], risk["spans"]) == (TRACES, TRACES * len(TREE))
    services_seen = {s["service"]: s for s in risk["services"]}
    # By hand, TopoSch eqs. 4-8 with alpha 0.5: every request of a service lasts the
    # same, so WST is that duration; S = the services with self time on the paths.
    wst = {"gw": 100_000, "orders": 56_000, "db": 38_000, "stock": 18_000}
    on_path = {"gw", "orders", "db"}
    wsp = {k: wst[k] / sum(wst[s] for s in on_path) if k in on_path else 0.0 for k in wst}
    wfp = {"gw": 0.0, "orders": 0.0, "db": 1 / 3, "stock": 0.0}
    expected_risk = {k: 0.5 * wsp[k] + 0.5 * wfp[k] for k in wst}
    for name, seen in services_seen.items():
        assert seen["requests"] == TRACES, name
        assert seen["errors"] == (1 if name == "db" else 0), name
        assert seen["on_critical_path"] == (name in on_path), name
        assert seen["critical_share"] == (1.0 if name in on_path else 0.0), name
        assert seen["wst_us"] == pytest.approx(wst[name]), name
        assert seen["wsp"] == pytest.approx(wsp[name]), name
        assert seen["wfp"] == pytest.approx(wfp[name]), name
        assert seen["risk"] == pytest.approx(expected_risk[name]), name
    assert set(services_seen) == set(wst)
    raw = {
        "node-1": expected_risk["gw"] + expected_risk["stock"],
        "node-2": expected_risk["orders"],
        "node-3": expected_risk["db"],
    }
    low, high = min(raw.values()), max(raw.values())
    nodes = {n["node"]: n for n in risk["nodes"]}
    assert set(nodes) == set(raw)
    for node, value in raw.items():
        assert nodes[node]["raw"] == pytest.approx(value), node
        assert nodes[node]["normalized"] == pytest.approx((value - low) / (high - low)), node
    assert nodes["node-3"]["normalized"] == 1.0  # db's node: the riskiest


def test_ten_thousand_spans_in_one_export_are_accepted_and_all_stored(
    start_receiver: Any, client: redis.Redis, store_config: RedisConfig
) -> None:
    server = start_receiver()
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "batch"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("job", kind=OtelKind.SERVER):
        for i in range(9_999):
            tracer.start_span(f"task {i % 10}").end()
    spans = memory.get_finished_spans()
    assert len(spans) == 10_000
    exporter = OTLPSpanExporter(endpoint=server.url, timeout=60)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()
    stats = server.receiver.stats()
    assert (stats.answers, stats.spans_accepted) == ({200: 1}, 10_000)  # one request
    assert ids(ingested(client, store_config)) == sdk_ids(spans)


# --------------------------------------------------------------------------- over the wire


def test_bad_requests_after_good_ones_lose_nothing_accepted(
    start_receiver: Any, client: redis.Redis, store_config: RedisConfig
) -> None:
    server = start_receiver(max_body_bytes=64 << 10)
    accepted: list[Sent] = []
    for number in range(1, 4):
        spans = many(20, number)
        assert post(server.url, proto_request(spans)).status_code == 200
        accepted += spans

    truncated = post(server.url, proto_request(CALLS)[:-3])
    assert truncated.status_code == 400
    status = status_of(truncated, truncated.content)
    assert "not a protobuf ExportTraceServiceRequest" in status.message
    assert status.details[0].Is(BadRequest.DESCRIPTOR)

    wrong_type = post(server.url, proto_request(CALLS), Content_Type="text/plain")
    assert wrong_type.status_code == 415 and wrong_type.headers["Connection"] == "close"
    assert "application/x-protobuf" in status_of(wrong_type, wrong_type.content).message

    # a body over the cap, sent whole: the client reads the 413, not a reset connection
    too_big = post(server.url, proto_request(many(40_000, 9)))  # 1.6 MB
    assert too_big.status_code == 413
    assert "more than 65536" in status_of(too_big, too_big.content).message

    assert ids(ingested(client, store_config)) == ids([s.stored() for s in accepted])
    assert server.receiver.stats().answers == {200: 3, 400: 1, 413: 1, 415: 1}


def test_a_refused_request_does_not_spoil_the_connection_for_the_next(
    start_receiver: Any, client: redis.Redis, store_config: RedisConfig
) -> None:
    server = start_receiver(token="s3cret")
    body = proto_request(CALLS)
    auth = {"Content-Type": PROTOBUF, "Authorization": "Bearer s3cret"}
    with requests.Session() as session:  # keep-alive, as exporters send
        refused = session.post(server.url, data=body, headers={"Content-Type": PROTOBUF})
        assert refused.status_code == 401
        accepted = session.post(server.url, data=body, headers=auth)
        assert accepted.status_code == 200, accepted.content
        again = session.post(server.url, data=body, headers=auth)
        assert again.status_code == 200, again.content
    assert len(ingested(client, store_config)) == len(CALLS)
    assert server.receiver.stats().answers == {401: 1, 200: 2}
    # The unread body of a refused request is never read as the next request.
    smuggled = (
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        "Authorization: Bearer s3cret\r\nContent-Length: 0\r\n\r\n"
    )
    head = (
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        f"Content-Length: {len(smuggled)}\r\n\r\n{smuggled}"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head.encode())
        answers = _rest(sock)  # until the receiver closes the connection
    assert answers.count(b"HTTP/1.1 ") == 1 and answers.startswith(b"HTTP/1.1 401 ")
    assert server.receiver.stats().answers == {401: 2, 200: 2}


def test_the_token_with_the_sdk_exporter(
    start_receiver: Any, client: redis.Redis, store_config: RedisConfig
) -> None:
    server = start_receiver(token="s3cret")
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "gw"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.get_tracer("test").start_span("GET /", kind=OtelKind.SERVER).end()
    spans = memory.get_finished_spans()
    anonymous = OTLPSpanExporter(endpoint=server.url, timeout=10)
    assert anonymous.export(spans) is SpanExportResult.FAILURE  # 401: not retried
    anonymous.shutdown()
    assert ingested(client, store_config) == []
    holder = OTLPSpanExporter(
        endpoint=server.url, timeout=10, headers={"Authorization": "Bearer s3cret"}
    )
    assert holder.export(spans) is SpanExportResult.SUCCESS
    holder.shutdown()
    assert ids(ingested(client, store_config)) == sdk_ids(spans)
    assert server.receiver.stats().answers == {401: 1, 200: 1}


def test_a_chunked_gzip_body_as_java_exporters_send_it(
    start_receiver: Any, client: redis.Redis, store_config: RedisConfig
) -> None:
    server = start_receiver(max_body_bytes=64 << 10)
    body = gzip.compress(proto_request(CALLS))
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    pieces = [body[i : i + 50] for i in range(0, len(body), 50)]
    connection.request(
        "POST",
        "/v1/traces",
        body=iter(pieces),
        headers={"Content-Type": PROTOBUF, "Content-Encoding": "gzip"},
        encode_chunked=True,
    )
    response = connection.getresponse()
    assert (response.status, response.read()) == (200, b"")
    # and, on the same connection, one over the cap
    huge = proto_request(many(5000, 9))
    connection.request(
        "POST",
        "/v1/traces",
        body=iter([huge[i : i + 4096] for i in range(0, len(huge), 4096)]),
        headers={"Content-Type": PROTOBUF},
        encode_chunked=True,
    )
    response = connection.getresponse()
    assert response.status == 413
    assert "more than 65536" in status_of(response, response.read()).message
    connection.close()
    assert ids(ingested(client, store_config)) == ids([s.stored() for s in CALLS])


def raw_exchange(port: int, head: str, body: bytes | None) -> bytes:
    """Send ``head`` (and ``body`` only after a 100 Continue); everything read back."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head.encode())
        first = sock.recv(65536)
        if body is None or not first.startswith(b"HTTP/1.1 100"):
            return first + _rest(sock)
        sock.sendall(body)
        return first + _rest(sock)


def _rest(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_expect_100_continue_is_refused_before_the_body_is_sent(
    start_receiver: Any, client: redis.Redis, store_config: RedisConfig
) -> None:
    server = start_receiver()
    body = proto_request(CALLS)
    head = (
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: {}\r\n"
        f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"
    )
    refused = raw_exchange(server.port, head.format("text/plain"), body)
    assert refused.startswith(b"HTTP/1.1 415 ") and b"100 Continue" not in refused
    accepted = raw_exchange(server.port, head.format(PROTOBUF), body)
    assert accepted.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 ")
    assert ids(ingested(client, store_config)) == ids([s.stored() for s in CALLS])


def test_a_full_backlog_is_503_with_retry_after_which_the_exporter_waits_out(
    start_receiver: Any, client: redis.Redis, store_config: RedisConfig
) -> None:
    server = start_receiver(max_backlog_entries=1, retry_after_s=1)
    assert post(server.url, proto_request(many(5, 1))).status_code == 200
    full = post(server.url, proto_request(many(5, 2)))
    assert (full.status_code, full.headers["Retry-After"]) == (503, "1")
    assert "ingest worker is behind" in status_of(full, full.content).message

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "gw"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.get_tracer("test").start_span("GET /", kind=OtelKind.SERVER).end()
    exporter = OTLPSpanExporter(endpoint=server.url, timeout=30)

    def catch_up() -> None:
        """The worker catches up once the exporter was refused, while it waits the
        second the answer asked for."""
        deadline = time.monotonic() + 30
        while server.receiver.stats().answers[503] < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        ingested(client, store_config)

    worker = threading.Thread(target=catch_up)
    worker.start()
    began = time.monotonic()
    assert exporter.export(memory.get_finished_spans()) is SpanExportResult.SUCCESS
    assert time.monotonic() - began >= 0.9
    worker.join()
    exporter.shutdown()
    answers = server.receiver.stats().answers
    assert answers[503] >= 2 and answers[200] == 2
    stored = ids(ingested(client, store_config))
    assert stored == ids([s.stored() for s in many(5, 1)]) | sdk_ids(memory.get_finished_spans())


def test_more_spans_per_second_than_allowed_is_429_with_retry_after(
    start_receiver: Any, client: redis.Redis, store_config: RedisConfig
) -> None:
    server = start_receiver(max_spans_per_s=10)
    assert post(server.url, proto_request(many(30, 1))).status_code == 200
    limited = post(server.url, proto_request(many(3, 2)))
    assert limited.status_code == 429
    assert int(limited.headers["Retry-After"]) == math.ceil(20 / 10)  # 20 spans owed
    assert "more than 10 spans/s" in status_of(limited, limited.content).message
    assert len(ingested(client, store_config)) == 30


def test_python_m_tracing_ingest_with_otlp(
    redis_server: RedisServer, store_config: RedisConfig, client: redis.Redis, tmp_path: Path
) -> None:
    port = free_port()
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    worker = subprocess.Popen(
        [sys.executable, "-m", "tracing", "ingest", "--redis-url", redis_server.url,
         "--prefix", store_config.prefix, "--quiet-s", "0.1",
         "--otlp", f"127.0.0.1:{port}", "--otlp-token-file", str(token)],
        env={k: v for k, v in {**os.environ, "PYTHONPATH": str(ROOT)}.items()
             if k != "TRACING_OTLP_TOKEN"},
        stderr=subprocess.PIPE,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1/traces"
    try:
        deadline = time.monotonic() + 60
        while True:  # until it listens
            try:
                reply = post(url, proto_request(CALLS), Authorization="Bearer s3cret")
                break
            except requests.ConnectionError:
                assert worker.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        assert reply.status_code == 200
        assert post(url, proto_request(CALLS)).status_code == 401
        store = TraceStore(client, store_config)
        while store.load().columns.n_spans < len(CALLS) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert store.load().columns.n_spans == len(CALLS)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    assert b"OTLP/HTTP receiver listening on http://127.0.0.1" in err


def test_python_m_tracing_ingest_refuses_an_open_receiver_without_a_token(
    redis_server: RedisServer, store_config: RedisConfig
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tracing", "ingest", "--redis-url", redis_server.url,
         "--prefix", store_config.prefix, "--otlp", f"0.0.0.0:{free_port()}"],
        env={k: v for k, v in {**os.environ, "PYTHONPATH": str(ROOT)}.items()
             if k != "TRACING_OTLP_TOKEN"},
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert b"is not a loopback address and no token is set" in result.stderr
