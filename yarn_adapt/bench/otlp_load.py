"""The OTLP/HTTP path of ``bench trace-risk``: the bench's traces, as exporters would
send them, through the receiver, the span stream and the ingest worker into the store.

The service's pieces, run as ``python -m tracing ingest --otlp`` runs them: the
receiver on 127.0.0.1 in processes of its own (:class:`tracing.receiver_process.ReceiverGroup`)
and an :class:`~tracing.ingest.IngestWorker` polling in a thread of this process, each
with a Redis client of its own. The receiver's rate limit is off (its default 200,000
spans/s would cap the figure); every other setting is its default.

What is sent: each resource (service, host, container) batches its spans as the
OpenTelemetry SDK's ``BatchSpanProcessor`` does (``batch_spans``, 512 by default; what
is left at the end goes out last), one ``ExportTraceServiceRequest`` per batch, binary
protobuf, gzip (level 9, as the Python SDK's exporter compresses). The bodies are built
before the clock starts: encoding is the services' cost, not the receiver's.
Traces whose times are relative to their file's origin are moved to epoch time (OTLP
has no time before 1970).

How: ``clients`` threads, each holding one keep-alive connection (``http.client``: the
same bytes on the wire as an SDK exporter, at about a fifth of ``requests``' CPU, which
here would be taken from the receiver: the exporters stand for other machines), take
the requests in turn; a 429 or 503 is retried after its ``Retry-After`` as exporters do
(``otlp_retries``). The clients run in a process of their own, as exporters run in
their services' processes: in this one they would take the interpreter's lock from the
worker for every request they send and read. The clock runs from the first request to
the moment the worker has stored every span (``otlp_s``, ``otlp_spans_per_s``);
``otlp_receive_spans_per_s`` stops at the last answer (receiver -> stream: the
counterpart of the exporter's ``export_spans_per_s``). ``otlp_cpu_s`` is the receiver's
processes' and this one's (the worker's), ``otlp_client_cpu_s`` the clients'.

A run is repeated ``repeats`` times (3) on a fresh receiver, worker and key prefix: the
figures are the median run's, with ``otlp_worst_spans_per_s`` and every run's rate
(``otlp_runs_spans_per_s``) beside them, since on a shared 2-core machine one run in
several loses a third of its rate to its neighbours.
"""

from __future__ import annotations

import gzip
import http.client
import math
import multiprocessing
import os
import statistics
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    InstrumentationScope,
    KeyValue,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as ProtoStatus

from tracing.ingest import IngestConfig, IngestWorker
from tracing.model import Span, SpanKind, Status
from tracing.receiver import ReceiverConfig
from tracing.receiver_process import RECEIVER_PROCESSES, ReceiverGroup
from tracing.redisconn import RedisConfig, make_client
from tracing.store import StoreLimits, TraceStore

SDK_BATCH_SPANS = 512  # BatchSpanProcessor's max_export_batch_size
RETRY_ATTEMPTS = 5
HEADERS = {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}
_OTLP_KIND = {
    SpanKind.INTERNAL: ProtoSpan.SPAN_KIND_INTERNAL,
    SpanKind.SERVER: ProtoSpan.SPAN_KIND_SERVER,
    SpanKind.CLIENT: ProtoSpan.SPAN_KIND_CLIENT,
    SpanKind.PRODUCER: ProtoSpan.SPAN_KIND_PRODUCER,
    SpanKind.CONSUMER: ProtoSpan.SPAN_KIND_CONSUMER,
}
_OTLP_STATUS = {
    Status.OK: ProtoStatus.STATUS_CODE_UNSET,
    Status.ERROR: ProtoStatus.STATUS_CODE_ERROR,
}
_EPOCH_FLOOR_US = 10**15  # 2001-09-09: earlier starts are times relative to a file's origin
_DAY_US = 86_400 * 10**6


@dataclass(frozen=True, kw_only=True)
class OtlpLoad:
    clients: int = 4
    batch_spans: int = SDK_BATCH_SPANS
    quiet_s: float = 0.0  # the worker's; the service's 5 s would only add a wait at the end
    processes: int = RECEIVER_PROCESSES  # the receiver's, as the service runs it
    repeats: int = 3  # whole runs; the figures are the median run's, the worst beside

    def __post_init__(self) -> None:
        counts = (self.clients, self.batch_spans, self.processes, self.repeats)
        if min(counts) < 1 or self.quiet_s < 0:
            raise ValueError(
                "otlp_clients, otlp_batch_spans, otlp_processes and otlp_repeats >= 1,"
                " otlp_quiet_s >= 0"
            )


@dataclass(frozen=True)
class OtlpRequests:
    """Gzipped request bodies and the spans they carry."""

    bodies: tuple[bytes, ...]
    spans: int


