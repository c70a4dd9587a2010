"""W3C traceparent, the tracer, the WSGI and ASGI middlewares and the requests adapter:
two real WSGI services on 127.0.0.1 calling each other, their spans through Redis."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Iterator
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
import redis
import requests

from tracing.asgi import TracingASGIMiddleware
from tracing.context import (
    SpanContext,
    current_context,
    format_traceparent,
    parse_traceparent,
)
from tracing.convert import spans_of_trace
from tracing.exporter import RedisStreamExporter
from tracing.graph import critical_path
from tracing.ingest import IngestConfig, IngestWorker
from tracing.model import Span, SpanKind, Status
from tracing.redisconn import Keys, RedisConfig
from tracing.requests_hook import instrument_session
from tracing.store import TraceStore
from tracing.tracer import Tracer
from tracing.wsgi import TracingMiddleware

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (f"00-{TRACE}-{PARENT}-01", SpanContext(TRACE, PARENT, 1)),
        (f"00-{TRACE}-{PARENT}-00", SpanContext(TRACE, PARENT, 0)),
        (f" 00-{TRACE}-{PARENT}-01 ", SpanContext(TRACE, PARENT, 1)),
        (f"01-{TRACE}-{PARENT}-01-extra", SpanContext(TRACE, PARENT, 1)),  # a later version
        (f"00-{TRACE}-{PARENT}-01-extra", None),  # version 00 has exactly four fields
        (f"ff-{TRACE}-{PARENT}-01", None),
        (f"00-{'0' * 32}-{PARENT}-01", None),
        (f"00-{TRACE}-{'0' * 16}-01", None),
        (f"00-{TRACE.upper()}-{PARENT}-01", None),
        (f"00-{TRACE[:-1]}-{PARENT}-01", None),
        ("garbage", None),
        ("", None),
        (None, None),
    ],
)
def test_traceparent_parsing(header: str | None, expected: SpanContext | None) -> None:
    assert parse_traceparent(header) == expected


def test_traceparent_round_trip() -> None:
    context = SpanContext(TRACE, PARENT, 1)
    assert parse_traceparent(format_traceparent(context)) == context


class ListSink:
    def __init__(self) -> None:
        self.spans: list[Span] = []

    def export(self, span: Span) -> None:
        self.spans.append(span)


def test_tracer_spans_nest_and_record_errors() -> None:
    sink = ListSink()
    tracer = Tracer("svc", sink, host="node-1", container="c1")
    with tracer.span("outer") as outer:
        assert current_context() == outer.context
        with pytest.raises(ValueError), tracer.span("inner"):
            raise ValueError("boom")
    assert current_context() is None
    inner, outer_span = sink.spans
    assert inner.parent_id == outer_span.span_id and inner.trace_id == outer_span.trace_id
    assert inner.status is Status.ERROR and outer_span.status is Status.OK
    assert (outer_span.host, outer_span.container) == ("node-1", "c1")


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def serve(app: object) -> Iterator[str]:
    server: WSGIServer = make_server("127.0.0.1", 0, app, handler_class=_Quiet)  # type: ignore[arg-type]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_two_wsgi_services_trace_one_request_through_redis(
    client: redis.Redis, store_config: RedisConfig
) -> None:
    stream = Keys(store_config.prefix).stream
    backend_exporter = RedisStreamExporter(client, stream)
    frontend_exporter = RedisStreamExporter(client, stream)
    backend_tracer = Tracer("backend", backend_exporter, host="node-2")
    frontend_tracer = Tracer("frontend", frontend_exporter, host="node-1")

    def backend(environ: dict[str, object], start_response: object) -> Iterable[bytes]:
        status = "503 Service Unavailable" if environ["PATH_INFO"] == "/fail" else "200 OK"
        start_response(status, [("Content-Type", "text/plain")])  # type: ignore[operator]
        return [b"ok"]

    backend_servers = serve(TracingMiddleware(backend, backend_tracer))
    backend_url = next(backend_servers)
    session = instrument_session(requests.Session(), frontend_tracer)

    def frontend(environ: dict[str, object], start_response: object) -> Iterable[bytes]:
        first = session.get(f"{backend_url}/accounts", timeout=10)
        second = session.get(f"{backend_url}/fail", timeout=10)
        start_response("200 OK", [("Content-Type", "text/plain")])  # type: ignore[operator]
        return [first.content, str(second.status_code).encode()]

    frontend_servers = serve(TracingMiddleware(frontend, frontend_tracer))
    frontend_url = next(frontend_servers)
    try:
        caller_context = SpanContext(TRACE, PARENT, 1)
        response = requests.get(
            f"{frontend_url}/checkout",
            headers={"traceparent": format_traceparent(caller_context)},
            timeout=10,
        )
        assert response.content == b"ok503"
    finally:
        session.close()
        for servers in (frontend_servers, backend_servers):
            next(servers, None)
    assert frontend_exporter.flush(10) and backend_exporter.flush(10)
    store = TraceStore(client, store_config)
    IngestWorker(store, IngestConfig(quiet_s=0.0)).drain()
    loaded = store.find(TRACE)
    spans = spans_of_trace(loaded.columns, loaded.names, 0)
    by_name = {(s.service, s.kind, s.operation.split(" ")[-1]): s for s in spans}
    root = by_name[("frontend", SpanKind.SERVER, "/checkout")]
    assert root.parent_id == PARENT  # the caller's span, which this trace does not hold
    client_calls = [s for s in spans if s.kind is SpanKind.CLIENT]
    assert len(client_calls) == 2 and all(c.parent_id == root.span_id for c in client_calls)
    served = {s.operation: s for s in spans if s.service == "backend"}
    for call in client_calls:
        assert any(s.parent_id == call.span_id for s in served.values())
    assert served["GET /fail"].status is Status.ERROR
    assert served["GET /accounts"].status is Status.OK
    failing_call = next(c for c in client_calls if served["GET /fail"].parent_id == c.span_id)
    assert failing_call.status is Status.ERROR  # a 5xx answer fails the client span too
    path = critical_path(spans)
    assert set(path.service_time_us()) <= {"frontend", "backend"}
    assert path.latency_us == root.duration_us
    frontend_exporter.close()
    backend_exporter.close()


def test_asgi_middleware_continues_the_trace_and_marks_5xx() -> None:
    sink = ListSink()
    tracer = Tracer("api", sink, host="node-1")
    seen: list[SpanContext | None] = []

    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        seen.append(current_context())
        await send({"type": "http.response.start", "status": 502, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"bad gateway"})  # type: ignore[operator]

    middleware = TracingASGIMiddleware(app, tracer)  # type: ignore[arg-type]
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/orders",
        "headers": [(b"traceparent", f"00-{TRACE}-{PARENT}-01".encode())],
    }
    asyncio.run(middleware(scope, receive, send))  # type: ignore[arg-type]
    (recorded,) = sink.spans
    assert (recorded.trace_id, recorded.parent_id) == (TRACE, PARENT)
    assert recorded.operation == "POST /orders" and recorded.kind is SpanKind.SERVER
    assert recorded.status is Status.ERROR
    assert seen == [SpanContext(TRACE, recorded.span_id, 1)]
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    lifespan: list[str] = []

    async def lifespan_app(scope: dict[str, object], receive: object, send: object) -> None:
        lifespan.append(str(scope["type"]))

    asyncio.run(TracingASGIMiddleware(lifespan_app, tracer)({"type": "lifespan"}, receive, send))  # type: ignore[arg-type]
    assert lifespan == ["lifespan"] and len(sink.spans) == 1


def test_an_exception_in_the_wsgi_app_is_recorded_and_raised() -> None:
    sink = ListSink()

    def broken(environ: dict[str, object], start_response: object) -> Iterable[bytes]:
        raise RuntimeError("bug")

    middleware = TracingMiddleware(broken, Tracer("svc", sink))  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):
        middleware({"REQUEST_METHOD": "GET", "PATH_INFO": "/x"}, lambda *a: None)  # type: ignore[arg-type]
    (recorded,) = sink.spans
    assert recorded.status is Status.ERROR and recorded.parent_id is None


def test_a_broken_sink_never_breaks_the_request() -> None:
    class Broken:
        def export(self, span: Span) -> None:
            raise OSError("disk full")

    tracer = Tracer("svc", Broken())
    with tracer.span("work"):
        pass  # no exception escapes
