"""Zipkin v2 JSON: a list of spans, or a list of traces (lists of spans), as the
``/api/v2/trace(s)`` endpoints return them.

A span has ``traceId`` (16 or 32 hex), ``id``, ``parentId``, ``name``, ``kind``,
``timestamp`` and ``duration`` (µs), ``localEndpoint.serviceName`` and ``ipv4`` / ``ipv6``
(the host), ``tags`` (``error`` present means an error; ``container.id``). In Zipkin's
shared-span RPC model the server half of a call reuses the client's id
(``shared: true``): when both halves are present, the server half gets an id of its own,
becomes the client's child, and adopts the spans that named the shared id as parent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from tracing.importers.common import (
    RecordError,
    Rejects,
    derived_span_id,
    hex_id,
    integer,
    obj,
    text,
)
from tracing.model import SPAN_ID_DIGITS, TRACE_ID_DIGITS, Span, SpanKind, Status

_KINDS = {
    "SERVER": SpanKind.SERVER,
    "CLIENT": SpanKind.CLIENT,
    "PRODUCER": SpanKind.PRODUCER,
    "CONSUMER": SpanKind.CONSUMER,
}


def parse_zipkin(
    documents: Iterator[tuple[str, Any]], rejects: Rejects
) -> Iterator[tuple[str, Span]]:
    parsed: list[tuple[str, Span, bool]] = []
    record = 0
    for doc_where, document in documents:
        prefix = f"{doc_where} " if doc_where else ""
        if not isinstance(document, list):
            record += 1
            rejects.reject(
                f"{prefix}record {record}".strip(), "not Zipkin v2 JSON (expected a list)", "schema"
            )
            continue
        for where, raw in _flatten(document):
            record += 1
            label = f"{prefix}record {record} ({where})"
            try:
                parsed.append((label, *_span(raw)))
            except RecordError as exc:
                rejects.reject(label, str(exc), exc.reason)
    yield from _split_shared(parsed)


def _flatten(document: list[Any]) -> Iterator[tuple[str, Any]]:
    for i, entry in enumerate(document):
        if isinstance(entry, list):
            for j, span in enumerate(entry):
                yield f"[{i}][{j}]", span
        else:
            yield f"[{i}]", entry


def _span(raw: Any) -> tuple[Span, bool]:
    span = obj(raw, "a span")
    trace_id = hex_id(text(span.get("traceId"), "traceId"), TRACE_ID_DIGITS, "traceId")
    span_id = hex_id(text(span.get("id"), "id"), SPAN_ID_DIGITS, "id")
    parent_raw = text(span.get("parentId"), "parentId", required=False)
    parent = hex_id(parent_raw, SPAN_ID_DIGITS, "parentId") if parent_raw else None
    if "timestamp" not in span or "duration" not in span:
        raise RecordError(f"span {span_id} is incomplete (no timestamp or duration)", "schema")
    start = integer(span["timestamp"], "timestamp")
    duration = integer(span["duration"], "duration")
    if duration < 0:
        raise RecordError(
            f"span {span_id} ends before it starts (duration {duration})", "end-before-start"
        )
    local = obj(span.get("localEndpoint") or {}, "localEndpoint")
    tags = obj(span.get("tags") or {}, "tags")
    for key, value in tags.items():
        text(value, f"tag {key}")
    kind = text(span.get("kind"), "kind", required=False).upper()
    if kind and kind not in _KINDS:
        raise RecordError(f"kind {kind!r:.30} is not a Zipkin span kind", "schema")
    return (
        Span(
            trace_id=trace_id,
            span_id=span_id,
            parent_id=parent,
            service=text(local.get("serviceName"), "localEndpoint.serviceName", required=False)
            or "unknown",
            operation=text(span.get("name"), "name", required=False),
            start_us=start,
            end_us=start + duration,
            kind=_KINDS.get(kind, SpanKind.INTERNAL),
            status=Status.ERROR if "error" in tags else Status.OK,
            host=text(local.get("ipv4") or local.get("ipv6"), "localEndpoint.ipv4", required=False),
            container=str(tags.get("container.id", "")),
        ),
        bool(span.get("shared", False)),
    )


def _split_shared(parsed: list[tuple[str, Span, bool]]) -> Iterator[tuple[str, Span]]:
    unshared = {(s.trace_id, s.span_id) for _, s, shared in parsed if not shared}
    server_of: dict[tuple[str, str], str] = {}
    for _, span, shared in parsed:
        key = (span.trace_id, span.span_id)
        if shared and key in unshared:
            server_of[key] = derived_span_id(span.trace_id, span.span_id, "server")
    for where, span, shared in parsed:
        key = (span.trace_id, span.span_id)
        if shared and key in server_of:
            span = dataclasses.replace(span, span_id=server_of[key], parent_id=span.span_id)
        elif span.parent_id is not None and (span.trace_id, span.parent_id) in server_of:
            span = dataclasses.replace(span, parent_id=server_of[(span.trace_id, span.parent_id)])
        yield where, span
