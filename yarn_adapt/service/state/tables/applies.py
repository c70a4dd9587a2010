"""The ``applies`` and ``journal`` tables: every apply and rollback, and the appliers'
step-by-step journal.
"""

from __future__ import annotations

import sqlite3

from yarn_adapt.service.state.database import Database
from yarn_adapt.service.state.records import (
    ApplyRecord,
)
from yarn_adapt.yarn.apply import ApplyStep, JournalEntry


class AppliesTable(Database):
    """The ``applies`` and ``journal`` tables: every apply and rollback, and the appliers'"""

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

    def all_applies(self) -> list[ApplyRecord]:
        """Every apply and rollback, oldest first."""
        rows = self._db.execute("SELECT * FROM applies ORDER BY id")
        return [_apply(row) for row in rows.fetchall()]

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
