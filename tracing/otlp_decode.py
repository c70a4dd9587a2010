"""OTLP/HTTP trace request bodies -> normalised spans (the receiver's decoding side).

``decode_request(body, encoding)`` reads one ``ExportTraceServiceRequest``, binary
protobuf (``opentelemetry-proto``'s generated messages do the decoding) or OTLP/JSON
(the importer's mapping, :mod:`tracing.importers.otlp`), and maps each span as the
importers do: ``service.name``, ``host.name`` (else ``k8s.node.name``) and
``container.id`` from the resource, times in µs, OTLP's kinds, ``status.code`` ERROR as
an error, and a root linked to a span of its own trace as that span's follows-from
child. A span that breaks OTLP's rules (a trace id that is not 16 non-zero bytes, a
span id that is not 8, an end before its start, no times) is rejected alone: the others
are accepted and the rejection is counted with the first problem, which the receiver
returns as OTLP's partial success. A body that does not decode at all, or whose
structure above the spans is not an ExportTraceServiceRequest's (in JSON: a
``resourceSpans`` entry, a resource or a ``scopeSpans`` entry of the wrong shape, which
binary protobuf could not even express), is :class:`OtlpBadData` (HTTP 400): it holds
no countable spans to reject one by one.

The accepted spans come out as the span stream carries them
(:class:`~tracing.wire_columns.WireSpans`). Protobuf requests are read a scope at a
time, a column per field (reading a message's field is most of the cost), and checked
with numpy for all the scope's spans at once, ids by their length first; only the first
rejected span is then checked alone (:func:`_proto_span`), for the reason that names
it. JSON requests go through the importer's :class:`~tracing.model.Span` objects.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from operator import attrgetter

import numpy as np
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from tracing.batch import WIRE_DTYPE
from tracing.importers.common import Rejects
from tracing.importers.otlp import OTLP_KINDS, parse_otlp
from tracing.model import Span, Status, span_problem
from tracing.wire import FLAG_ERROR, FLAG_FOLLOWS_FROM, FLAG_HAS_PARENT
from tracing.wire_columns import Placement, WireSpans

UNKNOWN_SERVICE = "unknown_service"
_STATUS_ERROR = 2
_MAX_US = (1 << 63) - 1  # the wire's i64 (tracing.wire)
_SPAN_LABEL = re.compile(r"^record \d+ \(")  # parse_otlp's label of one span
# what a span's columns are read from, in _scope_columns' order
_READ = attrgetter(
    "trace_id",
    "span_id",
    "parent_span_id",
    "start_time_unix_nano",
    "end_time_unix_nano",
    "kind",
    "status.code",
    "name",
)
_WIRE_KINDS = np.array([OTLP_KINDS[k] for k in range(len(OTLP_KINDS))], np.uint8)
_NO_PARENT = bytes(8)


class Encoding(Enum):
    PROTOBUF = "application/x-protobuf"
    JSON = "application/json"


class OtlpBadData(ValueError):
    """The body is not an ExportTraceServiceRequest in the encoding it claims."""


@dataclass(frozen=True)
class Decoded:
    """What one request carried: the spans accepted (as the span stream carries them),
    how many were rejected and why (the first problem, naming the span)."""

    spans: WireSpans
    rejected: int
    problem: str

    @property
    def received(self) -> int:
        return len(self.spans) + self.rejected


def decode_request(body: bytes, encoding: Encoding) -> Decoded:
    if encoding is Encoding.JSON:
        return _decode_json(body)
    return _decode_protobuf(body)


# --------------------------------------------------------------------------- protobuf


@dataclass(frozen=True)
class _Resource:
    service: str
    host: str
    container: str


def _decode_protobuf(body: bytes) -> Decoded:
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except DecodeError as exc:
        raise OtlpBadData(f"the body is not a protobuf ExportTraceServiceRequest: {exc}") from None
    parts: list[WireSpans] = []
    rejected = 0
    problem = ""
    for r, resource_spans in enumerate(request.resource_spans):
        resource = _resource(resource_spans.resource.attributes)
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            raws = scope_spans.spans
            if not raws:
                continue
            columns, valid = _scope_columns(raws, resource)
            if not bool(valid.all()):
                rejected += int(np.count_nonzero(~valid))
                where = f"resource_spans[{r}].scope_spans[{s}]"
                problem = problem or _first_problem(raws, valid, resource, where)
                columns = columns.kept(valid)
            parts.append(columns)
    return Decoded(WireSpans.joined(parts), rejected, problem)


def _scope_columns(raws: Sequence[ProtoSpan], resource: _Resource) -> tuple[WireSpans, np.ndarray]:
    """The spans of one scope as wire columns, and which of them are valid: the checks
    of :func:`_proto_span`, made on all the spans at once."""
    trace_ids, span_ids, parent_ids, starts, ends, kinds, codes, names = zip(
        *map(_READ, raws), strict=True
    )
    trace_fits, trace_words = _ids(trace_ids, 16)
    span_fits, span_words = _ids(span_ids, 8)
    parent_fits, parent_words = _ids([p or _NO_PARENT for p in parent_ids], 8)
    span, parent = span_words[:, 0], parent_words[:, 0].copy()
    follows = _linked_parents(raws, parent, parent_fits)
    start_ns, end_ns, kind = _numbers("Q", starts), _numbers("Q", ends), _numbers("q", kinds)
    known_kind = (kind >= 0) & (kind < len(_WIRE_KINDS))
    records = np.zeros(len(raws), WIRE_DTYPE)
    records["span"], records["parent"] = span, parent
    records["start"], records["end"] = start_ns // 1000, end_ns // 1000
    records["kind"] = _WIRE_KINDS[np.where(known_kind, kind, 0)]
    records["flags"] = _flags(_numbers("q", codes), follows, parent)
    valid = trace_fits & trace_words.any(axis=1) & span_fits & (span != 0) & parent_fits
    valid &= (start_ns != 0) & (end_ns != 0) & known_kind
    valid &= (parent != span) & (records["end"] >= records["start"])
    columns = WireSpans(list(trace_ids), list(names), _placements(raws, resource), records)
    return columns, valid


def _ids(ids: Sequence[bytes], size: int) -> tuple[np.ndarray, np.ndarray]:
    """Which ``ids`` are ``size`` bytes long (checked before anything else is read of
    them), and every id as big-endian 64-bit words, the wire's numbers (zero words for
    those of another length)."""
    joined = b"".join(ids)
    if len(joined) == size * len(ids) and max(map(len, ids), default=size) == size:
        fits = np.ones(len(ids), bool)
    else:
        fits = np.fromiter(map(len, ids), np.int64, len(ids)) == size
        joined = b"".join(i if len(i) == size else bytes(size) for i in ids)
    return fits, np.frombuffer(joined, ">u8").reshape(len(ids), size // 8)


def _numbers(typecode: str, numbers: Sequence[int]) -> np.ndarray:
    """``numbers`` as a numpy array: "Q" unsigned, "q" signed, 64 bits."""
    return np.frombuffer(array(typecode, numbers), np.uint64 if typecode == "Q" else np.int64)


def _linked_parents(
    raws: Sequence[ProtoSpan], parent: np.ndarray, parent_fits: np.ndarray
) -> np.ndarray:
    """Where a span has no parent id, the span of its own trace it links to becomes its
    parent (set in ``parent``); which spans only follow from their parent so."""
    follows = np.zeros(len(raws), bool)
    for i in np.flatnonzero((parent == 0) & parent_fits).tolist():
        if not raws[i].links:  # most roots link to nothing
            continue
        linked, follows[i] = _parent(raws[i])
        if linked is not None:
            parent[i] = int(linked, 16)
    return follows


def _flags(codes: np.ndarray, follows: np.ndarray, parent: np.ndarray) -> np.ndarray:
    flags: np.ndarray = (
        np.where(codes == _STATUS_ERROR, FLAG_ERROR, 0)
        | np.where(follows, FLAG_FOLLOWS_FROM, 0)
        | np.where(parent != 0, FLAG_HAS_PARENT, 0)
    )
    return flags


def _placements(raws: Sequence[ProtoSpan], resource: _Resource) -> list[Placement]:
    """Each span's service, host and container: its resource's host and container,
    else those it names itself."""
    host, container = resource.host, resource.container
    if host and container:
        return [(resource.service, host, container)] * len(raws)
    return [(resource.service, *_span_placement(raw, host, container)) for raw in raws]


def _first_problem(
    raws: Sequence[ProtoSpan], valid: np.ndarray, resource: _Resource, where: str
) -> str:
    """Why the first invalid span of a scope is rejected, said by the checks one span at
    a time."""
    first = int(np.flatnonzero(~valid)[0])
    span, why = _proto_span(raws[first], resource)
    if span is not None:
        raise RuntimeError(f"{where}.spans[{first}] is valid, yet its scope's checks failed it")
    return f"{where}.spans[{first}]: {why}"


def _resource(attributes: Sequence[KeyValue]) -> _Resource:
    wanted = {"service.name": "", "host.name": "", "k8s.node.name": "", "container.id": ""}
    for attribute in attributes:
        if attribute.key in wanted:
            wanted[attribute.key] = _text(attribute)
    return _Resource(
        service=wanted["service.name"] or UNKNOWN_SERVICE,
        host=wanted["host.name"] or wanted["k8s.node.name"],
        container=wanted["container.id"],
    )


def _text(attribute: KeyValue) -> str:
    value = attribute.value
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value
    if which in ("int_value", "bool_value", "double_value"):
        return str(getattr(value, which))
    return ""


def _proto_span(raw: ProtoSpan, resource: _Resource) -> tuple[Span | None, str]:
    """The span, or None and why it is rejected."""
    id_problem = _id_problem(raw)
    if id_problem:
        return None, id_problem
    if not raw.start_time_unix_nano or not raw.end_time_unix_nano:
        return None, "start_time_unix_nano and end_time_unix_nano are required"
    parent, follows = _parent(raw)
    kind = OTLP_KINDS.get(raw.kind)
    if kind is None:
        return None, f"kind {raw.kind} is not an OTLP span kind"
    host, container = resource.host, resource.container
    if not host or not container:
        host, container = _span_placement(raw, host, container)
    span = Span(
        trace_id=raw.trace_id.hex(),
        span_id=raw.span_id.hex(),
        parent_id=parent,
        service=resource.service,
        operation=raw.name,
        start_us=raw.start_time_unix_nano // 1000,
        end_us=raw.end_time_unix_nano // 1000,
        kind=kind,
        status=Status.ERROR if raw.status.code == _STATUS_ERROR else Status.OK,
        host=host,
        container=container,
        follows_from=follows,
    )
    problem = span_problem(span)
    return (None, problem) if problem else (span, "")


def _id_problem(raw: ProtoSpan) -> str:
    if len(raw.trace_id) != 16 or not any(raw.trace_id):
        return f"trace_id {raw.trace_id.hex()!r} is not 16 bytes (non-zero)"
    if len(raw.span_id) != 8 or not any(raw.span_id):
        return f"span_id {raw.span_id.hex()!r} is not 8 bytes (non-zero)"
    if raw.parent_span_id and len(raw.parent_span_id) != 8:
        return f"parent_span_id {raw.parent_span_id.hex()!r} is not 8 bytes"
    return ""


def _parent(raw: ProtoSpan) -> tuple[str | None, bool]:
    """The parent span id, and whether the span only follows from it (a root linked
    to a span of its own trace)."""
    if raw.parent_span_id and any(raw.parent_span_id):
        return raw.parent_span_id.hex(), False
    for link in raw.links:
        if link.trace_id == raw.trace_id and len(link.span_id) == 8 and any(link.span_id):
            return link.span_id.hex(), True
    return None, False


def _span_placement(raw: ProtoSpan, host: str, container: str) -> tuple[str, str]:
    """The host and container a span names itself when its resource does not."""
    for attribute in raw.attributes:
        if attribute.key == "host.name" and not host:
            host = _text(attribute)
        elif attribute.key == "container.id" and not container:
            container = _text(attribute)
    return host, container


# --------------------------------------------------------------------------- JSON


class _CountingRejects(Rejects):
    """Lenient, silent: the receiver reports rejected spans in its answer, not its log.
    A rejection above the spans (a resource or scope entry of the wrong shape) is the
    whole body's: :class:`OtlpBadData`."""

    def __init__(self) -> None:
        super().__init__("request", lenient=True)
        self.first = ""

    def reject(self, where: str, problem: str, reason: str) -> None:
        if not _SPAN_LABEL.match(where):
            raise OtlpBadData(f"the body is not an ExportTraceServiceRequest: {where}: {problem}")
        self.counts[reason] += 1
        self.first = self.first or f"{where}: {problem}"


