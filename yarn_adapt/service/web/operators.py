"""Named operator tokens: who approved, rejected or rolled back, in the audit log.

The service's write token (``[http] token`` / ``token_file``) is one secret shared
by everyone who has it, so an action taken with it can only be recorded as "the
shared token". A named token is one operator's: ``yarn-adapt operator-token issue
alice`` prints it once, and an approval made with it (signed in on the page, or as
the API's bearer) is recorded as ``alice``. Both kinds are accepted; a team that
wants every action named revokes nobody's access by keeping the shared token to
itself (in the unit's credential) and hands out named ones.

- **Format**: ``yao.<id>.<secret>``: ``id`` (16 hex digits) is public, the token is
  found by it; ``secret`` is 256 random bits (43 url-safe base64 characters).
- **Stored as a hash only** (``operator_tokens``: id, name, who issued it and when,
  the SHA-256 of the whole token), shown once when issued; checked in constant
  time; read from the database on every check, so a revoke takes effect at once.
- **One per name**: issuing for a name that has one is refused unless rotating.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from yarn_adapt.errors import InputError
from yarn_adapt.service.state.records import OperatorTokenRecord

if TYPE_CHECKING:
    from yarn_adapt.service.state.store import Store

TOKEN_PREFIX = "yao"
ID_BYTES = 8
SECRET_BYTES = 32
TOKEN_SHAPE = re.compile(r"yao\.(?P<id>[0-9a-f]{16})\.[A-Za-z0-9_-]{43}")
NAME_SHAPE = re.compile(r"[A-Za-z][A-Za-z0-9._@-]{0,63}")
SHARED = "operator (shared token)"
"""Who an action taken with the service's shared write token is recorded as."""


@dataclass(frozen=True)
class IssuedOperatorToken:
    """A new token, the only time it is seen, and the one it replaced, if any."""

    record: OperatorTokenRecord
    token: str
    replaced: OperatorTokenRecord | None = None

    def __repr__(self) -> str:
        return f"IssuedOperatorToken(record={self.record!r}, token=..., replaced={self.replaced!r})"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def checked_name(name: str) -> str:
    """``name`` when it can name an operator in the audit log, else InputError."""
    if not NAME_SHAPE.fullmatch(name):
        raise InputError(
            f"operator name {name!r}: a letter, then up to 63 letters, digits, '.', '_', "
            "'@' or '-' (e.g. alice or alice@example.com)"
        )
    return name


class OperatorTokens:
    """Issue, list, revoke and verify named operators' tokens in the service's store."""

    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock

    def issue(self, name: str, actor: str, *, rotate: bool = False) -> IssuedOperatorToken:
        token_id = secrets.token_hex(ID_BYTES)
        token = f"{TOKEN_PREFIX}.{token_id}.{secrets.token_urlsafe(SECRET_BYTES)}"
        record = OperatorTokenRecord(
            token_id=token_id,
            name=checked_name(name),
            sha256=digest(token),
            issued_at=self.clock(),
            issued_by=actor,
        )
        previous = self.store.put_operator_token(record, actor, replace_existing=rotate)
        if previous is not None and not rotate:
            raise InputError(
                f"operator {name} already has token {previous.token_id} (issued by "
                f"{previous.issued_by}); 'yarn-adapt operator-token issue --rotate {name}' "
                "replaces it, and the old one stops working at once"
            )
        return IssuedOperatorToken(record, token, previous)

    def revoke(self, name: str, actor: str) -> OperatorTokenRecord:
        removed = self.store.delete_operator_token(name, actor)
        if removed is None:
            known = ", ".join(r.name for r in self.store.operator_tokens()) or "none"
            raise InputError(f"operator {name!r} has no token (operators that have one: {known})")
        return removed

    def listed(self) -> list[OperatorTokenRecord]:
        return self.store.operator_tokens()

    def verify(self, token: str) -> str | None:
        """The name ``token`` speaks for, or None (not a named token, unknown id --
        never issued, revoked, rotated -- or a wrong secret)."""
        match = TOKEN_SHAPE.fullmatch(token)
        if match is None:
            return None
        record = self.store.operator_token(match.group("id"))
        if record is None or not hmac.compare_digest(digest(token), record.sha256):
            return None
        return record.name
