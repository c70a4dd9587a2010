"""The guard's Prometheus metrics (:class:`GuardCollector`), read from the loop at each
scrape.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from yarn_adapt.colocation.guard import ColocationGuard
from yarn_adapt.colocation.model import (
    GuardMode,
)
from yarn_adapt.service.guard.loop import GuardLoop


class GuardCollector(Collector):
    """The guard's figures at scrape time: its mode, actions, journal, the loop's
    health, each application's slack and each node's risk and visible share."""

    def __init__(self, guard: ColocationGuard, loop: GuardLoop | None = None) -> None:
        self.guard = guard
        self.loop = loop

    def collect(self) -> Iterator[Metric]:
        prefix = "yarn_adapt_guard"
        mode = GaugeMetricFamily(f"{prefix}_mode", "The guard's mode (1 for the active one).",
                                 labels=["mode"])  # fmt: skip
        for each in GuardMode:
            mode.add_metric([str(each)], 1.0 if each is self.guard.mode else 0.0)
        actions = CounterMetricFamily(f"{prefix}_actions", "Node changes by action and result.",
                                      labels=["action", "result"])  # fmt: skip
        for (action, result), count in sorted(dict(self.guard.counts).items()):
            actions.add_metric([action, result], count)
        journalled = GaugeMetricFamily(
            f"{prefix}_journalled_nodes", "Nodes not known to be back at their original total."
        )
        journalled.add_metric([], len(self.guard.actuator.pending_nodes()))
        repushes = CounterMetricFamily(
            f"{prefix}_repushes",
            "Totals YARN forgot (the node registered again) that the guard pushed again.",
            labels=["node"],
        )
        for node_id, count in sorted(dict(self.guard.repushes).items()):
            repushes.add_metric([node_id], count)
        gap = GaugeMetricFamily(
            f"{prefix}_repush_gap_seconds",
            "At most how long a node's throttle was missing before the guard pushed it "
            "again (the last push; from the last cycle that saw it held).",
            labels=["node"],
        )
        for node_id, seconds in sorted(dict(self.guard.repush_gap_s).items()):
            gap.add_metric([node_id], seconds)
        yield from (mode, actions, journalled, repushes, gap, *self._health(),
                    *self._applications())  # fmt: skip
        yield from self._nodes()

    def _health(self) -> Iterator[Metric]:
        if self.loop is None:
            return
        now_s = self.guard.clock()
        health = self.loop.health()
        prefix = "yarn_adapt_guard"
        failures = GaugeMetricFamily(f"{prefix}_consecutive_failures",
                                     "Guard cycles failed in a row.")  # fmt: skip
        failures.add_metric([], health.consecutive_failures)
        yield failures
        for name, help_text, at_s in (
            ("last_cycle_age_seconds", "Seconds since the last guard cycle ended.",
             health.last_cycle_at_s),
            ("nodes_age_seconds", "Age of the node list the guard read last.",
             health.nodes_read_at_s),
        ):  # fmt: skip
            if at_s is not None:
                gauge = GaugeMetricFamily(f"{prefix}_{name}", help_text)
                gauge.add_metric([], max(0.0, now_s - at_s))
                yield gauge

    def _applications(self) -> Iterator[Metric]:
        report = self.guard.last_report
        slack = GaugeMetricFamily(
            "yarn_adapt_guard_application_slack_ratio",
            "1 - P95 / target of each latency-critical application (below 0: a miss).",
            labels=["application"],
        )
        if report is not None and report.plan is not None:
            for app in report.plan.applications:
                slack.add_metric([app.application], app.slack_ratio)
        yield slack

    def _nodes(self) -> Iterator[Metric]:
        prefix = "yarn_adapt_guard_node"
        risk = GaugeMetricFamily(
            f"{prefix}_risk",
            "The node's risk: slack policy, its largest share of an application's target "
            "spent there on the critical path; toposch-paper, the normalised risk (0-1).",
            labels=["node"],
        )
        visible = GaugeMetricFamily(
            f"{prefix}_visible_ratio",
            "Share of the node the scheduler lets batch see now (0-1).",
            labels=["node", "resource"],
        )
        reclaim = GaugeMetricFamily(
            f"{prefix}_reclaim_millicores",
            "CPU the node agent is asked to reclaim from batch.",
            labels=["node"],
        )
        for allowance in self.guard.allowances().values():
            for resource, seen, whole in (
                ("vcores", allowance.total.vcores, allowance.capacity.vcores),
                ("memory", allowance.total.memory_mb, allowance.capacity.memory_mb),
            ):
                visible.add_metric([allowance.node_id, resource], seen / whole if whole else 1.0)
            request = self.guard.reclaim_for(allowance.node_id)
            reclaim.add_metric([allowance.node_id], request.cpu_millicores if request else 0)
        report = self.guard.last_report
        if report is not None and report.plan is not None:
            for decision in report.plan.decisions:
                if decision.risk is not None:
                    risk.add_metric([decision.node_id], decision.risk)
        yield from (risk, visible, reclaim)
