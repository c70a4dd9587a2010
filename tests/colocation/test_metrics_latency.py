"""Slack from a metrics endpoint the operator names: a real Prometheus histogram served
over real HTTP by prometheus_client, scraped each cycle; the percentile over the SLO
window's requests replaces the traces' (where they ran still comes from the traces);
an endpoint that cannot be read or makes no sense leaves the application without a
reading, said in one line."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Histogram, start_http_server

from tests.colocation.factories import NOW_S, qos, risk
from tests.colocation.test_edges import FixedRisk
from tests.service.factories import settings_for
from yarn_adapt.colocation import metricslatency
from yarn_adapt.colocation.metricslatency import (
    MetricsLatency,
    MetricsProblem,
    Scrape,
    parse_histogram,
    quantile,
)
from yarn_adapt.colocation.model import RiskReading
from yarn_adapt.errors import SettingsError
from yarn_adapt.service.backend import YarnBackend
from yarn_adapt.service.guard.build import build_guard
from yarn_adapt.service.guard.records import GuardStore
from yarn_adapt.service.state.store import Store

HISTOGRAM = "http_request_duration_seconds"


@pytest.fixture
def endpoint() -> Iterator[tuple[str, Histogram]]:
    """A service's own /metrics: a latency histogram on a real HTTP server."""
    registry = CollectorRegistry()
    latency = Histogram(HISTOGRAM, "request latency", ["handler"], registry=registry)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    yield f"http://127.0.0.1:{server.server_port}/metrics", latency
    server.shutdown()
    server.server_close()
    thread.join(5)


def traced() -> FixedRisk:
    """The traces' reading: frontend's P95 5 ms, its requests on a:1."""
    return FixedRisk(RiskReading(risk({"a:1": 1.0}), (qos(5.0, 100.0, ["a:1"]),)))


def source(url: str, window_s: float = 30.0) -> MetricsLatency:
    return MetricsLatency(
        traced(), {"frontend": url}, histogram=HISTOGRAM, percentile=95.0,
        slo_window_s=window_s, targets_ms={"frontend": 100.0},
    )  # fmt: skip


def test_the_p95_of_the_windows_requests_comes_from_the_histogram(
    endpoint: tuple[str, Histogram],
) -> None:
    url, latency = endpoint
    metrics = source(url)
    latency.labels("/other").observe(3.0)  # before the first scrape: not in any window
    first = metrics.read(NOW_S)
    assert first.qos == () and first.problem == ""  # one scrape counts nothing yet
    for _ in range(60):
        latency.labels("/pricing").observe(0.004)
    for _ in range(30):
        latency.labels("/cart").observe(0.004)
    for _ in range(10):
        latency.labels("/pricing").observe(0.2)
    [reading] = metrics.read(NOW_S + 5.0).qos
    # rank 95 of 100: the 5th of the 10 requests in (0.1 s, 0.25 s]: 0.175 s
    assert reading.latency_ms == pytest.approx(175.0)
    assert (reading.requests, reading.load_rps) == (100, 20.0)
    assert reading.nodes == ("a:1",)  # where it ran: the traces
    assert reading.target_ms == 100.0 and reading.violated is True


def test_the_window_starts_at_the_newest_scrape_before_it() -> None:
    bodies = iter([_body(0), _body(100), _body(200), _body(300)])
    metrics = MetricsLatency(
        traced(), {"frontend": "http://service:9100/metrics"}, histogram=HISTOGRAM,
        percentile=95.0, slo_window_s=10.0, targets_ms={"frontend": 100.0},
        fetch=lambda url, timeout_s: next(bodies),
    )  # fmt: skip
    for at_s in (0.0, 5.0, 10.0):
        metrics.read(NOW_S + at_s)
    [reading] = metrics.read(NOW_S + 15.0).qos
    assert reading.requests == 200  # since the scrape at 5 s, not the one at 0 s
    assert reading.load_rps == 20.0


@pytest.mark.parametrize(
    ("bodies", "problem"),
    [
        (["<html>a login page</html>"], "not the Prometheus text format"),
        (["# TYPE other_seconds histogram\nother_seconds_bucket{le=\"+Inf\"} 3\n"],
         f'no histogram {HISTOGRAM} (no {HISTOGRAM}_bucket with le="+Inf")'),
        ([None, None], "the histogram went backwards or changed its buckets (a restart)"),
    ],
)  # fmt: skip
def test_a_body_that_makes_no_sense_is_one_line_and_no_reading(
    bodies: list[str | None], problem: str
) -> None:
    served = iter(bodies if bodies[0] is not None else [_body(500), _body(20)])
    metrics = MetricsLatency(
        traced(), {"frontend": "http://service:9100/metrics"}, histogram=HISTOGRAM,
        percentile=95.0, slo_window_s=30.0, targets_ms={"frontend": 100.0},
        fetch=lambda url, timeout_s: next(served),
    )  # fmt: skip
    reading = metrics.read(NOW_S)
    if bodies[0] is None:
        reading = metrics.read(NOW_S + 5.0)
    assert reading.qos == ()  # not the traces' reading either: the operator chose this source
    assert reading.problem.startswith(
        f"latency of frontend from http://service:9100/metrics: {problem}"
    )
    assert len(reading.problem) < 200  # a hostile body is not repeated at length


