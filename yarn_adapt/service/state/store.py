"""The service's state in one embedded SQLite database (stdlib :mod:`sqlite3`, WAL).

Tables: ``rounds``, ``decisions``, ``proposals``, ``applies`` (every apply and
rollback: the configuration made to run, its result), ``audit`` (who did what),
``journal`` (the appliers' step-by-step apply journal, :class:`SqliteJournal`) and
``realized`` (measured latency after an apply beside the prediction),
``prediction_errors`` (each prediction checked on the jobs it was about),
``agent_tokens`` (one credential per node agent, kept as a hash only:
:mod:`yarn_adapt.service.state.agent_tokens`), ``operator_tokens`` (one per named
operator, a hash only: :mod:`yarn_adapt.service.web.operators`) and ``run_summary``
(the demo's judgement of its run, for the page). An operator's reason for an
approval, a rejection or a rollback is kept with the audit entry and the apply.

The schema carries its version in ``PRAGMA user_version``; :data:`MIGRATIONS` moves
an older database forward at open, in one transaction per step. Every write is a
transaction of its own (``BEGIN IMMEDIATE``), committed durably (WAL with
``synchronous=FULL``: the log is fsynced at each commit), so a crash leaves each
record either whole or absent; WAL keeps readers (the web page) from blocking the loop.

At open, ``PRAGMA quick_check`` must pass: a damaged file stops the service with one
line naming it and the backup copy (:class:`~yarn_adapt.errors.StateDamaged`). The
copy is taken with SQLite's online backup API (:meth:`Store.keep_backup`, after each
round and each apply): ``<database>.backup`` and the one before it,
``<database>.backup.1``, each checked before it replaces an older one.

Each thread gets its own connection (sqlite3 connections are not shared across
threads); the web server's worker threads and the loop thread all open the same file.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from yarn_adapt.errors import (
    ProposalNotFound,
    ProposalStateError,
    SettingsError,
    StateDamaged,
    VersionNotFound,
)
from yarn_adapt.service.state.records import (
    AgentTokenRecord,
    ApplyRecord,
    AuditEntry,
    AuditKind,
    Decision,
    DecisionKind,
    GroupPrediction,
    OperatorTokenRecord,
    PredictionError,
    ProposalRecord,
    ProposalState,
    RealizedLatency,
    RoundReport,
    RoundStatus,
)
from yarn_adapt.service.state.series import (
    ConfigVersion,
    GroupLatencySample,
    ProposalOrigin,
    QueueUsage,
    UsageSample,
)
from yarn_adapt.service.state.sqlitefile import SqliteFile
from yarn_adapt.service.state.statemachine import Action, allowed_from, refusal, target_of
from yarn_adapt.yarn.apply import ApplyStep, JournalEntry
from yarn_adapt.yarn.confxml import ChangeKind, ConfigChange
from yarn_adapt.yarn.schedconf.xmlio import fsync_directory

log = logging.getLogger(__name__)

SCHEMA_V1 = """
CREATE TABLE rounds (
    id INTEGER PRIMARY KEY,
    started_at REAL NOT NULL,
    finished_at REAL,
    status TEXT NOT NULL DEFAULT 'running',
    reason TEXT NOT NULL DEFAULT '',
    timings TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE proposals (
    id INTEGER PRIMARY KEY,
    round_id INTEGER REFERENCES rounds(id),
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    state TEXT NOT NULL,
    target TEXT NOT NULL,
    base_xml TEXT NOT NULL,
    proposed_xml TEXT NOT NULL,
    changes TEXT NOT NULL,
    groups TEXT NOT NULL,
    changed_groups TEXT NOT NULL DEFAULT '[]',
    cluster_before_s REAL NOT NULL,
    cluster_after_s REAL NOT NULL,
    reasons TEXT NOT NULL,
    gate TEXT NOT NULL DEFAULT '',
    apply_id TEXT NOT NULL DEFAULT '',
    note TEXT NOT NULL DEFAULT ''
);
CREATE INDEX proposals_state ON proposals(state);
CREATE TABLE decisions (
    id INTEGER PRIMARY KEY,
    round_id INTEGER REFERENCES rounds(id),
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    reason TEXT NOT NULL,
    grp TEXT NOT NULL DEFAULT '',
    proposal_id INTEGER REFERENCES proposals(id)
);
CREATE TABLE applies (
    id INTEGER PRIMARY KEY,
    proposal_id INTEGER NOT NULL REFERENCES proposals(id),
    apply_id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    actor TEXT NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL,
    result TEXT NOT NULL DEFAULT 'running',
    detail TEXT NOT NULL DEFAULT '',
    config_xml TEXT NOT NULL
);
CREATE TABLE audit (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    proposal_id INTEGER,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE TABLE journal (
    seq INTEGER PRIMARY KEY,
    apply_id TEXT NOT NULL,
    step TEXT NOT NULL,
    applier TEXT NOT NULL,
    target TEXT NOT NULL,
    backup TEXT NOT NULL DEFAULT '',
    new_sha256 TEXT NOT NULL DEFAULT '',
    detail TEXT NOT NULL DEFAULT '',
    at REAL NOT NULL
);
CREATE INDEX journal_apply ON journal(apply_id);
CREATE TABLE realized (
    proposal_id INTEGER NOT NULL REFERENCES proposals(id),
    grp TEXT NOT NULL,
    interval INTEGER NOT NULL,
    window_start_ms INTEGER NOT NULL,
    window_end_ms INTEGER NOT NULL,
    jobs INTEGER NOT NULL,
    mean_s REAL,
    predicted_s REAL NOT NULL,
    PRIMARY KEY (proposal_id, grp, interval)
);
"""

# The operators' console: per-round queue usage and group latency, every
# configuration that ran, and where an operator-made proposal came from.
SCHEMA_CONSOLE = """
CREATE TABLE queue_usage (
    round_id INTEGER NOT NULL REFERENCES rounds(id),
    at REAL NOT NULL,
    queue TEXT NOT NULL,
    used_percent REAL NOT NULL,
    guaranteed_percent REAL,
    pending_containers INTEGER NOT NULL,
    running_apps INTEGER NOT NULL,
    pending_apps INTEGER NOT NULL,
    PRIMARY KEY (round_id, queue)
);
CREATE TABLE group_latency (
    round_id INTEGER NOT NULL REFERENCES rounds(id),
    at REAL NOT NULL,
    grp TEXT NOT NULL,
    jobs INTEGER NOT NULL,
    mean_s REAL,
    PRIMARY KEY (round_id, grp)
);
CREATE TABLE versions (
    id INTEGER PRIMARY KEY,
    seen_at REAL NOT NULL,
    sha256 TEXT NOT NULL,
    xml TEXT NOT NULL,
    actor TEXT NOT NULL,
    why TEXT NOT NULL,
    proposal_id INTEGER REFERENCES proposals(id),
    apply_id TEXT NOT NULL DEFAULT '',
    round_id INTEGER
);
CREATE TABLE proposal_origin (
    proposal_id INTEGER PRIMARY KEY REFERENCES proposals(id),
    kind TEXT NOT NULL,
    version_id INTEGER REFERENCES versions(id),
    detail TEXT NOT NULL DEFAULT ''
);
"""

# Every journal entry carries what recovery needs: both hashes and both mutation bodies.
SCHEMA_JOURNAL = """
ALTER TABLE journal ADD COLUMN old_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE journal ADD COLUMN forward_body TEXT NOT NULL DEFAULT '';
ALTER TABLE journal ADD COLUMN reverse_body TEXT NOT NULL DEFAULT '';
"""

# Every prediction checked on its own population once those jobs finished.
SCHEMA_PREDICTIONS = """
CREATE TABLE prediction_errors (
    proposal_id INTEGER NOT NULL REFERENCES proposals(id),
    grp TEXT NOT NULL,
    config TEXT NOT NULL,
    predicted_s REAL NOT NULL,
    low_s REAL,
    high_s REAL,
    realised_s REAL NOT NULL,
    jobs INTEGER NOT NULL,
    finished INTEGER NOT NULL,
    window_start_s REAL NOT NULL,
    window_end_s REAL NOT NULL,
    error REAL NOT NULL,
    PRIMARY KEY (proposal_id, grp)
);
"""

# One credential per node agent: the public id it is found by, the node it may read
# for, and only the SHA-256 of the token (see yarn_adapt/service/state/agent_tokens.py).
SCHEMA_AGENT_TOKENS = """
CREATE TABLE agent_tokens (
    token_id TEXT PRIMARY KEY,
    node TEXT NOT NULL UNIQUE,
    sha256 TEXT NOT NULL,
    issued_at REAL NOT NULL,
    issued_by TEXT NOT NULL
);
"""

# Who did it and why: an operator's reason beside each audit entry and apply; named
# operator tokens (a hash only, like the agents'); the demo's summary of its run.
SCHEMA_OPERATORS = """
ALTER TABLE audit ADD COLUMN reason TEXT NOT NULL DEFAULT '';
ALTER TABLE applies ADD COLUMN reason TEXT NOT NULL DEFAULT '';
CREATE TABLE operator_tokens (
    token_id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    sha256 TEXT NOT NULL,
    issued_at REAL NOT NULL,
    issued_by TEXT NOT NULL
);
CREATE TABLE run_summary (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at REAL NOT NULL,
    summary TEXT NOT NULL
);
"""

MIGRATIONS: tuple[str, ...] = (
    SCHEMA_V1,
    SCHEMA_CONSOLE,
    SCHEMA_JOURNAL,
    SCHEMA_PREDICTIONS,
    SCHEMA_AGENT_TOKENS,
    SCHEMA_OPERATORS,
)
"""``MIGRATIONS[n]`` takes a database from version ``n`` to ``n + 1``."""

SCHEMA_VERSION = len(MIGRATIONS)


class Store:
    """All reads and writes of the service's database."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = SqliteFile(path, self._damaged)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._check_integrity()
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise self._damaged(str(exc)) from exc

    # ------------------------------------------------------------------ connections

    @property
    def _db(self) -> sqlite3.Connection:
        return self._file.db

    def close(self) -> None:
        self._file.close()

    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._file.transaction()

    def _check_integrity(self) -> None:
        rows = [str(row[0]) for row in self._db.execute("PRAGMA quick_check").fetchall()]
        if rows != ["ok"]:
            more = f" (and {len(rows) - 1} more)" if len(rows) > 1 else ""
            raise self._damaged(f"PRAGMA quick_check: {rows[0] if rows else 'no answer'}{more}")

    def _damaged(self, problem: str) -> StateDamaged:
        self.close()
        return StateDamaged(f"{self.path}: the database is damaged ({problem}); {self._rescue()}")

    def _rescue(self) -> str:
        copy = backup_path(self.path)
        if not copy.exists():
            return f"no backup copy exists ({copy} is missing)"
        taken = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(copy.stat().st_mtime))
        return (
            f"the last good copy is {copy} (taken {taken}): stop the service, move the "
            f"damaged file away and copy the backup in its place"
        )

    # ------------------------------------------------------------------ backups

    def keep_backup(self) -> Path | None:
        """Copy the database with SQLite's backup API into ``<database>.backup``
        (the previous copy becomes ``.backup.1``). A copy that fails its own
        integrity check replaces nothing. Returns the copy, None when none was made."""
        target = backup_path(self.path)
        partial = target.with_name(target.name + ".partial")
        try:
            partial.unlink(missing_ok=True)
            copy = sqlite3.connect(partial)
            try:
                self._db.backup(copy)
                healthy = copy.execute("PRAGMA quick_check").fetchone()[0] == "ok"
            finally:
                copy.close()
            if not healthy:
                log.error(
                    "%s: the backup copy fails its integrity check; kept the older one", partial
                )
                partial.unlink(missing_ok=True)
                return None
            _fsync_file(partial)
            if target.exists():
                target.replace(target.with_name(target.name + ".1"))
            partial.replace(target)
            fsync_directory(target.parent)
        except (sqlite3.Error, OSError) as exc:
            log.error("%s: cannot keep a backup copy: %s", target, exc)
            return None
        return target

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise SettingsError(
                f"{self.path}: schema version {version} is newer than this yarn-adapt "
                f"({SCHEMA_VERSION}); upgrade yarn-adapt"
            )
        for step in range(version, SCHEMA_VERSION):
            with self._transaction() as db:
                for statement in _statements(MIGRATIONS[step]):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {step + 1}")

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    # ------------------------------------------------------------------ rounds

    def begin_round(self, started_at: float) -> int:
        with self._transaction() as db:
            cursor = db.execute("INSERT INTO rounds (started_at) VALUES (?)", (started_at,))
            return int(cursor.lastrowid or 0)

    def finish_round(
        self, round_id: int, status: RoundStatus, reason: str, timings: dict[str, float]
    ) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE rounds SET finished_at=?, status=?, reason=?, timings=? WHERE id=?",
                (time.time(), str(status), reason, json.dumps(timings), round_id),
            )

    def record_decision(self, round_id: int | None, decision: Decision) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO decisions (round_id, at, kind, reason, grp, proposal_id)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    round_id,
                    time.time(),
                    str(decision.kind),
                    decision.reason,
                    decision.group,
                    decision.proposal_id,
                ),
            )

    def rounds(self, limit: int = 20) -> list[RoundReport]:
        rows = self._db.execute("SELECT * FROM rounds ORDER BY id DESC LIMIT ?", (limit,))
        return [self._round(row) for row in rows.fetchall()]

    def _round(self, row: sqlite3.Row) -> RoundReport:
        decisions = self._db.execute(
            "SELECT * FROM decisions WHERE round_id=? ORDER BY id", (row["id"],)
        ).fetchall()
        return RoundReport(
            id=row["id"],
            started_at=row["started_at"],
            status=RoundStatus(row["status"]),
            decisions=tuple(_decision(d) for d in decisions),
            timings_s=json.loads(row["timings"]),
            reason=row["reason"],
        )

    def decisions(self, limit: int = 50) -> list[tuple[float, Decision]]:
        rows = self._db.execute("SELECT * FROM decisions ORDER BY id DESC LIMIT ?", (limit,))
        return [(row["at"], _decision(row)) for row in rows.fetchall()]

    # ------------------------------------------------------------------ proposals

    def create_proposal(
        self, draft: ProposalRecord, changed_groups: Sequence[str], actor: str = "service"
    ) -> ProposalRecord:
        """Store ``draft`` (its id and times are assigned here) as pending; older
        pending or approved proposals are superseded: they were computed against a
        cluster that has moved on."""
        now = time.time()
        with self._transaction() as db:
            for row in db.execute(
                "SELECT id FROM proposals WHERE state IN (?, ?)",
                (ProposalState.PENDING.value, ProposalState.APPROVED.value),
            ).fetchall():
                self._move(db, row["id"], Action.SUPERSEDE, actor, "a newer proposal replaced it")
            cursor = db.execute(
                "INSERT INTO proposals (round_id, created_at, updated_at, state, target,"
                " base_xml, proposed_xml, changes, groups, changed_groups, cluster_before_s,"
                " cluster_after_s, reasons, gate) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    draft.round_id,
                    now,
                    now,
                    ProposalState.PENDING.value,
                    draft.target,
                    draft.base_xml,
                    draft.proposed_xml,
                    json.dumps([_change_json(c) for c in draft.changes]),
                    json.dumps([asdict(g) for g in draft.groups]),
                    json.dumps(list(changed_groups)),
                    _finite(draft.cluster_before_s),
                    _finite(draft.cluster_after_s),
                    json.dumps(list(draft.reasons)),
                    draft.gate,
                ),
            )
            proposal_id = int(cursor.lastrowid or 0)
            _audit(db, actor, "propose", proposal_id, draft.gate or "stored for review")
        return self.proposal(proposal_id)

    def proposal(self, proposal_id: int) -> ProposalRecord:
        row = self._db.execute("SELECT * FROM proposals WHERE id=?", (proposal_id,)).fetchone()
        if row is None:
            raise ProposalNotFound(f"no proposal {proposal_id}")
        return _proposal(row)

    def proposals(
        self, limit: int = 50, states: Iterable[ProposalState] | None = None
    ) -> list[ProposalRecord]:
        if states is None:
            rows = self._db.execute("SELECT * FROM proposals ORDER BY id DESC LIMIT ?", (limit,))
        else:
            wanted = [str(s) for s in states]
            marks = ",".join("?" * len(wanted))
            rows = self._db.execute(
                f"SELECT * FROM proposals WHERE state IN ({marks}) ORDER BY id DESC LIMIT ?",
                (*wanted, limit),
            )
        return [_proposal(row) for row in rows.fetchall()]

    def transition(
        self,
        proposal_id: int,
        action: Action,
        actor: str,
        note: str = "",
        apply_id: str = "",
        reason: str = "",
    ) -> ProposalRecord:
        """Move the proposal by ``action`` or raise ProposalStateError; the check and
        the write are one transaction, so concurrent callers cannot both succeed.
        ``reason``: why the operator asked, kept in the audit log."""
        with self._transaction() as db:
            self._move(db, proposal_id, action, actor, note, apply_id, reason)
        return self.proposal(proposal_id)

    def _move(
        self,
        db: sqlite3.Connection,
        proposal_id: int,
        action: Action,
        actor: str,
        note: str,
        apply_id: str = "",
        reason: str = "",
    ) -> None:
        row = db.execute("SELECT state FROM proposals WHERE id=?", (proposal_id,)).fetchone()
        if row is None:
            raise ProposalNotFound(f"no proposal {proposal_id}")
        state = ProposalState(row["state"])
        if state not in allowed_from(action):
            raise ProposalStateError(refusal(action, proposal_id, state))
        db.execute(
            "UPDATE proposals SET state=?, updated_at=?, note=?,"
            " apply_id=CASE WHEN ?='' THEN apply_id ELSE ? END WHERE id=?",
            (str(target_of(action)), time.time(), note, apply_id, apply_id, proposal_id),
        )
        _audit(db, actor, str(action), proposal_id, note, reason)

    def latest_applied(self) -> ProposalRecord | None:
        """The proposal whose configuration runs now (the last one applied and not
        rolled back since), if any."""
        row = self._db.execute(
            "SELECT p.* FROM proposals p JOIN applies a ON a.proposal_id = p.id"
            " WHERE a.result IN ('applied', 'rolled-back') ORDER BY a.finished_at DESC LIMIT 1"
        ).fetchone()
        if row is None or row["state"] != ProposalState.APPLIED.value:
            return None
        return _proposal(row)

    def last_change_per_group(self) -> dict[str, float]:
        """When each group's queues were last changed by an apply or a rollback."""
        rows = self._db.execute(
            "SELECT p.changed_groups, a.finished_at FROM applies a"
            " JOIN proposals p ON p.id = a.proposal_id"
            " WHERE a.result IN ('applied', 'rolled-back') AND a.finished_at IS NOT NULL"
        ).fetchall()
        last: dict[str, float] = {}
        for row in rows:
            for group in json.loads(row["changed_groups"]):
                last[group] = max(last.get(group, 0.0), row["finished_at"])
        return last

    # ------------------------------------------------------------------ applies

    def begin_apply(
        self,
        proposal_id: int,
        action: Action,
        apply_id: str,
        actor: str,
        config_xml: str,
        note: str = "",
        reason: str = "",
    ) -> ProposalRecord:
        """Move the proposal into applying / rolling-back and open its ``applies``
        row in one transaction: either both happen or neither. ``reason``: why the
        operator asked (kept with the apply and in the audit log)."""
        kind = "rollback" if action is Action.BEGIN_ROLLBACK else "apply"
        with self._transaction() as db:
            self._move(db, proposal_id, action, actor, note, apply_id, reason)
            db.execute(
                "INSERT INTO applies (proposal_id, apply_id, kind, actor, started_at, config_xml,"
                " reason) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (proposal_id, apply_id, kind, actor, time.time(), config_xml, reason),
            )
        return self.proposal(proposal_id)

    def end_apply(
        self, apply_id: str, result: str, detail: str, action: Action, actor: str
    ) -> ProposalRecord:
        """Close the ``applies`` row and move its proposal by ``action``, together."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT proposal_id FROM applies WHERE apply_id=?", (apply_id,)
            ).fetchone()
            if row is None:
                raise ProposalNotFound(f"no apply {apply_id}")
            db.execute(
                "UPDATE applies SET finished_at=?, result=?, detail=? WHERE apply_id=?",
                (time.time(), result, detail, apply_id),
            )
            self._move(db, row["proposal_id"], action, actor, detail)
        return self.proposal(row["proposal_id"])

    def proposal_of_apply(self, apply_id: str) -> ProposalRecord:
        record = self.apply_record(apply_id)
        if record is None:
            raise ProposalNotFound(f"no apply {apply_id}")
        return self.proposal(record.proposal_id)

    def apply_record(self, apply_id: str) -> ApplyRecord | None:
        row = self._db.execute("SELECT * FROM applies WHERE apply_id=?", (apply_id,)).fetchone()
        return _apply(row) if row is not None else None

    def applies(self, limit: int = 50, proposal_id: int | None = None) -> list[ApplyRecord]:
        if proposal_id is None:
            rows = self._db.execute("SELECT * FROM applies ORDER BY id DESC LIMIT ?", (limit,))
        else:
            rows = self._db.execute(
                "SELECT * FROM applies WHERE proposal_id=? ORDER BY id DESC LIMIT ?",
                (proposal_id, limit),
            )
        return [_apply(row) for row in rows.fetchall()]

    def unfinished_applies(self) -> list[ApplyRecord]:
        rows = self._db.execute("SELECT * FROM applies WHERE finished_at IS NULL ORDER BY id")
        return [_apply(row) for row in rows.fetchall()]

    def count_applies(self, proposal_id: int, kind: str) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) FROM applies WHERE proposal_id=? AND kind=?", (proposal_id, kind)
        ).fetchone()
        return int(row[0])

    # ------------------------------------------------------------------ audit

    def audit(
        self,
        actor: str,
        action: str,
        proposal_id: int | None,
        detail: str = "",
        reason: str = "",
    ) -> None:
        with self._transaction() as db:
            _audit(db, actor, action, proposal_id, detail, reason)

    def audit_log(
        self, limit: int = 100, proposal_id: int | None = None, kind: AuditKind | None = None
    ) -> list[AuditEntry]:
        """The newest ``limit`` entries (of one proposal, of one kind when given)."""
        where, args = ("", ()) if proposal_id is None else ("WHERE proposal_id=?", (proposal_id,))
        if kind is None:  # (a kind is the action's: read on until enough of it are found)
            where, args = f"{where} ORDER BY id DESC LIMIT ?", (*args, limit)
        else:
            where = f"{where} ORDER BY id DESC"
        rows = self._db.execute(f"SELECT * FROM audit {where}", args)
        found: list[AuditEntry] = []
        for r in rows:
            entry = AuditEntry(
                r["at"], r["actor"], r["action"], r["proposal_id"], r["detail"], r["reason"]
            )
            if kind is None or entry.kind is kind:
                found.append(entry)
                if len(found) >= limit:
                    break
        return found

    # ------------------------------------------------------------------ journal

    def record_journal(self, entry: JournalEntry) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO journal (apply_id, step, applier, target, backup, new_sha256,"
                " detail, at, old_sha256, forward_body, reverse_body)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry.apply_id,
                    str(entry.step),
                    entry.applier,
                    entry.target,
                    entry.backup,
                    entry.new_sha256,
                    entry.detail,
                    entry.at,
                    entry.old_sha256,
                    entry.forward_body,
                    entry.reverse_body,
                ),
            )

    def unfinished_journal_applies(self) -> list[str]:
        """The applies whose last journal step is not final (one query, no bodies)."""
        rows = self._db.execute(
            "SELECT apply_id, step FROM journal WHERE seq IN"
            " (SELECT MAX(seq) FROM journal GROUP BY apply_id) ORDER BY seq"
        ).fetchall()
        return [row["apply_id"] for row in rows if not ApplyStep(row["step"]).is_final]

    def journal_entries(self, apply_id: str | None = None) -> list[JournalEntry]:
        if apply_id is None:
            rows = self._db.execute("SELECT * FROM journal ORDER BY seq")
        else:
            rows = self._db.execute(
                "SELECT * FROM journal WHERE apply_id=? ORDER BY seq", (apply_id,)
            )
        return [_journal_entry(row) for row in rows.fetchall()]

    # ------------------------------------------------------------------ realized

    def record_realized(self, realized: RealizedLatency) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO realized (proposal_id, grp, interval, window_start_ms,"
                " window_end_ms, jobs, mean_s, predicted_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    realized.proposal_id,
                    realized.group,
                    realized.interval,
                    realized.window_start_ms,
                    realized.window_end_ms,
                    realized.jobs,
                    realized.mean_s,
                    _finite(realized.predicted_s),
                ),
            )

    def realized(self, proposal_id: int | None = None) -> list[RealizedLatency]:
        if proposal_id is None:
            rows = self._db.execute("SELECT * FROM realized ORDER BY proposal_id, grp, interval")
        else:
            rows = self._db.execute(
                "SELECT * FROM realized WHERE proposal_id=? ORDER BY grp, interval",
                (proposal_id,),
            )
        return [_realized(row) for row in rows.fetchall()]

    def intervals_measured(self, proposal_id: int) -> int:
        row = self._db.execute(
            "SELECT COALESCE(MAX(interval), 0) FROM realized WHERE proposal_id=?", (proposal_id,)
        ).fetchone()
        return int(row[0])

    # ------------------------------------------------------------------ prediction errors

    def record_prediction_error(self, checked: PredictionError) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO prediction_errors (proposal_id, grp, config,"
                " predicted_s, low_s, high_s, realised_s, jobs, finished, window_start_s,"
                " window_end_s, error) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    checked.proposal_id,
                    checked.group,
                    checked.config,
                    checked.predicted_s,
                    checked.low_s,
                    checked.high_s,
                    checked.realised_s,
                    checked.jobs,
                    checked.finished,
                    checked.window_start_s,
                    checked.window_end_s,
                    checked.error,
                ),
            )

    def prediction_errors(self, proposal_id: int | None = None) -> list[PredictionError]:
        """Checked predictions, oldest proposal first."""
        if proposal_id is None:
            rows = self._db.execute("SELECT * FROM prediction_errors ORDER BY proposal_id, grp")
        else:
            rows = self._db.execute(
                "SELECT * FROM prediction_errors WHERE proposal_id=? ORDER BY grp", (proposal_id,)
            )
        return [_prediction_error(row) for row in rows.fetchall()]

    def unchecked_proposals(self, limit: int = 50) -> list[ProposalRecord]:
        """Of the latest ``limit`` proposals, those with a group prediction that has a
        population and no check yet, each with only such groups."""
        checked: dict[int, set[str]] = {}
        for row in self._db.execute("SELECT proposal_id, grp FROM prediction_errors"):
            checked.setdefault(row["proposal_id"], set()).add(row["grp"])
        found = []
        for proposal in self.proposals(limit=limit):
            done = checked.get(proposal.id, set())
            open_groups = tuple(g for g in proposal.groups if g.population and g.group not in done)
            if open_groups:
                found.append(replace(proposal, groups=open_groups))
        return found

    def was_applied(self, proposal_id: int) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM applies WHERE proposal_id=? AND kind='apply' AND result='applied'",
            (proposal_id,),
        ).fetchone()
        return row is not None

    # ------------------------------------------------------------------ console series
    # (the operators' console: per-round usage and latency, versions, origins)

    def record_usage(self, round_id: int, at: float, usage: Sequence[QueueUsage]) -> None:
        with self._transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO queue_usage (round_id, at, queue, used_percent,"
                " guaranteed_percent, pending_containers, running_apps, pending_apps)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        round_id, at, u.queue, u.used_percent, u.guaranteed_percent,
                        u.pending_containers, u.running_apps, u.pending_apps,
                    )
                    for u in usage
                ],
            )  # fmt: skip

    def record_group_latency(self, samples: Sequence[GroupLatencySample]) -> None:
        with self._transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO group_latency (round_id, at, grp, jobs, mean_s)"
                " VALUES (?, ?, ?, ?, ?)",
                [(s.round_id, s.at, s.group, s.jobs, s.mean_s) for s in samples],
            )

    def usage_series(self, rounds: int = 60) -> list[UsageSample]:
        """Every queue's usage in the last ``rounds`` rounds that recorded it, oldest first."""
        rows = self._db.execute(
            "SELECT * FROM queue_usage WHERE round_id IN (SELECT DISTINCT round_id FROM"
            " queue_usage ORDER BY round_id DESC LIMIT ?) ORDER BY round_id, queue",
            (rounds,),
        ).fetchall()
        return [
            UsageSample(
                r["round_id"],
                r["at"],
                QueueUsage(
                    r["queue"],
                    r["used_percent"],
                    r["guaranteed_percent"],
                    r["pending_containers"],
                    r["running_apps"],
                    r["pending_apps"],
                ),
            )
            for r in rows
        ]

    def latest_usage(self) -> tuple[int, float, list[QueueUsage]] | None:
        """The last recorded round's usage: its round id, time and queues."""
        row = self._db.execute("SELECT MAX(round_id) FROM queue_usage").fetchone()
        if row is None or row[0] is None:
            return None
        samples = list(self.usage_series(rounds=1))
        return samples[0].round_id, samples[0].at, [s.usage for s in samples]

    def latency_series(self, rounds: int = 60) -> list[GroupLatencySample]:
        rows = self._db.execute(
            "SELECT * FROM group_latency WHERE round_id IN (SELECT DISTINCT round_id FROM"
            " group_latency ORDER BY round_id DESC LIMIT ?) ORDER BY round_id, grp",
            (rounds,),
        ).fetchall()
        return [
            GroupLatencySample(r["round_id"], r["at"], r["grp"], r["jobs"], r["mean_s"])
            for r in rows
        ]

    def last_round_at(self) -> float | None:
        row = self._db.execute("SELECT MAX(started_at) FROM rounds").fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def count_proposals(self, state: ProposalState) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) FROM proposals WHERE state=?", (str(state),)
        ).fetchone()
        return int(row[0])

    # ------------------------------------------------------------------ versions

    def record_version(
        self,
        seen_at: float,
        sha256: str,
        xml: str,
        actor: str,
        why: str,
        *,
        proposal_id: int | None = None,
        apply_id: str = "",
        round_id: int | None = None,
    ) -> ConfigVersion:
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO versions (seen_at, sha256, xml, actor, why, proposal_id,"
                " apply_id, round_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (seen_at, sha256, xml, actor, why, proposal_id, apply_id, round_id),
            )
            version_id = int(cursor.lastrowid or 0)
        return self.version(version_id)

    def version(self, version_id: int) -> ConfigVersion:
        row = self._db.execute("SELECT * FROM versions WHERE id=?", (version_id,)).fetchone()
        if row is None:
            raise VersionNotFound(f"no configuration version {version_id}")
        return _version(row)

    def versions(self, limit: int = 100) -> list[ConfigVersion]:
        """Newest first; the first is the configuration running now."""
        rows = self._db.execute("SELECT * FROM versions ORDER BY id DESC LIMIT ?", (limit,))
        return [_version(row) for row in rows.fetchall()]

    def latest_version(self) -> ConfigVersion | None:
        found = self.versions(limit=1)
        return found[0] if found else None

    # ------------------------------------------------------------------ origins

    def create_operator_proposal(
        self,
        draft: ProposalRecord,
        changed_groups: Sequence[str],
        origin: ProposalOrigin,
        actor: str,
    ) -> ProposalRecord:
        """Store an operator's proposal (a revert) for the same review as the
        tuner's, and remember where it came from."""
        created = self.create_proposal(draft, changed_groups, actor=actor)
        with self._transaction() as db:
            db.execute(
                "INSERT INTO proposal_origin (proposal_id, kind, version_id, detail)"
                " VALUES (?, ?, ?, ?)",
                (created.id, origin.kind, origin.version_id, origin.detail),
            )
        return created

    def origins(self) -> dict[int, ProposalOrigin]:
        rows = self._db.execute("SELECT * FROM proposal_origin").fetchall()
        return {
            r["proposal_id"]: ProposalOrigin(
                r["proposal_id"], r["kind"], r["version_id"], r["detail"]
            )
            for r in rows
        }

    def all_applies(self) -> list[ApplyRecord]:
        """Every apply and rollback, oldest first."""
        rows = self._db.execute("SELECT * FROM applies ORDER BY id")
        return [_apply(row) for row in rows.fetchall()]

    # ------------------------------------------------------------------ agent tokens

    def put_agent_token(
        self, record: AgentTokenRecord, actor: str, *, replace_existing: bool
    ) -> AgentTokenRecord | None:
        """Store ``record`` (audited) unless its node has a token already and
        ``replace_existing`` is false; returns the node's previous token, if any
        (replaced, or left as it was and nothing stored)."""
        with self._transaction() as db:
            row = db.execute("SELECT * FROM agent_tokens WHERE node=?", (record.node,)).fetchone()
            previous = None if row is None else _agent_token(row)
            if previous is not None and not replace_existing:
                return previous
            db.execute("DELETE FROM agent_tokens WHERE node=?", (record.node,))
            db.execute(
                "INSERT INTO agent_tokens (token_id, node, sha256, issued_at, issued_by)"
                " VALUES (?, ?, ?, ?, ?)",
                (record.token_id, record.node, record.sha256, record.issued_at, record.issued_by),
            )
            replaced = f", replacing token {previous.token_id}" if previous else ""
            detail = f"node {record.node}: token {record.token_id}{replaced}"
            _audit(db, actor, "issue agent token", None, detail)
        return previous

    def delete_agent_token(self, node: str, actor: str) -> AgentTokenRecord | None:
        """Remove ``node``'s token (audited); the removed token, None if it had none."""
        with self._transaction() as db:
            row = db.execute("SELECT * FROM agent_tokens WHERE node=?", (node,)).fetchone()
            if row is None:
                return None
            db.execute("DELETE FROM agent_tokens WHERE node=?", (node,))
            _audit(db, actor, "revoke agent token", None, f"node {node}: token {row['token_id']}")
        return _agent_token(row)

    def agent_token(self, token_id: str) -> AgentTokenRecord | None:
        row = self._db.execute(
            "SELECT * FROM agent_tokens WHERE token_id=?", (token_id,)
        ).fetchone()
        return None if row is None else _agent_token(row)

    def agent_tokens(self) -> list[AgentTokenRecord]:
        """Every node's token, by node."""
        rows = self._db.execute("SELECT * FROM agent_tokens ORDER BY node").fetchall()
        return [_agent_token(row) for row in rows]

    # ------------------------------------------------------------------ operator tokens

    def put_operator_token(
        self, record: OperatorTokenRecord, actor: str, *, replace_existing: bool
    ) -> OperatorTokenRecord | None:
        """Store ``record`` (audited) unless its operator has a token already and
        ``replace_existing`` is false; returns the operator's previous token, if any."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT * FROM operator_tokens WHERE name=?", (record.name,)
            ).fetchone()
            previous = None if row is None else _operator_token(row)
            if previous is not None and not replace_existing:
                return previous
            db.execute("DELETE FROM operator_tokens WHERE name=?", (record.name,))
            db.execute(
                "INSERT INTO operator_tokens (token_id, name, sha256, issued_at, issued_by)"
                " VALUES (?, ?, ?, ?, ?)",
                (record.token_id, record.name, record.sha256, record.issued_at, record.issued_by),
            )
            replaced = f", replacing token {previous.token_id}" if previous else ""
            detail = f"operator {record.name}: token {record.token_id}{replaced}"
            _audit(db, actor, "issue operator token", None, detail)
        return previous

    def delete_operator_token(self, name: str, actor: str) -> OperatorTokenRecord | None:
        """Remove ``name``'s token (audited); the removed token, None if it had none."""
        with self._transaction() as db:
            row = db.execute("SELECT * FROM operator_tokens WHERE name=?", (name,)).fetchone()
            if row is None:
                return None
            db.execute("DELETE FROM operator_tokens WHERE name=?", (name,))
            detail = f"operator {name}: token {row['token_id']}"
            _audit(db, actor, "revoke operator token", None, detail)
        return _operator_token(row)

    def operator_token(self, token_id: str) -> OperatorTokenRecord | None:
        row = self._db.execute(
            "SELECT * FROM operator_tokens WHERE token_id=?", (token_id,)
        ).fetchone()
        return None if row is None else _operator_token(row)

    def operator_tokens(self) -> list[OperatorTokenRecord]:
        """Every named operator's token, by name."""
        rows = self._db.execute("SELECT * FROM operator_tokens ORDER BY name").fetchall()
        return [_operator_token(row) for row in rows]

    # ------------------------------------------------------------------ run summary

    def record_run_summary(self, summary: dict[str, Any]) -> None:
        """The demo's judgement of its run so far (one, replaced each time)."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO run_summary (id, at, summary) VALUES (1, ?, ?)"
                " ON CONFLICT(id) DO UPDATE SET at=excluded.at, summary=excluded.summary",
                (time.time(), json.dumps(summary)),
            )

    def run_summary(self) -> tuple[float, dict[str, Any]] | None:
        row = self._db.execute("SELECT at, summary FROM run_summary WHERE id=1").fetchone()
        return None if row is None else (row["at"], json.loads(row["summary"]))


def _agent_token(row: sqlite3.Row) -> AgentTokenRecord:
    return AgentTokenRecord(
        token_id=row["token_id"],
        node=row["node"],
        sha256=row["sha256"],
        issued_at=row["issued_at"],
        issued_by=row["issued_by"],
    )


def _operator_token(row: sqlite3.Row) -> OperatorTokenRecord:
    return OperatorTokenRecord(
        token_id=row["token_id"],
        name=row["name"],
        sha256=row["sha256"],
        issued_at=row["issued_at"],
        issued_by=row["issued_by"],
    )


def _version(row: sqlite3.Row) -> ConfigVersion:
    return ConfigVersion(
        id=row["id"],
        seen_at=row["seen_at"],
        sha256=row["sha256"],
        xml=row["xml"],
        actor=row["actor"],
        why=row["why"],
        proposal_id=row["proposal_id"],
        apply_id=row["apply_id"],
        round_id=row["round_id"],
    )


class SqliteJournal:
    """The :class:`~yarn_adapt.yarn.apply.ApplyJournal` of the service: the appliers'
    steps go into the ``journal`` table, each in its own committed transaction
    (``synchronous=FULL``) before the next step starts."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def record(self, entry: JournalEntry) -> None:
        self.store.record_journal(entry)

    def entries(self) -> list[JournalEntry]:
        return self.store.journal_entries()


