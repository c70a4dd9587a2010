"""What the guard keeps: :class:`GuardStore`, its own tables in the service's SQLite file
(decisions per node when they change, and at least every ``RECORD_EVERY_S`` while they
hold; rows older than ``KEEP_ROWS_S`` deleted), :class:`ServiceRecorder` into the
service's audit log, and the rows' views.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from yarn_adapt.colocation.guard import GuardRoundReport
from yarn_adapt.colocation.model import (
    NodeDecision,
    NodePath,
)
from yarn_adapt.errors import StateDamaged
from yarn_adapt.service.state.sqlitefile import SqliteFile
from yarn_adapt.service.state.store import Store

log = logging.getLogger(__name__)


HISTORY_ROUNDS = 60


RECORD_EVERY_S = 60.0  # a node's unchanged decision is recorded at least this often


KEEP_ROWS_S = 7 * 86400.0  # decisions older than this are deleted


PRUNE_EVERY_S = 600.0


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
