"""Importers: trace files from other tracers, normalised to :class:`~tracing.model.Span`.

``load_spans(path, fmt="auto", lenient=False)`` reads one file (gzip is fine) in one of
:data:`FORMATS`; ``auto`` looks at the content. Every importer produces the same
normalised spans, checked the same way (:func:`tracing.importers.common.checked`).
:func:`publish` writes them to the span stream as the instrumentation's exporter does,
so the ingest worker stores imported and live traces alike.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from pathlib import Path

import redis

from tracing.errors import TraceInputError
from tracing.importers.alibaba import parse_alibaba, schema_of
from tracing.importers.common import (
    ImportResult,
    RecordError,
    Rejects,
    checked,
    json_documents,
    read_text,
)
from tracing.importers.jaeger import parse_jaeger
from tracing.importers.otlp import parse_otlp
from tracing.importers.zipkin import parse_zipkin
from tracing.model import Span
from tracing.wire import FIELD, encode_batch

FORMATS = ("auto", "otlp", "jaeger", "zipkin", "alibaba", "alibaba-2021", "alibaba-2022")
PUBLISH_BATCH = 1024


def load_spans(path: Path, fmt: str = "auto", *, lenient: bool = False) -> ImportResult:
    if fmt not in FORMATS:
        raise TraceInputError(
            str(path), "", f"unknown format {fmt!r} (known: {', '.join(FORMATS)})"
        )
    source = str(path)
    text = read_text(path)
    rejects = Rejects(source, lenient=lenient)
    fmt = sniff(source, text) if fmt == "auto" else fmt
    records = list(_records(source, text, fmt, rejects))
    spans = checked(records, rejects)
    return ImportResult(
        source=source,
        format=fmt,
        spans=tuple(spans),
        records=len(records),
        skipped=dict(rejects.counts),
        merged=dict(rejects.merged),
    )


def _records(source: str, text: str, fmt: str, rejects: Rejects) -> Iterator[tuple[str, Span]]:
    if fmt.startswith("alibaba"):
        schema = None if fmt == "alibaba" else fmt
        try:
            yield from parse_alibaba(source, text, rejects, schema)
        except RecordError as exc:
            raise TraceInputError(source, "", str(exc)) from exc
        return
    documents = json_documents(source, text, rejects)
    parser = {"otlp": parse_otlp, "jaeger": parse_jaeger, "zipkin": parse_zipkin}[fmt]
    yield from parser(documents, rejects)


def sniff(source: str, text: str) -> str:
    """The format of ``text`` from its first characters and keys."""
    head = text.lstrip("\ufeff \t\r\n")[:4096]
    if head.startswith("{"):
        if '"resourceSpans"' in head or '"resource_spans"' in head:
            return "otlp"
        if '"data"' in head or '"traceID"' in head:
            return "jaeger"
    elif head.startswith("["):
        if '"traceID"' in head:
            return "jaeger"
        if '"traceId"' in head:
            return "zipkin"
    else:
        first_line = head.splitlines()[0] if head else ""
        schema = schema_of(next(csv.reader([first_line]), []))
        if schema:
            return schema
    raise TraceInputError(
        source,
        "",
        "cannot tell the format (OTLP/JSON, Jaeger JSON, Zipkin v2 JSON or an "
        "Alibaba call-graph CSV); give --format",
    )


def publish(
    spans: Sequence[Span], client: redis.Redis, stream: str, batch: int = PUBLISH_BATCH
) -> int:
    """XADD ``spans`` to ``stream`` in batches (pipelined); the number of entries."""
    pipe = client.pipeline(transaction=False)
    entries = 0
    for first in range(0, len(spans), batch):
        pipe.xadd(stream, {FIELD: encode_batch(spans[first : first + batch])})
        entries += 1
    pipe.execute()
    return entries


__all__ = ["FORMATS", "ImportResult", "load_spans", "publish", "sniff"]
