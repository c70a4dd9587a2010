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
``yarn_adapt_agent_isolation_mode{mode}``                   gauge: 1 for the mode now
                                                            (agent-hierarchy,
                                                            per-container, off)
``yarn_adapt_agent_suppress_quota_millicores``              gauge: batch's CFS quota now
                                                            (-1: none yet, or off)
``yarn_adapt_agent_suppress_budget_millicores``             gauge: the formula's budget
``yarn_adapt_agent_node_cpu_used_millicores``               gauge: /proc/stat, last interval
``yarn_adapt_agent_batch_cpu_used_millicores``              gauge: batch's cgroups, same
``yarn_adapt_agent_suppress_changes_total{change}``         counter: first, decrease,
                                                            increase, increase-bounded
``yarn_adapt_agent_batch_weighted_groups``                  gauge: cgroups given batch's
                                                            low CPU weight
``yarn_adapt_agent_memory_pressure``                        gauge: 1 under memory pressure
``yarn_adapt_agent_memory_capped_groups``                   gauge: batch cgroups capped
``yarn_adapt_agent_services_memory_protected``              gauge: service cgroups given
                                                            memory.low
``yarn_adapt_agent_evictions_total{cause}``                 counter: kills, by cause
                                                            (reclaim: Algorithm 2's last
                                                            resort; memory-pressure)
==========================================================  ===========================
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from preemption.cgroups.base import MIB
from preemption.isolator import AGENT_HIERARCHY, OFF, PER_CONTAINER, IsolationReport
from preemption.node import Event, TickReport

ISOLATION_MODES = (AGENT_HIERARCHY, PER_CONTAINER, OFF)
QUOTA_CHANGES = ("first", "decrease", "increase", "increase-bounded")
EVICTION_CAUSES = ("reclaim", "memory-pressure")
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
        self._isolation_metrics(r)
        for kind in EVENT_KINDS:
            self.events.labels(kind)
        for kind in ("unreachable", "malformed"):
            self.request_errors.labels(kind)
        self._squeezed_ids: set[str] = set()

    def _isolation_metrics(self, r: CollectorRegistry) -> None:
        self.isolation_mode = Gauge(
            "yarn_adapt_agent_isolation_mode", "The isolation loop's mode now", ["mode"],
            registry=r,
        )  # fmt: skip
        self.suppress_quota = Gauge(
            "yarn_adapt_agent_suppress_quota_millicores", "Batch's CFS quota now (-1: none)",
            registry=r,
        )  # fmt: skip
        self.suppress_budget = Gauge(
            "yarn_adapt_agent_suppress_budget_millicores", "Batch's budget by the suppress formula",
            registry=r,
        )  # fmt: skip
        self.node_cpu = Gauge(
            "yarn_adapt_agent_node_cpu_used_millicores", "The node's CPU use (/proc/stat)",
            registry=r,
        )  # fmt: skip
        self.batch_cpu = Gauge(
            "yarn_adapt_agent_batch_cpu_used_millicores", "Batch's CPU use (its cgroups)",
            registry=r,
        )  # fmt: skip
        self.suppress_changes = Counter(
            "yarn_adapt_agent_suppress_changes", "Changes of batch's quota", ["change"], registry=r
        )
        self.weighted = Gauge(
            "yarn_adapt_agent_batch_weighted_groups", "Cgroups given batch's low CPU weight",
            registry=r,
        )  # fmt: skip
        self.memory_pressure = Gauge(
            "yarn_adapt_agent_memory_pressure", "1 while the node is under memory pressure",
            registry=r,
        )  # fmt: skip
        self.memory_capped = Gauge(
            "yarn_adapt_agent_memory_capped_groups", "Batch cgroups capped at what they hold",
            registry=r,
        )  # fmt: skip
        self.services_protected = Gauge(
            "yarn_adapt_agent_services_memory_protected", "Service cgroups given memory.low",
            registry=r,
        )  # fmt: skip
        self.evictions = Counter(
            "yarn_adapt_agent_evictions", "Containers killed, by cause", ["cause"], registry=r
        )
        self.suppress_quota.set(-1)
        for mode in ISOLATION_MODES:
            self.isolation_mode.labels(mode)
        for change in QUOTA_CHANGES:
            self.suppress_changes.labels(change)
        for cause in EVICTION_CAUSES:
            self.evictions.labels(cause)

    def record_isolation(self, report: IsolationReport) -> None:
        for mode in ISOLATION_MODES:
            self.isolation_mode.labels(mode).set(1 if mode == report.mode else 0)
        quota = report.quota_millicores
        self.suppress_quota.set(-1 if quota is None else quota)
        if report.step is not None:
            self.suppress_budget.set(report.step.budget_millicores)
            if report.step.changed:
                self.suppress_changes.labels(report.step.change).inc()
        if report.use is not None:
            self.node_cpu.set(report.use.node_millicores)
            self.batch_cpu.set(report.use.batch_millicores)
        self.weighted.set(report.weighted_groups)
        self.memory_pressure.set(1 if report.pressure else 0)
        self.memory_capped.set(report.memory_capped_groups)
        self.services_protected.set(report.services_protected)
        for event in report.events:
            self.record_event(event)

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
        if event.kind == "killed":
            self.evictions.labels(event.cause).inc()
        if event.kind == "step" and event.container_id not in self._squeezed_ids:
            self._squeezed_ids.add(event.container_id)
            self.squeezed.inc()

    def value(self, name: str, **labels: str) -> float:
        """A sample's value, for tests and the status line."""
        found = self.registry.get_sample_value(name, labels or None)
        return 0.0 if found is None else found
