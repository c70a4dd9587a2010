"""Between :class:`~tracing.model.Span` objects and columns, without Redis.

``columns_from_spans`` runs the same encoding, decoding and assembly as the exporter and
the ingest worker, with names interned in memory as the worker interns them;
``spans_of_trace`` turns one stored trace back into spans (for the networkx graph and
the CLI).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from tracing.batch import decode_batch
from tracing.columns import TRACE_ID_DTYPE, RawSpans, TraceColumns, assemble, concat_columns
from tracing.model import Span, SpanKind, Status
from tracing.names import NameIndex, NameTable, endpoint_text, placement_text
from tracing.wire import (
    FLAG_ERROR,
    FLAG_FOLLOWS_FROM,
    MAX_SPANS_PER_BATCH,
    encode_batch,
)


def raw_from_payloads(payloads: Iterable[bytes], names: NameIndex) -> RawSpans:
    slots: dict[bytes, int] = {}
    parts: list[dict[str, np.ndarray]] = []
    for payload in payloads:
        batch = decode_batch(payload)
        records = batch.records
        slot_of = np.array(
            [slots.setdefault(t, len(slots)) for t in batch.trace_ids.tolist()], np.int64
        )
        endpoint = names.ids(
            [
                endpoint_text(batch.names[s], batch.names[o])
                for s, o in zip(records["service"], records["operation"], strict=True)
            ]
        )
        placement = names.ids(
            [
                placement_text(batch.names[h], batch.names[c])
                for h, c in zip(records["host"], records["container"], strict=True)
            ]
        )
        parts.append(
            {
                "trace": slot_of[records["trace"]] if len(records) else np.zeros(0, np.int64),
                "span": records["span"],
                "parent": records["parent"],
                "start": records["start"],
                "end": records["end"],
                "endpoint": np.array(endpoint, np.uint32),
                "placement": np.array(placement, np.uint32),
                "kind": records["kind"],
                "flags": records["flags"],
            }
        )
    trace_ids = np.array([np.frombuffer(t, TRACE_ID_DTYPE)[0] for t in slots], TRACE_ID_DTYPE)

    def cat(name: str, dtype: type) -> np.ndarray:
        return np.concatenate([p[name] for p in parts]) if parts else np.zeros(0, dtype)

    return RawSpans(
        trace_ids,
        cat("trace", np.int64),
        cat("span", np.uint64),
        cat("parent", np.uint64),
        cat("start", np.int64),
        cat("end", np.int64),
        cat("endpoint", np.uint32),
        cat("placement", np.uint32),
        cat("kind", np.uint8),
        cat("flags", np.uint8),
    )


def columns_from_spans(
    spans: Sequence[Span], names: NameIndex | None = None
) -> tuple[TraceColumns, NameTable]:
    """``spans`` (any number of traces) assembled as the ingest worker would."""
    names = names if names is not None else NameIndex()
    payloads = [
        encode_batch(spans[i : i + MAX_SPANS_PER_BATCH])
        for i in range(0, len(spans), MAX_SPANS_PER_BATCH)
    ]
    columns = assemble(raw_from_payloads(payloads, names)).columns
    return concat_columns([columns]), names.table()


def spans_of_trace(columns: TraceColumns, names: NameTable, trace: int) -> list[Span]:
    """Trace number ``trace`` of ``columns`` as spans (absolute times)."""
    first, last = int(columns.offsets[trace]), int(columns.offsets[trace + 1])
    trace_id = columns.trace_ids[trace].tobytes().hex()
    base = int(columns.base[trace])
    spans = []
    for row in range(first, last):
        parent_index = int(columns.parent[row])
        if parent_index >= 0:
            parent: str | None = f"{int(columns.span[first + parent_index]):016x}"
        elif columns.missing_parent[row]:
            parent = f"{int(columns.missing_parent[row]):016x}"
        else:
            parent = None
        service, operation = names.endpoint(int(columns.endpoint[row]))
        host, container = names.placement(int(columns.placement[row]))
        flags = int(columns.flags[row])
        spans.append(
            Span(
                trace_id=trace_id,
                span_id=f"{int(columns.span[row]):016x}",
                parent_id=parent,
                service=service,
                operation=operation,
                start_us=base + int(columns.start[row]),
                end_us=base + int(columns.end[row]),
                kind=SpanKind(int(columns.kind[row])),
                status=Status.ERROR if flags & FLAG_ERROR else Status.OK,
                host=host,
                container=container,
                follows_from=bool(flags & FLAG_FOLLOWS_FROM),
            )
        )
    return spans