def _decode_json(body: bytes) -> Decoded:
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise OtlpBadData(f"the body is not OTLP/JSON: {exc}") from None
    if not isinstance(document, dict):
        raise OtlpBadData("the body is not an ExportTraceServiceRequest (a JSON object)")
    if document.get("resourceSpans") is None:  # absent or null: an empty request
        document["resourceSpans"] = []
    if not isinstance(document["resourceSpans"], list):
        raise OtlpBadData("the body is not an ExportTraceServiceRequest (resourceSpans[])")
    rejects = _CountingRejects()
    spans: list[Span] = []
    for label, span in parse_otlp(iter([("", document)]), rejects):
        problem = span_problem(span) or _time_problem(span)
        if problem:
            rejects.reject(label, problem, "invalid-span")
        else:
            spans.append(span)
    return Decoded(WireSpans.of(spans), rejects.total, rejects.first)


def _time_problem(span: Span) -> str | None:
    """JSON's integers have no bound; the wire's times are signed 64-bit µs."""
    if not -_MAX_US <= span.start_us <= _MAX_US or not -_MAX_US <= span.end_us <= _MAX_US:
        return f"span {span.span_id}: its times do not fit in 64 bits of microseconds"
    return None


__all__ = ["Decoded", "Encoding", "OtlpBadData", "decode_request"]
