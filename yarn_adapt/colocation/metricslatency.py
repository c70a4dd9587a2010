"""Tail latency from a metrics endpoint the operator names, instead of the traces.

An application whose entry service exports a Prometheus histogram of its request
latency (``<name>_bucket{le="..."}``, cumulative counts, as every Prometheus client
library writes one) can have its slack read from there: ``[colocation]
latency_metrics = ["frontend=http://10.0.0.5:9100/metrics"]`` with
``latency_histogram = "http_request_duration_seconds"``. Each guard cycle scrapes
every named endpoint once; the percentile is taken over the requests counted between
the oldest scrape inside the SLO window and now (the histogram's buckets summed over
all its label sets, the quantile interpolated inside its bucket as Prometheus's own
``histogram_quantile`` does). Where the requests ran, and so where to act, still comes
from the traces' critical paths; only the latency and the request count are replaced.

An endpoint that cannot be read, a body that is not the text format, a histogram that
is not there, or a counter that went backwards (the service restarted) leaves that
application without a reading for the cycle, and the reading's ``problem`` says which
and why in one line: the guard never acts on a latency it could not measure.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from itertools import pairwise

import requests
import urllib3
from prometheus_client.parser import text_string_to_metric_families

from yarn_adapt.colocation.model import QosReading, RiskReading
from yarn_adapt.colocation.observe import RiskSource

UNIT_TO_MS = {"seconds": 1000.0, "milliseconds": 1.0}


class MetricsProblem(Exception):
    """One endpoint's problem, in one line."""


@dataclass(frozen=True)
class Scrape:
    """One read of a histogram: the cumulative count at each upper bound, ascending."""

    at_s: float
    buckets: tuple[tuple[float, float], ...]

    @property
    def count(self) -> float:
        return self.buckets[-1][1] if self.buckets else 0.0


def histogram_unit(name: str) -> str | None:
    """The unit a histogram's name ends with (Prometheus names carry it), or None."""
    for unit in UNIT_TO_MS:
        if name.endswith(f"_{unit}"):
            return unit
    return None


