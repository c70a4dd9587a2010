"""Who may act: write actions need the service token.

- API clients send ``Authorization: Bearer <token>``; a browser never adds that
  header by itself, so the API cannot be driven by a cross-site form.
- People sign in once with the token on ``/login``; the signed session cookie
  (HttpOnly, SameSite=Strict) then marks them as an operator, and every form carries
  the session's CSRF token, checked in constant time together with the Origin.

Tokens are compared with :func:`hmac.compare_digest` and never logged or echoed.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlsplit

from flask import Request, session

SESSION_OPERATOR = "operator"
SESSION_CSRF = "csrf"


def token_matches(given: str | None, expected: str | None) -> bool:
    """Constant-time comparison; no configured token means nobody may write."""
    if not expected or given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def sign_in() -> None:
    session.clear()
    session[SESSION_OPERATOR] = True
    session[SESSION_CSRF] = secrets.token_urlsafe(32)


def is_operator() -> bool:
    return bool(session.get(SESSION_OPERATOR))


def csrf_token() -> str:
    """The token forms carry (one per session)."""
    if SESSION_CSRF not in session:
        session[SESSION_CSRF] = secrets.token_urlsafe(32)
    return str(session[SESSION_CSRF])


def form_is_genuine(request: Request) -> bool:
    """A form post from our own page: the session's CSRF token and, when the
    browser sends one, our own Origin."""
    expected = session.get(SESSION_CSRF)
    given = request.form.get("csrf", "")
    if not expected or not hmac.compare_digest(given.encode(), str(expected).encode()):
        return False
    origin = request.headers.get("Origin")
    return origin is None or _same_origin(origin, request)


def _same_origin(origin: str, request: Request) -> bool:
    parts = urlsplit(origin)
    return f"{parts.scheme}://{parts.netloc}" == request.host_url.rstrip("/")
