"""Spans in the span stream's format, a column per field (the OTLP receiver's encoding
side; numpy).

:class:`WireSpans` holds what :func:`tracing.wire.encode_batch` would write for each
span, without a :class:`~tracing.model.Span` per span: the 16-byte trace id, the
operation, the placement (service, host, container: one tuple for all the spans of a
resource) and the rest as the wire's records (span and parent ids as numbers, times in
µs, kind, flags). The trace and name indices of the records are numbered per
batch, in order of first use as ``encode_batch`` numbers them, so
``WireSpans.of(spans).payloads(n)`` equals ``encode_batch`` over each ``n`` spans, byte
for byte. The receiver's protobuf decoding (:mod:`tracing.otlp_decode`) fills the
columns straight from the messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, compress, groupby
from typing import TypeVar

import numpy as np

from tracing.batch import WIRE_DTYPE
from tracing.model import Span, Status
from tracing.wire import (
    FLAG_ERROR,
    FLAG_FOLLOWS_FROM,
    FLAG_HAS_PARENT,
    MAX_SPANS_PER_BATCH,
    batch_payload,
)

Placement = tuple[str, str, str]  # service, host, container
T = TypeVar("T")


@dataclass(frozen=True)
class WireSpans:
    """Spans as the wire carries them; ``records``' trace and name indices are set per
    batch, by :meth:`payloads`."""

    trace_ids: list[bytes]  # 16 bytes each
    operations: list[str]
    placements: list[Placement]  # the same tuple for the spans of one resource
    records: np.ndarray  # WIRE_DTYPE

    def __len__(self) -> int:
        return len(self.trace_ids)

    @classmethod
    def empty(cls) -> WireSpans:
        return cls([], [], [], np.zeros(0, WIRE_DTYPE))

    @classmethod
    def of(cls, spans: Sequence[Span]) -> WireSpans:
        records = np.zeros(len(spans), WIRE_DTYPE)
        records["span"] = [int(s.span_id, 16) for s in spans]
        records["parent"] = [0 if s.parent_id is None else int(s.parent_id, 16) for s in spans]
        records["start"] = [s.start_us for s in spans]
        records["end"] = [s.end_us for s in spans]
        records["kind"] = [int(s.kind) for s in spans]
        records["flags"] = [_flags(s) for s in spans]
        return cls(
            [bytes.fromhex(s.trace_id) for s in spans],
            [s.operation for s in spans],
            [(s.service, s.host, s.container) for s in spans],
            records,
        )

    @classmethod
    def joined(cls, parts: Sequence[WireSpans]) -> WireSpans:
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls.empty()
        return cls(
            list(chain.from_iterable(p.trace_ids for p in parts)),
            list(chain.from_iterable(p.operations for p in parts)),
            list(chain.from_iterable(p.placements for p in parts)),
            np.concatenate([p.records for p in parts]),
        )

    def kept(self, keep: np.ndarray) -> WireSpans:
        """The spans where ``keep`` (bool, one per span) is true."""
        if bool(keep.all()):
            return self
        flags = keep.tolist()
        return WireSpans(
            list(compress(self.trace_ids, flags)),
            list(compress(self.operations, flags)),
            list(compress(self.placements, flags)),
            self.records[keep],
        )

    def payloads(self, batch_spans: int) -> Iterator[bytes]:
        """The spans as stream entry payloads of at most ``batch_spans`` spans each."""
        if not 1 <= batch_spans <= MAX_SPANS_PER_BATCH:
            raise ValueError(f"a batch holds 1..{MAX_SPANS_PER_BATCH} spans, not {batch_spans}")
        for first in range(0, len(self), batch_spans):
            yield self._payload(first, first + batch_spans)

    def _payload(self, first: int, stop: int) -> bytes:
        records = self.records[first:stop].copy()
        trace_ids = self.trace_ids[first:stop]
        traces = _numbered(trace_ids)
        records["trace"] = list(map(traces.__getitem__, trace_ids))
        names = _named(records, self.operations[first:stop], self.placements[first:stop])
        return batch_payload(names, list(traces), len(records), records.tobytes())


def _named(
    records: np.ndarray, operations: Sequence[str], placements: Sequence[Placement]
) -> dict[str, int]:
    """The batch's names numbered as ``encode_batch`` numbers them (span by span, a
    span's four in turn), with the records' name indices set to them."""
    names: dict[str, int] = {}
    at = 0
    for (service, host, container), run in groupby(placements):
        end = at + len(list(run))
        # while the placement stays, only operations can be new, in their first spans' order
        for name in (service, operations[at], host, container, *dict.fromkeys(operations[at:end])):
            names.setdefault(name, len(names))
        records["service"][at:end] = names[service]
        records["host"][at:end] = names[host]
        records["container"][at:end] = names[container]
        at = end
    records["operation"] = list(map(names.__getitem__, operations))
    return names


def _numbered(items: Iterable[T]) -> dict[T, int]:
    """Each distinct item -> its number, in order of first occurrence."""
    return {item: number for number, item in enumerate(dict.fromkeys(items))}


def _flags(span: Span) -> int:
    flags = FLAG_ERROR if span.status is Status.ERROR else 0
    flags |= FLAG_FOLLOWS_FROM if span.follows_from else 0
    return flags | (FLAG_HAS_PARENT if span.parent_id is not None else 0)


__all__ = ["Placement", "WireSpans"]
