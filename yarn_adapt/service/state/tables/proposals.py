"""The ``proposals``, ``proposal_origin`` and ``audit`` tables: a proposal's life
(created, moved through the state machine, applied, rolled back), each move audited in
the same transaction.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, replace
from typing import Any

from yarn_adapt.errors import (
    ProposalNotFound,
    ProposalStateError,
)
from yarn_adapt.service.state.database import insert_audit, stored_float
from yarn_adapt.service.state.records import (
    AuditEntry,
    AuditKind,
    GroupPrediction,
    ProposalRecord,
    ProposalState,
)
from yarn_adapt.service.state.series import (
    ProposalOrigin,
)
from yarn_adapt.service.state.statemachine import Action, allowed_from, refusal, target_of
from yarn_adapt.service.state.tables.applies import AppliesTable
from yarn_adapt.yarn.confxml import ChangeKind, ConfigChange


class ProposalsTable(AppliesTable):
    """The ``proposals``, ``proposal_origin`` and ``audit`` tables: a proposal's life"""

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
                    stored_float(draft.cluster_before_s),
                    stored_float(draft.cluster_after_s),
                    json.dumps(list(draft.reasons)),
                    draft.gate,
                ),
            )
            proposal_id = int(cursor.lastrowid or 0)
            insert_audit(db, actor, "propose", proposal_id, draft.gate or "stored for review")
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
        insert_audit(db, actor, str(action), proposal_id, note, reason)

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

    def count_proposals(self, state: ProposalState) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) FROM proposals WHERE state=?", (str(state),)
        ).fetchone()
        return int(row[0])

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

    def audit(
        self,
        actor: str,
        action: str,
        proposal_id: int | None,
        detail: str = "",
        reason: str = "",
    ) -> None:
        with self._transaction() as db:
            insert_audit(db, actor, action, proposal_id, detail, reason)

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
