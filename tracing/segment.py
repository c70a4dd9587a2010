"""The stored form of assembled traces: one Redis string per segment, columnar.

Little endian::

    header  magic b"YTG2", u8 time width (4 or 8 bytes), u8 depth width (2 or 4), 2 pad,
            u32 n_traces, u32 n_spans, u32 n_orphans, i64 min start, i64 max end (µs)
    traces  16-byte ids | i64 base | u32 span count            (each a column)
    spans   u64 id | i32 parent index | i32/i64 start offset | u32/u64 duration |
            u32 endpoint | u32 placement | u8 kind | u8 flags | u16/u32 depth (columns)
    orphans u32 span row | u64 missing parent id
    names   u32 n_names, u32 bytes, n_names x u32 length, the names (UTF-8)

About 32 bytes a span and 28 a trace, plus the names the segment uses: endpoint and
placement ids index the segment's own name list (from 1; 0 is none), so names expire
with the traces that use them (:mod:`tracing.names`). Times are offsets from the
trace's first start, and a missing parent's id is kept only for the spans that have one.
Times use 4 bytes unless a trace is longer than 35 minutes.

Segments of the first format (magic ``YTG1``) are the same without the names section:
their ids are the ones the Redis hash ``{prefix}:names:rev`` held. They decode with
``names`` None.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tracing.columns import TRACE_ID_DTYPE, TraceColumns

MAGIC = b"YTG2"
SHARED_NAMES_MAGIC = b"YTG1"  # the first format: names in Redis hashes, not in the segment
HEADER = struct.Struct("<4sBB2xIIIqq")
_NARROW = np.iinfo(np.int32).max


class SegmentError(ValueError):
    """Bytes that are not a segment this version wrote."""


@dataclass(frozen=True)
class Segment:
    columns: TraceColumns
    names: tuple[str, ...] | None  # what ids 1..n stand for; None: a YTG1 segment


def encode_segment(columns: TraceColumns, names: Sequence[str]) -> bytes:
    """``columns``, whose endpoint and placement ids index ``names`` (from 1)."""
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
        _encode_names(names),
    ]
    return b"".join(parts)


def _encode_names(names: Sequence[str]) -> bytes:
    encoded = [name.encode("utf-8") for name in names]
    lengths = np.array([len(e) for e in encoded], "<u4")
    blob = b"".join(encoded)
    return struct.pack("<II", len(encoded), len(blob)) + lengths.tobytes() + blob


def segment_bounds(payload: bytes) -> tuple[int, int]:
    """(min start, max end) of a segment, from its header alone."""
    fields = _header(payload)
    return fields[6], fields[7]


def _header(payload: bytes) -> tuple[bytes, int, int, int, int, int, int, int]:
    try:
        fields: tuple[bytes, int, int, int, int, int, int, int] = HEADER.unpack_from(payload, 0)
    except struct.error as exc:
        raise SegmentError("truncated segment header") from exc
    known = fields[0] in (MAGIC, SHARED_NAMES_MAGIC)
    if not known or fields[1] not in (4, 8) or fields[2] not in (2, 4):
        raise SegmentError("not a trace segment")
    return fields


def segment_trace_ids(payload: bytes) -> np.ndarray:
    """The trace ids a segment holds (V16), without decoding the rest."""
    n_traces = _header(payload)[3]
    return _Reader(payload, HEADER.size).take(TRACE_ID_DTYPE, n_traces)


def decode_segment(payload: bytes) -> Segment:
    magic, width, depth_width, n_traces, n_spans, n_orphans, _, _ = _header(payload)
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
    names = _decode_names(reader) if magic == MAGIC else None
    reader.finish()
    offsets = np.concatenate(([0], np.cumsum(counts, dtype=np.int64)))
    if offsets[-1] != n_spans or (n_orphans and int(orphan_rows.max()) >= n_spans):
        raise SegmentError("segment counts do not add up")
    highest_name = max(int(endpoint.max(initial=0)), int(placement.max(initial=0)))
    if names is not None and highest_name > len(names):
        raise SegmentError("a span refers to a name the segment does not hold")
    missing = np.zeros(n_spans, np.uint64)
    missing[orphan_rows] = orphan_parents
    columns = TraceColumns(
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
    return Segment(columns, names)


def _decode_names(reader: _Reader) -> tuple[str, ...]:
    count, size = (int(x) for x in reader.take(np.dtype("<u4"), 2))
    lengths = reader.take(np.dtype("<u4"), count).astype(np.int64)
    blob = reader.take(np.dtype("u1"), size).tobytes()
    if int(lengths.sum()) != size:
        raise SegmentError("the segment's name lengths do not add up")
    ends = np.cumsum(lengths).tolist()
    starts = [0, *ends[:-1]]
    return tuple(blob[a:b].decode("utf-8", "replace") for a, b in zip(starts, ends, strict=True))


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