# --------------------------------------------------------------------------- bodies


def otlp_requests(traces: Iterable[Sequence[Span]], batch_spans: int) -> OtlpRequests:
    """``traces`` as the requests each resource's exporter would send, in sending order."""
    relative_base_us = time.time_ns() // 1000 - _DAY_US
    batches: dict[tuple[str, str, str], list[ProtoSpan]] = {}
    bodies: list[bytes] = []
    count = 0
    for trace in traces:
        shift = relative_base_us if min(s.start_us for s in trace) < _EPOCH_FLOOR_US else 0
        for span in trace:
            resource = (span.service, span.host, span.container)
            batch = batches.setdefault(resource, [])
            batch.append(_proto_span(span, shift))
            if len(batch) == batch_spans:
                bodies.append(_body(resource, batch))
                batch.clear()
        count += len(trace)
    bodies += [_body(resource, batch) for resource, batch in batches.items() if batch]
    return OtlpRequests(tuple(bodies), count)


def _proto_span(span: Span, shift_us: int) -> ProtoSpan:
    proto = ProtoSpan(
        trace_id=bytes.fromhex(span.trace_id),
        span_id=bytes.fromhex(span.span_id),
        name=span.operation,
        kind=_OTLP_KIND[span.kind],
        start_time_unix_nano=(span.start_us + shift_us) * 1000,
        end_time_unix_nano=(span.end_us + shift_us) * 1000,
        status=ProtoStatus(code=_OTLP_STATUS[span.status]),
    )
    if span.parent_id is not None and span.follows_from:  # OTLP: a root linked to it
        proto.links.add(trace_id=proto.trace_id, span_id=bytes.fromhex(span.parent_id))
    elif span.parent_id is not None:
        proto.parent_span_id = bytes.fromhex(span.parent_id)
    for link in span.links:
        proto.links.add(trace_id=bytes.fromhex(link.trace_id), span_id=bytes.fromhex(link.span_id))
    return proto


def _body(resource: tuple[str, str, str], spans: list[ProtoSpan]) -> bytes:
    service, host, container = resource
    named = (("service.name", service), ("host.name", host), ("container.id", container))
    attributes = [KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in named if v]
    scope = ScopeSpans(scope=InstrumentationScope(name="yarn-adapt.bench"), spans=spans)
    resource_spans = ResourceSpans(resource=Resource(attributes=attributes), scope_spans=[scope])
    request = ExportTraceServiceRequest(resource_spans=[resource_spans])
    return gzip.compress(request.SerializeToString())


# --------------------------------------------------------------------------- clients


@dataclass
class _Sent:
    """What the clients did, filled in by their threads."""

    latencies_s: list[float] = field(default_factory=list)
    retries: int = 0
    client_cpu_s: float = 0.0
    last_answer: float = 0.0  # perf_counter (CLOCK_MONOTONIC: one clock for every process)
    failure: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Clients:
    """``count`` threads posting ``bodies`` to ``url`` once ``go`` is set."""

    def __init__(self, url: str, bodies: Sequence[bytes], count: int) -> None:
        self.url = url
        self.next: Iterator[bytes] = iter(bodies)
        self.take = threading.Lock()
        self.go = threading.Event()
        self.sent = _Sent()
        self.threads = [
            threading.Thread(target=self._run, name=f"otlp-client-{n}", daemon=True)
            for n in range(count)
        ]
        for thread in self.threads:
            thread.start()

    def done(self) -> bool:
        return not any(t.is_alive() for t in self.threads)

    def join(self, timeout_s: float) -> None:
        for thread in self.threads:
            thread.join(timeout_s)

    def _run(self) -> None:
        address = urlsplit(self.url)
        connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=60)
        self.go.wait()
        cpu = time.thread_time()
        try:
            while (body := self._take()) is not None:
                self._post(connection, address.path, body)
        except Exception as exc:  # reported by the bench: a failed run must not report
            with self.sent.lock:
                self.sent.failure = self.sent.failure or f"{type(exc).__name__}: {exc}"
        finally:
            connection.close()
        with self.sent.lock:
            self.sent.client_cpu_s += time.thread_time() - cpu

    def _take(self) -> bytes | None:
        with self.take:
            if self.sent.failure:
                return None
            return next(self.next, None)

    def _post(self, connection: http.client.HTTPConnection, path: str, body: bytes) -> None:
        for _ in range(RETRY_ATTEMPTS):
            began = time.perf_counter()
            connection.request("POST", path, body=body, headers=HEADERS)
            answer = connection.getresponse()
            answer.read()
            ended = time.perf_counter()
            if answer.status == 200:
                with self.sent.lock:
                    self.sent.latencies_s.append(ended - began)
                    self.sent.last_answer = max(self.sent.last_answer, ended)
                return
            if answer.status not in (429, 503):
                raise RuntimeError(f"the receiver answered {answer.status}")
            with self.sent.lock:
                self.sent.retries += 1
            time.sleep(float(answer.getheader("Retry-After", "1")))
        raise RuntimeError(f"the receiver refused a request {RETRY_ATTEMPTS} times")


