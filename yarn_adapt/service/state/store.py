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

from yarn_adapt.service.state.tables.checks import ChecksTable
from yarn_adapt.service.state.tables.console import ConsoleTable
from yarn_adapt.service.state.tables.proposals import ProposalsTable
from yarn_adapt.service.state.tables.rounds import RoundsTable
from yarn_adapt.service.state.tables.tokens import TokensTable
from yarn_adapt.yarn.apply import JournalEntry


class Store(RoundsTable, ProposalsTable, ChecksTable, ConsoleTable, TokensTable):
    """All reads and writes of the service's database: every table family
    (:mod:`yarn_adapt.service.state.tables`) over one file."""


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
