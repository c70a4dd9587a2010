"""The console's tables: ``queue_usage`` and ``group_latency`` per round, ``versions``
(every configuration that ran) and ``run_summary`` (the demo's judgement of its run).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from yarn_adapt.errors import (
    VersionNotFound,
)
from yarn_adapt.service.state.database import Database
from yarn_adapt.service.state.series import (
    ConfigVersion,
    GroupLatencySample,
    QueueUsage,
    UsageSample,
)


class ConsoleTable(Database):
    """The console's tables: ``queue_usage`` and ``group_latency`` per round, ``versions``"""

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
