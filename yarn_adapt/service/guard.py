"""The co-location guard inside the service: built from ``[colocation]``, run as one
step of every round (after the loop observed the RM), recorded in the service's
database and audit log, exported as Prometheus metrics.

:class:`GuardStep` wraps :class:`~yarn_adapt.colocation.guard.ColocationGuard` (the
same class the testbed runs) with what only the service has: the RM the backend
already talks to, the trace store named in ``[tracing]``, the SQLite store
(:class:`GuardStore`, its own tables beside the configurator's) and the registry.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tracing.redisconn import RedisConfig, make_client
from tracing.risk import RiskSettings
from tracing.store import StoreLimits, TraceStore
from yarn_adapt.colocation.actuate import Actuator, RmNodeTotals
from yarn_adapt.colocation.demand import DemandProvider, NoDemand, ObservedUsageDemand
from yarn_adapt.colocation.guard import ColocationGuard, GuardRoundReport
from yarn_adapt.colocation.lra import LearnedLraDemand, NodeUtilizationUsage, load_warm_start
from yarn_adapt.colocation.model import GuardMode, GuardSettings, NodeDecision
from yarn_adapt.colocation.observe import GuardObserver, TraceStoreRisk
from yarn_adapt.colocation.queuecap import QueueCap
from yarn_adapt.demand.lra import LraDemandLearner, LraMode, LraSettings, LraSpec
from yarn_adapt.errors import SettingsError
from yarn_adapt.model import ClusterSnapshot, Resources
from yarn_adapt.service.backend import YarnBackend
from yarn_adapt.service.records import Decision, DecisionKind
from yarn_adapt.service.settings import (
    ColocationSection,
    Settings,
    TracingSection,
    pairs,
    redis_password,
    redis_password_setting,
)
from yarn_adapt.service.store import SqliteJournal, Store
from yarn_adapt.yarn.apply import PollSettings

log = logging.getLogger(__name__)

HISTORY_ROUNDS = 60


# --------------------------------------------------------------------------- building


def decision_settings(section: ColocationSection) -> GuardSettings:
    try:
        return GuardSettings(
            nu=section.nu,
            zero_violation=section.zero_violation,
            min_visible_fraction=section.min_visible_fraction,
            min_raw_risk=section.min_raw_risk,
            dead_band_fraction=section.dead_band_fraction,
            max_step_up_fraction=section.max_step_up_fraction,
            cooldown_s=section.cooldown_s,
            stale_after_s=section.stale_after_s,
            millicores_per_vcore=section.millicores_per_vcore,
        )
    except ValueError as exc:
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
    targets = {name: float(ms) for name, ms in pairs(section.qos_targets).items()}
    risk = TraceStoreRisk(
        trace_store_opener(settings),
        window_s=settings.tracing.window_s,
        risk_settings=RiskSettings(
            alpha=settings.tracing.alpha, min_share=settings.tracing.critical_min_share
        ),
        percentile=section.qos_percentile,
        targets_ms=targets,
    )
    demand = demand_provider(settings)
    observer = GuardObserver(risk, demand, node_hosts=pairs(section.node_hosts))
    actuator = guard_actuator(settings, backend, store)
    mode = section.mode if section.enabled else GuardMode.OFF
    ttl = section.reclaim_ttl_s or 3 * settings.service.interval_s
    return ColocationGuard(
        decision_settings(section),
        observer,
        actuator,
        ServiceRecorder(store, guard_store),
        mode=mode,
        reclaim_ttl_s=ttl,
    )


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
    return RmNodeTotals(
        backend.rm,
        settings.state.state_dir,
        verify=PollSettings(timeout_s=section.verify_timeout_s, interval_s=0.25),
    )


# --------------------------------------------------------------------------- the step


class GuardStep:
    """One round's guard step inside the service loop, and the guard's view for the
    page, the API and /metrics."""

    def __init__(self, guard: ColocationGuard, store: GuardStore) -> None:
        self.guard = guard
        self.store = store

    def run(self, round_id: int, view: object) -> Decision:
        if not isinstance(view, ClusterSnapshot):
            return Decision(DecisionKind.GUARD, "guard: needs a real RM's nodes; nothing done")
        report = self.guard.run_round(view.nodes, round_id)
        return Decision(DecisionKind.GUARD, report.summary())

    def stop(self) -> None:
        for outcome in self.guard.stop():
            log.info("guard stop: %s: %s", outcome.node_id, outcome.status)

    def status(self) -> dict[str, Any]:
        report = self.guard.last_report
        return {
            "mode": str(self.guard.mode),
            "settings": _settings_view(self.guard.settings),
            "journalled_nodes": self.guard.actuator.pending_nodes(),
            "last_round": None if report is None else report_view(report),
            "nodes": [node_view(row) for row in self.store.latest()],
        }


def report_view(report: GuardRoundReport) -> dict[str, Any]:
    return {
        "at_epoch_s": report.at_s,
        "mode": str(report.mode),
        "summary": report.summary(),
        "risk_problem": report.problem,
        "seconds": report.seconds,
        "restored": [
            {"node": o.node_id, "result": str(o.result), "status": o.status}
            for o in report.restored
        ],
    }


def _settings_view(settings: GuardSettings) -> dict[str, Any]:
    return {
        "nu": settings.nu,
        "zero_violation": settings.zero_violation,
        "min_visible_fraction": settings.min_visible_fraction,
        "min_raw_risk": settings.min_raw_risk,
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
"""


