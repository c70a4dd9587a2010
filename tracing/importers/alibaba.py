"""Alibaba cluster-trace-microservices call graphs (CSV with a header line).

- v2021 (``MSCallGraph``): ``traceid, timestamp, rpcid, um, rpctype, dm, interface, rt``
  in any order, possibly after an unnamed index column.
- v2022 (``CallGraph``): ``timestamp, traceid, service, rpc_id, um, uminstanceid,
  rpctype, interface, dm, dminstanceid, rt``.

A row is one view of one call (rpc id ``0.1.2`` is made by the callee of ``0.1``):
``timestamp`` is when it started (ms), ``rt`` its response time (ms). The format's own
rules (the datasets' READMEs) decide which rows are the same call:

- a call between two services (``rpc``, ``http``, anything but the three below) is
  recorded twice under one rpc id, once by the caller (UM) and once by the callee (DM).
  In v2021 the caller's rt is positive and the callee's negative; an rt of 0 is either
  (``-0`` prints as ``0``). In v2022 both are positive: the caller's view starts first
  (and lasts longer). Rows of one rpc id, one rpc type and one DM are paired into calls
  (k-th caller view with k-th callee view in time order, rows of unknown side filling
  the smaller side): a pair is merged into one call (counted ``caller+callee``);
- ``mc``, ``db`` and ``mq`` calls (memcached, a database, a message queue) are recorded
  once: every such row is a call of its own, even when several share an rpc id;
- a DM the caller did not know (``(?)``) is the one DM the other rows of that rpc id
  and type name;
- identical rows (the v2022 files repeat many) count once (``identical-row``).

Mapping:

- a merged call: a CLIENT span of the UM and, inside it, a SERVER span of the DM;
- one view only: one span for the DM, the microservice that served the request
  (SERVER; for ``mq`` a CONSUMER that follows from its parent, as a consumed message
  does not block the producer);
- a call's parent is the innermost span of a call at the nearest recorded ancestor rpc
  id -- of the calls there, one whose DM is this call's UM (the format's rule) -- and a
  call without one is top-level (the trace then gets a virtual root, see tracing.forest);
- span ids are derived from (trace, rpc id, side, the call's index within its rpc id);
  trace ids that are not hex are hashed (``yarn-adapt trace critical-path`` accepts the
  original id);
- names the trace marks unknown (``(?)``, ``UNKNOWN``, ``UNAVAILABLE``, empty, NaN)
  become ``unknown``. The traces carry no node names, so node risk stays empty.

What remains an error (skipped with ``lenient``): a row with too few fields, an rpc id
that is not dotted numbers, an empty trace id, a timestamp or rt that is not a number,
text that is not UTF-8.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, replace
from enum import Enum

from tracing.importers.common import (
    RecordError,
    Rejects,
    clean,
    derived_span_id,
    external_trace_id,
)
from tracing.model import Span, SpanKind

COLUMNS_2021 = ("traceid", "timestamp", "rpcid", "um", "rpctype", "dm", "interface", "rt")
COLUMNS_2022 = (
    "timestamp",
    "traceid",
    "service",
    "rpc_id",
    "um",
    "uminstanceid",
    "rpctype",
    "interface",
    "dm",
    "dminstanceid",
    "rt",
)
UNKNOWN_NAMES = frozenset({"", "nan", "(?)", "unknown", "unavailable", "none", "null"})
_RPC_ID = re.compile(r"^\d+(\.\d+)*$")
ONE_VIEW_TYPES = frozenset({"mc", "db", "mq"})  # recorded once, by the caller


@dataclass(frozen=True)
class _Row:
    where: str
    trace: str
    timestamp_us: int
    rpc_id: str
    um: str
    um_instance: str
    rpc_type: str
    interface: str
    dm: str
    dm_instance: str
    rt_us: int
    side: Side

    @property
    def end_us(self) -> int:
        return self.timestamp_us + self.rt_us


class Side(Enum):
    CALLER = "caller"
    CALLEE = "callee"
    EITHER = "either"


@dataclass(frozen=True)
class _Call:
    """One call: its caller's view, its callee's view, or both (merged)."""

    trace: str
    rpc_id: str
    index: int  # among the calls of its rpc id
    caller: _Row | None
    callee: _Row | None

    @property
    def first(self) -> _Row:
        view = self.callee or self.caller
        assert view is not None, "a call has at least one view"
        return view

    @property
    def dm(self) -> str:
        return self.first.dm

    @property
    def um(self) -> str:
        return (self.caller or self.first).um

    @property
    def start_us(self) -> int:
        return (self.caller or self.first).timestamp_us

    def span_id(self, side: str) -> str:
        """``side``: "c" (the caller's CLIENT span) or "s" (the DM's span)."""
        extra = (str(self.index),) if self.index else ()
        return derived_span_id(self.trace, self.rpc_id, side, *extra)

    @property
    def innermost(self) -> str:
        """The span a call made inside this one hangs from."""
        return self.span_id("s" if self.callee is not None or self.caller is None else "c")


def schema_of(header: list[str]) -> str | None:
    names = {c.strip().lower() for c in header if c.strip()}
    if names >= set(COLUMNS_2022):
        return "alibaba-2022"
    if names >= set(COLUMNS_2021):
        return "alibaba-2021"
    return None


def parse_alibaba(
    source: str, text: str, rejects: Rejects, schema: str | None = None
) -> Iterator[tuple[str, Span]]:
    lines = text.lstrip("\ufeff").splitlines()
    if not lines:
        raise RecordError("the file is empty", "schema")
    header = next(csv.reader([lines[0]]))
    found = schema_of(header)
    if found is None or (schema is not None and found != schema):
        wanted = schema or "alibaba-2021 or alibaba-2022"
        raise RecordError(f"line 1: the header is not an {wanted} call-graph header", "schema")
    columns = {c.strip().lower(): i for i, c in enumerate(header) if c.strip()}
    rows = _rows(lines, columns, found, rejects)
    yield from _spans(rows, rejects)


def _rows(lines: list[str], columns: dict[str, int], schema: str, rejects: Rejects) -> list[_Row]:
    rows: list[_Row] = []
    seen: set[tuple[str, ...]] = set()
    for number, fields in enumerate(csv.reader(lines[1:]), start=2):
        if not fields or all(not f.strip() for f in fields):
            continue
        where = f"line {number}"
        try:
            if len(fields) < len(columns):
                raise RecordError(f"{len(fields)} fields, the header names {len(columns)}")
            identity = tuple(fields[i] for i in columns.values())
            if identity in seen:  # an identical row again: counts once
                rejects.merged["identical-row"] += 1
                continue
            seen.add(identity)
            rows.append(_row(where, fields, columns, schema))
        except RecordError as exc:
            rejects.reject(where, str(exc), exc.reason)
    return rows


def _row(where: str, fields: list[str], columns: dict[str, int], schema: str) -> _Row:
    def get(name: str) -> str:
        return clean(fields[columns[name]].strip(), name)

    rpc_id = get("rpc_id" if schema == "alibaba-2022" else "rpcid")
    if not _RPC_ID.match(rpc_id):
        raise RecordError(f"rpc id {rpc_id!r:.30} is not dotted numbers")
    trace = get("traceid")
    if not trace:
        raise RecordError("the trace id is empty")
    rt = _number(get("rt"), "rt")
    return _Row(
        where=where,
        trace=trace,
        timestamp_us=round(_number(get("timestamp"), "timestamp") * 1000),
        rpc_id=rpc_id,
        um=_name(get("um")),
        um_instance=_name(get("uminstanceid")) if "uminstanceid" in columns else "",
        rpc_type=get("rpctype").lower() or "rpc",
        interface=get("interface"),
        dm=_name(get("dm")),
        dm_instance=_name(get("dminstanceid")) if "dminstanceid" in columns else "",
        rt_us=abs(round(rt * 1000)),
        side=_side(rt, schema),
    )


def _side(rt: float, schema: str) -> Side:
    """Who recorded the row, as far as its rt tells: negative is the callee (both
    years); positive the caller in v2021, where the callee's rt is negated; v2022
    records both positive, and 0 is either (the callee's -0)."""
    if rt < 0:
        return Side.CALLEE
    if rt > 0 and schema == "alibaba-2021":
        return Side.CALLER
    return Side.EITHER


def _number(value: str, what: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise RecordError(f"{what} {value!r:.30} is not a number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise RecordError(f"{what} is not a finite number")
    return number


def _name(value: str) -> str:
    return "unknown" if value.lower() in UNKNOWN_NAMES else value


def _spans(rows: list[_Row], rejects: Rejects) -> Iterator[tuple[str, Span]]:
    by_rpc: dict[tuple[str, str], list[_Row]] = defaultdict(list)
    for row in rows:
        by_rpc[(row.trace, row.rpc_id)].append(row)
    calls: dict[tuple[str, str], list[_Call]] = {}
    for (trace, rpc_id), group in by_rpc.items():
        found = calls[(trace, rpc_id)] = _calls_of(trace, rpc_id, group)
        merged = sum(1 for c in found if c.caller is not None and c.callee is not None)
        if merged:
            rejects.merged["caller+callee"] += merged
    for of_rpc in calls.values():
        for call in of_rpc:
            yield from _call_spans(call, _parent(call, calls))


def _calls_of(trace: str, rpc_id: str, rows: list[_Row]) -> list[_Call]:
    """The calls the rows of one rpc id record (module docstring), in time order."""
    known_dms: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        if row.dm != "unknown":
            known_dms[row.rpc_type].add(row.dm)
    groups: dict[tuple[str, str], list[_Row]] = defaultdict(list)
    for row in rows:
        if row.dm == "unknown" and len(known_dms[row.rpc_type]) == 1:
            row = replace(row, dm=next(iter(known_dms[row.rpc_type])))
        groups[(row.rpc_type, row.dm)].append(row)
    views: list[tuple[_Row | None, _Row | None]] = []
    for (rpc_type, _), group in groups.items():
        if rpc_type in ONE_VIEW_TYPES:
            views += [(None, row) for row in group]
        else:
            views += _paired(group)
    views.sort(key=lambda v: _view_start(v))
    return [_Call(trace, rpc_id, i, caller, callee) for i, (caller, callee) in enumerate(views)]


def _paired(rows: list[_Row]) -> list[tuple[_Row | None, _Row | None]]:
    """The caller and callee views of one two-sided call type, paired in time order."""
    callers = [r for r in rows if r.side is Side.CALLER]
    callees = [r for r in rows if r.side is Side.CALLEE]
    for row in sorted((r for r in rows if r.side is Side.EITHER), key=_earliest_longest):
        (callers if len(callers) <= len(callees) else callees).append(row)
    callers.sort(key=_earliest_longest)
    callees.sort(key=_earliest_longest)
    pairs: list[tuple[_Row | None, _Row | None]] = []
    for k in range(max(len(callers), len(callees))):
        caller = callers[k] if k < len(callers) else None
        callee = callees[k] if k < len(callees) else None
        if caller is not None and callee is not None and not _same_um(caller, callee):
            pairs += [(None, caller), (None, callee)]  # two callers: two calls
            continue
        pairs.append((caller, callee) if callee is not None else (None, caller))
    return pairs


def _earliest_longest(row: _Row) -> tuple[int, int]:
    return (row.timestamp_us, -row.rt_us)


def _view_start(view: tuple[_Row | None, _Row | None]) -> tuple[int, int]:
    row = view[0] or view[1]
    assert row is not None
    return _earliest_longest(row)


def _same_um(caller: _Row, callee: _Row) -> bool:
    return "unknown" in (caller.um, callee.um) or caller.um == callee.um


def _parent(call: _Call, calls: dict[tuple[str, str], list[_Call]]) -> str | None:
    """The innermost span of the call at the nearest recorded ancestor rpc id: of the
    calls there, those whose DM is this call's UM first, then the latest to start
    before this one."""
    parts = call.rpc_id.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        found = calls.get((call.trace, ".".join(parts[:cut])))
        if found:
            return _best_parent(call, found).innermost
    return None


def _best_parent(call: _Call, candidates: list[_Call]) -> _Call:
    callers = [c for c in candidates if c.dm == call.um] or candidates
    started = [c for c in callers if c.start_us <= call.start_us]
    return max(started, key=lambda c: c.start_us) if started else callers[0]


def _call_spans(call: _Call, parent: str | None) -> Iterator[tuple[str, Span]]:
    trace_id = external_trace_id(call.trace)
    callee = call.callee
    message = call.first.rpc_type == "mq"
    if call.caller is not None and callee is not None:
        caller = call.caller
        client_id = call.span_id("c")
        client_kind = SpanKind.PRODUCER if message else SpanKind.CLIENT
        yield (
            caller.where,
            _span(
                trace_id, client_id, parent, caller, caller.um, caller.um_instance,
                client_kind, False,
            ),
        )  # fmt: skip
        server_kind = SpanKind.CONSUMER if message else SpanKind.SERVER
        yield (
            callee.where,
            _span(
                trace_id, call.span_id("s"), client_id, callee, callee.dm,
                callee.dm_instance or caller.dm_instance, server_kind, message,
            ),
        )  # fmt: skip
        return
    row = call.first
    yield (
        row.where,
        _span(
            trace_id,
            call.innermost,
            parent,
            row,
            row.dm,
            row.dm_instance,
            SpanKind.CONSUMER if message else SpanKind.SERVER,
            message,
        ),
    )


def _span(
    trace_id: str,
    span_id: str,
    parent: str | None,
    row: _Row,
    service: str,
    container: str,
    kind: SpanKind,
    follows_from: bool,
) -> Span:
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent,
        service=service,
        operation=row.interface if row.interface.lower() not in UNKNOWN_NAMES else row.rpc_type,
        start_us=row.timestamp_us,
        end_us=row.timestamp_us + row.rt_us,
        kind=kind,
        container=container,
        follows_from=follows_from,
    )
