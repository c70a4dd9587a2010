"""The co-location guard inside the service: built from ``[colocation]``, run on its own
clock by :class:`GuardLoop` (every ``period_s``, in its own thread, apart from the
configurator's round), recorded in the service's database and audit log, exported as
Prometheus metrics.

:class:`GuardStep` wraps :class:`~yarn_adapt.colocation.guard.ColocationGuard` (the
same class the testbed runs) with what only the service has: the RM the backend
already talks to, the trace store named in ``[tracing]``, the SQLite store
(:class:`GuardStore`, its own tables beside the configurator's), the registry and the
loop.

The loop reads the nodes from the :class:`~yarn_adapt.colocation.nodes.NodeCache` it
shares with the configurator's observe (refreshed at most once a period). Its health
-- the last cycle's time and duration, consecutive failures, the nodes' age -- is in
``GET /api/guard`` (``health``) and the metrics. A cycle that fails (the RM cannot be
read, the journal is damaged, a bug) is logged and counted; after ``failure_budget``
failures in a row every node is given back (and the audit log says why), and the
loop keeps trying. The configurator's failures (drift, a failing tuner, a skipped
round) never reach the guard, and the guard's never reach the configurator.

Decisions are recorded per node when they change (action, target, result, state, mode)
and at least every ``RECORD_EVERY_S`` while they hold; rows older than
``KEEP_ROWS_S`` are deleted.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from preemption.targets import REPORT_LINE_CHARS, REPORT_LINES
from tracing.redisconn import RedisConfig, make_client
from tracing.risk import RiskSettings
from tracing.store import StoreLimits, TraceStore
from yarn_adapt.colocation.actuate import Actuator, RmNodeTotals
from yarn_adapt.colocation.demand import DemandProvider, NoDemand, ObservedUsageDemand
from yarn_adapt.colocation.guard import ColocationGuard, GuardRecorder, GuardRoundReport
from yarn_adapt.colocation.lra import LearnedLraDemand, NodeUtilizationUsage, load_warm_start
from yarn_adapt.colocation.metricslatency import MetricsLatency
from yarn_adapt.colocation.mirror import DynamicResourcesMirror
from yarn_adapt.colocation.model import (
    AppSlack,
    GuardMode,
    GuardPolicy,
    GuardSettings,
    NodeDecision,
    NodePath,
)
from yarn_adapt.colocation.nodes import NodeCache
from yarn_adapt.colocation.observe import GuardObserver, RiskSource, TraceReader, TraceStoreRisk
from yarn_adapt.colocation.queuecap import QueueCap
from yarn_adapt.demand.lra import LraDemandLearner, LraMode, LraSettings, LraSpec
from yarn_adapt.errors import InputError, SettingsError, StateDamaged, YarnAdaptError
from yarn_adapt.service.backend import YarnBackend
from yarn_adapt.service.metrics import NAMESPACE
from yarn_adapt.service.settings import (
    ColocationSection,
    Settings,
    TracingSection,
    pairs,
    redis_password,
    redis_password_setting,
)
from yarn_adapt.service.state.sqlitefile import SqliteFile
from yarn_adapt.service.state.store import SqliteJournal, Store
from yarn_adapt.yarn.apply import PollSettings

log = logging.getLogger(__name__)

HISTORY_ROUNDS = 60
RECORD_EVERY_S = 60.0  # a node's unchanged decision is recorded at least this often
KEEP_ROWS_S = 7 * 86400.0  # decisions older than this are deleted
PRUNE_EVERY_S = 600.0
CYCLE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60)


# --------------------------------------------------------------------------- building


def decision_settings(section: ColocationSection) -> GuardSettings:
    try:
        return GuardSettings(
            policy=GuardPolicy(section.policy),
            low_slack_ratio=section.low_slack_ratio,
            high_slack_ratio=section.high_slack_ratio,
            min_path_fraction=section.min_path_fraction,
            max_step_down_fraction=section.max_step_down_fraction,
            throttle_settle_s=section.throttle_settle_s,
            nu=section.nu,
            zero_violation=section.zero_violation,
            min_visible_fraction=section.min_visible_fraction,
            min_raw_risk=section.min_raw_risk,
            dead_band_fraction=section.dead_band_fraction,
            max_step_up_fraction=section.max_step_up_fraction,
            cooldown_s=section.cooldown_s,
            stale_after_s=section.stale_after_s,
            millicores_per_vcore=section.millicores_per_vcore,
            min_total_memory_mb=section.min_total_memory_mb,
            min_total_vcores=section.min_total_vcores,
        )
    except ValueError as exc:  # also an unknown policy
        raise SettingsError(f"[colocation] {exc}") from exc


def redis_config(settings: Settings, url: str | None = None) -> RedisConfig:
    """How to reach the trace store: ``[tracing]``'s connection settings (``url``
    instead of its ``redis_url`` when given), naming where the password came from."""
    section = settings.tracing
    return RedisConfig(
        url=url or section.redis_url,
        password=redis_password(settings),
        password_setting=redis_password_setting(settings),
        tls=section.tls,
        ca_bundle=section.ca_bundle,
        verify_tls=section.verify_tls,
        timeout_s=section.timeout_s,
        prefix=section.prefix,
    )


def trace_store_opener(settings: Settings) -> TraceStoreOpener:
    section = settings.tracing
    config = redis_config(settings)
    return TraceStoreOpener(config, store_limits(section))


def store_limits(section: TracingSection) -> StoreLimits:
    """The trace store's bounds from ``[tracing]``: retention, the memory budget (traces,
    their names and the dead-letter records) and the dead-letter stream's length."""
    return StoreLimits(
        retention_s=section.retention_s,
        memory_budget_bytes=int(section.memory_budget_mb * (1 << 20)),
        dead_letter_entries=section.dead_letter_entries,
    )


