"""The testbed's latency-critical application: small instrumented WSGI services.

``python -m yarn_adapt.testbed.services NAME --port P --host NODE --redis URL ...``
serves one service with waitress. Every request is a SERVER span (the tracing
package's WSGI middleware) sent through the Redis exporter, with ``host`` = the YARN
node the service stands on; calls to ``--downstream`` services go through an
instrumented ``requests`` session, one after the other, so they are CLIENT spans
on the same trace and on its critical path. ``--work N`` is the CPU a request costs
(N iterations of a small arithmetic loop: fixed work, so contention shows as time).
With ``--stats PATH`` every request also appends ``[start, cpu_ms, self_ms]`` to
PATH (one JSON array a line): when its own work began (epoch seconds), the CPU time
the handling thread spent on it (``time.thread_time``: contention-free, the
service time) and the wall time of that work (queueing for the interpreter and the
CPU, and interference, included; downstream calls excluded). The testbed reads them
per window (:func:`yarn_adapt.testbed.results.service_figures`).

The application (:data:`LAYOUT`): ``frontend`` has two replicas, one per node; each
calls ``inventory`` (light, node 1) and then ``pricing`` (CPU-heavy, node 0).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import requests
import waitress

from tracing.exporter import ExporterConfig, RedisStreamExporter
from tracing.redisconn import Keys, RedisConfig, make_client
from tracing.requests_hook import TracingAdapter
from tracing.tracer import Tracer
from tracing.wsgi import StartResponse, TracingMiddleware


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    node: int  # which of the two nodes (cpusets) it runs on
    work: int  # loop iterations of CPU per request
    downstream: tuple[str, ...] = ()  # names of the services it calls, in order


LAYOUT: tuple[ServiceSpec, ...] = (
    ServiceSpec("pricing", 0, 40_000),
    ServiceSpec("inventory", 1, 4_000),
    ServiceSpec("frontend", 0, 2_000, ("inventory", "pricing")),
    ServiceSpec("frontend", 1, 2_000, ("inventory", "pricing")),
)


def burn(iterations: int) -> int:
    total = 0
    for value in range(iterations):
        total += value * value % 7
    return total


class RequestStats:
    """Per request: ``[start epoch s, thread CPU ms, wall ms]`` of the service's own
    work, one JSON line each, written whole under a lock (line-buffered)."""

    def __init__(self, stream: IO[str] | None) -> None:
        self.stream = stream
        self.lock = threading.Lock()

    def measured(self, work: int) -> int:
        started, wall, cpu = time.time(), time.perf_counter(), time.thread_time()
        checksum = burn(work)
        cpu_ms = (time.thread_time() - cpu) * 1000.0
        wall_ms = (time.perf_counter() - wall) * 1000.0
        if self.stream is not None:
            line = json.dumps([round(started, 4), round(cpu_ms, 3), round(wall_ms, 3)])
            with self.lock:
                self.stream.write(line + "\n")
        return checksum


class Service:
    def __init__(
        self,
        spec_work: int,
        downstream: Sequence[str],
        session: requests.Session,
        stats: RequestStats | None = None,
    ) -> None:
        self.work = spec_work
        self.downstream = list(downstream)
        self.session = session
        self.stats = stats or RequestStats(None)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        checksum = self.stats.measured(self.work)
        for url in self.downstream:
            reply = self.session.get(url, timeout=30)
            if reply.status_code != 200:
                start_response("502 Bad Gateway", [("Content-Type", "text/plain")])
                return [b"downstream failed\n"]
        body = json.dumps({"ok": True, "checksum": checksum}).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m yarn_adapt.testbed.services")
    parser.add_argument("name")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", required=True, help="the YARN node id spans name")
    parser.add_argument("--redis", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--work", type=int, default=1000)
    parser.add_argument("--downstream", action="append", default=[])
    parser.add_argument("--threads", type=int, default=6)
    parser.add_argument("--stats", type=Path, help="per-request CPU and wall time (JSONL)")
    args = parser.parse_args(argv)
    config = RedisConfig(url=args.redis, prefix=args.prefix)
    exporter = RedisStreamExporter(
        make_client(config), Keys(args.prefix).stream, ExporterConfig(flush_interval_s=0.2)
    )
    tracer = Tracer(args.name, exporter, host=args.host)
    session = requests.Session()
    session.mount("http://", TracingAdapter(tracer, pool_maxsize=32))
    stream = args.stats.open("a", buffering=1) if args.stats is not None else None
    stats = RequestStats(stream)
    app = TracingMiddleware(Service(args.work, args.downstream, session, stats), tracer)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        waitress.serve(
            app, host="127.0.0.1", port=args.port, threads=args.threads, _quiet=True,
            connection_limit=200, channel_timeout=60,
        )  # fmt: skip
    finally:
        exporter.flush(timeout_s=2.0)
        if stream is not None:
            stream.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
