"""The service's SQLite file under every table family: one connection per thread (through
:mod:`~yarn_adapt.service.state.sqlitefile`), ``PRAGMA quick_check`` at open, the online
backup copies, and the schema's migrations (:mod:`~yarn_adapt.service.state.schema`).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from contextlib import AbstractContextManager
from pathlib import Path

from yarn_adapt.errors import (
    SettingsError,
    StateDamaged,
)
from yarn_adapt.service.state.schema import MIGRATIONS, SCHEMA_VERSION, statements
from yarn_adapt.service.state.sqlitefile import SqliteFile
from yarn_adapt.yarn.schedconf.xmlio import fsync_directory

log = logging.getLogger(__name__)


class Database:
    """The file, its connections, its integrity, backups and migrations: what every
    table family stands on."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = SqliteFile(path, self._damaged)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._check_integrity()
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise self._damaged(str(exc)) from exc

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
                for statement in statements(MIGRATIONS[step]):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {step + 1}")

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])


def backup_path(database: Path) -> Path:
    """Where the service keeps the last good copy of ``database``."""
    return database.with_name(database.name + ".backup")


def _fsync_file(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def insert_audit(
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


def stored_float(value: float) -> float:
    # SQLite stores NaN as NULL; a prediction that is unknown is kept as -1.
    return value if value == value else -1.0
