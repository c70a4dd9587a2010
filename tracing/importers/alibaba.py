"""Alibaba cluster-trace-microservices call graphs (CSV with a header line).

- v2021 (``MSCallGraph``): ``traceid, timestamp, rpcid, um, rpctype, dm, interface, rt``
  in any order, possibly after an unnamed index column.
- v2022 (``CallGraph``): ``timestamp, traceid, service, rpc_id, um, uminstanceid,
  rpctype, interface, dm, dminstanceid, rt``.

A row is one side of one call (rpc id ``0.1.2`` is made by the callee of ``0.1``):
``timestamp`` is when it started (ms), ``rt`` its response time (ms), positive when
recorded by the caller (UM), negative when recorded by the callee (DM). Mapping:

- both sides recorded: a CLIENT span of the UM and, inside it, a SERVER span of the DM;
- one side recorded: one span for the DM, the microservice that served the request
  (SERVER; for ``mq`` a CONSUMER that follows from its parent, as a consumed message
  does not block the producer);
- a call's parent is the innermost span of the nearest recorded ancestor rpc id; a call
  without one is top-level (the trace then gets a virtual root, see tracing.forest);
- span ids are derived from (trace, rpc id, side); trace ids that are not hex are
  hashed (``yarn-adapt trace critical-path`` accepts the original id);
- identical rows (the v2022 files repeat many) count once; two different rows for the
  same side of the same call are a duplicate span;
- names the trace marks unknown (``(?)``, ``UNKNOWN``, ``UNAVAILABLE``, empty, NaN)
  become ``unknown``. The traces carry no node names, so node risk stays empty.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass

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
    callee_side: bool


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
                rejects.counts["identical-row"] += 1
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
        callee_side=rt < 0,
    )


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
    calls: dict[tuple[str, str], dict[bool, _Row]] = {}
    for row in rows:
        sides = calls.setdefault((row.trace, row.rpc_id), {})
        if row.callee_side in sides:
            side = "callee" if row.callee_side else "caller"
            rejects.reject(
                row.where,
                f"duplicate span: a second {side} row for rpc id {row.rpc_id} of trace "
                f"{row.trace} (first at {sides[row.callee_side].where})",
                "duplicate-span",
            )
            continue
        sides[row.callee_side] = row
    innermost: dict[tuple[str, str], str] = {}
    for (trace, rpc_id), sides in calls.items():
        innermost[(trace, rpc_id)] = derived_span_id(trace, rpc_id, "s" if True in sides else "c")
    for (trace, rpc_id), sides in calls.items():
        parent = _parent(trace, rpc_id, innermost)
        yield from _call_spans(trace, rpc_id, sides, parent)


def _parent(trace: str, rpc_id: str, innermost: dict[tuple[str, str], str]) -> str | None:
    parts = rpc_id.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        found = innermost.get((trace, ".".join(parts[:cut])))
        if found:
            return found
    return None


def _call_spans(
    trace: str, rpc_id: str, sides: dict[bool, _Row], parent: str | None
) -> Iterator[tuple[str, Span]]:
    trace_id = external_trace_id(trace)
    caller, callee = sides.get(False), sides.get(True)
    message = (callee or caller or _never()).rpc_type == "mq"
    if caller is not None and callee is not None:
        client_id = derived_span_id(trace, rpc_id, "c")
        yield (
            caller.where,
            _span(
                trace_id,
                client_id,
                parent,
                caller,
                caller.um,
                caller.um_instance,
                SpanKind.PRODUCER if message else SpanKind.CLIENT,
                False,
            ),
        )
        yield (
            callee.where,
            _span(
                trace_id,
                derived_span_id(trace, rpc_id, "s"),
                client_id,
                callee,
                callee.dm,
                callee.dm_instance,
                SpanKind.CONSUMER if message else SpanKind.SERVER,
                message,
            ),
        )
        return
    row = callee or caller or _never()
    side = "s" if callee is not None else "c"
    yield (
        row.where,
        _span(
            trace_id,
            derived_span_id(trace, rpc_id, side),
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


def _never() -> _Row:
    raise AssertionError("a call has at least one row")
