"""The ``agent_tokens`` and ``operator_tokens`` tables: one credential per node agent and
per named operator, each kept as a hash only, every change audited.
"""

from __future__ import annotations

import sqlite3

from yarn_adapt.service.state.database import Database, insert_audit
from yarn_adapt.service.state.records import (
    AgentTokenRecord,
    OperatorTokenRecord,
)


class TokensTable(Database):
    """The ``agent_tokens`` and ``operator_tokens`` tables: one credential per node agent and"""

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
            insert_audit(db, actor, "issue agent token", None, detail)
        return previous

    def delete_agent_token(self, node: str, actor: str) -> AgentTokenRecord | None:
        """Remove ``node``'s token (audited); the removed token, None if it had none."""
        with self._transaction() as db:
            row = db.execute("SELECT * FROM agent_tokens WHERE node=?", (node,)).fetchone()
            if row is None:
                return None
            db.execute("DELETE FROM agent_tokens WHERE node=?", (node,))
            insert_audit(
                db, actor, "revoke agent token", None, f"node {node}: token {row['token_id']}"
            )
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
            insert_audit(db, actor, "issue operator token", None, detail)
        return previous

    def delete_operator_token(self, name: str, actor: str) -> OperatorTokenRecord | None:
        """Remove ``name``'s token (audited); the removed token, None if it had none."""
        with self._transaction() as db:
            row = db.execute("SELECT * FROM operator_tokens WHERE name=?", (name,)).fetchone()
            if row is None:
                return None
            db.execute("DELETE FROM operator_tokens WHERE name=?", (name,))
            detail = f"operator {name}: token {row['token_id']}"
            insert_audit(db, actor, "revoke operator token", None, detail)
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
