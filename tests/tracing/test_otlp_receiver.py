"""The OTLP/HTTP receiver's answers (``OtlpReceiver.answer``, no sockets) against a real
redis-server: what is stored for protobuf and JSON bodies (plain, gzip, deflate),
partial success, bad bodies, refusals, the token, backlog and rate limits, and Redis
down. Every stored span is read back through the ingest worker and the store."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pytest
import redis
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc.error_details_pb2 import BadRequest
from google.rpc.status_pb2 import Status as RpcStatus
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as ProtoStatus

from tracing.convert import spans_of_trace
from tracing.ingest import IngestConfig, IngestWorker
from tracing.model import Span, SpanKind, Status
from tracing.receiver import OtlpReceiver, ReceiverConfig, Reply
from tracing.redisconn import Keys, RedisConfig, make_client
from tracing.store import TraceStore
from yarn_adapt.minicluster.redis_server import free_port

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
TRACE = "5b8efff798038103d269b633813fc60c"
BASE_US = 1_700_000_000_000_000
OTLP_KIND = {SpanKind.INTERNAL: 1, SpanKind.SERVER: 2, SpanKind.CLIENT: 3}


# --------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class Sent:
    """One span as an exporter sends it (ids as numbers, times in µs after BASE_US)."""

    service: str
    host: str
    span_id: int
    parent: int | None
    name: str
    start: int
    end: int
    kind: SpanKind = SpanKind.SERVER
    error: bool = False
    trace: str = TRACE

    def stored(self) -> Span:
        """The span the receiver should store for it."""
        return Span(
            trace_id=self.trace,
            span_id=f"{self.span_id:016x}",
            parent_id=None if self.parent is None else f"{self.parent:016x}",
            service=self.service,
            operation=self.name,
            start_us=BASE_US + self.start,
            end_us=BASE_US + self.end,
            kind=self.kind,
            status=Status.ERROR if self.error else Status.OK,
            host=self.host,
        )


CALLS = (
    Sent("gw", "node-1", 1, None, "GET /checkout", 0, 1000),
    Sent("gw", "node-1", 2, 1, "GET /orders", 100, 700, SpanKind.CLIENT),
    Sent("orders", "node-2", 3, 2, "GET /orders", 120, 680, error=True),
)


def by_resource(spans: Sequence[Sent]) -> dict[tuple[str, str], list[Sent]]:
    groups: dict[tuple[str, str], list[Sent]] = {}
    for sent in spans:
        groups.setdefault((sent.service, sent.host), []).append(sent)
    return groups


def proto_request(spans: Sequence[Sent]) -> bytes:
    request = ExportTraceServiceRequest()
    for (service, host), group in by_resource(spans).items():
        resource = Resource(attributes=[text_attribute("service.name", service)])
        resource.attributes.append(text_attribute("host.name", host))
        scope = ScopeSpans(spans=[proto_span(s) for s in group])
        request.resource_spans.append(ResourceSpans(resource=resource, scope_spans=[scope]))
    return request.SerializeToString()


def text_attribute(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def proto_span(sent: Sent) -> ProtoSpan:
    return ProtoSpan(
        trace_id=bytes.fromhex(sent.trace),
        span_id=sent.span_id.to_bytes(8, "big"),
        parent_span_id=b"" if sent.parent is None else sent.parent.to_bytes(8, "big"),
        name=sent.name,
        kind=OTLP_KIND[sent.kind],
        start_time_unix_nano=(BASE_US + sent.start) * 1000,
        end_time_unix_nano=(BASE_US + sent.end) * 1000,
        status=ProtoStatus(code=2 if sent.error else 0),
    )


def json_request(spans: Sequence[Sent]) -> bytes:
    """OTLP/JSON as the spec writes it: lowerCamelCase keys, ids in hex (upper case here:
    hex is case-insensitive), 64-bit integers as strings, enums as integers, and a field
    this receiver does not know (which it must ignore)."""
    resource_spans = []
    for (service, host), group in by_resource(spans).items():
        attributes = [
            {"key": "service.name", "value": {"stringValue": service}},
            {"key": "host.name", "value": {"stringValue": host}},
        ]
        resource_spans.append(
            {
                "resource": {"attributes": attributes, "droppedAttributesCount": 0},
                "scopeSpans": [{"scope": {"name": "test"}, "spans": [json_span(s) for s in group]}],
            }
        )
    return json.dumps({"resourceSpans": resource_spans}).encode()


def json_span(sent: Sent) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": sent.trace.upper(),
        "spanId": f"{sent.span_id:016X}",
        "name": sent.name,
        "kind": OTLP_KIND[sent.kind],
        "startTimeUnixNano": str((BASE_US + sent.start) * 1000),
        "endTimeUnixNano": str((BASE_US + sent.end) * 1000),
        "status": {"code": 2 if sent.error else 0},
        "aFieldFromTheFuture": {"x": 1},
    }
    if sent.parent is not None:
        span["parentSpanId"] = f"{sent.parent:016x}"
    return span


def headers(body: bytes, content_type: str = PROTOBUF, **extra: str) -> dict[str, str]:
    """Request headers as the HTTP layer hands them over (lower-case names)."""
    given = {"content-type": content_type, "content-length": str(len(body))}
    given.update({k.replace("_", "-"): v for k, v in extra.items()})
    return given


def post(receiver: OtlpReceiver, body: bytes, content_type: str = PROTOBUF, **extra: str) -> Reply:
    return receiver.answer("POST", "/v1/traces", headers(body, content_type, **extra), body)


def parsed(reply: Reply, message: Message) -> Message:
    """The reply's body decoded in the encoding it claims."""
    if reply.content_type == JSON:
        return json_format.Parse(reply.body, message)
    message.ParseFromString(reply.body)
    return message


