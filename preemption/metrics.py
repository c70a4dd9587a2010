"""The agent's Prometheus metrics, on a registry of its own (tests build one each).

==========================================================  ===========================
``yarn_adapt_agent_reclaimed_cpu_millicores``               gauge: reclaimed now
``yarn_adapt_agent_reclaimed_memory_bytes``                 gauge: reclaimed now
``yarn_adapt_agent_desired_cpu_millicores``                 gauge: what the target asks
``yarn_adapt_agent_desired_memory_bytes``                   gauge
``yarn_adapt_agent_managed_containers``                     gauge: batch containers seen
``yarn_adapt_agent_tasks_squeezed_total``                   counter: tasks squeezed at least once
``yarn_adapt_agent_events_total{kind}``                     counter: step, released,
                                                            blacklisted, killed,
                                                            kill-failed, vanished,
                                                            denied, error
``yarn_adapt_agent_request_errors_total{kind}``             counter: unreachable, malformed
``yarn_adapt_agent_yarn_errors_total``                      counter: RM calls that failed
``yarn_adapt_agent_untrusted_intervals_total``              counter: intervals the agent
                                                            acted on nothing (the
                                                            NodeManager unverified, or
                                                            its list unreadable)
``yarn_adapt_agent_restores_total{outcome}``                counter: complete, incomplete
``yarn_adapt_agent_tick_seconds``                           histogram: one interval's work
==========================================================  ===========================
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from preemption.cgroups.base import MIB
from preemption.node import Event, TickReport

EVENT_KINDS = (
    "step", "released", "blacklisted", "killed", "kill-failed", "vanished", "denied", "error",
)  # fmt: skip


class AgentMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.reclaimed_cpu = Gauge(
            "yarn_adapt_agent_reclaimed_cpu_millicores", "CPU reclaimed from batch now", registry=r
        )
        self.reclaimed_memory = Gauge(
            "yarn_adapt_agent_reclaimed_memory_bytes", "Memory reclaimed from batch now", registry=r
        )
        self.desired_cpu = Gauge(
            "yarn_adapt_agent_desired_cpu_millicores", "CPU the target asks for", registry=r
        )
        self.desired_memory = Gauge(
            "yarn_adapt_agent_desired_memory_bytes", "Memory the target asks for", registry=r
        )
        self.managed = Gauge(
            "yarn_adapt_agent_managed_containers", "Batch containers managed", registry=r
        )
        self.squeezed = Counter(
            "yarn_adapt_agent_tasks_squeezed", "Tasks squeezed at least once", registry=r
        )
        self.events = Counter(
            "yarn_adapt_agent_events", "Reclaim events by kind", ["kind"], registry=r
        )
        self.request_errors = Counter(
            "yarn_adapt_agent_request_errors", "Failed target requests", ["kind"], registry=r
        )
        self.yarn_errors = Counter(
            "yarn_adapt_agent_yarn_errors", "Failed calls to the RM", registry=r
        )
        self.untrusted = Counter(
            "yarn_adapt_agent_untrusted_intervals",
            "Intervals without a verified NodeManager and its container list: nothing done",
            registry=r,
        )
        self.restores = Counter(
            "yarn_adapt_agent_restores", "Restores of every changed limit", ["outcome"], registry=r
        )
        self.tick_seconds = Histogram(
            "yarn_adapt_agent_tick_seconds", "Time one interval took", registry=r
        )
        for kind in EVENT_KINDS:
            self.events.labels(kind)
        for kind in ("unreachable", "malformed"):
            self.request_errors.labels(kind)
        self._squeezed_ids: set[str] = set()

    def record_tick(self, report: TickReport) -> None:
        status = report.decision.status
        self.reclaimed_cpu.set(report.reclaimed.cpu_millicores)
        self.reclaimed_memory.set(report.reclaimed.memory_mb * MIB)
        self.desired_cpu.set(status.desired.cpu_millicores)
        self.desired_memory.set(status.desired.memory_mb * MIB)
        self.managed.set(report.managed)
        for event in report.events:
            self.record_event(event)

    def record_event(self, event: Event) -> None:
        self.events.labels(event.kind).inc()
        if event.kind == "step" and event.container_id not in self._squeezed_ids:
            self._squeezed_ids.add(event.container_id)
            self.squeezed.inc()

    def value(self, name: str, **labels: str) -> float:
        """A sample's value, for tests and the status line."""
        found = self.registry.get_sample_value(name, labels or None)
        return 0.0 if found is None else found
