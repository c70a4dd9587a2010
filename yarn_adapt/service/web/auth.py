"""How the operator proves who they are (which endpoint takes which credential:
:mod:`yarn_adapt.service.web.access`).

- API clients send ``Authorization: Bearer <token>``; a browser never adds that
  header by itself, so the API cannot be driven by a cross-site form.
- People sign in once with the token on ``/login``; the signed session cookie
  (HttpOnly, SameSite=Strict) then marks them as an operator -- by name when they
  signed in with a named token (:mod:`~yarn_adapt.service.web.operators`) -- and every
  form carries the session's CSRF token, checked in constant time with the Origin.

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


def sign_in(name: str) -> None:
    """Mark this session as operator ``name`` (who the audit log will name)."""
    session.clear()
    session[SESSION_OPERATOR] = name
    session[SESSION_CSRF] = secrets.token_urlsafe(32)


def is_operator() -> bool:
    return bool(session.get(SESSION_OPERATOR))


def operator_name() -> str:
    """Who signed in this session ('' when nobody)."""
    name = session.get(SESSION_OPERATOR)
    return name if isinstance(name, str) else ""


def csrf_token() -> str:
    """The token forms carry (one per session)."""
    if SESSION_CSRF not in session:
        session[SESSION_CSRF] = secrets.token_urlsafe(32)
    return str(session[SESSION_CSRF])


def form_is_genuine(request: Request, public_origin: str | None = None) -> bool:
    """A form post from our own page: the session's CSRF token and, when the
    browser sends one, our own Origin: the address the request came to, or the
    configured public origin (``[http] public_url``) behind a TLS proxy, where the
    browser's ``https://`` origin differs from the proxied ``http://`` request."""
    expected = session.get(SESSION_CSRF)
    given = request.form.get("csrf", "")
    if not expected or not hmac.compare_digest(given.encode(), str(expected).encode()):
        return False
    origin = request.headers.get("Origin")
    if origin is None:
        return True
    allowed = {origin_of(request.host_url)} | ({public_origin} if public_origin else set())
    return origin_of(origin) in allowed


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL, lower-cased, default ports dropped."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    host = f"[{host}]" if ":" in host else host
    try:
        port = parts.port
    except ValueError:
        return "invalid"
    default = {"http": 80, "https": 443}.get(scheme)
    shown_port = "" if port is None or port == default else f":{port}"
    return f"{scheme}://{host}{shown_port}"