def test_an_endpoint_that_cannot_be_read_is_said_and_the_next_cycle_tries_again(
    endpoint: tuple[str, Histogram],
) -> None:
    url, latency = endpoint
    latency.labels("/cart").observe(0.01)
    closed = "http://127.0.0.1:1/metrics"
    metrics = MetricsLatency(
        traced(), {"frontend": closed, "cart": url}, histogram=HISTOGRAM, percentile=95.0,
        slo_window_s=30.0, targets_ms={"frontend": 100.0, "cart": 50.0}, timeout_s=2.0,
    )  # fmt: skip
    reading = metrics.read(NOW_S)
    assert reading.qos == () and reading.problem == (
        f"latency of frontend from {closed}: cannot be read (ConnectionError)"
    )  # (cart's first scrape counts nothing yet, and is no problem)
    latency.labels("/cart").observe(0.01)
    again = metrics.read(NOW_S + 5.0)
    assert [q.application for q in again.qos] == ["cart"]  # the other one is read
    assert again.problem.startswith("latency of frontend from")


def test_a_quantile_past_the_last_bound_is_the_last_bound() -> None:
    before = Scrape(0.0, ((0.1, 0.0), (1.0, 0.0), (float("inf"), 0.0)))
    after = Scrape(5.0, ((0.1, 10.0), (1.0, 10.0), (float("inf"), 100.0)))
    assert quantile(before, after, 95.0) == (1.0, 100.0)
    assert quantile(after, after, 95.0) is None  # no request in between
    with pytest.raises(MetricsProblem, match="not cumulative"):
        parse_histogram(
            f'{HISTOGRAM}_bucket{{le="0.1"}} 5\n{HISTOGRAM}_bucket{{le="+Inf"}} 3\n', HISTOGRAM, 0
        )


def test_the_service_reads_the_named_endpoints(tmp_path: Path) -> None:
    settings = settings_for(
        tmp_path,
        yarn={"rm": ["http://127.0.0.1:1"]},
        scheduler={"via": "mutation"},
        colocation={"enabled": True, "demand": "none", "qos_targets": ["frontend=100"],
                    "latency_metrics": ["frontend=http://10.0.0.5:9100/metrics"],
                    "latency_histogram": HISTOGRAM},
    )  # fmt: skip
    store = Store(tmp_path / "state.db")
    guard = build_guard(settings, YarnBackend(settings), store, GuardStore(tmp_path / "g.db"))
    source = guard.observer.risk
    assert isinstance(source, MetricsLatency)
    assert [e.url for e in source.endpoints] == ["http://10.0.0.5:9100/metrics"]


@pytest.mark.parametrize(
    ("colocation", "error"),
    [
        ({"latency_metrics": ["frontend=http://h:1/metrics"]},
         "must name the endpoints' latency histogram, ending in _seconds or _milliseconds"),
        ({"latency_metrics": ["frontend=http://h:1/metrics"], "latency_histogram": "requests"},
         "must name the endpoints' latency histogram, ending in _seconds or _milliseconds"),
        ({"latency_metrics": ["cart=http://h:1/metrics"], "latency_histogram": HISTOGRAM},
         "names an application without a qos_targets entry: cart"),
        ({"latency_metrics": ["frontend=h:1/metrics"], "latency_histogram": HISTOGRAM},
         "must be http(s) URLs: frontend"),
    ],
)  # fmt: skip
def test_settings_that_cannot_measure_are_refused(
    tmp_path: Path, colocation: dict[str, object], error: str
) -> None:
    with pytest.raises(SettingsError, match=r"\[colocation\] latency_.*" + re.escape(error)):
        settings_for(
            tmp_path,
            scheduler={"via": "mutation"},
            colocation={"enabled": True, "demand": "none", "qos_targets": ["frontend=100"],
                        **colocation},
        )  # fmt: skip


def _body(requests: int) -> str:
    """A histogram with ``requests`` counted, all under 5 ms."""
    return (
        f"# TYPE {HISTOGRAM} histogram\n"
        f'{HISTOGRAM}_bucket{{le="0.005"}} {requests}\n'
        f'{HISTOGRAM}_bucket{{le="+Inf"}} {requests}\n'
        f"{HISTOGRAM}_count {requests}\n"
    )


def test_an_endpoint_that_answers_too_much_is_one_line(
    endpoint: tuple[str, Histogram], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, latency = endpoint
    latency.labels("/cart").observe(0.01)
    monkeypatch.setattr(metricslatency, "MAX_BODY_BYTES", 100)
    reading = source(url).read(NOW_S)
    assert reading.problem == f"latency of frontend from {url}: answered more than 100 bytes"
