"""Serve the app with waitress (a pure-Python production WSGI server) in a thread
of its own, so the tuning loop keeps the main thread."""

from __future__ import annotations

import logging
import threading

from flask import Flask
from waitress.server import create_server

from yarn_adapt.errors import SettingsError

log = logging.getLogger(__name__)


class WebServer:
    def __init__(self, app: Flask, host: str, port: int, *, threads: int = 4) -> None:
        try:
            self._server = create_server(app, host=host, port=port, threads=threads)
        except OSError as exc:
            raise SettingsError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        self.host = host
        self._thread = threading.Thread(target=self._server.run, name="web", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.effective_port)  # type: ignore[union-attr]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> WebServer:
        self._thread.start()
        log.info("serving the operators' page on %s", self.url)
        return self

    def stop(self) -> None:
        """Finish the requests in hand, then close every socket *in the server's own
        thread*: closing them from here while its loop waits in ``select`` on them
        (kept-alive connections stay in its map) ends that loop with EBADF."""
        server = self._server
        server.task_dispatcher.shutdown()
        if not self._thread.is_alive():
            server.asyncore.close_all(server._map)  # type: ignore[union-attr]
            return
        server.trigger.pull_trigger(lambda: server.asyncore.close_all(server._map))  # type: ignore[union-attr]
        self._thread.join(timeout=5)
        if self._thread.is_alive():
            log.warning("the page's server did not stop within 5 s")
