"""Decoding span batches (:mod:`tracing.wire`) into numpy records, checked.

A batch that is not what an exporter writes (wrong magic, truncated, an index out of
range, a span ending before it starts, a zero id) raises :class:`BatchError`; the ingest
worker moves such an entry to the dead-letter stream and goes on with the others.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from tracing.wire import MAGIC, RECORD_SIZE

WIRE_DTYPE = np.dtype(
    [
        ("trace", "<u2"),
        ("span", "<u8"),
        ("parent", "<u8"),
        ("start", "<i8"),
        ("end", "<i8"),
        ("service", "<u2"),
        ("operation", "<u2"),
        ("host", "<u2"),
        ("container", "<u2"),
        ("kind", "u1"),
        ("flags", "u1"),
    ]
)
assert WIRE_DTYPE.itemsize == RECORD_SIZE
MAX_KIND = 4


class BatchError(ValueError):
    """A stream entry that is not a valid span batch."""


@dataclass(frozen=True)
class DecodedBatch:
    names: list[str]
    trace_ids: list[bytes]
    records: np.ndarray  # WIRE_DTYPE


def decode_batch(payload: bytes) -> DecodedBatch:
    if not payload.startswith(MAGIC):
        raise BatchError("not a span batch (bad magic)")
    try:
        names, offset = _names(payload, len(MAGIC))
        (n_traces,) = struct.unpack_from("<I", payload, offset)
        offset += 4
        end = offset + 16 * n_traces
        if end > len(payload):
            raise BatchError("truncated trace table")
        trace_ids = [payload[i : i + 16] for i in range(offset, end, 16)]
        (n_spans,) = struct.unpack_from("<I", payload, end)
        offset = end + 4
    except struct.error as exc:
        raise BatchError(f"truncated batch: {exc}") from exc
    if len(payload) != offset + n_spans * RECORD_SIZE:
        raise BatchError(f"{n_spans} spans announced, {len(payload) - offset} bytes follow")
    records = np.frombuffer(payload, dtype=WIRE_DTYPE, count=n_spans, offset=offset)
    _check(records, len(names), len(trace_ids))
    return DecodedBatch(names, trace_ids, records)


def _names(payload: bytes, offset: int) -> tuple[list[str], int]:
    (count,) = struct.unpack_from("<I", payload, offset)
    offset += 4
    names: list[str] = []
    for _ in range(count):
        (length,) = struct.unpack_from("<H", payload, offset)
        offset += 2
        if offset + length > len(payload):
            raise BatchError("truncated name table")
        names.append(payload[offset : offset + length].decode("utf-8", "replace"))
        offset += length
    return names, offset


def _check(records: np.ndarray, n_names: int, n_traces: int) -> None:
    if not len(records):
        return
    if int(records["trace"].max()) >= n_traces:
        raise BatchError("a span refers to a trace id the batch does not hold")
    for column in ("service", "operation", "host", "container"):
        if int(records[column].max()) >= n_names:
            raise BatchError(f"a span's {column} refers to a name the batch does not hold")
    if bool((records["span"] == 0).any()):
        raise BatchError("a span id is zero")
    if bool((records["end"] < records["start"]).any()):
        raise BatchError("a span ends before it starts")
    if int(records["kind"].max()) > MAX_KIND:
        raise BatchError("unknown span kind")
