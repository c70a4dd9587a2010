"""Prometheus metrics of one service instance, in a registry of its own.

Counters and the round-duration histogram are updated as things happen; the
latency gauges (predicted before/after and realized, per group) are read from the
store at scrape time by :class:`LatencyCollector`, so they survive restarts and
never disagree with the page.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from yarn_adapt.service.store import Store

NAMESPACE = "yarn_adapt"
ROUND_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300)


class ServiceMetrics:
    def __init__(self, store: Store | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.round_seconds = Histogram(
            "round_duration_seconds", "Wall time of a tuning round.", ["status"],
            namespace=NAMESPACE, buckets=ROUND_BUCKETS, registry=r,
        )  # fmt: skip
        self.step_seconds = Histogram(
            "round_step_seconds", "Wall time of each step of a round.", ["step"],
            namespace=NAMESPACE, buckets=ROUND_BUCKETS, registry=r,
        )  # fmt: skip
        self.rounds = Counter(
            "rounds", "Tuning rounds by outcome.", ["status"], namespace=NAMESPACE, registry=r
        )
        self.decisions = Counter(
            "decisions", "Round decisions by kind.", ["kind"], namespace=NAMESPACE, registry=r
        )
        self.proposals = Counter(
            "proposals", "Proposals stored for review.", namespace=NAMESPACE, registry=r
        )
        self.applies = Counter(
            "applies", "Configurations the RM confirmed running.", namespace=NAMESPACE, registry=r
        )
        self.rollbacks = Counter(
            "rollbacks", "Rollbacks the RM confirmed.", namespace=NAMESPACE, registry=r
        )
        self.failures = Counter(
            "failures", "Failures by kind.", ["kind"], namespace=NAMESPACE, registry=r
        )
        self.rm_available = Gauge(
            "rm_available", "1 when the last round could read the active RM.",
            namespace=NAMESPACE, registry=r,
        )  # fmt: skip
        if store is not None:
            r.register(LatencyCollector(store))

    def applied(self, kind: str) -> None:
        (self.rollbacks if kind == "rollback" else self.applies).inc()

    def failure(self, kind: str) -> None:
        self.failures.labels(kind=kind).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class LatencyCollector(Collector):
    """Predicted latency (before/after) per group of the latest proposal, and the
    realized latency of the configuration running now beside its prediction."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        predicted = GaugeMetricFamily(
            f"{NAMESPACE}_predicted_latency_seconds",
            "Predicted mean job latency of the latest proposal, per group.",
            labels=["group", "config", "proposal"],
        )
        realized = GaugeMetricFamily(
            f"{NAMESPACE}_realized_latency_seconds",
            "Measured mean job latency after the running proposal was applied, per group.",
            labels=["group", "proposal"],
        )
        expected = GaugeMetricFamily(
            f"{NAMESPACE}_realized_predicted_latency_seconds",
            "What the running proposal predicted for the group realized_latency measures.",
            labels=["group", "proposal"],
        )
        latest = self.store.proposals(limit=1)
        for proposal in latest:
            for group in proposal.groups:
                pid = str(proposal.id)
                predicted.add_metric([group.group, "running", pid], group.before_s)
                predicted.add_metric([group.group, "proposed", pid], group.after_s)
        running = self.store.latest_applied()
        if running is not None:
            self._realized(running.id, realized, expected)
        yield from (predicted, realized, expected)

    def _realized(
        self, proposal_id: int, realized: GaugeMetricFamily, expected: GaugeMetricFamily
    ) -> None:
        newest: dict[str, tuple[float, float]] = {}
        for measured in self.store.realized(proposal_id):
            if measured.mean_s is not None:
                newest[measured.group] = (measured.mean_s, measured.predicted_s)
        for group, (mean_s, predicted_s) in newest.items():
            realized.add_metric([group, str(proposal_id)], mean_s)
            expected.add_metric([group, str(proposal_id)], predicted_s)