def parse_histogram(text: str, name: str, at_s: float) -> Scrape:
    """The histogram ``name`` in a text-format body, summed over its label sets."""
    counts: dict[float, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name != f"{name}_bucket":
                    continue
                bound = float(sample.labels.get("le", "nan"))
                if math.isnan(bound) or not math.isfinite(sample.value) or sample.value < 0:
                    raise MetricsProblem(f"{name}_bucket has a bad sample: {sample}")
                counts[bound] = counts.get(bound, 0.0) + sample.value
    except ValueError as exc:
        raise MetricsProblem(f"not the Prometheus text format ({str(exc)[:60]})") from exc
    if math.inf not in counts:
        raise MetricsProblem(f'no histogram {name} (no {name}_bucket with le="+Inf")')
    buckets = tuple(sorted(counts.items()))
    if any(later[1] < earlier[1] for earlier, later in pairwise(buckets)):
        raise MetricsProblem(f"{name}'s buckets are not cumulative")
    return Scrape(at_s, buckets)


def quantile(before: Scrape, after: Scrape, percentile: float) -> tuple[float, float] | None:
    """The ``percentile`` of the requests counted between two scrapes and how many
    there were (None: none); interpolated inside its bucket, as ``histogram_quantile``
    (a quantile in the +Inf bucket is the highest finite bound)."""
    old = dict(before.buckets)
    deltas = [(bound, count - old.get(bound, 0.0)) for bound, count in after.buckets]
    if any(delta < 0 for _, delta in deltas) or set(old) != {b for b, _ in after.buckets}:
        raise MetricsProblem("the histogram went backwards or changed its buckets (a restart)")
    total = deltas[-1][1]
    if total <= 0:
        return None
    rank = percentile / 100.0 * total
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in deltas:
        if count >= rank:
            if math.isinf(bound):
                finite = [b for b, _ in deltas if math.isfinite(b)]
                return (finite[-1] if finite else 0.0), total
            inside = count - lower_count
            share = (rank - lower_count) / inside if inside > 0 else 1.0
            return lower_bound + (bound - lower_bound) * share, total
        lower_bound, lower_count = bound, count
    return None  # (unreachable: the +Inf bucket holds every request)


@dataclass
class Endpoint:
    """One application's endpoint and its recent scrapes (newest last)."""

    application: str
    url: str
    scrapes: deque[Scrape]


Fetch = Callable[[str, float], str]


MAX_BODY_BYTES = 8 * 1024 * 1024  # a metrics page is kilobytes; more is not one


def http_fetch(url: str, timeout_s: float) -> str:
    try:
        with requests.get(
            url, timeout=timeout_s, headers={"Accept": "text/plain"}, stream=True
        ) as response:
            if response.status_code != 200:
                raise MetricsProblem(f"answered HTTP {response.status_code}")
            body = response.raw.read(MAX_BODY_BYTES + 1, decode_content=True)
    except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:
        raise MetricsProblem(f"cannot be read ({exc.__class__.__name__})") from exc
    if len(body) > MAX_BODY_BYTES:
        raise MetricsProblem(f"answered more than {MAX_BODY_BYTES} bytes")
    return body.decode("utf-8", errors="replace")


class MetricsLatency:
    """A :class:`RiskSource`: the traces' reading, with the tail latency of each named
    application read from its metrics endpoint."""

    def __init__(
        self,
        inner: RiskSource,
        endpoints: Mapping[str, str],
        *,
        histogram: str,
        percentile: float,
        slo_window_s: float,
        targets_ms: Mapping[str, float],
        timeout_s: float = 5.0,
        fetch: Fetch = http_fetch,
    ) -> None:
        unit = histogram_unit(histogram)
        if unit is None:
            raise ValueError(f"{histogram}: the name must end with _seconds or _milliseconds")
        self.inner = inner
        self.histogram = histogram
        self.to_ms = UNIT_TO_MS[unit]
        self.percentile = percentile
        self.slo_window_s = slo_window_s
        self.targets_ms = dict(targets_ms)
        self.timeout_s = timeout_s
        self.fetch = fetch
        self.endpoints = [Endpoint(app, url, deque()) for app, url in endpoints.items()]

    def read(self, now_s: float) -> RiskReading:
        reading = self.inner.read(now_s)
        traced = {q.application: q for q in reading.qos}
        measured: dict[str, QosReading | None] = {}
        problems = [reading.problem] if reading.problem else []
        for endpoint in self.endpoints:
            try:
                measured[endpoint.application] = self._measure(endpoint, now_s, traced)
            except MetricsProblem as exc:
                endpoint.scrapes.clear()  # start afresh: no window spans the problem
                measured[endpoint.application] = None
                problems.append(f"latency of {endpoint.application} from {endpoint.url}: {exc}")
        qos = [q for q in reading.qos if q.application not in measured]
        qos += [q for q in measured.values() if q is not None]
        return replace(reading, qos=tuple(qos), problem="; ".join(problems))

    def _measure(
        self, endpoint: Endpoint, now_s: float, traced: Mapping[str, QosReading]
    ) -> QosReading | None:
        scrape = parse_histogram(self.fetch(endpoint.url, self.timeout_s), self.histogram, now_s)
        scrapes = endpoint.scrapes
        while scrapes and scrapes[0].at_s < now_s - self.slo_window_s:
            if len(scrapes) > 1 and scrapes[1].at_s <= now_s - self.slo_window_s:
                scrapes.popleft()  # a newer scrape also starts the window: drop the older
            else:
                break
        scrapes.append(scrape)
        if len(scrapes) < 2:
            return None  # the first scrape: nothing counted yet
        found = quantile(scrapes[0], scrape, self.percentile)
        if found is None:
            return None
        latency, requests_counted = found
        seconds = max(now_s - scrapes[0].at_s, 1e-9)
        from_traces = traced.get(endpoint.application)
        return QosReading(
            application=endpoint.application,
            latency_ms=latency * self.to_ms,
            percentile=self.percentile,
            requests=int(requests_counted),
            load_rps=requests_counted / seconds,
            nodes=from_traces.nodes if from_traces is not None else (),
            measured_at_s=now_s,
            target_ms=self.targets_ms.get(endpoint.application),
        )

    def close(self) -> None:
        self.inner.close()
