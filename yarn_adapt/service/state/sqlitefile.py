"""The service's SQLite file, opened one way for every store that keeps tables in it
(the configurator's :class:`~yarn_adapt.service.state.store.Store`, the guard's
:class:`~yarn_adapt.service.guard.GuardStore`).

Every connection gets the same settings: WAL (readers never wait for the writer),
``synchronous=FULL`` (a committed decision survives a power cut), ``foreign_keys=ON``,
and rows as :class:`sqlite3.Row`. A thread gets a connection of its own (sqlite3
connections are not shared across threads); :meth:`SqliteFile.close` closes them all,
the web server's threads' included.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from yarn_adapt.errors import SettingsError

PRAGMAS = ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON")


class SqliteFile:
    """Per-thread connections to ``path``. ``damaged`` turns SQLite's word that the file
    is corrupt into the caller's error (the store's names its rescue copy)."""

    def __init__(self, path: Path, damaged: Callable[[str], Exception]) -> None:
        self.path = path
        self._damaged = damaged
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()

    @property
    def db(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._connect()
            self._local.connection = connection
            with self._all_lock:
                self._all.append(connection)
        return connection

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``; ``ROLLBACK`` on any exception."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def close(self) -> None:
        """Every thread's connection."""
        with self._all_lock:
            for connection in self._all:
                connection.close()
            self._all.clear()
        self._local = threading.local()

    def _connect(self) -> sqlite3.Connection:
        try:
            connection = sqlite3.connect(
                self.path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise SettingsError(f"{self.path}: cannot open the database: {exc}") from exc
        try:
            connection.row_factory = sqlite3.Row
            for pragma in PRAGMAS:
                connection.execute(f"PRAGMA {pragma}")
        except sqlite3.DatabaseError as exc:
            connection.close()
            if getattr(exc, "sqlite_errorname", "") == "SQLITE_CORRUPT":
                raise self._damaged(str(exc)) from exc
            raise SettingsError(f"{self.path}: not a usable SQLite database: {exc}") from exc
        return connection
