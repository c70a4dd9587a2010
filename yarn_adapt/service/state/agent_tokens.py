"""Node agent tokens: one credential per node, for one job.

A node agent reads its own node's reclaim request (``GET
/api/agent/nodes/<node>/reclaim``) and nothing else, so it holds a token issued for
that node (``yarn-adapt agent-token issue NODE``), never the operator's write token:
a token copied off one NodeManager host reads that node's request and does nothing
more (:mod:`yarn_adapt.service.web.access` says which endpoint takes which token).

- **Format**: ``yaa.<id>.<secret>``. ``id`` (16 hex digits) is public: the token is
  found by it. ``secret`` is 256 random bits (43 url-safe base64 characters).
- **Stored as a hash only**: the ``agent_tokens`` table keeps the id, the node, who
  issued it and when, and the SHA-256 of the whole token; the token itself is shown
  once, when issued. A fast hash is enough: 256 random bits leave no dictionary to
  try, so a copy of the database yields no token.
- **Checked in constant time**: the id is looked up, then the digests are compared
  with :func:`hmac.compare_digest`. Every check reads the database, so a revoked or
  rotated token fails on its next request, whichever process revoked it.
- **One token per node**: issuing for a node that has one is refused unless the
  caller asks to rotate (the old token then stops working at once). Two live tokens
  would hide which copy an agent uses; replacing silently would lock a running agent
  out on a typo of the node name.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from yarn_adapt.errors import InputError
from yarn_adapt.service.state.records import AgentTokenRecord

if TYPE_CHECKING:
    from yarn_adapt.service.state.store import Store

TOKEN_PREFIX = "yaa"
ID_BYTES = 8
SECRET_BYTES = 32
TOKEN_SHAPE = re.compile(r"yaa\.(?P<id>[0-9a-f]{16})\.[A-Za-z0-9_-]{43}")
NODE_SHAPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:\[\]-]{0,254}")
"""A YARN node id as the RM and the agent name it (``host:port``): the letters of a
host name, an IPv6 literal in brackets and a port; no ``/`` (it is a path segment)."""


@dataclass(frozen=True)
class IssuedToken:
    """A new token, the only time it is seen, and the token it replaced, if any."""

    record: AgentTokenRecord
    token: str = field(repr=False)
    replaced: AgentTokenRecord | None = None


@dataclass(frozen=True)
class AgentCredential:
    """Whom a verified agent token speaks for."""

    node: str
    token_id: str

    def __str__(self) -> str:
        return f"node {self.node}'s agent token {self.token_id}"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_id_of(token: str) -> str | None:
    """The public id of a string shaped like an agent token; None for anything else."""
    match = TOKEN_SHAPE.fullmatch(token)
    return match.group("id") if match else None


def checked_node(node: str) -> str:
    """``node`` when it can name a YARN node in the agents' path, else InputError."""
    if not NODE_SHAPE.fullmatch(node):
        raise InputError(
            f"node {node!r} is not a YARN node id as the RM names it (host:port, e.g. "
            f"worker-7.example.com:8041: letters, digits, '.', '-', '_', ':', '[', ']')"
        )
    return node


class AgentTokens:
    """Issue, list, revoke and verify the node agents' tokens in the service's store."""

    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock

    def issue(self, node: str, actor: str, *, rotate: bool = False) -> IssuedToken:
        """A new token for ``node``. A node that has one keeps it (InputError) unless
        ``rotate``: then the old one stops working at once."""
        token_id = secrets.token_hex(ID_BYTES)
        token = f"{TOKEN_PREFIX}.{token_id}.{secrets.token_urlsafe(SECRET_BYTES)}"
        record = AgentTokenRecord(
            token_id=token_id,
            node=checked_node(node),
            sha256=digest(token),
            issued_at=self.clock(),
            issued_by=actor,
        )
        previous = self.store.put_agent_token(record, actor, replace_existing=rotate)
        if previous is not None and not rotate:
            raise InputError(
                f"node {node} already has agent token {previous.token_id} (issued by "
                f"{previous.issued_by}); 'yarn-adapt agent-token issue --rotate {node}' "
                f"replaces it, and the old one stops working at once"
            )
        return IssuedToken(record, token, previous)

    def revoke(self, node: str, actor: str) -> AgentTokenRecord:
        """Remove ``node``'s token; its next request is refused."""
        removed = self.store.delete_agent_token(node, actor)
        if removed is None:
            known = ", ".join(r.node for r in self.store.agent_tokens()) or "none"
            raise InputError(f"node {node!r} has no agent token (nodes that have one: {known})")
        return removed

    def listed(self) -> list[AgentTokenRecord]:
        return self.store.agent_tokens()

    def verify(self, token: str) -> AgentCredential | None:
        """The node ``token`` speaks for, or None: not an agent token, unknown id
        (never issued, revoked, rotated) or a wrong secret."""
        token_id = token_id_of(token)
        if token_id is None:
            return None
        record = self.store.agent_token(token_id)
        if record is None or not hmac.compare_digest(digest(token), record.sha256):
            return None
        return AgentCredential(record.node, record.token_id)