def _client_process(
    url: str, bodies: Sequence[bytes], count: int, go: Any, answers: Connection
) -> None:
    """The clients' own process: says it is ready once every client waits, posts every
    body once ``go`` is set, and sends back what it saw (:meth:`_ClientProcess.result`)."""
    clients = _Clients(url, bodies, count)
    answers.send("ready")
    go.wait()
    clients.go.set()
    clients.join(24 * 3600.0)
    sent = clients.sent
    answers.send(
        (sent.latencies_s, sent.retries, sent.client_cpu_s, sent.last_answer, sent.failure)
    )
    answers.close()


class _ClientProcess:
    """:class:`_Clients` in a process of their own (spawned: this process has threads),
    ready to go when built."""

    def __init__(self, url: str, bodies: Sequence[bytes], count: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.go = context.Event()
        self.answers, child_end = context.Pipe(duplex=False)
        self.process = context.Process(
            target=_client_process,
            args=(url, bodies, count, self.go, child_end),
            name="otlp-clients",
            daemon=True,
        )
        self.process.start()
        child_end.close()
        self.sent: _Sent | None = None
        if not self.answers.poll(120) or self.answers.recv() != "ready":
            self.stop()
            raise RuntimeError("bench trace-risk: the OTLP clients' process did not start")

    def start(self) -> None:
        self.go.set()

    def result(self) -> _Sent | None:
        """What the clients saw, once they all ended (None before); a process that
        ended without saying is a failure."""
        if self.sent is not None:
            return self.sent
        if self.answers.poll():
            latencies, retries, cpu_s, last_answer, failure = self.answers.recv()
            self.sent = _Sent(latencies, retries, cpu_s, last_answer, failure)
        elif not self.process.is_alive():
            self.sent = _Sent(failure=f"the clients' process ended {self.process.exitcode}")
        return self.sent

    def wait(self, timeout_s: float) -> _Sent:
        if self.result() is None:
            self.answers.poll(timeout_s)
        sent = self.result()
        return sent if sent is not None else _Sent(failure=f"no answer in {timeout_s:g} s")

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(10)
        self.answers.close()


# --------------------------------------------------------------------------- the run


class _Service:
    """The receiver (in its own process) and the ingest worker under ``prefix`` of
    ``url``, as the service runs them; ``stop`` ends both and deletes the keys."""

    def __init__(self, url: str, prefix: str, load: OtlpLoad) -> None:
        self.config = RedisConfig(url=url, prefix=prefix)
        self.store = TraceStore(
            make_client(self.config),
            self.config,
            StoreLimits(retention_s=3600, memory_budget_bytes=1 << 30),
        )
        self.worker = IngestWorker(self.store, IngestConfig(quiet_s=load.quiet_s))
        self.worker.ensure_group()
        self.receiver = ReceiverGroup(
            self.config,
            self.store.keys.stream,
            ReceiverConfig(host="127.0.0.1", port=0, max_spans_per_s=0.0),
            load.processes,
        ).start()
        self.stopping = threading.Event()
        self.thread = threading.Thread(
            target=self.worker.run, args=(self.stopping,), name="otlp-ingest", daemon=True
        )
        self.thread.start()

    def cpu_s(self) -> float:
        """CPU seconds of this process (the worker) and the receiver's processes."""
        return time.process_time() + sum(map(process_cpu_s, self.receiver.pids))

    def stop(self) -> None:
        self.receiver.stop()
        self.stopping.set()
        self.thread.join(60)
        client = self.store.client
        for key in client.scan_iter(f"{self.config.prefix}:*"):
            client.delete(key)
        client.close()


def measure_otlp(
    url: str, prefix: str, traces: Iterable[Sequence[Span]], load: OtlpLoad
) -> dict[str, Any]:
    """Figures of ``load.repeats`` runs (see the module docstring), keys starting
    ``otlp_``: the median run's (by ``otlp_spans_per_s``), with every run's rate and
    the worst beside it."""
    built = otlp_requests(traces, load.batch_spans)
    runs = [_measure_once(url, f"{prefix}-{n}", built, load) for n in range(load.repeats)]
    runs.sort(key=lambda figures: figures["otlp_spans_per_s"])
    rates = [figures["otlp_spans_per_s"] for figures in runs]
    return {
        **runs[(len(runs) - 1) // 2],
        "otlp_worst_spans_per_s": rates[0],
        "otlp_runs_spans_per_s": rates,
        "otlp_repeats": load.repeats,
    }


def _measure_once(url: str, prefix: str, built: OtlpRequests, load: OtlpLoad) -> dict[str, Any]:
    service = _Service(url, prefix, load)
    try:
        run = _timed_run(service, built, load)
        stored_spans = service.store.load().columns.n_spans
        rejected = service.receiver.stats().spans_rejected
    finally:
        service.stop()
    return _figures(built, run, (stored_spans, rejected), load)


@dataclass(frozen=True)
class _Run:
    sent: _Sent
    elapsed_s: float  # first request -> every span stored
    receive_s: float  # first request -> last answer
    service_cpu_s: float  # the receiver's process's and the worker's
    redis_cpu_s: float


def _timed_run(service: _Service, built: OtlpRequests, load: OtlpLoad) -> _Run:
    clients = _ClientProcess(service.receiver.url, built.bodies, load.clients)
    try:
        redis_before, cpu = redis_cpu_s(service.store.client), service.cpu_s()
        began = time.perf_counter()
        clients.start()
        stored_at = _wait_stored(service, built.spans, clients)
        service_cpu_s = service.cpu_s() - cpu
        redis_used_s = redis_cpu_s(service.store.client) - redis_before
        sent = clients.wait(60)
    finally:
        clients.stop()
    if sent.failure:
        raise RuntimeError(f"bench trace-risk: an OTLP client failed: {sent.failure}")
    return _Run(
        sent,
        elapsed_s=stored_at - began,
        receive_s=sent.last_answer - began,
        service_cpu_s=service_cpu_s,
        redis_cpu_s=redis_used_s,
    )


def _wait_stored(service: _Service, spans: int, clients: _ClientProcess) -> float:
    """When the worker had stored ``spans`` spans, less those the receiver rejected or
    the worker found twice (perf_counter), or when waiting became pointless (a client
    failed, the worker died, the deadline passed)."""
    deadline = time.perf_counter() + max(60.0, spans / 1000)
    counters, rejected, asked = service.worker.counters, 0, 0.0
    while counters.spans_stored + counters.duplicates + rejected < spans:
        now = time.perf_counter()
        if now > asked + 0.1:  # a round trip to the receiver's process
            rejected, asked = service.receiver.stats().spans_rejected, now
        sent = clients.result()
        failed = sent is not None and bool(sent.failure)
        if now > deadline or failed or not service.thread.is_alive():
            return now
        time.sleep(0.002)
    return time.perf_counter()


def _figures(
    built: OtlpRequests, run: _Run, stored_rejected: tuple[int, int], load: OtlpLoad
) -> dict[str, Any]:
    latencies = sorted(run.sent.latencies_s)
    return {
        "otlp_spans_sent": built.spans,
        "otlp_spans_stored": stored_rejected[0],
        "otlp_spans_rejected": stored_rejected[1],
        "otlp_spans_per_s": round(built.spans / run.elapsed_s),
        "otlp_s": round(run.elapsed_s, 3),
        "otlp_receive_spans_per_s": round(built.spans / run.receive_s),
        "otlp_requests": len(built.bodies),
        "otlp_request_bytes": round(sum(map(len, built.bodies)) / len(built.bodies)),
        "otlp_request_mean_s": round(statistics.fmean(latencies), 4),
        "otlp_request_p50_s": round(statistics.median(latencies), 4),
        "otlp_request_p99_s": round(_nearest_rank(latencies, 0.99), 4),
        "otlp_request_worst_s": round(latencies[-1], 4),
        "otlp_retries": run.sent.retries,
        "otlp_cpu_s": round(run.service_cpu_s, 3),
        "otlp_client_cpu_s": round(run.sent.client_cpu_s, 3),
        "otlp_redis_cpu_s": round(run.redis_cpu_s, 3),
        "otlp_spans_per_cpu_s": round(built.spans / (run.service_cpu_s + run.redis_cpu_s)),
        "otlp_clients": load.clients,
        "otlp_batch_spans": load.batch_spans,
        "otlp_quiet_s": load.quiet_s,
        "otlp_processes": load.processes,
    }


def _nearest_rank(ordered: Sequence[float], quantile: float) -> float:
    return ordered[max(0, math.ceil(quantile * len(ordered)) - 1)]


def process_cpu_s(pid: int) -> float:
    """CPU seconds process ``pid`` has used (user and system, /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def redis_cpu_s(client: redis.Redis) -> float:
    """CPU seconds the redis-server process has used (INFO cpu)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
