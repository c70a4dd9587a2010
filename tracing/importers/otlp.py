"""OpenTelemetry OTLP/JSON: ``ExportTraceServiceRequest`` documents (one per file, or one
per line as the collector's file exporter writes them).

``resourceSpans[].resource.attributes`` give the service (``service.name``), the host
(``host.name``, else ``k8s.node.name``) and the container (``container.id``);
``scopeSpans[]`` (``instrumentationLibrarySpans[]`` in older files) hold the spans. Ids
are hex (the OTLP/JSON rule; base64 is accepted too), times ``*UnixNano`` (strings or
numbers) become µs, ``kind`` and ``status.code`` may be numbers or enum names. A span
without a parent but linked to a span of its own trace is that span's follows-from
child.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from typing import Any

from tracing.importers.common import (
    RecordError,
    Rejects,
    hex_id,
    integer,
    items,
    obj,
    text,
)
from tracing.model import SPAN_ID_DIGITS, TRACE_ID_DIGITS, Span, SpanKind, SpanRef, Status

OTLP_KINDS = {
    0: SpanKind.INTERNAL,
    1: SpanKind.INTERNAL,
    2: SpanKind.SERVER,
    3: SpanKind.CLIENT,
    4: SpanKind.PRODUCER,
    5: SpanKind.CONSUMER,
}
_KIND_NAMES = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


def parse_otlp(
    documents: Iterator[tuple[str, Any]], rejects: Rejects
) -> Iterator[tuple[str, Span]]:
    record = 0
    for doc_where, document in documents:
        prefix = f"{doc_where} " if doc_where else ""
        try:
            resource_spans = _resource_spans(document)
        except RecordError as exc:
            record += 1
            rejects.reject(f"{prefix}record {record}".strip(), str(exc), exc.reason)
            continue
        for r, resource_span in enumerate(resource_spans):
            for where, raw_span, resource in _spans_of(resource_span, r, rejects, prefix):
                record += 1
                label = f"{prefix}record {record} ({where})"
                try:
                    yield label, _span(raw_span, resource)
                except RecordError as exc:
                    rejects.reject(label, str(exc), exc.reason)


def _resource_spans(document: Any) -> list[Any]:
    body = obj(document, "the document")
    if "resourceSpans" not in body:
        raise RecordError("not an ExportTraceServiceRequest (no resourceSpans)", "schema")
    return items(body["resourceSpans"], "resourceSpans")


def _spans_of(
    resource_span: Any, r: int, rejects: Rejects, prefix: str
) -> Iterator[tuple[str, Any, Mapping[str, str]]]:
    where = f"resourceSpans[{r}]"
    try:
        body = obj(resource_span, where)
        attributes = _attributes(obj(body.get("resource") or {}, f"{where}.resource"))
        scopes_key = "scopeSpans" if "scopeSpans" in body else "instrumentationLibrarySpans"
        scopes = items(body.get(scopes_key), f"{where}.{scopes_key}")
    except RecordError as exc:
        rejects.reject(f"{prefix}{where}", str(exc), exc.reason)
        return
    for s, scope in enumerate(scopes):
        scope_where = f"{where}.{scopes_key}[{s}]"
        try:
            spans = items(obj(scope, scope_where).get("spans"), f"{scope_where}.spans")
        except RecordError as exc:
            rejects.reject(f"{prefix}{scope_where}", str(exc), exc.reason)
            continue
        for i, raw_span in enumerate(spans):
            yield f"{scope_where}.spans[{i}]", raw_span, attributes


def _attributes(holder: Mapping[str, Any]) -> dict[str, str]:
    """String-valued attributes of a resource or span."""
    result: dict[str, str] = {}
    for entry in items(holder.get("attributes"), "attributes"):
        entry = obj(entry, "an attribute")
        key = text(entry.get("key"), "attribute key")
        value = obj(entry.get("value") or {}, f"attribute {key}")
        for field in ("stringValue", "intValue", "boolValue"):
            if field in value:
                result[key] = text(str(value[field]), f"attribute {key}")
    return result


def _span(raw: Any, resource: Mapping[str, str]) -> Span:
    span = obj(raw, "a span")
    trace_id = _id(span, ("traceId", "trace_id"), TRACE_ID_DIGITS, "traceId")
    span_id = _id(span, ("spanId", "span_id"), SPAN_ID_DIGITS, "spanId")
    parent_raw = span.get("parentSpanId", span.get("parent_span_id")) or None
    parent = (
        hex_id(_bytes_id(parent_raw, SPAN_ID_DIGITS), SPAN_ID_DIGITS, "parentSpanId")
        if parent_raw
        else None
    )
    links = tuple(_link(link) for link in items(span.get("links"), "links"))
    follows = False
    if parent is None:
        own = [link for link in links if link.trace_id == trace_id]
        if own:
            parent, follows = own[0].span_id, True
    service = resource.get("service.name") or "unknown_service"
    attributes = _attributes(span)
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent,
        service=service,
        operation=text(span.get("name"), "name"),
        start_us=integer(span.get("startTimeUnixNano"), "startTimeUnixNano") // 1000,
        end_us=integer(span.get("endTimeUnixNano"), "endTimeUnixNano") // 1000,
        kind=_kind(span.get("kind", 0)),
        status=_status(span.get("status") or {}),
        host=resource.get("host.name")
        or resource.get("k8s.node.name")
        or attributes.get("host.name", ""),
        container=resource.get("container.id") or attributes.get("container.id", ""),
        follows_from=follows,
        links=links,
    )


def _id(span: Mapping[str, Any], keys: tuple[str, ...], digits: int, what: str) -> str:
    value = next((span[k] for k in keys if k in span), None)
    if not value:
        raise RecordError(f"{what} is missing", "schema")
    return hex_id(_bytes_id(text(value, what), digits), digits, what)


def _bytes_id(value: str, digits: int) -> str:
    """Hex as is; a base64 id of the right length decoded to hex."""
    if len(value) == digits:
        return value
    try:
        decoded = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value
    return decoded.hex() if len(decoded) * 2 == digits else value


def _link(raw: Any) -> SpanRef:
    link = obj(raw, "a link")
    return SpanRef(
        trace_id=_id(link, ("traceId", "trace_id"), TRACE_ID_DIGITS, "links.traceId"),
        span_id=_id(link, ("spanId", "span_id"), SPAN_ID_DIGITS, "links.spanId"),
    )


def _kind(value: Any) -> SpanKind:
    number = _KIND_NAMES.get(value, value) if isinstance(value, str) else value
    if isinstance(number, bool) or not isinstance(number, int) or number not in OTLP_KINDS:
        raise RecordError(f"kind {value!r:.30} is not an OTLP span kind", "schema")
    return OTLP_KINDS[number]


def _status(value: Any) -> Status:
    code = obj(value, "status").get("code", 0)
    code = _STATUS_NAMES.get(code, code) if isinstance(code, str) else code
    if code not in (0, 1, 2):
        raise RecordError(f"status code {code!r:.30} is not an OTLP status code", "schema")
    return Status.ERROR if code == 2 else Status.OK
