"""What the OTLP receiver writes to the span stream, pinned byte for byte.

A varied protobuf request (resources with and without service / host / container,
attributes of every value type, the placement named by the spans instead, several
scopes, every OTLP kind and status, parents, follows-from links and links to other
traces, names past the wire's cut, repeated trace ids and spans) plus a span of every
kind OTLP rejects goes through ``OtlpReceiver.answer`` into a real redis-server; the
stream's payloads must hash to what the receiver of commit 919a82a (a ``Span`` per span,
then :func:`tracing.wire.encode_batch`) wrote, for batches that end inside a resource
and for the default. Each rejection is also checked alone, with its reason, and the
receiver's columnar encoder is checked against ``encode_batch`` on the spans the JSON
path and the importers make.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

import numpy as np
import pytest
import redis
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from tracing.batch import decode_batch
from tracing.model import Span, SpanKind, Status
from tracing.receiver import OtlpReceiver, ReceiverConfig
from tracing.redisconn import Keys, RedisConfig
from tracing.wire import FIELD, encode_batch
from tracing.wire_columns import WireSpans

BASE_NS = 1_700_000_000_000_000_000
TRACE = bytes.fromhex("5b8efff798038103d269b633813fc60c")
RESOURCES: tuple[tuple[tuple[str, Any], ...], ...] = (
    (("service.name", "gateway"), ("host.name", "node-1"), ("container.id", "c-1")),
    (("service.name", "orders"),),  # host and container from the spans' attributes
    (("service.name", "db"), ("k8s.node.name", "node-3")),  # container from the spans
    (("host.name", "node-4"), ("container.id", "c-4"), ("telemetry.sdk", "x")),  # no service
    (("service.name", "ünïcode-svc"), ("host.name", 42), ("container.id", True)),
    (("service.name", 2.5), ("host.name", ""), ("k8s.node.name", "node-6")),
)
NAMES = ("GET /", "POST /orders", "SELECT ?", "日本語 /path", "x" * 600, "", "q" * 511 + "é")
SPAN_ATTRIBUTES: tuple[tuple[tuple[str, Any], ...], ...] = (
    (),
    (("host.name", "span-host"),),
    (("container.id", "span-c"), ("http.method", "GET")),
    (("host.name", 7), ("container.id", False)),
    (("container.id", 1.25), ("host.name", "other")),
)


def attribute(key: str, value: Any) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def valid_span(
    rng: random.Random, traces: list[bytes], seen: dict[bytes, list[bytes]]
) -> ProtoSpan:
    trace = rng.choice(traces)
    span_id = rng.getrandbits(64).to_bytes(8, "big")
    start = BASE_NS + rng.randrange(10**12)
    span = ProtoSpan(
        trace_id=trace,
        span_id=span_id,
        name=rng.choice(NAMES),
        kind=rng.randrange(6),
        start_time_unix_nano=start,
        end_time_unix_nano=start + rng.randrange(10**7),
    )
    span.status.code = rng.choice((0, 1, 2))
    earlier = seen.setdefault(trace, [])
    how = rng.randrange(6)
    if earlier and how < 3:
        span.parent_span_id = rng.choice(earlier)
    elif earlier and how == 3:  # a root that follows from a span of its own trace
        span.links.add(trace_id=rng.choice(traces), span_id=b"\x01" * 8)
        span.links.add(trace_id=trace, span_id=rng.choice(earlier))
    elif how == 4:
        span.parent_span_id = bytes(8)  # all zero: no parent
        span.links.add(trace_id=trace, span_id=bytes(8))  # a zero link: no parent either
    for key, value in rng.choice(SPAN_ATTRIBUTES):
        span.attributes.append(attribute(key, value))
    earlier.append(span_id)
    return span


def broken(span: ProtoSpan, how: str) -> ProtoSpan:
    """``span`` made invalid in the way ``how`` names (see INVALID)."""
    if how == "short trace id":
        span.trace_id = span.trace_id[:15]
    elif how == "zero trace id":
        span.trace_id = bytes(16)
    elif how == "long span id":
        span.span_id = span.span_id + b"\x00"
    elif how == "zero span id":
        span.span_id = bytes(8)
    elif how == "short parent id":
        span.parent_span_id = b"\x01\x02\x03"
    elif how == "no start":
        span.start_time_unix_nano = 0
    elif how == "no end":
        span.end_time_unix_nano = 0
    elif how == "an unknown kind":
        span.kind = 6  # type: ignore[assignment]
    elif how == "a negative kind":
        span.kind = -1  # type: ignore[assignment]
    elif how == "its own parent":
        span.parent_span_id = span.span_id
    elif how == "following itself":
        del span.links[:]
        span.ClearField("parent_span_id")
        span.links.add(trace_id=span.trace_id, span_id=span.span_id)
    elif how == "ends before it starts":
        span.end_time_unix_nano = span.start_time_unix_nano - 1000
    return span


# how: the problem the receiver names, for the span below (ids and times as there)
INVALID = {
    "short trace id": "trace_id '0102030405060708090a0b0c0d0e0f' is not 16 bytes (non-zero)",
    "zero trace id": "trace_id '00000000000000000000000000000000' is not 16 bytes (non-zero)",
    "long span id": "span_id '111111111111111100' is not 8 bytes (non-zero)",
    "zero span id": "span_id '0000000000000000' is not 8 bytes (non-zero)",
    "short parent id": "parent_span_id '010203' is not 8 bytes",
    "no start": "start_time_unix_nano and end_time_unix_nano are required",
    "no end": "start_time_unix_nano and end_time_unix_nano are required",
    "an unknown kind": "kind 6 is not an OTLP span kind",
    "a negative kind": "kind -1 is not an OTLP span kind",
    "its own parent": "span 1111111111111111 is its own parent",
    "following itself": "span 1111111111111111 is its own parent",
    "ends before it starts": (
        "span 1111111111111111 ends before it starts (1700000000000001 < 1700000000000002)"
    ),
}


def edge_times(trace: bytes) -> list[ProtoSpan]:
    """Valid spans at the edges of the times: ending a few ns before their start
    within the same µs, and ending at the last nanosecond fixed64 holds."""
    return [
        ProtoSpan(
            trace_id=trace,
            span_id=b"\x7e" * 8,
            name="reversed within a µs",
            start_time_unix_nano=BASE_NS + 999,
            end_time_unix_nano=BASE_NS + 1,
        ),
        ProtoSpan(
            trace_id=trace,
            span_id=b"\x7f" * 8,
            name="the last ns",
            kind=5,
            start_time_unix_nano=(1 << 64) - 2000,
            end_time_unix_nano=(1 << 64) - 1,
        ),
    ]


def varied_request() -> tuple[bytes, int]:
    """The request and how many of its spans are invalid."""
    rng = random.Random(26)
    traces = [rng.getrandbits(128).to_bytes(16, "big") for _ in range(40)]
    seen: dict[bytes, list[bytes]] = {}
    request = ExportTraceServiceRequest()
    invalid = 0
    for resource in RESOURCES:
        resource_spans = request.resource_spans.add()
        for key, value in resource:
            resource_spans.resource.attributes.append(attribute(key, value))
        for _ in range(2):
            scope = resource_spans.scope_spans.add()
            sent = [valid_span(rng, traces, seen) for _ in range(rng.randrange(250, 550))]
            sent.append(sent[0])  # sent twice
            for span in sent:
                if rng.random() < 0.03:
                    span = broken(span, rng.choice(list(INVALID)))
                    invalid += 1
                scope.spans.append(span)
            scope.spans.extend(edge_times(traces[0]))
    request.resource_spans.add()  # a resource with no spans
    return request.SerializeToString(), invalid


def headers(body: bytes) -> dict[str, str]:
    return {"content-type": "application/x-protobuf", "content-length": str(len(body))}


# batch_spans: sha256 of the stream's payloads, one after the other, as 919a82a stored them
PINNED = {
    4096: "09f341273bfc4e2d2e55af980a57d675a104ca979788f2d5a3aef33b60e28a71",
    97: "6406508430a18d2ba79a012debb490b28b493628c70e4335e92f615efea7c43b",
}
PINNED_MESSAGE = (
    "rejected 156 of 5307 spans; the first: resource_spans[0].scope_spans[0].spans[8]: "
    "span_id 'f6d36f2809ada1e500' is not 8 bytes (non-zero)"
)


@pytest.mark.parametrize("batch_spans", list(PINNED))
def test_the_stored_bytes_of_a_varied_request_are_pinned(
    batch_spans: int, client: redis.Redis, store_config: RedisConfig
) -> None:
    body, invalid = varied_request()
    stream = Keys(store_config.prefix).stream
    receiver = OtlpReceiver(client, stream, ReceiverConfig(batch_spans=batch_spans))
    reply = receiver.answer("POST", "/v1/traces", headers(body), body)
    assert reply.status == 200, reply.body
    response = ExportTraceServiceResponse.FromString(reply.body)
    assert response.partial_success.rejected_spans == invalid > 5
    assert response.partial_success.error_message == PINNED_MESSAGE
    payloads = [fields[FIELD] for _, fields in client.xrange(stream)]
    accepted = receiver.stats().spans_accepted
    assert sum(len(decode_batch(p).records) for p in payloads) == accepted
    assert len(payloads) == -(-accepted // batch_spans)
    assert hashlib.sha256(b"".join(payloads)).hexdigest() == PINNED[batch_spans]


@pytest.mark.parametrize("how", list(INVALID))
def test_each_invalid_span_is_rejected_alone_with_its_reason(
    how: str, client: redis.Redis, store_config: RedisConfig
) -> None:
    good = ProtoSpan(
        trace_id=TRACE,
        span_id=b"\x22" * 8,
        name="GET /",
        kind=2,
        start_time_unix_nano=BASE_NS,
        end_time_unix_nano=BASE_NS + 5000,
    )
    bad = ProtoSpan(
        trace_id=bytes(range(1, 17)),
        span_id=b"\x11" * 8,
        parent_span_id=b"\x22" * 8,
        name="GET /x",
        kind=3,
        start_time_unix_nano=BASE_NS + 2000,
        end_time_unix_nano=BASE_NS + 3000,
    )
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    scope.spans.extend([good, broken(bad, how), good])
    body = request.SerializeToString()
    stream = Keys(store_config.prefix).stream
    receiver = OtlpReceiver(client, stream, ReceiverConfig())
    reply = receiver.answer("POST", "/v1/traces", headers(body), body)
    partial = ExportTraceServiceResponse.FromString(reply.body).partial_success
    assert reply.status == 200 and partial.rejected_spans == 1
    where = "resource_spans[0].scope_spans[0].spans[1]"
    assert partial.error_message == f"rejected 1 of 3 spans; the first: {where}: {INVALID[how]}"
    assert receiver.stats().spans_accepted == 2


def varied_spans(count: int) -> list[Span]:
    """Spans as the JSON path and the importers make them: placements that change from
    span to span and back, a name in several roles, follows-from with and without a
    parent, names past the wire's cut, repeated spans."""
    rng = random.Random(7)
    names = ["gw", "node-1", "", "c-1", "GET /", "é" * 300, "x" * 600]
    traces = [f"{rng.getrandbits(128) | 1:032x}" for _ in range(30)]
    spans = []
    for i in range(count):
        parent = None if rng.random() < 0.2 else f"{rng.getrandbits(64) | 1:016x}"
        start = rng.randrange(-(10**6), 10**15)
        spans.append(
            Span(
                trace_id=rng.choice(traces),
                span_id=f"{i + 1:016x}",
                parent_id=parent,
                service=rng.choice(names) or "svc",
                operation=rng.choice(names),
                start_us=start,
                end_us=start + rng.randrange(10**6),
                kind=rng.choice(list(SpanKind)),
                status=rng.choice(list(Status)),
                host=rng.choice(names),
                container=rng.choice(names[:4]) if i % 50 < 25 else "c-9",
                follows_from=rng.random() < 0.1,
            )
        )
    return spans + spans[:40]


@pytest.mark.parametrize("batch_spans", [1, 7, 512, 4096])
def test_wire_spans_are_encoded_as_encode_batch_encodes_the_spans(batch_spans: int) -> None:
    spans = varied_spans(3000)
    expected = [encode_batch(spans[i : i + batch_spans]) for i in range(0, len(spans), batch_spans)]
    assert list(WireSpans.of(spans).payloads(batch_spans)) == expected
    keep = np.array([i % 3 != 1 for i in range(len(spans))])
    kept = [s for s, k in zip(spans, keep, strict=True) if k]
    parts = WireSpans.joined([WireSpans.of(spans[:1000]), WireSpans.of(spans[1000:])])
    expected = [encode_batch(kept[i : i + batch_spans]) for i in range(0, len(kept), batch_spans)]
    assert list(parts.kept(keep).payloads(batch_spans)) == expected
    assert list(WireSpans.of([]).payloads(batch_spans)) == []
