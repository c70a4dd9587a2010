"""A PiggyMetrics-like application that produces request traces (for ``bench trace-risk``).

Twelve services, as in TopoSch's evaluation (§6.1): a gateway, four business services
(auth, account, statistics, notification) each with its MongoDB, RabbitMQ, a service
registry and a config server, placed on six nodes (the busy ones with two replicas).
Five request types mix sequential calls, parallel fan-out (the gateway asks account and
statistics at once), a message consumed asynchronously after the response (account ->
RabbitMQ -> notification), and occasional registry / config lookups.

Every call produces a CLIENT span on the caller's node and a SERVER span on the
callee's, each stamped by its own node's clock; node clocks are off by up to
``skew_us`` (so server spans can fall outside their client spans). Server spans fail
with probability ``error_rate``; a failure makes the caller's server span fail half the
time. Everything is drawn from one seeded generator: the same seed, the same traces.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from tracing.model import Span, SpanKind, Status

SERVICES = (
    "gateway",
    "auth-service",
    "account-service",
    "statistics-service",
    "notification-service",
    "auth-mongodb",
    "account-mongodb",
    "statistics-mongodb",
    "notification-mongodb",
    "rabbitmq",
    "registry",
    "config",
)
NODES = tuple(f"node-{i}" for i in range(1, 7))
PLACEMENT: dict[str, tuple[str, ...]] = {
    "gateway": ("node-1", "node-2"),
    "auth-service": ("node-2", "node-3"),
    "account-service": ("node-3", "node-4"),
    "statistics-service": ("node-4", "node-5"),
    "notification-service": ("node-5",),
    "auth-mongodb": ("node-6",),
    "account-mongodb": ("node-6",),
    "statistics-mongodb": ("node-1",),
    "notification-mongodb": ("node-2",),
    "rabbitmq": ("node-3",),
    "registry": ("node-5",),
    "config": ("node-4",),
}
# Median own work per server span (µs); databases are the slow ones, as in §2.3.
WORK_US = {
    "gateway": 300,
    "auth-service": 600,
    "account-service": 900,
    "statistics-service": 1200,
    "notification-service": 700,
    "auth-mongodb": 1500,
    "account-mongodb": 2500,
    "statistics-mongodb": 3500,
    "notification-mongodb": 1800,
    "rabbitmq": 250,
    "registry": 200,
    "config": 300,
}


@dataclass(frozen=True, kw_only=True)
class AppSettings:
    error_rate: float = 0.01
    skew_us: int = 3000
    network_us: int = 250
    window_s: float = 60.0


@dataclass
class _Trace:
    rng: random.Random
    settings: AppSettings
    clock_offset: dict[str, int]
    trace_id: str
    spans: list[Span] = field(default_factory=list)

    def new_id(self) -> str:
        return f"{self.rng.getrandbits(64) | 1:016x}"

    def work(self, service: str) -> int:
        return max(20, int(self.rng.lognormvariate(0, 0.5) * WORK_US[service]))

    def net(self) -> int:
        return max(10, int(self.rng.expovariate(1 / self.settings.network_us)))


Caller = tuple[str, str]  # the calling server span's id and node
Handler = Callable[[_Trace, Caller, int], tuple[int, bool]]


class PiggyMetrics:
    """Draws traces; ``traces(n, end_us)`` spreads n requests over the window ending at
    ``end_us``."""

    def __init__(self, seed: int, settings: AppSettings | None = None) -> None:
        self.rng = random.Random(seed)
        self.settings = settings or AppSettings()
        skew = self.settings.skew_us
        self.clock_offset = {node: self.rng.randint(-skew, skew) for node in NODES}
        self.requests: list[tuple[float, str, Handler]] = [
            (0.35, "GET /accounts/current", _get_account),
            (0.20, "PUT /accounts/current", _save_account),
            (0.20, "GET /statistics/current", _get_statistics),
            (0.15, "GET /notifications/settings/current", _get_notifications),
            (0.10, "POST /uaa/oauth/token", _login),
        ]

    def traces(self, count: int, end_us: int) -> Iterator[list[Span]]:
        window_us = int(self.settings.window_s * 1e6)
        weights = [w for w, _, _ in self.requests]
        for _ in range(count):
            arrival = end_us - window_us + self.rng.randrange(window_us - 2_000_000)
            _, operation, handler = self.rng.choices(self.requests, weights)[0]
            trace = _Trace(
                self.rng, self.settings, self.clock_offset, f"{self.rng.getrandbits(128) | 1:032x}"
            )
            _serve(trace, "gateway", operation, None, arrival, handler)
            yield trace.spans


def _serve(
    trace: _Trace,
    service: str,
    operation: str,
    parent: str | None,
    start: int,
    body: Handler,
    kind: SpanKind = SpanKind.SERVER,
    follows_from: bool = False,
) -> tuple[int, bool]:
    """A server span of ``service`` starting at true time ``start``; (true end, failed)."""
    span_id = trace.new_id()
    host = trace.rng.choice(PLACEMENT[service])
    begin = start
    now = start + trace.work(service) // 2
    now, child_failed = body(trace, (span_id, host), now)
    end = now + trace.work(service) // 2
    failed = trace.rng.random() < trace.settings.error_rate or (
        child_failed and trace.rng.random() < 0.5
    )
    skew = trace.clock_offset[host]
    trace.spans.append(
        Span(
            trace_id=trace.trace_id,
            span_id=span_id,
            parent_id=parent,
            service=service,
            operation=operation,
            start_us=begin + skew,
            end_us=end + skew,
            kind=kind,
            status=Status.ERROR if failed else Status.OK,
            host=host,
            container=f"{service}-{host}",
            follows_from=follows_from,
        )
    )
    return end, failed


def _call(
    trace: _Trace,
    caller: str,
    caller_span: Caller,
    callee: str,
    operation: str,
    start: int,
    body: Handler | None = None,
) -> tuple[int, bool]:
    """``caller`` calls ``callee``: a CLIENT span (on the caller's node) around the
    callee's SERVER span."""
    client_id = trace.new_id()
    caller_id, host = caller_span
    server_end, failed = _serve(
        trace, callee, operation, client_id, start + trace.net(), body or _leaf
    )
    end = server_end + trace.net()
    skew = trace.clock_offset[host]
    trace.spans.append(
        Span(
            trace_id=trace.trace_id,
            span_id=client_id,
            parent_id=caller_id,
            service=caller,
            operation=f"{callee} {operation}",
            start_us=start + skew,
            end_us=end + skew,
            kind=SpanKind.CLIENT,
            status=Status.ERROR if failed else Status.OK,
            host=host,
            container=f"{caller}-{host}",
        )
    )
    return end, failed


def _leaf(trace: _Trace, span: Caller, now: int) -> tuple[int, bool]:
    return now, False


def _auth(trace: _Trace, span: Caller, now: int) -> tuple[int, bool]:
    return _call(trace, "auth-service", span, "auth-mongodb", "find users", now)


def _check_token(trace: _Trace, span: Caller, now: int) -> tuple[int, bool]:
    return _call(trace, "gateway", span, "auth-service", "GET /uaa/users/current", now, _auth)


def _account_lookup(trace: _Trace, span: Caller, now: int) -> tuple[int, bool]:
    now, failed = _call(trace, "account-service", span, "account-mongodb", "find accounts", now)
    if trace.rng.random() < 0.05:
        now, more = _call(trace, "account-service", span, "config", "GET /account-service", now)
        failed |= more
    return now, failed


def _statistics_lookup(trace: _Trace, span: Caller, now: int) -> tuple[int, bool]:
    return _call(trace, "statistics-service", span, "statistics-mongodb", "find datapoints", now)


def _get_account(trace: _Trace, span: Caller, now: int) -> tuple[int, bool]:
    now, failed = _check_token(trace, span, now)
    # Parallel fan-out: both calls start together; the gateway waits for the slower.
    account_end, a = _call(
        trace, "gateway", span, "account-service", "GET /accounts/{name}", now, _account_lookup
    )
    stats_end, b = _call(
        trace,
        "gateway",
        span,
        "statistics-service",
        "GET /statistics/{name}",
        now + 30,
        _statistics_lookup,
    )
    return max(account_end, stats_end), failed or a or b


def _save_in_account(trace: _Trace, span: Caller, now: int) -> tuple[int, bool]:
    now, failed = _call(trace, "account-service", span, "account-mongodb", "save accounts", now)
    now, more = _call(
        trace,
        "account-service",
        span,
        "statistics-service",
        "PUT /statistics/{name}",
        now,
        _save_statistics,
    )
    published, _ = _publish(trace, span, now)
    return published, failed or more


def _save_statistics(trace: _Trace, span: Caller, now: int) -> tuple[int, bool]:
    return _call(trace, "statistics-service", span, "statistics-mongodb", "save datapoints", now)


def _publish(trace: _Trace, span: Caller, now: int) -> tuple[int, bool]:
    """account-service publishes to RabbitMQ; notification-service consumes it later."""
    producer_id = trace.new_id()
    span_id, host = span
    end = now + trace.net() + trace.work("rabbitmq")
    skew = trace.clock_offset[host]
    trace.spans.append(
        Span(
            trace_id=trace.trace_id,
            span_id=producer_id,
            parent_id=span_id,
            service="account-service",
            operation="publish account.updated",
            start_us=now + skew,
            end_us=end + skew,
            kind=SpanKind.PRODUCER,
            host=host,
            container=f"account-service-{host}",
        )
    )
    consume_at = end + int(trace.rng.expovariate(1 / 5000))
    _serve(
        trace,
        "notification-service",
        "consume account.updated",
        producer_id,
        consume_at,
        _notification_store,
        SpanKind.CONSUMER,
    )
    return end, False


def _notification_store(trace: _Trace, span: Caller, now: int) -> tuple[int, bool]:
    return _call(
        trace, "notification-service", span, "notification-mongodb", "save recipients", now
    )


def _save_account(trace: _Trace, span: Caller, now: int) -> tuple[int, bool]:
    now, failed = _check_token(trace, span, now)
    now, more = _call(
        trace, "gateway", span, "account-service", "PUT /accounts/current", now, _save_in_account
    )
    return now, failed or more


def _get_statistics(trace: _Trace, span: Caller, now: int) -> tuple[int, bool]:
    now, failed = _check_token(trace, span, now)

    def two_queries(trace: _Trace, span: Caller, now: int) -> tuple[int, bool]:
        now, a = _statistics_lookup(trace, span, now)
        now, b = _statistics_lookup(trace, span, now)
        return now, a or b

    now, more = _call(
        trace, "gateway", span, "statistics-service", "GET /statistics/current", now, two_queries
    )
    return now, failed or more


def _get_notifications(trace: _Trace, span: Caller, now: int) -> tuple[int, bool]:
    now, failed = _check_token(trace, span, now)

    def lookup(trace: _Trace, span: Caller, now: int) -> tuple[int, bool]:
        return _call(
            trace, "notification-service", span, "notification-mongodb", "find recipients", now
        )

    now, more = _call(
        trace,
        "gateway",
        span,
        "notification-service",
        "GET /notifications/settings/current",
        now,
        lookup,
    )
    return now, failed or more


def _login(trace: _Trace, span: Caller, now: int) -> tuple[int, bool]:
    if trace.rng.random() < 0.3:
        now, _ = _call(trace, "gateway", span, "registry", "GET /eureka/apps", now)
    return _call(trace, "gateway", span, "auth-service", "POST /uaa/oauth/token", now, _auth)
