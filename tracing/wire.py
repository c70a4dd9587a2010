"""The span batch format on the Redis stream (encoding side; stdlib only).

One stream entry carries one batch of spans in one field, ``b``, so a service's
exporter pays one XADD per few hundred spans rather than one per span. Little endian::

    magic  b"YTS1"
    u32 n_names, u32 bytes, then n_names x (u16 length, UTF-8)   names used in the batch
    u32 n_traces,  then n_traces x 16 bytes                      trace ids used in the batch
    u32 n_spans,   then n_spans x RECORD (44 bytes, below)

    RECORD: u16 trace (index into the trace ids), u64 span id, u64 parent span id (0: none),
            i64 start_us, i64 end_us, u16 service, u16 operation, u16 host, u16 container
            (indices into the names), u8 kind (SpanKind), u8 flags (FLAG_*)

Names longer than ``MAX_NAME_BYTES`` are cut (an operation is an API url, never a body).
Cross-trace links are not carried: only the parent relation and its follows-from flag
matter to the critical path. The decoding side (numpy) is :mod:`tracing.batch`; the
OTLP receiver encodes from columns (numpy) with :mod:`tracing.wire_columns`.
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Sequence

from tracing.model import Span, Status

MAGIC = b"YTS1"
FIELD = b"b"
RECORD = struct.Struct("<HQQqqHHHHBB")
RECORD_SIZE = RECORD.size  # 44
MAX_SPANS_PER_BATCH = 8192
MAX_NAME_BYTES = 512

FLAG_ERROR = 0x01
FLAG_FOLLOWS_FROM = 0x02
FLAG_HAS_PARENT = 0x04
FLAG_CYCLE_CUT = 0x08  # set at assembly, never on the wire
FLAG_CLOCK_AHEAD = 0x10  # set at ingest (moved back, see tracing.clocks), never on the wire
WORKER_FLAGS = FLAG_CYCLE_CUT | FLAG_CLOCK_AHEAD  # cleared from what arrives

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")


def encode_batch(spans: Sequence[Span]) -> bytes:
    """``spans`` (at most MAX_SPANS_PER_BATCH) as one stream entry payload."""
    if len(spans) > MAX_SPANS_PER_BATCH:
        raise ValueError(f"a batch holds at most {MAX_SPANS_PER_BATCH} spans, got {len(spans)}")
    names: dict[str, int] = {}
    traces: dict[str, int] = {}
    records = bytearray(RECORD_SIZE * len(spans))
    pack_into = RECORD.pack_into
    offset = 0
    for span in spans:
        trace = traces.setdefault(span.trace_id, len(traces))
        flags = (FLAG_ERROR if span.status is Status.ERROR else 0) | (
            FLAG_FOLLOWS_FROM if span.follows_from else 0
        )
        parent = 0
        if span.parent_id is not None:
            parent = int(span.parent_id, 16)
            flags |= FLAG_HAS_PARENT
        pack_into(
            records,
            offset,
            trace,
            int(span.span_id, 16),
            parent,
            span.start_us,
            span.end_us,
            names.setdefault(span.service, len(names)),
            names.setdefault(span.operation, len(names)),
            names.setdefault(span.host, len(names)),
            names.setdefault(span.container, len(names)),
            int(span.kind),
            flags,
        )
        offset += RECORD_SIZE
    trace_ids = [bytes.fromhex(trace_id) for trace_id in traces]
    return batch_payload(names, trace_ids, len(spans), records)


def batch_payload(
    names: Collection[str], trace_ids: Collection[bytes], n_spans: int, records: bytes | bytearray
) -> bytes:
    """A stream entry's payload from its parts: the names and the 16-byte trace ids in
    the order the records' indices number them, and ``n_spans`` records."""
    table: list[bytes] = []
    for name in names:
        raw = name.encode("utf-8", "replace")[:MAX_NAME_BYTES]
        table += (_U16.pack(len(raw)), raw)
    name_bytes = b"".join(table)
    parts = [MAGIC, _U32.pack(len(names)), _U32.pack(len(name_bytes)), name_bytes]
    parts.append(_U32.pack(len(trace_ids)))
    parts += trace_ids
    parts += (_U32.pack(n_spans), bytes(records))
    return b"".join(parts)
