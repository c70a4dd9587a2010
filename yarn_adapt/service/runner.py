"""Running a built service: reconcile, serve the page, loop until a signal.

The page's reads need no token, so it is served off loopback only when the
operator says so (``[http] public = true`` or ``serve --public``), and then with a
warning: expose it through a TLS proxy that authenticates, never bare.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import secrets
import signal
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from yarn_adapt.errors import SettingsError
from yarn_adapt.service.service import Service
from yarn_adapt.service.settings import Settings, token_from_file, write_token
from yarn_adapt.service.web.app import create_app
from yarn_adapt.service.web.server import WebServer

log = logging.getLogger(__name__)


def ensure_token(settings: Settings) -> tuple[str, Path | None]:
    """The configured write token; with none configured, a new random one kept in
    ``<state dir>/token`` (mode 0600) -- its path is logged, the token never."""
    configured = write_token(settings)
    if configured:
        return configured, None
    path = settings.state.state_dir / "token"
    if path.exists():
        return token_from_file(path, f"the generated token file {path}"), path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        token = secrets.token_urlsafe(32)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(token + "\n")
    except OSError as exc:
        raise SettingsError(f"cannot create the token file {path}: {exc.strerror}") from exc
    return token, path


def is_loopback(host: str) -> bool:
    """True when every address ``host`` names is a loopback address."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addresses = {str(info[4][0]) for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def check_exposure(settings: Settings) -> str | None:
    """Refuse a bind off loopback unless public; the warning to show when public."""
    host = settings.http.host
    if is_loopback(host):
        return None
    if not settings.http.public:
        raise SettingsError(
            f"{settings.source}: [http] host {host!r} is not a loopback address and the page's "
            "reads need no token; set [http] public = true (or serve --public) to expose it, "
            "behind a TLS proxy"
        )
    return (
        f"the page is served on {host}, off loopback: anyone who reaches it can read "
        "proposals and history; put a TLS proxy that authenticates in front of it"
    )


@contextmanager
def serving(service: Service) -> Iterator[WebServer | None]:
    """The operators' page, while the block runs (none when [http] enabled is false)."""
    if not service.settings.http.enabled:
        yield None
        return
    warning = check_exposure(service.settings)
    if warning:
        log.warning("%s", warning)
    server = WebServer(create_app(service), service.settings.http.host, service.settings.http.port)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGTERM or SIGINT (restoring the old handlers afterwards)."""
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: stopping after the current round", signum)
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
