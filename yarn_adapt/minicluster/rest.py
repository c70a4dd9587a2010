"""Plain HTTP helpers the harness uses to watch its own cluster.

A secured cluster needs SPNEGO and its own CA: :class:`RestAccess` carries both, and
every helper takes one (the default is plain HTTP, no authentication).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import requests

from yarn_adapt.minicluster.errors import MiniClusterError

T = TypeVar("T")
JSON_HEADERS = {"Accept": "application/json"}
REQUEST_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class RestAccess:
    """How the harness authenticates (a ``requests`` auth object) and which CA it trusts."""

    auth: Any = None
    verify: bool | str = True

    def request(self, method: str, url: str, timeout: float, **kwargs: Any) -> requests.Response:
        return requests.request(
            method, url, auth=self.auth, verify=self.verify, timeout=timeout, **kwargs
        )


PLAIN = RestAccess()


def get_json(url: str, access: RestAccess = PLAIN) -> Any:
    """GET ``url`` as JSON; connection problems and error statuses become MiniClusterError."""
    try:
        response = access.request("GET", url, REQUEST_TIMEOUT_S, headers=JSON_HEADERS)
    except requests.RequestException as exc:
        raise MiniClusterError(f"GET {url} failed: {exc.__class__.__name__}") from exc
    _raise_for_status("GET", url, response)
    return response.json()


def send(method: str, url: str, access: RestAccess = PLAIN, **kwargs: Any) -> requests.Response:
    """Send a request and return the response whatever its status."""
    try:
        return access.request(method, url, REQUEST_TIMEOUT_S, **kwargs)
    except requests.RequestException as exc:
        raise MiniClusterError(f"{method} {url} failed: {exc.__class__.__name__}") from exc


def _raise_for_status(method: str, url: str, response: requests.Response) -> None:
    if response.status_code >= 400:
        first_line = (response.text.strip().splitlines() or [""])[0][:300]
        raise MiniClusterError(f"{method} {url} -> HTTP {response.status_code}: {first_line}")


def poll(probe: Callable[[], T | None], timeout_s: float, what: str, interval_s: float = 0.2) -> T:
    """Call ``probe`` until it returns something other than None, or fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = probe()
        if result is not None:
            return result
        if time.monotonic() >= deadline:
            raise MiniClusterError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(interval_s)


def answers(url: str, access: RestAccess = PLAIN) -> Any | None:
    """The JSON at ``url``, or None while the server is not up yet."""
    try:
        response = access.request("GET", url, 2.0, headers=JSON_HEADERS)
    except requests.RequestException:
        return None
    return response.json() if response.status_code == 200 else None
