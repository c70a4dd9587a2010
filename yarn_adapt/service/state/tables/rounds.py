"""The ``rounds`` and ``decisions`` tables: each round of the loop and what it decided."""

from __future__ import annotations

import json
import sqlite3
import time

from yarn_adapt.service.state.database import Database
from yarn_adapt.service.state.records import (
    Decision,
    DecisionKind,
    RoundReport,
    RoundStatus,
)


class RoundsTable(Database):
    """The ``rounds`` and ``decisions`` tables: each round of the loop and what it decided."""

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

    def last_round_at(self) -> float | None:
        row = self._db.execute("SELECT MAX(started_at) FROM rounds").fetchone()
        return None if row is None or row[0] is None else float(row[0])


def _decision(row: sqlite3.Row) -> Decision:
    return Decision(DecisionKind(row["kind"]), row["reason"], row["proposal_id"], row["grp"])
