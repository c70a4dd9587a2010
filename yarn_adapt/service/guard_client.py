"""Asking a running yarn-adapt service for its co-location guard's status
(``GET /api/guard``, which needs no token): where the service listens, from its
``[http]`` settings, and the request with a one-line error naming the address."""

from __future__ import annotations

import re
from typing import Any

from yarn_adapt.errors import YarnAdaptError
from yarn_adapt.service.settings import HttpSection

DEFAULT_URL = "http://127.0.0.1:8765"
WILDCARDS = frozenset({"0.0.0.0", "::", "[::]", ""})


class GuardStatusUnavailable(YarnAdaptError):
    """The service could not be asked for its guard's status."""


def service_url(http: HttpSection) -> str:
    """Where the service listens: ``[http] public_url``, else ``host`` and ``port`` (a
    wildcard host asked on loopback)."""
    if http.public_url:
        return http.public_url
    host = "127.0.0.1" if http.host in WILDCARDS else http.host
    host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{host}:{http.port}"


def fetch_status(base: str, timeout_s: float) -> dict[str, Any]:
    """``GET {base}/api/guard``; a one-line error naming the address when it fails."""
    import requests

    where = base.rstrip("/") + "/api/guard"
    try:
        reply = requests.get(where, timeout=timeout_s)
    except requests.RequestException as exc:
        raise GuardStatusUnavailable(
            f"{where}: the service cannot be reached ({_reason(exc)})"
        ) from exc
    try:
        body = reply.json()
    except ValueError:
        body = None
    if reply.status_code != 200 or not isinstance(body, dict):
        error = body.get("error") if isinstance(body, dict) else reply.text[:200]
        raise GuardStatusUnavailable(f"{where}: HTTP {reply.status_code}: {error}")
    return body


def _reason(exc: Exception) -> str:
    """The operating system's words for a failed connection, else the error's kind."""
    found = re.search(r"\[Errno -?\d+\] ([^'\")]+)", str(exc))
    return found.group(1).strip() if found else type(exc).__name__
