"""One guard cycle inside the service: :class:`GuardStep` wraps
:class:`~yarn_adapt.colocation.guard.ColocationGuard` (the class the testbed runs) with
the service's RM, store and loop, and the views ``GET /api/guard`` shows; the node
agents' reports (:class:`AgentReport`).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from preemption.targets import REPORT_LINE_CHARS, REPORT_LINES
from yarn_adapt.colocation.guard import ColocationGuard, GuardRoundReport
from yarn_adapt.colocation.lra import LearnedLraDemand
from yarn_adapt.colocation.model import (
    AppSlack,
    GuardSettings,
    LearnedApplication,
)
from yarn_adapt.demand.model import Demand
from yarn_adapt.errors import InputError
from yarn_adapt.service.guard.loop import GuardLoop
from yarn_adapt.service.guard.records import GuardStore, decision_view, node_view

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentReport:
    """What a node's agent last said it does (its status in words) and when."""

    at_s: float
    lines: tuple[str, ...]


def parse_agent_report(body: object, at_s: float) -> AgentReport:
    """An agent's report, ``{"lines": [str, ...]}``: at most ``REPORT_LINES`` lines of
    ``REPORT_LINE_CHARS`` characters, printable; anything else is an InputError."""
    lines = body.get("lines") if isinstance(body, dict) else None
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        raise InputError('an agent report is {"lines": [string, ...]}')
    if len(lines) > REPORT_LINES:
        raise InputError(f"an agent report has at most {REPORT_LINES} lines, not {len(lines)}")
    too_long = [len(line) for line in lines if len(line) > REPORT_LINE_CHARS]
    if too_long:
        raise InputError(
            f"an agent report's lines have at most {REPORT_LINE_CHARS} characters, "
            f"not {too_long[0]}"
        )
    printable = ("".join(c if c.isprintable() else " " for c in line) for line in lines)
    return AgentReport(at_s, tuple(printable))


def agent_view(report: AgentReport | None, now_s: float) -> dict[str, Any] | None:
    if report is None:
        return None
    return {"at_epoch_s": report.at_s, "age_s": max(0.0, now_s - report.at_s),
            "lines": list(report.lines)}  # fmt: skip


class GuardStep:
    """The guard in the service: the guard, its tables, and its loop (``None`` when
    the service was built without one); the page, the API and /metrics read it, and
    the node agents' reports (the newest per node, kept in memory: an agent sends
    one with every poll)."""

    def __init__(
        self, guard: ColocationGuard, store: GuardStore, loop: GuardLoop | None = None
    ) -> None:
        self.guard = guard
        self.store = store
        self.loop = loop
        self._agent_reports: dict[str, AgentReport] = {}
        self._reports_lock = threading.Lock()

    def note_agent_report(self, node: str, report: AgentReport) -> None:
        """Keep ``node``'s newest report (only a node with an agent token gets here)."""
        with self._reports_lock:
            self._agent_reports[node] = report

    def agent_report(self, node: str) -> AgentReport | None:
        with self._reports_lock:
            return self._agent_reports.get(node)

    def stop(self) -> None:
        """Stop the loop, then give every node back."""
        if self.loop is not None:
            self.loop.stop()
        for outcome in self.guard.stop():
            log.info("guard stop: %s: %s", outcome.node_id, outcome.status)

    def status(self) -> dict[str, Any]:
        report = self.guard.last_report
        now_s = self.guard.clock()
        plan = report.plan if report is not None else None
        return {
            "mode": str(self.guard.mode),
            "policy": str(self.guard.settings.policy),
            "settings": _settings_view(self.guard.settings),
            "health": None if self.loop is None else self.loop.health().to_json(now_s),
            "journalled_nodes": self.guard.actuator.pending_nodes(),
            "last_round": None if report is None else report_view(report),
            "applications": [] if plan is None else [app_view(a) for a in plan.applications],
            "learned_demand": self._learned(),
            "nodes": self._nodes(report),
            "agents": self._agents(now_s),
        }

    def _learned(self) -> list[dict[str, Any]]:
        """Each latency-critical application's learned demand (empty when the guard's
        demand is not learned)."""
        provider = self.guard.observer.demand
        if not isinstance(provider, LearnedLraDemand):
            return []
        return [learned_view(app) for app in provider.applications()]

    def _agents(self, now_s: float) -> dict[str, Any]:
        """Every agent's newest report by node (a node the guard has not decided on
        yet shows here too)."""
        with self._reports_lock:
            reports = dict(self._agent_reports)
        return {node: agent_view(report, now_s) for node, report in sorted(reports.items())}

    def _nodes(self, report: GuardRoundReport | None) -> list[dict[str, Any]]:
        """The last cycle's decisions (the newest stored ones when it decided none),
        each with its agent's newest report."""
        if report is None or report.plan is None:
            views = [node_view(row) for row in self.store.latest()]
        else:
            views = [decision_view(report, d) for d in report.plan.decisions]
        now_s = self.guard.clock()
        return [{**view, "agent": agent_view(self.agent_report(view["node"]), now_s)}
                for view in views]  # fmt: skip