class GuardStore:
    """The guard's tables in the service's SQLite file (WAL; a connection per thread).

    Created with ``IF NOT EXISTS`` when the guard is built: the tables are the
    guard's own and need no step in the configurator's schema migrations."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        with self._transaction() as db:
            for statement in filter(None, (s.strip() for s in GUARD_SCHEMA.split(";"))):
                db.execute(statement)

    @property
    def _db(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(
                self.path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            connection.row_factory = sqlite3.Row
            connection.execute("PRAGMA journal_mode=WAL")
            self._local.connection = connection
            with self._all_lock:
                self._all.append(connection)
        return connection

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def record(self, round_id: int | None, report: GuardRoundReport) -> None:
        if report.plan is None:
            return
        with self._transaction() as db:
            for decision in report.plan.decisions:
                outcome = report.outcomes.get(decision.node_id)
                db.execute(
                    "INSERT INTO guard_nodes (round_id, at, mode, node, action, reason, risk,"
                    " reserved, capacity_mb, capacity_vcores, current_mb, current_vcores,"
                    " target_mb, target_vcores, used_mb, used_vcores, reclaim_mb, reclaim_vcores,"
                    " demand, qos, result, status)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (round_id, report.at_s, str(report.mode), *_row(decision),
                     str(outcome.result) if outcome else "",
                     outcome.status if outcome else ""),
                )  # fmt: skip

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
        """Every node's decisions of the last ``rounds`` guard rounds, oldest first."""
        return self._db.execute(
            "SELECT * FROM guard_nodes WHERE at >= (SELECT MIN(at) FROM (SELECT DISTINCT at"
            " FROM guard_nodes ORDER BY at DESC LIMIT ?)) ORDER BY id",
            (rounds,),
        ).fetchall()

    def close(self) -> None:
        """Every thread's connection (the web server's included)."""
        with self._all_lock:
            for connection in self._all:
                connection.close()
            self._all.clear()
        self._local = threading.local()


def _row(decision: NodeDecision) -> tuple[object, ...]:
    demand = decision.demand
    qos = decision.qos
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
    )  # fmt: skip


def node_view(row: sqlite3.Row) -> dict[str, Any]:
    """One stored decision, for the API and the page."""
    return {
        "node": row["node"],
        "at_epoch_s": row["at"],
        "round_id": row["round_id"],
        "mode": row["mode"],
        "action": row["action"],
        "reason": row["reason"],
        "risk": row["risk"],
        "reserved_fraction": row["reserved"],
        "real": {"memory_mb": row["capacity_mb"], "vcores": row["capacity_vcores"]},
        "visible_before": {"memory_mb": row["current_mb"], "vcores": row["current_vcores"]},
        "visible": {"memory_mb": row["target_mb"], "vcores": row["target_vcores"]},
        "used": {"memory_mb": row["used_mb"], "vcores": row["used_vcores"]},
        "reclaim": {"memory_mb": row["reclaim_mb"], "vcores": row["reclaim_vcores"]},
        "demand": json.loads(row["demand"]) if row["demand"] else None,
        "qos": json.loads(row["qos"]) if row["qos"] else None,
        "result": row["result"],
        "status": row["status"],
    }


# --------------------------------------------------------------------------- metrics


class GuardCollector(Collector):
    """The guard's per-node figures of its last round, at scrape time."""

    def __init__(self, guard: ColocationGuard) -> None:
        self.guard = guard

    def collect(self) -> Iterator[Metric]:
        prefix = "yarn_adapt_guard"
        mode = GaugeMetricFamily(f"{prefix}_mode", "The guard's mode (1 for the active one).",
                                 labels=["mode"])  # fmt: skip
        for each in GuardMode:
            mode.add_metric([str(each)], 1.0 if each is self.guard.mode else 0.0)
        actions = CounterMetricFamily(f"{prefix}_actions", "Node changes by action and result.",
                                      labels=["action", "result"])  # fmt: skip
        for (action, result), count in sorted(self.guard.counts.items()):
            actions.add_metric([action, result], count)
        journalled = GaugeMetricFamily(
            f"{prefix}_journalled_nodes", "Nodes not known to be back at their original total."
        )
        journalled.add_metric([], len(self.guard.actuator.pending_nodes()))
        yield from (mode, actions, journalled, *self._nodes())

    def _nodes(self) -> Iterator[Metric]:
        prefix = "yarn_adapt_guard_node"
        risk = GaugeMetricFamily(f"{prefix}_risk", "Normalised node risk (0-1).", labels=["node"])
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
        report = self.guard.last_report
        if report is not None and report.plan is not None:
            for decision in report.plan.decisions:
                if decision.risk is not None:
                    risk.add_metric([decision.node_id], decision.risk)
                total = _effective_total(report, decision)
                for resource, seen, whole in (
                    ("vcores", total.vcores, decision.capacity.vcores),
                    ("memory", total.memory_mb, decision.capacity.memory_mb),
                ):
                    visible.add_metric([decision.node_id, resource], seen / whole if whole else 1.0)
                request = self.guard.reclaim_for(decision.node_id)
                reclaim.add_metric([decision.node_id], request.cpu_millicores if request else 0)
        yield from (risk, visible, reclaim)


def _effective_total(report: GuardRoundReport, decision: NodeDecision) -> Resources:
    """What the scheduler sees after the round: the target when it was set."""
    outcome = report.outcomes.get(decision.node_id)
    return decision.target if outcome is not None and outcome.ok else decision.current