@dataclass(frozen=True)
class TraceStoreOpener:
    config: RedisConfig
    limits: StoreLimits

    def __call__(self) -> TraceStore:
        return TraceStore(make_client(self.config), self.config, self.limits)


def demand_provider(settings: Settings) -> DemandProvider:
    """``[colocation] demand``: each latency-critical application's own learner
    (``learned``, ``stated``: :func:`lra_demand`), usage plus headroom
    (``observed``), or ``none``."""
    section = settings.colocation
    if section.demand == "none":
        return NoDemand()
    if section.demand in ("learned", "stated"):
        return lra_demand(settings)
    return ObservedUsageDemand(
        headroom=section.demand_headroom, vcores_per_core=section.vcores_per_core
    )


def lra_demand(settings: Settings) -> LearnedLraDemand:
    """The applications of ``[colocation] applications``, each with the latency
    target of its first service in ``qos_targets`` (the percentile is
    ``qos_percentile``), its stated demand and warm-start curve; CPU from the
    NodeManagers' utilization."""
    section = settings.colocation
    applications = {
        app.strip(): tuple(s.strip() for s in services.split(",") if s.strip())
        for app, services in pairs(section.applications).items()
    }
    targets = {name.strip(): float(ms) for name, ms in pairs(section.qos_targets).items()}
    stated = {app.strip(): float(value) for app, value in pairs(section.stated_demand).items()}
    curves = {app.strip(): load_warm_start(Path(path.strip()))
              for app, path in pairs(section.warm_start).items()}  # fmt: skip
    specs = [
        LraSpec(
            name=app,
            services=services,
            target_ms=next((targets[s] for s in services if s in targets), None),
            percentile=min(section.qos_percentile, 99.9),
            stated=stated.get(app),
            warm_start=curves.get(app),
        )
        for app, services in applications.items()
    ]
    learning = LraSettings(
        mode=LraMode(section.demand),
        range_factor=section.learn_range,
        slope=section.learn_slope,
        min_requests=section.learn_min_requests,
        confidence=section.learn_confidence,
    )
    hosts = {k.strip(): v.strip() for k, v in pairs(section.node_hosts).items()}
    try:
        learner = LraDemandLearner(specs, learning)
    except ValueError as exc:
        raise SettingsError(f"{settings.source}: [colocation] {exc}") from exc
    return LearnedLraDemand(
        learner,
        NodeUtilizationUsage(applications, hosts),
        round_s=section.learn_round_s,
        vcores_per_core=section.vcores_per_core,
        node_hosts=hosts,
        reserve=section.reserve,
    )


