"""One way to open the service's SQLite file: the configurator's store and the guard's
store get the same strict settings on every thread's connection."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from yarn_adapt.errors import SettingsError, StateDamaged
from yarn_adapt.service.guard.records import GuardStore
from yarn_adapt.service.state.sqlitefile import SqliteFile
from yarn_adapt.service.state.store import Store


def settings_of(db: sqlite3.Connection) -> tuple[str, int, int]:
    journal = db.execute("PRAGMA journal_mode").fetchone()[0]
    return (
        journal,
        db.execute("PRAGMA synchronous").fetchone()[0],
        db.execute("PRAGMA foreign_keys").fetchone()[0],
    )


def test_both_stores_open_the_file_with_the_same_strict_settings(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store, guard = Store(path), GuardStore(path)
    try:
        for db in (store._db, guard._db):
            assert settings_of(db) == ("wal", 2, 1)  # WAL, synchronous=FULL, foreign keys
        seen: list[tuple[str, int, int]] = []
        other = threading.Thread(target=lambda: seen.append(settings_of(guard._db)))
        other.start()
        other.join()
        assert seen == [("wal", 2, 1)]  # another thread's own connection, the same way
    finally:
        store.close()
        guard.close()


def test_a_transaction_rolls_back_on_an_exception_and_close_closes_every_thread(
    tmp_path: Path,
) -> None:
    sqlite = SqliteFile(tmp_path / "t.db", lambda problem: StateDamaged(problem))
    sqlite.db.execute("CREATE TABLE t (x INTEGER)")
    with pytest.raises(RuntimeError), sqlite.transaction() as db:
        db.execute("INSERT INTO t VALUES (1)")
        raise RuntimeError("half-way")
    assert sqlite.db.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 0
    first = sqlite.db
    sqlite.close()
    with pytest.raises(sqlite3.ProgrammingError):
        first.execute("SELECT 1")
    assert sqlite.db is not first  # a fresh connection after close


def test_a_file_that_is_not_a_database_is_named(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(SettingsError, match=r"junk\.db"):
        SqliteFile(path, lambda problem: StateDamaged(problem)).db.execute("SELECT 1")
