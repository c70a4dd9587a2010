"""Prometheus metrics of one service instance, in a registry of its own.

Counters and the round-duration histogram are updated as things happen; every
counter's known label values start at zero, so a rate() sees the first event.
The gauges read from the store at scrape time (:class:`LatencyCollector`,
:class:`ConsoleCollector`) survive restarts and never disagree with the page:
predicted latency per group, the realised latency of the latest prediction checked
on its own jobs (the page's figure), the last round's time, the pending proposals,
and each queue's configured and held share of the cluster. Labels are bounded: a
group, a queue, a kind -- never a proposal id.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import metadata

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from yarn_adapt.service.state.records import DecisionKind, ProposalState, RoundStatus
from yarn_adapt.service.state.store import Store

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
        self.build_info = Gauge(
            "build_info", "yarn-adapt's version (always 1).", ["version"],
            namespace=NAMESPACE, registry=r,
        )  # fmt: skip
        self.build_info.labels(version=_version()).set(1)
        self._start_at_zero()
        if store is not None:
            r.register(LatencyCollector(store))
            r.register(ConsoleCollector(store))

    def _start_at_zero(self) -> None:
        for status in RoundStatus:
            self.rounds.labels(status=str(status))
        for kind in DecisionKind:
            self.decisions.labels(kind=str(kind))
        for failure in FAILURE_KINDS:
            self.failures.labels(kind=failure)

    def applied(self, kind: str) -> None:
        (self.rollbacks if kind == "rollback" else self.applies).inc()

    def failure(self, kind: str) -> None:
        self.failures.labels(kind=kind).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class LatencyCollector(Collector):
    """Predicted latency (before/after) per group of the latest proposal, and per
    group the latest prediction checked on its own jobs: what they realised once all
    finished, and what it predicted for them (the page's "realised by its jobs")."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        predicted = GaugeMetricFamily(
            f"{NAMESPACE}_predicted_latency_seconds",
            "Predicted mean job latency of the latest proposal, per group.",
            labels=["group", "config"],
        )
        realized = GaugeMetricFamily(
            f"{NAMESPACE}_realized_latency_seconds",
            "Mean latency the jobs of the latest checked prediction realised once all "
            "finished, per group.",
            labels=["group"],
        )
        expected = GaugeMetricFamily(
            f"{NAMESPACE}_realized_predicted_latency_seconds",
            "What that prediction said of the same jobs, per group.",
            labels=["group"],
        )
        latest = self.store.proposals(limit=1)
        for proposal in latest:
            for group in proposal.groups:
                predicted.add_metric([group.group, "running"], group.before_s)
                predicted.add_metric([group.group, "proposed"], group.after_s)
        newest: dict[str, tuple[float, float]] = {}
        for checked in sorted(self.store.prediction_errors(), key=lambda c: c.proposal_id):
            newest[checked.group] = (checked.realised_s, checked.predicted_s)
        for name, (realised_s, predicted_s) in newest.items():
            realized.add_metric([name], realised_s)
            expected.add_metric([name], predicted_s)
        yield from (predicted, realized, expected)


class ConsoleCollector(Collector):
    """What a dashboard overlays: the last round's time, the proposals waiting, the
    latest proposal's id, and per queue the configured guarantee and the used share
    of the cluster (ratios 0-1) and the containers waiting, as the last round saw them."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        last = GaugeMetricFamily(
            f"{NAMESPACE}_last_round_timestamp_seconds", "When the last round started (Unix time)."
        )
        started = self.store.last_round_at()
        if started is not None:
            last.add_metric([], started)
        pending = GaugeMetricFamily(
            f"{NAMESPACE}_pending_proposals", "Proposals waiting for an operator."
        )
        pending.add_metric([], self.store.count_proposals(ProposalState.PENDING))
        newest = GaugeMetricFamily(
            f"{NAMESPACE}_latest_proposal_id", "The id of the newest proposal (0: none)."
        )
        latest = self.store.proposals(limit=1)
        newest.add_metric([], latest[0].id if latest else 0)
        yield from (last, pending, newest, *self._queues())

    def _queues(self) -> Iterator[Metric]:
        configured = GaugeMetricFamily(
            f"{NAMESPACE}_queue_configured_capacity_ratio",
            "A queue's configured guarantee as a share of the cluster (0-1).",
            labels=["queue"],
        )
        used = GaugeMetricFamily(
            f"{NAMESPACE}_queue_used_capacity_ratio",
            "The share of the cluster a queue used at the last round (0-1).",
            labels=["queue"],
        )
        waiting = GaugeMetricFamily(
            f"{NAMESPACE}_queue_pending_containers",
            "Containers a queue's applications waited for at the last round.",
            labels=["queue"],
        )
        latest = self.store.latest_usage()
        for usage in latest[2] if latest else []:
            if usage.guaranteed_percent is not None:
                configured.add_metric([usage.queue], usage.guaranteed_percent / 100.0)
            used.add_metric([usage.queue], usage.used_percent / 100.0)
            waiting.add_metric([usage.queue], usage.pending_containers)
        yield from (configured, used, waiting)


FAILURE_KINDS = (
    "round",
    "rm-unavailable",
    "apply-refused",
    "apply-error",
    "rollback-refused",
    "rollback-error",
    "rollback-failed",
)
"""The kinds ``failures_total`` counts (each starts at zero)."""


def _version() -> str:
    try:
        return metadata.version("yarn-adapt")
    except metadata.PackageNotFoundError:
        return "unknown"
