"""The stored form of assembled traces: one Redis string per segment, columnar.

Little endian::

    header  magic b"YTG1", u8 time width (4 or 8 bytes), u8 depth width (2 or 4), 2 pad,
            u32 n_traces, u32 n_spans, u32 n_orphans, i64 min start, i64 max end (µs)
    traces  16-byte ids | i64 base | u32 span count            (each a column)
    spans   u64 id | i32 parent index | i32/i64 start offset | u32/u64 duration |
            u32 endpoint | u32 placement | u8 kind | u8 flags | u16/u32 depth (columns)
    orphans u32 span row | u64 missing parent id

About 32 bytes a span and 28 a trace: service and operation names are interned
(endpoint ids), times are offsets from the trace's first start, and a missing
parent's id is kept only for the spans that have one. Times use 4 bytes unless a
trace is longer than 35 minutes.
"""

from __future__ import annotations

import struct

import numpy as np

from tracing.columns import TRACE_ID_DTYPE, TraceColumns

MAGIC = b"YTG1"
HEADER = struct.Struct("<4sBB2xIIIqq")
_NARROW = np.iinfo(np.int32).max


class SegmentError(ValueError):
    """Bytes that are not a segment this version wrote."""


def encode_segment(columns: TraceColumns) -> bytes:
    duration = columns.end - columns.start
    narrow = columns.n_spans == 0 or (
        (int(columns.start.min()) >= 0 and int(columns.start.max()) <= _NARROW)
        and int(duration.max()) <= _NARROW
    )
    width = 4 if narrow else 8
    time_type = "<i4" if narrow else "<i8"
    duration_type = "<u4" if narrow else "<u8"
    orphans = np.flatnonzero(columns.missing_parent)
    min_start = int(columns.base.min()) if columns.n_traces else 0
    ends = columns.end + columns.base[columns.trace_of_span()]
    max_end = int(ends.max()) if columns.n_spans else 0
    depth_width = 2 if columns.n_spans == 0 or int(columns.depth.max()) < 1 << 16 else 4
    header = HEADER.pack(
        MAGIC,
        width,
        depth_width,
        columns.n_traces,
        columns.n_spans,
        len(orphans),
        min_start,
        max_end,
    )
    parts = [
        header,
        columns.trace_ids.tobytes(),
        columns.base.astype("<i8").tobytes(),
        np.diff(columns.offsets).astype("<u4").tobytes(),
        columns.span.astype("<u8").tobytes(),
        columns.parent.astype("<i4").tobytes(),
        columns.start.astype(time_type).tobytes(),
        duration.astype(duration_type).tobytes(),
        columns.endpoint.astype("<u4").tobytes(),
        columns.placement.astype("<u4").tobytes(),
        columns.kind.astype("u1").tobytes(),
        columns.flags.astype("u1").tobytes(),
        columns.depth.astype(f"<u{depth_width}").tobytes(),
        orphans.astype("<u4").tobytes(),
        columns.missing_parent[orphans].astype("<u8").tobytes(),
    ]
    return b"".join(parts)


def segment_bounds(payload: bytes) -> tuple[int, int]:
    """(min start, max end) of a segment, from its header alone."""
    fields = _header(payload)
    return fields[6], fields[7]


def _header(payload: bytes) -> tuple[bytes, int, int, int, int, int, int, int]:
    try:
        fields: tuple[bytes, int, int, int, int, int, int, int] = HEADER.unpack_from(payload, 0)
    except struct.error as exc:
        raise SegmentError("truncated segment header") from exc
    if fields[0] != MAGIC or fields[1] not in (4, 8) or fields[2] not in (2, 4):
        raise SegmentError("not a trace segment")
    return fields


def segment_trace_ids(payload: bytes) -> np.ndarray:
    """The trace ids a segment holds (V16), without decoding the rest."""
    n_traces = _header(payload)[3]
    return _Reader(payload, HEADER.size).take(TRACE_ID_DTYPE, n_traces)


def decode_segment(payload: bytes) -> TraceColumns:
    _, width, depth_width, n_traces, n_spans, n_orphans, _, _ = _header(payload)
    reader = _Reader(payload, HEADER.size)
    trace_ids = reader.take(TRACE_ID_DTYPE, n_traces)
    base = reader.take(np.dtype("<i8"), n_traces).astype(np.int64)
    counts = reader.take(np.dtype("<u4"), n_traces)
    span = reader.take(np.dtype("<u8"), n_spans).astype(np.uint64)
    parent = reader.take(np.dtype("<i4"), n_spans).astype(np.int32)
    start = reader.take(np.dtype(f"<i{width}"), n_spans).astype(np.int64)
    duration = reader.take(np.dtype(f"<u{width}"), n_spans).astype(np.int64)
    endpoint = reader.take(np.dtype("<u4"), n_spans).astype(np.uint32)
    placement = reader.take(np.dtype("<u4"), n_spans).astype(np.uint32)
    kind = reader.take(np.dtype("u1"), n_spans)
    flags = reader.take(np.dtype("u1"), n_spans)
    depth = reader.take(np.dtype(f"<u{depth_width}"), n_spans).astype(np.int32)
    orphan_rows = reader.take(np.dtype("<u4"), n_orphans).astype(np.int64)
    orphan_parents = reader.take(np.dtype("<u8"), n_orphans)
    reader.finish()
    offsets = np.concatenate(([0], np.cumsum(counts, dtype=np.int64)))
    if offsets[-1] != n_spans or (n_orphans and int(orphan_rows.max()) >= n_spans):
        raise SegmentError("segment counts do not add up")
    missing = np.zeros(n_spans, np.uint64)
    missing[orphan_rows] = orphan_parents
    return TraceColumns(
        trace_ids=trace_ids,
        base=base,
        offsets=offsets,
        span=span,
        parent=parent,
        missing_parent=missing,
        start=start,
        end=start + duration,
        endpoint=endpoint,
        placement=placement,
        kind=kind,
        flags=flags,
        depth=depth,
    )


class _Reader:
    def __init__(self, payload: bytes, offset: int) -> None:
        self.payload = payload
        self.offset = offset

    def take(self, dtype: np.dtype, count: int) -> np.ndarray:
        size = dtype.itemsize * count
        if self.offset + size > len(self.payload):
            raise SegmentError("truncated segment")
        array = np.frombuffer(self.payload, dtype=dtype, count=count, offset=self.offset)
        self.offset += size
        return array

    def finish(self) -> None:
        if self.offset != len(self.payload):
            raise SegmentError("trailing bytes after the segment")