# --------------------------------------------------------------------------- files


def backup_path(database: Path) -> Path:
    """Where the service keeps the last good copy of ``database``."""
    return database.with_name(database.name + ".backup")


def _fsync_file(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


# --------------------------------------------------------------------------- rows


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


def _audit(
    db: sqlite3.Connection,
    actor: str,
    action: str,
    proposal_id: int | None,
    detail: str,
    reason: str = "",
) -> None:
    db.execute(
        "INSERT INTO audit (at, actor, action, proposal_id, detail, reason)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (time.time(), actor, action, proposal_id, detail, reason),
    )


def _finite(value: float) -> float:
    # SQLite stores NaN as NULL; a prediction that is unknown is kept as -1.
    return value if value == value else -1.0


def _change_json(change: ConfigChange) -> dict[str, Any]:
    return {
        "kind": str(change.kind),
        "queue": change.queue,
        "prop": change.prop,
        "old": change.old,
        "new": change.new,
    }


def _change(raw: dict[str, Any]) -> ConfigChange:
    return ConfigChange(ChangeKind(raw["kind"]), raw["queue"], raw["prop"], raw["old"], raw["new"])


def _proposal(row: sqlite3.Row) -> ProposalRecord:
    return ProposalRecord(
        id=row["id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        state=ProposalState(row["state"]),
        round_id=row["round_id"],
        target=row["target"],
        base_xml=row["base_xml"],
        proposed_xml=row["proposed_xml"],
        changes=tuple(_change(c) for c in json.loads(row["changes"])),
        groups=tuple(GroupPrediction(**g) for g in json.loads(row["groups"])),
        cluster_before_s=row["cluster_before_s"],
        cluster_after_s=row["cluster_after_s"],
        reasons=tuple(json.loads(row["reasons"])),
        gate=row["gate"],
        apply_id=row["apply_id"],
        note=row["note"],
    )


def _decision(row: sqlite3.Row) -> Decision:
    return Decision(DecisionKind(row["kind"]), row["reason"], row["proposal_id"], row["grp"])


def _apply(row: sqlite3.Row) -> ApplyRecord:
    return ApplyRecord(
        id=row["id"],
        proposal_id=row["proposal_id"],
        apply_id=row["apply_id"],
        kind=row["kind"],
        actor=row["actor"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        result=row["result"],
        detail=row["detail"],
        config_xml=row["config_xml"],
        reason=row["reason"],
    )


def _journal_entry(row: sqlite3.Row) -> JournalEntry:
    return JournalEntry(
        apply_id=row["apply_id"],
        step=ApplyStep(row["step"]),
        applier=row["applier"],
        target=row["target"],
        backup=row["backup"],
        new_sha256=row["new_sha256"],
        detail=row["detail"],
        at=row["at"],
        old_sha256=row["old_sha256"],
        forward_body=row["forward_body"],
        reverse_body=row["reverse_body"],
    )


def _realized(row: sqlite3.Row) -> RealizedLatency:
    return RealizedLatency(
        proposal_id=row["proposal_id"],
        group=row["grp"],
        interval=row["interval"],
        window_start_ms=row["window_start_ms"],
        window_end_ms=row["window_end_ms"],
        jobs=row["jobs"],
        mean_s=row["mean_s"],
        predicted_s=row["predicted_s"],
    )


def _prediction_error(row: sqlite3.Row) -> PredictionError:
    return PredictionError(
        proposal_id=row["proposal_id"],
        group=row["grp"],
        config=row["config"],
        predicted_s=row["predicted_s"],
        low_s=row["low_s"],
        high_s=row["high_s"],
        realised_s=row["realised_s"],
        jobs=row["jobs"],
        finished=row["finished"],
        window_start_s=row["window_start_s"],
        window_end_s=row["window_end_s"],
        error=row["error"],
    )
