"""Decoding span batches (:mod:`tracing.wire`) into numpy records, checked.

A batch that is not what an exporter writes (wrong magic, truncated, an index out of
range, a span ending before it starts, a zero id) raises :class:`BatchError`; the ingest
worker moves such an entry to the dead-letter stream and goes on with the others. Flags
only the worker sets (``WORKER_FLAGS``: a cut cycle, a clock running ahead) are cleared
from what arrives, so a sender cannot claim them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from tracing.wire import MAGIC, RECORD_SIZE, WORKER_FLAGS

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
NAME_CACHE_SIZE = 4096


class BatchError(ValueError):
    """A stream entry that is not a valid span batch."""


@dataclass(frozen=True)
class DecodedBatch:
    names: list[str]
    name_table: bytes  # the encoded names: a key for caches built on them
    trace_ids: np.ndarray  # V16
    records: np.ndarray  # WIRE_DTYPE


def decode_batch(payload: bytes, name_cache: dict[bytes, list[str]] | None = None) -> DecodedBatch:
    """The batch in ``payload``. ``name_cache`` (name table bytes -> names) spares
    decoding the table a service's exporter sends with every batch."""
    if not payload.startswith(MAGIC):
        raise BatchError("not a span batch (bad magic)")
    try:
        count, size = struct.unpack_from("<II", payload, len(MAGIC))
        offset = len(MAGIC) + 8
        table = payload[offset : offset + size]
        if len(table) != size:
            raise BatchError("truncated name table")
        names = name_cache.get(table) if name_cache is not None else None
        if names is None:
            names = _names(table, count)
            if name_cache is not None:
                if len(name_cache) > NAME_CACHE_SIZE:
                    name_cache.clear()
                name_cache[table] = names
        offset += size
        (n_traces,) = struct.unpack_from("<I", payload, offset)
        offset += 4
        end = offset + 16 * n_traces
        if end > len(payload):
            raise BatchError("truncated trace table")
        trace_ids = np.frombuffer(payload, dtype="V16", count=n_traces, offset=offset)
        (n_spans,) = struct.unpack_from("<I", payload, end)
        offset = end + 4
    except struct.error as exc:
        raise BatchError(f"truncated batch: {exc}") from exc
    if len(payload) != offset + n_spans * RECORD_SIZE:
        raise BatchError(f"{n_spans} spans announced, {len(payload) - offset} bytes follow")
    records = np.frombuffer(payload, dtype=WIRE_DTYPE, count=n_spans, offset=offset)
    _check(records, len(names), len(trace_ids))
    return DecodedBatch(names, table, trace_ids, _without_worker_flags(records))


def _names(table: bytes, count: int) -> list[str]:
    names: list[str] = []
    offset = 0
    for _ in range(count):
        (length,) = struct.unpack_from("<H", table, offset)
        offset += 2
        if offset + length > len(table):
            raise BatchError("truncated name table")
        names.append(table[offset : offset + length].decode("utf-8", "replace"))
        offset += length
    if offset != len(table):
        raise BatchError("the name table's size does not match its names")
    return names


def _without_worker_flags(records: np.ndarray) -> np.ndarray:
    if not len(records) or not bool((records["flags"] & WORKER_FLAGS).any()):
        return records  # the usual case: the zero-copy view
    cleared = records.copy()
    cleared["flags"] &= np.uint8(0xFF ^ WORKER_FLAGS)
    return cleared


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