def status_of(reply: Reply) -> RpcStatus:
    status = parsed(reply, RpcStatus())
    assert isinstance(status, RpcStatus)
    return status


def response_of(reply: Reply) -> ExportTraceServiceResponse:
    response = parsed(reply, ExportTraceServiceResponse())
    assert isinstance(response, ExportTraceServiceResponse)
    return response


# --------------------------------------------------------------------------- fixtures


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_receiver(client: redis.Redis, store_config: RedisConfig, clock: Clock) -> Any:
    def make(**config: Any) -> OtlpReceiver:
        stream = Keys(store_config.prefix).stream
        return OtlpReceiver(client, stream, ReceiverConfig(**config), clock=clock)

    return make


def stored(client: redis.Redis, store_config: RedisConfig) -> list[Span]:
    """Everything the stream holds, ingested and read back from the store."""
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


def stream_length(client: redis.Redis, store_config: RedisConfig) -> int:
    return int(client.xlen(Keys(store_config.prefix).stream))


def many(count: int, trace_number: int) -> list[Sent]:
    """``count`` spans of one trace: a root and its children."""
    trace = f"{trace_number:032x}"
    root = Sent("gw", "node-1", 1, None, "GET /", 0, 10 * count, trace=trace)
    children = [
        Sent("db", "node-2", i + 2, 1, f"query {i % 7}", 10 * i, 10 * i + 5, trace=trace)
        for i in range(count - 1)
    ]
    return [root, *children]


# --------------------------------------------------------------------------- accepted


def gzipped(body: bytes) -> bytes:
    return gzip.compress(body)


ENCODINGS = {
    "protobuf": (PROTOBUF, proto_request, {}),
    "json": (JSON, json_request, {}),
    "json, charset": (JSON + "; charset=utf-8", json_request, {}),
    "protobuf, gzip": (PROTOBUF, lambda s: gzipped(proto_request(s)), {"content_encoding": "gzip"}),
    "json, gzip": (JSON, lambda s: gzipped(json_request(s)), {"content_encoding": "gzip"}),
    "protobuf, deflate": (
        PROTOBUF,
        lambda s: zlib.compress(proto_request(s)),
        {"content_encoding": "deflate"},
    ),
    "protobuf, two gzip members": (
        PROTOBUF,
        lambda s: gzipped(proto_request(s[:1])) + gzipped(proto_request(s[1:])),
        {"content_encoding": "gzip"},
    ),
}


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_spans_are_stored_as_sent(
    name: str, make_receiver: Any, client: redis.Redis, store_config: RedisConfig
) -> None:
    content_type, encode, extra = ENCODINGS[name]
    reply = post(make_receiver(), encode(CALLS), content_type, **extra)
    assert (reply.status, reply.close) == (200, False), status_of(reply).message
    assert reply.content_type == content_type.split(";")[0]
    assert not response_of(reply).HasField("partial_success")  # full success: left unset
    if content_type.startswith(JSON):
        assert json.loads(reply.body) == {}
    assert sorted(stored(client, store_config), key=lambda s: s.span_id) == [
        s.stored() for s in CALLS
    ]