def build_guard(
    settings: Settings,
    backend: YarnBackend,
    store: Store,
    guard_store: GuardStore,
    proposer: object = None,
) -> ColocationGuard:
    """The guard of ``[colocation]``. (``proposer``, the configurator's, is not
    read: the guard's demand learners are its own, :func:`lra_demand`.)"""
    section = settings.colocation
    risk: RiskSource = trace_risk(settings, trace_store_opener(settings))
    if section.latency_metrics:  # the latency from the endpoints, the paths from traces
        risk = MetricsLatency(
            risk, pairs(section.latency_metrics), histogram=section.latency_histogram,
            percentile=section.qos_percentile, slo_window_s=section.slo_window_s,
            targets_ms=qos_targets(section),
        )  # fmt: skip
    actuator = guard_actuator(settings, backend, store)
    return assemble_guard(settings, risk, actuator, ServiceRecorder(store, guard_store))


def qos_targets(section: ColocationSection) -> dict[str, float]:
    return {name: float(ms) for name, ms in pairs(section.qos_targets).items()}


def trace_risk(settings: Settings, open_store: Callable[[], TraceReader]) -> TraceStoreRisk:
    """Risk, path times and QoS over ``[tracing] window_s`` of a trace store."""
    section = settings.colocation
    return TraceStoreRisk(
        open_store,
        window_s=settings.tracing.window_s,
        risk_settings=RiskSettings(
            alpha=settings.tracing.alpha, min_share=settings.tracing.critical_min_share
        ),
        percentile=section.qos_percentile,
        targets_ms=qos_targets(section),
        slo_window_s=section.slo_window_s,
    )


def assemble_guard(
    settings: Settings,
    risk: RiskSource,
    actuator: Actuator,
    recorder: GuardRecorder,
    clock: Callable[[], float] = time.time,
) -> ColocationGuard:
    """The guard of ``[colocation]`` on these sources: what :func:`build_guard` builds
    beside a real RM, and the demo beside its simulated one."""
    section = settings.colocation
    observer = GuardObserver(risk, demand_provider(settings), clock=clock,
                             node_hosts=pairs(section.node_hosts))  # fmt: skip
    mode = section.mode if section.enabled else GuardMode.OFF
    ttl = section.reclaim_ttl_s or 3 * section.period_s
    return ColocationGuard(decision_settings(section), observer, actuator, recorder,
                           mode=mode, reclaim_ttl_s=ttl, clock=clock)  # fmt: skip


def guard_actuator(settings: Settings, backend: YarnBackend, store: Store) -> Actuator:
    """The RM's node totals, or (``actuator = "queue-cap"``) the batch queue's cap
    through the configurator's applier and journal."""
    section = settings.colocation
    if section.actuator == "queue-cap":
        journal = SqliteJournal(store)
        return QueueCap(
            backend.document,
            lambda: backend.applier(journal),
            section.batch_queue,
            settings.state.state_dir,
            via="mutation" if backend.path is None else str(backend.path),
            dead_band_percent=100 * section.dead_band_fraction,
        )
    mirror = None
    if section.dynamic_resources_file:
        mirror = DynamicResourcesMirror(
            Path(section.dynamic_resources_file).expanduser(),
            settings.state.state_dir / "guard",
            section.refresh_nodes_resources_command,
        )
    return RmNodeTotals(
        backend.rm,
        settings.state.state_dir,
        verify=PollSettings(timeout_s=section.verify_timeout_s, interval_s=0.25),
        mirror=mirror,
    )


# --------------------------------------------------------------------------- the loop


