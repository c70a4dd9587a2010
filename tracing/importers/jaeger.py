"""Jaeger JSON: the query API's ``{"data": [trace, ...]}`` (what the UI's "Download
JSON" saves too), a list of traces, or one trace object.

A trace is ``{traceID, spans, processes}``; a span has ``spanID``, ``operationName``,
``references`` (``CHILD_OF`` / ``FOLLOWS_FROM``; older spans carry ``parentSpanID``),
``startTime`` and ``duration`` in µs, ``tags`` and a ``processID`` naming its process
(``serviceName`` and tags). ``span.kind`` gives the kind; ``error=true`` or
``otel.status_code=ERROR`` an error. The host is the process tag ``hostname``
(else ``host.name``, ``ip``), the container ``container.id``.
"""

from __future__ import annotations

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

_KINDS = {
    "server": SpanKind.SERVER,
    "client": SpanKind.CLIENT,
    "producer": SpanKind.PRODUCER,
    "consumer": SpanKind.CONSUMER,
    "internal": SpanKind.INTERNAL,
}


def parse_jaeger(
    documents: Iterator[tuple[str, Any]], rejects: Rejects
) -> Iterator[tuple[str, Span]]:
    record = 0
    for doc_where, document in documents:
        prefix = f"{doc_where} " if doc_where else ""
        try:
            traces = _traces(document)
        except RecordError as exc:
            record += 1
            rejects.reject(f"{prefix}record {record}".strip(), str(exc), exc.reason)
            continue
        for trace_where, trace in traces:
            try:
                body = obj(trace, trace_where)
                processes = _processes(body.get("processes") or {})
                spans = items(body.get("spans"), f"{trace_where}.spans")
            except RecordError as exc:
                record += 1
                rejects.reject(f"{prefix}record {record} ({trace_where})", str(exc), exc.reason)
                continue
            for i, raw in enumerate(spans):
                record += 1
                label = f"{prefix}record {record} ({trace_where}.spans[{i}])"
                try:
                    yield label, _span(raw, processes)
                except RecordError as exc:
                    rejects.reject(label, str(exc), exc.reason)


def _traces(document: Any) -> list[tuple[str, Any]]:
    if isinstance(document, list):
        return [(f"[{i}]", trace) for i, trace in enumerate(document)]
    body = obj(document, "the document")
    if "data" in body:
        return [(f"data[{i}]", trace) for i, trace in enumerate(items(body["data"], "data"))]
    if "spans" in body:
        return [("trace", body)]
    raise RecordError("not Jaeger JSON (no data[] and no spans[])", "schema")


def _processes(raw: Any) -> dict[str, tuple[str, dict[str, Any]]]:
    result: dict[str, tuple[str, dict[str, Any]]] = {}
    for key, value in obj(raw, "processes").items():
        process = obj(value, f"processes.{key}")
        service = text(process.get("serviceName"), f"processes.{key}.serviceName")
        result[key] = (service, _tags(process.get("tags")))
    return result


def _tags(raw: Any) -> dict[str, Any]:
    tags: dict[str, Any] = {}
    for entry in items(raw, "tags"):
        tag = obj(entry, "a tag")
        key = text(tag.get("key"), "tag key")
        value = tag.get("value")
        if isinstance(value, str):
            text(value, f"tag {key}")
        tags[key] = value
    return tags


def _span(raw: Any, processes: Mapping[str, tuple[str, dict[str, Any]]]) -> Span:
    span = obj(raw, "a span")
    trace_id = hex_id(text(span.get("traceID"), "traceID"), TRACE_ID_DIGITS, "traceID")
    span_id = hex_id(text(span.get("spanID"), "spanID"), SPAN_ID_DIGITS, "spanID")
    parent, follows, links = _references(span, trace_id)
    process_id = str(span.get("processID"))
    if "process" in span:  # embedded process (some exporters)
        embedded = obj(span["process"], "process")
        service = text(embedded.get("serviceName"), "process.serviceName")
        process_tags = _tags(embedded.get("tags"))
    elif process_id in processes:
        service, process_tags = processes[process_id]
    else:
        raise RecordError(f"processID {process_id!r:.30} is not in the trace's processes", "schema")
    tags = _tags(span.get("tags"))
    start = integer(span.get("startTime"), "startTime")
    duration = integer(span.get("duration"), "duration")
    if duration < 0:
        raise RecordError(
            f"span {span_id} ends before it starts (duration {duration})", "end-before-start"
        )
    kind_tag = tags.get("span.kind", "internal")
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent,
        service=service,
        operation=text(span.get("operationName"), "operationName"),
        start_us=start,
        end_us=start + duration,
        kind=_KINDS.get(str(kind_tag).lower(), SpanKind.INTERNAL),
        status=Status.ERROR if _is_error(tags) else Status.OK,
        host=str(
            process_tags.get("hostname")
            or process_tags.get("host.name")
            or process_tags.get("ip")
            or ""
        ),
        container=str(process_tags.get("container.id") or ""),
        follows_from=follows,
        links=links,
    )


def _references(
    span: Mapping[str, Any], trace_id: str
) -> tuple[str | None, bool, tuple[SpanRef, ...]]:
    """(parent, follows-from, other links): the first CHILD_OF reference in the trace is
    the parent; failing that, the first FOLLOWS_FROM one (non-blocking)."""
    refs: list[tuple[str, str, str]] = []
    for i, entry in enumerate(items(span.get("references"), "references")):
        ref = obj(entry, f"references[{i}]")
        kind = text(ref.get("refType"), f"references[{i}].refType").upper()
        ref_trace = hex_id(
            text(ref.get("traceID", trace_id), f"references[{i}].traceID"),
            TRACE_ID_DIGITS,
            "traceID",
        )
        ref_span = hex_id(
            text(ref.get("spanID"), f"references[{i}].spanID"), SPAN_ID_DIGITS, "spanID"
        )
        if kind not in ("CHILD_OF", "FOLLOWS_FROM"):
            raise RecordError(
                f"refType {kind!r:.30} is neither CHILD_OF nor FOLLOWS_FROM", "schema"
            )
        refs.append((kind, ref_trace, ref_span))
    legacy = span.get("parentSpanID")
    if legacy and legacy.strip("0"):
        refs.insert(
            0,
            (
                "CHILD_OF",
                trace_id,
                hex_id(text(legacy, "parentSpanID"), SPAN_ID_DIGITS, "parentSpanID"),
            ),
        )
    for wanted in ("CHILD_OF", "FOLLOWS_FROM"):
        for kind, ref_trace, ref_span in refs:
            if kind == wanted and ref_trace == trace_id:
                others = tuple(SpanRef(t, s) for k, t, s in refs if (t, s) != (ref_trace, ref_span))
                return ref_span, wanted == "FOLLOWS_FROM", others
    return None, False, tuple(SpanRef(t, s) for _, t, s in refs)


def _is_error(tags: Mapping[str, Any]) -> bool:
    error = tags.get("error")
    if error is True or (isinstance(error, str) and error.lower() == "true"):
        return True
    return str(tags.get("otel.status_code", "")).upper() == "ERROR"
