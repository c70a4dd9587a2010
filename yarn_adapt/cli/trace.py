"""``yarn-adapt trace``: import traces, run the ingest worker, show a critical path, the
risk per service and node, and the service topology.

The trace store is the ``[tracing]`` table of ``--config`` (default: built-in defaults,
``redis://127.0.0.1:6379/0``); ``--redis-url`` overrides its URL. The tracing package's
errors become yarn-adapt's here, in one place: bad files and unknown trace ids exit 2,
an unreachable Redis exits 3.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from tracing.analysis import analyse, window_bounds
from tracing.convert import spans_of_trace
from tracing.errors import StoreError, StoreUnavailable, TraceInputError, TraceNotFound
from tracing.graph import critical_path, service_topology
from tracing.importers import FORMATS, load_spans, publish
from tracing.importers.common import external_trace_id
from tracing.ingest import IngestWorker
from tracing.model import CriticalPath, RiskSnapshot
from tracing.redisconn import make_client
from tracing.risk import RiskSettings
from tracing.store import TraceStore
from yarn_adapt.durations import duration
from yarn_adapt.errors import InputError, YarnAdaptError
from yarn_adapt.service.guard.build import redis_config, store_limits
from yarn_adapt.service.ingest import worker_config
from yarn_adapt.service.settings import Settings, TracingSection, load_settings
from yarn_adapt.service.web.words import when


class TraceFileError(InputError):
    """A trace file or record is malformed (file and record named)."""


class TraceUnknown(InputError):
    """No stored trace has that id."""


class TraceStoreUnavailable(YarnAdaptError):
    """The Redis trace store does not answer."""

    exit_code = 3


class TraceStoreFailed(YarnAdaptError):
    """The Redis trace store refused a command."""


@contextlib.contextmanager
def tracing_errors() -> Iterator[None]:
    """The tracing package's error tree mapped onto yarn-adapt's."""
    try:
        yield
    except TraceInputError as exc:
        raise TraceFileError(exc.one_line()) from exc
    except TraceNotFound as exc:
        raise TraceUnknown(exc.one_line()) from exc
    except StoreUnavailable as exc:
        raise TraceStoreUnavailable(exc.one_line()) from exc
    except StoreError as exc:
        raise TraceStoreFailed(exc.one_line()) from exc


class _Context:
    def __init__(self, settings: Settings, redis_url: str | None) -> None:
        self.settings = settings
        self.section: TracingSection = settings.tracing
        self.config = redis_config(settings, redis_url)

    def store(self) -> TraceStore:
        with tracing_errors():
            return TraceStore(make_client(self.config), self.config, store_limits(self.section))

    def worker(self, store: TraceStore) -> IngestWorker:
        return IngestWorker(store, worker_config(self.section))

    def risk_settings(self, alpha: float | None, min_share: float | None) -> RiskSettings:
        try:
            return RiskSettings(
                alpha=self.section.alpha if alpha is None else alpha,
                min_share=self.section.critical_min_share if min_share is None else min_share,
            )
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from exc


pass_context = click.make_pass_decorator(_Context)


@click.group("trace")
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    help="yarn-adapt.toml; its [tracing] table names the trace store.",
)
@click.option("--redis-url", envvar="YARN_ADAPT_REDIS_URL", help="Overrides [tracing] redis_url.")
@click.pass_context
def trace_group(ctx: click.Context, config_path: Path | None, redis_url: str | None) -> None:
    """Request traces (TopoSch): import, ingest, critical paths, risk, topology."""
    settings = load_settings(config_path) if config_path else Settings()
    ctx.obj = _Context(settings, redis_url)


@trace_group.command("import")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="auto", show_default=True)
@click.option("--lenient", is_flag=True, help="Skip and count bad records instead of failing.")
@click.option("--no-ingest", is_flag=True, help="Only write to the span stream.")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def import_command(
    context: _Context, file: Path, fmt: str, lenient: bool, no_ingest: bool, as_json: bool
) -> None:
    """Import FILE (OTLP/JSON, Jaeger JSON, Zipkin v2 JSON, Alibaba call-graph CSV) into
    the trace store; with --lenient, bad records are skipped and counted."""
    with tracing_errors():
        result = load_spans(file, fmt, lenient=lenient)
        store = context.store()
        entries = publish(result.spans, store.client, store.keys.stream)
        stored = None if no_ingest else context.worker(store).drain().traces_stored
    summary = {
        "file": str(file),
        "format": result.format,
        "records": result.records,
        "spans": len(result.spans),
        "traces": result.traces,
        "skipped": dict(result.skipped),
        "stream_entries": entries,
        "traces_stored": stored,
    }
    if as_json:
        click.echo(json.dumps(summary))
        return
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(result.skipped.items())) or "none"
    click.echo(
        f"{file}: {result.format}, {result.records} records -> {len(result.spans)} spans in "
        f"{result.traces} traces; skipped: {skipped}"
    )
    if stored is not None:
        click.echo(f"stored {stored} traces")


@trace_group.command("ingest")
@click.option("--once", is_flag=True, help="Drain the stream, store everything, exit.")
@click.option("--json", "as_json", is_flag=True, help="With --once: counters as JSON.")
@pass_context
def ingest_command(context: _Context, once: bool, as_json: bool) -> None:
    """Run the ingest worker: span batches from the stream into stored traces."""
    with tracing_errors():
        store = context.store()
        worker = context.worker(store)
        if once:
            counters = worker.drain()
            if as_json:
                click.echo(json.dumps(vars(counters)))
            else:
                click.echo(", ".join(f"{name} {value}" for name, value in vars(counters).items()))
            return
        stop = threading.Event()
        try:
            worker.run(stop)
        except KeyboardInterrupt:
            stop.set()
            worker.flush(force=True)


@trace_group.command("critical-path")
@click.argument("trace_id")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def critical_path_command(context: _Context, trace_id: str, as_json: bool) -> None:
    """The chain of spans that bounded TRACE_ID's latency, and each service's self time
    on it. TRACE_ID: 32 hex digits, or the id the source file used."""
    stored_id = external_trace_id(trace_id)
    try:
        with tracing_errors():
            found = context.store().find(stored_id)
    except TraceUnknown as exc:
        raise TraceUnknown(unknown_trace(trace_id, stored_id)) from exc
    spans = spans_of_trace(found.columns, found.names, 0)
    path = critical_path(spans)
    if as_json:
        click.echo(json.dumps(_path_json(path)))
    else:
        click.echo("\n".join(render_path(path)))


def unknown_trace(given: str, stored_id: str) -> str:
    """Why nothing was found, in the id the operator typed (an id that is not hex
    is stored under a hash of it, which means nothing to them)."""
    if stored_id.lstrip("0") == given.strip().lower().lstrip("0"):
        return f"no stored trace has id {given.strip()}"
    return (
        f"no stored trace has id {given.strip()!r} (an id from the source file; a trace id "
        "is 32 hex digits)"
    )


def _path_json(path: CriticalPath) -> dict[str, Any]:
    return {
        "trace_id": path.trace_id,
        "latency_us": path.latency_us,
        "segments": [
            {
                "span_id": s.span_id,
                "service": s.service,
                "operation": s.operation,
                "start_us": s.start_us,
                "end_us": s.end_us,
            }
            for s in path.segments
        ],
        "service_time_us": path.service_time_us(),
        "notes": dict(path.notes),
    }


def render_path(path: CriticalPath) -> list[str]:
    origin = path.segments[0].start_us if path.segments else 0
    lines = [f"trace {path.trace_id}: end-to-end {path.latency_us / 1000:.3f} ms", ""]
    lines += [f"{'from ms':>10} {'to ms':>10} {'self ms':>9}  service  operation  (span)"]
    for segment in path.segments:
        lines.append(
            f"{(segment.start_us - origin) / 1000:10.3f} {(segment.end_us - origin) / 1000:10.3f}"
            f" {segment.duration_us / 1000:9.3f}  {segment.service}  {segment.operation}"
            f"  ({segment.span_id})"
        )
    lines += ["", "self time on the path per service"]
    for service, total in sorted(path.service_time_us().items(), key=lambda kv: -kv[1]):
        share = total / path.latency_us if path.latency_us else 0.0
        lines.append(f"  {service:30} {total / 1000:9.3f} ms  {share:6.1%}")
    notes = ", ".join(f"{k} {v}" for k, v in path.notes.items() if v)
    if notes:
        lines.append(f"notes: {notes}")
    return lines


_SECONDS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*s?\s*$")


def parse_duration(text: str) -> float:
    """Seconds, as every yarn-adapt option takes them: ``60`` or ``60s``."""
    match = _SECONDS.match(text)
    if not match or float(match.group(1)) <= 0:
        raise click.BadParameter(f"{text!r} is not a positive number of seconds like 60 or 60s")
    return float(match.group(1))


def parse_end(text: str) -> int | None:
    """``latest`` (None: the newest stored trace), ``now``, or epoch seconds; µs."""
    if text == "latest":
        return None
    if text == "now":
        return time.time_ns() // 1000
    try:
        return int(float(text) * 1e6)
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected latest, now or epoch seconds") from None


@trace_group.command("risk")
@click.option(
    "--window",
    default=None,
    metavar="SECONDS",
    help="Sliding window; [tracing] window_s.",
)
@click.option("--end", default="latest", show_default=True, help="latest, now or epoch seconds.")
@click.option("--alpha", type=float, help="Eq. 7's alpha; [tracing] alpha.")
@click.option("--min-share", type=float, help="[tracing] critical_min_share.")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def risk_command(
    context: _Context,
    window: str | None,
    end: str,
    alpha: float | None,
    min_share: float | None,
    as_json: bool,
) -> None:
    """Microservice and node risk over a window (TopoSch eqs. 4-8), with the numbers
    that produced each score."""
    window_s = parse_duration(window) if window else context.section.window_s
    settings = context.risk_settings(alpha, min_share)
    with tracing_errors():
        store = context.store()
        start_us, end_us = window_bounds(store, window_s, parse_end(end))
        loaded = store.load(start_us, end_us)
    snapshot = analyse(loaded, settings, start_us, end_us).risk
    if as_json:
        click.echo(json.dumps(snapshot.to_dict()))
    else:
        click.echo("\n".join(render_risk(snapshot)))


def render_risk(snapshot: RiskSnapshot) -> list[str]:
    window = (snapshot.window_end_us - snapshot.window_start_us) / 1e6
    lines = [
        f"window {duration(window)} ending {when(snapshot.window_end_us / 1e6)}: "
        f"{snapshot.traces} traces, {snapshot.spans} spans; alpha {snapshot.alpha}",
        "",
        f"{'service':28} {'requests':>9} {'errors':>7} {'WST ms':>9} {'on CP':>6} "
        f"{'WSP':>6} {'WFP':>7} {'risk':>7}",
    ]
    for s in snapshot.services:
        lines.append(
            f"{s.service:28} {s.requests:9d} {s.errors:7d} {s.wst_us / 1000:9.3f} "
            f"{s.critical_share:6.1%} {s.wsp:6.3f} {s.wfp:7.4f} {s.risk:7.4f}"
        )
        for api in s.apis:
            lines.append(
                f"    {api.api:40.40} v={api.share:5.3f} n={api.requests:<7d} "
                f"geomean {api.geo_mean_us / 1000:.3f} ms"
            )
    lines += ["", f"{'node':20} {'risk':>7} {'raw':>7}  services"]
    for n in snapshot.nodes:
        lines.append(f"{n.node:20} {n.normalized:7.3f} {n.raw:7.4f}  {', '.join(n.services)}")
    if not snapshot.nodes:
        lines.append("(no spans name their node)")
    return lines


@trace_group.command("topology")
@click.option(
    "--window",
    default=None,
    metavar="SECONDS",
    help="Sliding window; [tracing] window_s.",
)
@click.option("--end", default="latest", show_default=True, help="latest, now or epoch seconds.")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def topology_command(context: _Context, window: str | None, end: str, as_json: bool) -> None:
    """The services and who calls whom (call counts, errors, mean latency) over a window."""
    window_s = parse_duration(window) if window else context.section.window_s
    with tracing_errors():
        store = context.store()
        start_us, end_us = window_bounds(store, window_s, parse_end(end))
        loaded = store.load(start_us, end_us)
    graph = service_topology(analyse(loaded, RiskSettings(), start_us, end_us).paths)
    edges = [{"caller": a, "callee": b, **data} for a, b, data in sorted(graph.edges(data=True))]
    if as_json:
        nodes = [{"service": n, **data} for n, data in sorted(graph.nodes(data=True))]
        click.echo(json.dumps({"services": nodes, "calls": edges}))
        return
    for edge in edges:
        click.echo(
            f"{edge['caller']} -> {edge['callee']}: {edge['calls']} calls, "
            f"{edge['errors']} errors, mean {edge['mean_us'] / 1000:.3f} ms"
        )