@dataclass(frozen=True)
class GuardHealth:
    """The guard loop's health: how recent and how fast its cycles are, how many
    failed in a row, and whether its error budget gave the nodes back."""

    period_s: float
    failure_budget: int
    running: bool
    cycles: int
    consecutive_failures: int
    last_cycle_at_s: float | None
    last_cycle_s: float | None
    last_ok_at_s: float | None
    last_error: str
    gave_back_at_s: float | None
    gave_back_why: str
    nodes_read_at_s: float | None

    @property
    def budget_spent(self) -> bool:
        return self.consecutive_failures >= self.failure_budget

    def healthy(self, now_s: float) -> bool:
        """Running, within its budget, and a cycle ended within three periods."""
        recent = self.last_cycle_at_s is not None and now_s - self.last_cycle_at_s < max(
            3 * self.period_s, (self.last_cycle_s or 0.0) + self.period_s
        )
        return self.running and recent and not self.budget_spent

    def to_json(self, now_s: float) -> dict[str, Any]:
        def age(at_s: float | None) -> float | None:
            return None if at_s is None else round(max(0.0, now_s - at_s), 3)

        return {
            "healthy": self.healthy(now_s),
            "running": self.running,
            "period_s": self.period_s,
            "cycles": self.cycles,
            "last_cycle_at_epoch_s": self.last_cycle_at_s,
            "last_cycle_age_s": age(self.last_cycle_at_s),
            "last_cycle_duration_s": self.last_cycle_s,
            "last_ok_at_epoch_s": self.last_ok_at_s,
            "consecutive_failures": self.consecutive_failures,
            "failure_budget": self.failure_budget,
            "error_budget_spent": self.budget_spent,
            "last_error": self.last_error,
            "gave_back_at_epoch_s": self.gave_back_at_s,
            "gave_back_reason": self.gave_back_why,
            "nodes_read_at_epoch_s": self.nodes_read_at_s,
            "nodes_age_s": age(self.nodes_read_at_s),
        }