def test_an_empty_request_is_a_success(make_receiver: Any) -> None:
    receiver = make_receiver()
    for body, content_type in ((b"", PROTOBUF), (b"{}", JSON), (b'{"resourceSpans": null}', JSON)):
        reply = post(receiver, body, content_type)
        assert reply.status == 200 and not response_of(reply).HasField("partial_success")
    assert receiver.stats().entries_written == 0


@pytest.mark.parametrize("content_type", [PROTOBUF, JSON])
def test_invalid_spans_are_rejected_alone_as_a_partial_success(
    content_type: str, make_receiver: Any, client: redis.Redis, store_config: RedisConfig
) -> None:
    backwards = Sent("orders", "node-2", 9, 3, "SELECT", 500, 400)  # ends before it starts
    encode = proto_request if content_type == PROTOBUF else json_request
    receiver = make_receiver()
    reply = post(receiver, encode([*CALLS, backwards]), content_type)
    assert reply.status == 200
    partial = response_of(reply).partial_success
    assert partial.rejected_spans == 1
    assert "ends before it starts" in partial.error_message
    assert "1 of 4" in partial.error_message
    assert sorted(s.span_id for s in stored(client, store_config)) == [
        f"{s.span_id:016x}" for s in CALLS
    ]
    stats = receiver.stats()
    assert (stats.spans_accepted, stats.spans_rejected) == (3, 1)


def test_a_protobuf_span_with_a_short_id_is_rejected_alone(
    make_receiver: Any, client: redis.Redis, store_config: RedisConfig
) -> None:
    request = ExportTraceServiceRequest.FromString(proto_request(CALLS))
    request.resource_spans[0].scope_spans[0].spans[1].span_id = b"\x01\x02\x03\x04"
    reply = post(make_receiver(), request.SerializeToString())
    partial = response_of(reply).partial_success
    assert (reply.status, partial.rejected_spans) == (200, 1)
    assert "span_id '01020304' is not 8 bytes" in partial.error_message
    assert len(stored(client, store_config)) == 2


def test_ten_thousand_spans_in_one_request_are_all_stored(
    make_receiver: Any, client: redis.Redis, store_config: RedisConfig
) -> None:
    spans = many(10_000, 7)
    receiver = make_receiver(max_spans_per_s=0)
    reply = post(receiver, proto_request(spans))
    assert reply.status == 200 and not response_of(reply).HasField("partial_success")
    assert receiver.stats().entries_written == 3  # batches of 4096
    assert ids(stored(client, store_config)) == ids([s.stored() for s in spans])


# --------------------------------------------------------------------------- refused


def truncated_gzip() -> bytes:
    return gzipped(proto_request(CALLS))[:-12]