def report_view(report: GuardRoundReport) -> dict[str, Any]:
    return {
        "at_epoch_s": report.at_s,
        "mode": str(report.mode),
        "summary": report.summary(),
        "risk_problem": report.problem,
        "duration_s": report.seconds,
        "restored": [
            {"node": o.node_id, "result": str(o.result), "status": o.status}
            for o in report.restored
        ],
    }


def app_view(app: AppSlack) -> dict[str, Any]:
    return {
        "application": app.application,
        "latency_ms": round(app.latency_ms, 3),
        "percentile": app.percentile,
        "target_ms": app.target_ms,
        "slack_ratio": round(app.slack_ratio, 4),
        "state": str(app.state),
        "requests": app.requests,
    }


def learned_view(app: LearnedApplication) -> dict[str, Any]:
    """One application's learned demand: CPU (vcores) and memory (MB), each with its
    bounds and the samples behind it, and what the guard keeps for it meanwhile."""
    return {
        "application": app.application,
        "rounds": app.rounds,
        "memory_samples": app.memory_samples,
        "min_rounds": app.min_rounds,
        "cpu": _demand_view(app.cpu, "vcores"),
        "memory": _demand_view(app.memory, "mb"),
        "cpu_used": "learned" if app.cpu_short is None else "observed",
        "memory_used": "learned" if app.memory_short is None else "observed",
        "cpu_short": app.cpu_short,
        "memory_short": app.memory_short,
    }


def _demand_view(demand: Demand | None, unit: str) -> dict[str, Any] | None:
    if demand is None:
        return None
    return {
        "source": str(demand.source),
        "load_rps": round(demand.load, 3),
        f"estimate_{unit}": round(demand.estimate, 3),
        f"lower_{unit}": round(demand.lower, 3),
        f"upper_{unit}": round(demand.upper, 3),
    }


def _settings_view(settings: GuardSettings) -> dict[str, Any]:
    return {
        "policy": str(settings.policy),
        "nu": settings.nu,
        "zero_violation": settings.zero_violation,
        "min_visible_fraction": settings.min_visible_fraction,
        "min_raw_risk": settings.min_raw_risk,
        "low_slack_ratio": settings.low_slack_ratio,
        "high_slack_ratio": settings.high_slack_ratio,
        "min_path_fraction": settings.min_path_fraction,
        "max_step_down_fraction": settings.max_step_down_fraction,
        "throttle_settle_s": settings.throttle_settle_s,
        "dead_band_fraction": settings.dead_band_fraction,
        "max_step_up_fraction": settings.max_step_up_fraction,
        "cooldown_s": settings.cooldown_s,
        "stale_after_s": settings.stale_after_s,
    }