class GuardLoop:
    """The guard on its own clock: a cycle every ``period_s`` in its own thread.

    A cycle reads the nodes from the shared cache (none while the guard is off: it
    only gives back) and runs one guard round on them. A failure is logged, counted
    and timed; at ``failure_budget`` failures in a row (and every failing cycle
    after) every node is given back, saying why; the loop keeps cycling, and the
    first cycle that succeeds decides afresh."""

    def __init__(
        self,
        guard: ColocationGuard,
        nodes: NodeCache,
        *,
        period_s: float,
        failure_budget: int,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.guard = guard
        self.nodes = nodes
        self.period_s = period_s
        self.failure_budget = failure_budget
        self.clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cycles = 0
        self._failures = 0
        self._last: tuple[float, float] | None = None  # (at, seconds) of the last cycle
        self._last_ok_at_s: float | None = None
        self._last_error = ""
        self._gave_back: tuple[float, str] | None = None
        self._driven = False  # cycles run by the caller (the demo's simulated clock)
        self._metrics = _LoopMetrics(registry or CollectorRegistry())

    # ------------------------------------------------------------------ thread

    def start(self) -> None:
        """Cycle in a thread of its own until :meth:`stop`."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self.run_forever, args=(self._stop,), name="guard-loop", daemon=True
        )
        self._thread.start()

    def drive(self) -> None:
        """The caller runs the cycles (:meth:`run_cycle`) on a clock of its own -- the
        demo's simulated one -- instead of a thread: the loop counts as running
        until :meth:`stop`."""
        self._driven = True

    def stop(self, timeout_s: float = 120.0) -> None:
        """No new cycle; wait for the one running (at most ``timeout_s``)."""
        self._driven = False
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout_s)
            if thread.is_alive():
                log.error("guard loop: a cycle still runs after %g s; stopping anyway", timeout_s)

    @property
    def running(self) -> bool:
        return self._driven or (self._thread is not None and self._thread.is_alive())

    def run_forever(self, stop: threading.Event) -> None:
        """A cycle every ``period_s`` (the next at once when one took longer)."""
        while not stop.is_set():
            began = time.monotonic()
            self.run_cycle()
            stop.wait(max(0.0, self.period_s - (time.monotonic() - began)))

    # ------------------------------------------------------------------ one cycle

    def run_cycle(self) -> GuardRoundReport | None:
        """One guard round on the cached nodes; None when it failed."""
        began, at_s = time.perf_counter(), self.clock()
        try:
            report = self._cycle()
        except YarnAdaptError as exc:
            self._failed(at_s, exc.one_line(), time.perf_counter() - began)
            return None
        except Exception as exc:  # a bug: keep its traceback, keep cycling
            log.exception("guard cycle failed unexpectedly")
            self._failed(at_s, f"unexpected {type(exc).__name__}: {exc}",
                         time.perf_counter() - began)  # fmt: skip
            return None
        self._succeeded(at_s, time.perf_counter() - began)
        return report

    def _cycle(self) -> GuardRoundReport:
        with self._lock:
            self._cycles += 1
            cycle = self._cycles
        if self.guard.mode is GuardMode.OFF:
            return self.guard.run_round((), cycle)  # gives back; reads no node
        snapshot = self.nodes.read(newer_than_s=self.guard.last_change_at_s)
        return self.guard.run_round(snapshot.nodes, cycle)

    def _succeeded(self, at_s: float, seconds: float) -> None:
        with self._lock:
            self._failures, self._last_error = 0, ""
            self._last, self._last_ok_at_s = (at_s, seconds), at_s
        self._metrics.cycle_seconds.labels(result="ok").observe(seconds)

    def _failed(self, at_s: float, why: str, seconds: float) -> None:
        with self._lock:
            self._failures += 1
            failures = self._failures
            self._last, self._last_error = (at_s, seconds), why
        self._metrics.cycle_seconds.labels(result="failed").observe(seconds)
        self._metrics.failures.inc()
        log.error("guard cycle failed (%d in a row): %s", failures, why)
        if failures >= self.failure_budget:
            self._spend_budget(at_s, failures, why)

    def _spend_budget(self, at_s: float, failures: int, why: str) -> None:
        reason = (f"{failures} guard cycles in a row failed (failure_budget "
                  f"{self.failure_budget}); the last: {why}")  # fmt: skip
        try:
            outcomes = self.guard.give_back(reason)
        except YarnAdaptError as exc:
            log.error("guard: cannot give the nodes back: %s", exc.one_line())
            return
        if not outcomes:
            return
        back = ", ".join(f"{o.node_id} {o.result}" for o in outcomes)
        with self._lock:
            self._gave_back = (at_s, f"{reason}: {back}")
        self._metrics.gave_back.inc()

    # ------------------------------------------------------------------ reading

    def health(self) -> GuardHealth:
        with self._lock:
            last, gave_back = self._last, self._gave_back
            latest = self.nodes.latest()
            return GuardHealth(
                period_s=self.period_s,
                failure_budget=self.failure_budget,
                running=self.running,
                cycles=self._cycles,
                consecutive_failures=self._failures,
                last_cycle_at_s=last[0] if last else None,
                last_cycle_s=round(last[1], 4) if last else None,
                last_ok_at_s=self._last_ok_at_s,
                last_error=self._last_error,
                gave_back_at_s=gave_back[0] if gave_back else None,
                gave_back_why=gave_back[1] if gave_back else "",
                nodes_read_at_s=latest.read_at_s if latest else None,
            )


class _LoopMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.cycle_seconds = Histogram(
            "guard_cycle_duration_seconds", "Wall time of a guard cycle, by result.",
            ["result"], namespace=NAMESPACE, buckets=CYCLE_BUCKETS, registry=registry,
        )  # fmt: skip
        self.failures = Counter(
            "guard_cycle_failures", "Guard cycles that failed.", namespace=NAMESPACE,
            registry=registry,
        )  # fmt: skip
        self.gave_back = Counter(
            "guard_gave_back", "Times the error budget gave every node back.",
            namespace=NAMESPACE, registry=registry,
        )  # fmt: skip
        for result in ("ok", "failed"):
            self.cycle_seconds.labels(result=result)


# --------------------------------------------------------------------------- the guard


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
            "nodes": self._nodes(report),
            "agents": self._agents(now_s),
        }

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


# --------------------------------------------------------------------------- records


class ServiceRecorder:
    """A guard round into the guard's tables; every change into the one audit log."""

    def __init__(self, store: Store, guard_store: GuardStore) -> None:
        self.store = store
        self.guard_store = guard_store

    def record(self, round_id: int | None, report: GuardRoundReport) -> None:
        self.guard_store.record(round_id, report)

    def audit(self, action: str, detail: str) -> None:
        self.store.audit("guard", action, None, detail)


GUARD_SCHEMA = """
CREATE TABLE IF NOT EXISTS guard_nodes (
    id INTEGER PRIMARY KEY,
    round_id INTEGER,
    at REAL NOT NULL,
    mode TEXT NOT NULL,
    node TEXT NOT NULL,
    action TEXT NOT NULL,
    reason TEXT NOT NULL,
    risk REAL,
    reserved REAL,
    capacity_mb INTEGER NOT NULL,
    capacity_vcores INTEGER NOT NULL,
    current_mb INTEGER NOT NULL,
    current_vcores INTEGER NOT NULL,
    target_mb INTEGER NOT NULL,
    target_vcores INTEGER NOT NULL,
    used_mb INTEGER NOT NULL,
    used_vcores INTEGER NOT NULL,
    reclaim_mb INTEGER NOT NULL,
    reclaim_vcores INTEGER NOT NULL,
    demand TEXT,
    qos TEXT,
    result TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS guard_nodes_node ON guard_nodes(node, id);
CREATE INDEX IF NOT EXISTS guard_nodes_round ON guard_nodes(round_id);
CREATE INDEX IF NOT EXISTS guard_nodes_at ON guard_nodes(at)
"""
# Columns added after the first release: added to an older table when missing.
GUARD_COLUMNS = (
    ("policy", "TEXT NOT NULL DEFAULT ''"),
    ("state", "TEXT NOT NULL DEFAULT ''"),
    ("paths", "TEXT"),
)


class GuardStore:
    """The guard's tables in the service's SQLite file (WAL; a connection per thread).

    Created with ``IF NOT EXISTS`` when the guard is built, and given the columns a
    later version added (``ALTER TABLE ... ADD COLUMN``): the tables are the guard's
    own and need no step in the configurator's schema migrations. ``round_id`` holds
    the guard's cycle number."""

    def __init__(
        self,
        path: Path,
        *,
        record_every_s: float = RECORD_EVERY_S,
        keep_s: float = KEEP_ROWS_S,
    ) -> None:
        self.path = path
        self.record_every_s = record_every_s
        self.keep_s = keep_s
        self._file = SqliteFile(path, lambda problem: StateDamaged(f"{path}: {problem}"))
        self._written: dict[str, tuple[tuple[object, ...], float]] = {}  # node -> (key, at)
        self._pruned_at = 0.0
        with self._transaction() as db:
            for statement in filter(None, (s.strip() for s in GUARD_SCHEMA.split(";"))):
                db.execute(statement)
            present = {row["name"] for row in db.execute("PRAGMA table_info(guard_nodes)")}
            for name, kind in GUARD_COLUMNS:
                if name not in present:
                    db.execute(f"ALTER TABLE guard_nodes ADD COLUMN {name} {kind}")

    @property
    def _db(self) -> sqlite3.Connection:
        return self._file.db

    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._file.transaction()

    def record(self, round_id: int | None, report: GuardRoundReport) -> None:
        """The cycle's decisions of nodes whose decision changed, or that were last
        recorded ``record_every_s`` ago or more."""
        if report.plan is None:
            return
        rows = [_row(report, d) for d in report.plan.decisions if self._due(report, d)]
        if rows:
            with self._transaction() as db:
                db.executemany(
                    "INSERT INTO guard_nodes (round_id, at, mode, node, action, reason, risk,"
                    " reserved, capacity_mb, capacity_vcores, current_mb, current_vcores,"
                    " target_mb, target_vcores, used_mb, used_vcores, reclaim_mb, reclaim_vcores,"
                    " demand, qos, result, status, policy, state, paths)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    [(round_id, report.at_s, str(report.mode), *row) for row in rows],
                )
        self._prune(report.at_s)

    def _due(self, report: GuardRoundReport, decision: NodeDecision) -> bool:
        outcome = report.outcomes.get(decision.node_id)
        key = (str(report.mode), str(decision.action), decision.target, decision.current,
               str(outcome.result) if outcome else "", str(decision.state or ""))  # fmt: skip
        last = self._written.get(decision.node_id)
        if last is not None and last[0] == key and report.at_s - last[1] < self.record_every_s:
            return False
        self._written[decision.node_id] = (key, report.at_s)
        return True

    def _prune(self, now_s: float) -> None:
        if now_s - self._pruned_at < PRUNE_EVERY_S:
            return
        self._pruned_at = now_s
        with self._transaction() as db:
            db.execute("DELETE FROM guard_nodes WHERE at < ?", (now_s - self.keep_s,))

    def latest(self) -> list[sqlite3.Row]:
        """The newest decision of every node."""
        return self._db.execute(
            "SELECT * FROM guard_nodes WHERE id IN (SELECT MAX(id) FROM guard_nodes GROUP BY node)"
            " ORDER BY node"
        ).fetchall()

    def history(self, node: str, limit: int = 50) -> list[sqlite3.Row]:
        return self._db.execute(
            "SELECT * FROM guard_nodes WHERE node=? ORDER BY id DESC LIMIT ?", (node, limit)
        ).fetchall()

    def series(self, rounds: int = HISTORY_ROUNDS) -> list[sqlite3.Row]:
        """Every node's decisions of the last ``rounds`` recorded cycles, oldest first."""
        return self._db.execute(
            "SELECT * FROM guard_nodes WHERE at >= (SELECT MIN(at) FROM (SELECT DISTINCT at"
            " FROM guard_nodes ORDER BY at DESC LIMIT ?)) ORDER BY id",
            (rounds,),
        ).fetchall()

    def close(self) -> None:
        """Every thread's connection (the web server's included)."""
        self._file.close()


def _row(report: GuardRoundReport, decision: NodeDecision) -> tuple[object, ...]:
    outcome = report.outcomes.get(decision.node_id)
    demand, qos = decision.demand, decision.qos
    return (
        decision.node_id, str(decision.action), decision.reason, decision.risk,
        decision.reserved_fraction,
        decision.capacity.memory_mb, decision.capacity.vcores,
        decision.current.memory_mb, decision.current.vcores,
        decision.target.memory_mb, decision.target.vcores,
        decision.used.memory_mb, decision.used.vcores,
        decision.reclaim.memory_mb, decision.reclaim.vcores,
        None if demand is None else json.dumps(
            {"vcores": demand.vcores, "memory_mb": demand.memory_mb, "source": demand.source}),
        None if qos is None else json.dumps(
            {"application": qos.application, "latency_ms": qos.latency_ms,
             "percentile": qos.percentile, "target_ms": qos.target_ms}),
        str(outcome.result) if outcome else "", outcome.status if outcome else "",
        str(report.plan.policy) if report.plan else "", str(decision.state or ""),
        json.dumps([path_view(p) for p in decision.paths]),
    )  # fmt: skip


def path_view(path: NodePath) -> dict[str, Any]:
    return {
        "application": path.application,
        "self_ms": round(path.self_ms, 3),
        "target_ms": path.target_ms,
        "share_ratio": round(path.share, 4),
        "slack_ratio": round(path.slack_ratio, 4),
        "state": str(path.state),
    }


def _amount(memory_mb: int, vcores: int) -> dict[str, int]:
    return {"memory_mb": memory_mb, "vcores": vcores}


def node_view(row: sqlite3.Row) -> dict[str, Any]:
    """One stored decision, for the API and the page."""
    return {
        "node": row["node"],
        "at_epoch_s": row["at"],
        "cycle": row["round_id"],
        "mode": row["mode"],
        "policy": row["policy"],
        "state": row["state"] or None,
        "action": row["action"],
        "reason": row["reason"],
        "risk": row["risk"],
        "reserved_fraction": row["reserved"],
        "real": _amount(row["capacity_mb"], row["capacity_vcores"]),
        "visible_before": _amount(row["current_mb"], row["current_vcores"]),
        "visible": _amount(row["target_mb"], row["target_vcores"]),
        "used": _amount(row["used_mb"], row["used_vcores"]),
        "reclaim": _amount(row["reclaim_mb"], row["reclaim_vcores"]),
        "demand": json.loads(row["demand"]) if row["demand"] else None,
        "qos": json.loads(row["qos"]) if row["qos"] else None,
        "paths": json.loads(row["paths"]) if row["paths"] else [],
        "result": row["result"],
        "status": row["status"],
        "agent": None,  # what the node's agent reported (GuardStep adds its newest)
    }


def decision_view(report: GuardRoundReport, decision: NodeDecision) -> dict[str, Any]:
    """One decision of the last cycle, in :func:`node_view`'s shape."""
    row = dict(zip(_ROW_NAMES, (report.cycle, report.at_s, str(report.mode),
                                *_row(report, decision)), strict=True))  # fmt: skip
    return node_view(row)  # type: ignore[arg-type]


_ROW_NAMES = (
    "round_id", "at", "mode", "node", "action", "reason", "risk", "reserved", "capacity_mb",
    "capacity_vcores", "current_mb", "current_vcores", "target_mb", "target_vcores", "used_mb",
    "used_vcores", "reclaim_mb", "reclaim_vcores", "demand", "qos", "result", "status",
    "policy", "state", "paths",
)  # fmt: skip


# --------------------------------------------------------------------------- metrics


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