BAD_BODIES = {
    # name: (content type, body, extra headers, words in the Status message)
    "truncated protobuf": (PROTOBUF, proto_request(CALLS)[:-3], {}, "not a protobuf"),
    "JSON sent as protobuf": (PROTOBUF, json_request(CALLS), {}, "not a protobuf"),
    "not JSON": (JSON, b'{"resourceSpans": [', {}, "not OTLP/JSON"),
    "a JSON list": (JSON, b"[]", {}, "a JSON object"),
    "resourceSpans not a list": (JSON, b'{"resourceSpans": 3}', {}, "resourceSpans[]"),
    "a resource that is a string": (
        JSON,
        b'{"resourceSpans": ["gw"]}',
        {},
        "resourceSpans[0] must be an object",
    ),
    "scopeSpans not a list": (
        JSON,
        b'{"resourceSpans": [{"scopeSpans": {}}]}',
        {},
        "scopeSpans must be a list",
    ),
    "JSON nested too deep": (JSON, b"[" * 100_000 + b"]" * 100_000, {}, "not OTLP/JSON"),
    "truncated gzip": (PROTOBUF, truncated_gzip(), {"content_encoding": "gzip"}, "truncated"),
    "gzip that is not": (
        PROTOBUF,
        proto_request(CALLS),
        {"content_encoding": "gzip"},
        "does not decompress",
    ),
    "deflate with bytes after its end": (
        PROTOBUF,
        zlib.compress(proto_request(CALLS)) + b"x",
        {"content_encoding": "deflate"},
        "bytes after its end",
    ),
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_a_bad_body_is_400_with_a_status_and_stores_nothing(
    name: str, make_receiver: Any, client: redis.Redis, store_config: RedisConfig
) -> None:
    content_type, body, extra, words = BAD_BODIES[name]
    reply = post(make_receiver(), body, content_type, **extra)
    assert reply.status == 400 and reply.content_type == content_type
    status = status_of(reply)
    assert words in status.message and status.code == 3  # INVALID_ARGUMENT
    detail = BadRequest()
    assert len(status.details) == 1 and status.details[0].Unpack(detail)
    assert detail.field_violations[0].description == status.message
    assert stream_length(client, store_config) == 0


def refusal_cases() -> dict[str, tuple[str, str, dict[str, str], int, dict[str, str]]]:
    """name: (method, path, headers, status, headers the answer must carry)."""
    body = proto_request(CALLS)
    good = headers(body)
    return {
        "another path": ("POST", "/v1/metrics", good, 404, {}),
        "GET": ("GET", "/v1/traces", good, 405, {"Allow": "POST"}),
        "text/plain": ("POST", "/v1/traces", {**good, "content-type": "text/plain"}, 415, {}),
        "no content type": (
            "POST",
            "/v1/traces",
            {k: v for k, v in good.items() if k != "content-type"},
            415,
            {},
        ),
        "brotli": (
            "POST",
            "/v1/traces",
            {**good, "content-encoding": "br"},
            415,
            {"Accept-Encoding": "gzip, deflate, identity"},
        ),
        "no length": (
            "POST",
            "/v1/traces",
            {k: v for k, v in good.items() if k != "content-length"},
            411,
            {},
        ),
        "a length over the cap": (
            "POST",
            "/v1/traces",
            {**good, "content-length": str(4 << 20 | 1)},
            413,
            {},
        ),
        "gzip transfer coding": (
            "POST",
            "/v1/traces",
            {**good, "transfer-encoding": "gzip, chunked"},
            501,
            {},
        ),
    }


@pytest.mark.parametrize("name", list(refusal_cases()))
def test_refusals_before_the_body_close_the_connection_and_store_nothing(
    name: str, make_receiver: Any, client: redis.Redis, store_config: RedisConfig
) -> None:
    method, path, given, status, answer_headers = refusal_cases()[name]
    reply = make_receiver().answer(method, path, given, proto_request(CALLS))
    assert reply.status == status
    assert reply.close  # the body was not read: the connection cannot carry another request
    assert status_of(reply).message
    for header, value in answer_headers.items():
        assert reply.headers[header] == value
    assert stream_length(client, store_config) == 0


def test_a_body_that_inflates_past_the_cap_is_413(make_receiver: Any) -> None:
    big = Sent("gw", "node-1", 1, None, "x" * 600_000, 0, 1)
    body = gzipped(proto_request([big]))
    receiver = make_receiver(max_body_bytes=100_000, max_decoded_bytes=500_000)
    assert len(body) < 100_000
    reply = post(receiver, body, content_encoding="gzip")
    assert reply.status == 413 and "inflates to more than 500000" in status_of(reply).message
    assert post(receiver, gzipped(proto_request(CALLS)), content_encoding="gzip").status == 200


def test_the_token(make_receiver: Any, client: redis.Redis, store_config: RedisConfig) -> None:
    receiver = make_receiver(token="s3cret")
    body = proto_request(CALLS)
    for given in ("", "Bearer wrong", "Basic s3cret", "Bearer s3cret2", "s3cret"):
        extra = {"authorization": given} if given else {}
        reply = post(receiver, body, **extra)
        assert reply.status == 401 and reply.headers["WWW-Authenticate"] == "Bearer", given
    # 401 before anything else about the request: its type is not looked at
    reply = post(receiver, body, "text/plain")
    assert reply.status == 401
    assert stream_length(client, store_config) == 0
    assert post(receiver, body, authorization="Bearer s3cret").status == 200
    assert post(receiver, body, authorization="bearer  s3cret ").status == 200
    assert len(stored(client, store_config)) == len(CALLS)


def test_a_full_backlog_is_503_with_retry_after_and_nothing_accepted_is_lost(
    make_receiver: Any, client: redis.Redis, store_config: RedisConfig, clock: Clock
) -> None:
    receiver = make_receiver(max_backlog_entries=2, retry_after_s=7)
    accepted: list[Sent] = []
    for number in range(1, 3):
        spans = many(5, number)
        assert post(receiver, proto_request(spans)).status == 200
        accepted += spans
    refused = post(receiver, proto_request(many(5, 3)))
    assert (refused.status, refused.headers["Retry-After"]) == (503, "7")
    assert "ingest worker is behind or down" in status_of(refused).message
    clock.now += 1  # the stream's length is read again, not taken from the last write
    assert post(receiver, proto_request(many(5, 3))).status == 503
    assert ids(stored(client, store_config)) == ids([s.stored() for s in accepted])
    clock.now += 1  # the worker caught up (and trimmed the stream): there is room again
    assert post(receiver, proto_request(many(5, 3))).status == 200
    assert len(stored(client, store_config)) == 15


def test_more_spans_per_second_than_allowed_is_429_with_retry_after(
    make_receiver: Any, client: redis.Redis, store_config: RedisConfig, clock: Clock
) -> None:
    receiver = make_receiver(max_spans_per_s=10)
    assert post(receiver, proto_request(many(30, 1))).status == 200  # a large one passes
    refused = post(receiver, proto_request(many(3, 2)))
    assert (refused.status, refused.headers["Retry-After"]) == (429, "2")  # 20 spans owed
    assert status_of(refused).code == 8
    clock.now += 1.5
    assert post(receiver, proto_request(many(3, 2))).headers["Retry-After"] == "1"
    clock.now += 0.5
    assert post(receiver, proto_request(many(3, 2))).status == 200
    assert len(stored(client, store_config)) == 33
    assert receiver.stats().answers == {200: 2, 429: 2}


def test_redis_down_is_503_with_retry_after(store_config: RedisConfig) -> None:
    down = replace(store_config, url=f"redis://127.0.0.1:{free_port()}/0", timeout_s=1.0)
    connection = make_client(down, retries=0)
    receiver = OtlpReceiver(connection, Keys(down.prefix).stream, ReceiverConfig())
    reply = post(receiver, proto_request(CALLS))
    assert (reply.status, reply.headers["Retry-After"]) == (503, "5")
    message = status_of(reply).message
    assert "unavailable" in message and "127.0.0.1" not in message  # no address leaks out
    connection.close()


def test_a_failure_of_the_receiver_is_500_not_a_dropped_request(
    make_receiver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = make_receiver()

    def broken(*_: object) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr("tracing.receiver.decode_request", broken)
    reply = post(receiver, proto_request(CALLS))
    assert reply.status == 500 and "its log has the details" in status_of(reply).message


def test_json_times_beyond_64_bits_are_rejected_alone(
    make_receiver: Any, client: redis.Redis, store_config: RedisConfig
) -> None:
    document = json.loads(json_request(CALLS))
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["endTimeUnixNano"] = str(10**30)
    reply = post(make_receiver(), json.dumps(document).encode(), JSON)
    partial = response_of(reply).partial_success
    assert (reply.status, partial.rejected_spans) == (200, 1)
    assert "64 bits" in partial.error_message
    assert len(stored(client, store_config)) == 2
