"""The ``realized`` and ``prediction_errors`` tables: what ran after an apply, and each
prediction checked on the jobs it was about.
"""

from __future__ import annotations

import sqlite3

from yarn_adapt.service.state.database import Database, stored_float
from yarn_adapt.service.state.records import (
    PredictionError,
    RealizedLatency,
)


class ChecksTable(Database):
    """The ``realized`` and ``prediction_errors`` tables: what ran after an apply, and each"""

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
                    stored_float(realized.predicted_s),
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
