"""Serve the app with waitress (a pure-Python production WSGI server) in a thread
of its own, so the tuning loop keeps the main thread.

Waitress's sockets (the listener, its wake-up pipe, every kept-alive connection)
live in one map that only the loop's thread may close: closing them from another
thread while the loop waits in ``select`` on them ends the loop with EBADF. So the
loop here is our own: it polls until asked to stop, then closes the map itself.
``stop`` asks, wakes it, and waits; it is safe in any order and from any thread
(before ``start``, after the loop ended by itself, twice, concurrently), and it
never writes to the wake-up pipe once the loop has closed it (the descriptor's
number may already belong to another file by then).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from flask import Flask
from waitress.server import BaseWSGIServer, create_server

from yarn_adapt.errors import SettingsError

log = logging.getLogger(__name__)

STOP_WAIT_S = 5.0


class WebServer:
    def __init__(self, app: Flask, host: str, port: int, *, threads: int = 4) -> None:
        try:
            server = create_server(app, host=host, port=port, threads=threads)
        except OSError as exc:
            raise SettingsError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        if not isinstance(server, BaseWSGIServer):  # one host and port give one socket
            raise SettingsError(f"{host}:{port} names more than one address to listen on")
        # Any: waitress's stubs leave out the loop's map and trigger used below.
        self._server: Any = server
        self.host = host
        self._stopping = threading.Event()
        # Held while the map is closed and while the wake-up pipe is written, so
        # the one never happens during the other.
        self._sockets_lock = threading.Lock()
        self._sockets_closed = False
        self._stop_lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name="web", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.effective_port)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def serving(self) -> bool:
        return self._thread.is_alive() and not self._stopping.is_set()

    def start(self) -> WebServer:
        if self._stopping.is_set():
            raise RuntimeError("this page server was stopped; make a new one")
        self._thread.start()
        log.info("serving the operators' page on %s", self.url)
        return self

    def stop(self) -> None:
        """Finish the requests in hand, then end the loop, which closes every socket
        in its own thread. Never raises for a server that is already down."""
        with self._stop_lock:
            first = not self._stopping.is_set()
            self._stopping.set()
            if first:
                self._server.task_dispatcher.shutdown()
        if threading.current_thread() is self._thread:
            return  # called from the loop itself: the loop closes on its way out
        if self._thread.ident is None:
            self._close_sockets()  # never started: nothing else will close them
            return
        self._wake_loop()
        self._thread.join(timeout=STOP_WAIT_S)
        if self._thread.is_alive():
            log.warning("the page's server did not stop within %.0f s", STOP_WAIT_S)

    def _serve(self) -> None:
        server = self._server
        adj = server.adj
        try:
            while not self._stopping.is_set() and server._map:
                server.asyncore.loop(
                    timeout=adj.asyncore_loop_timeout,
                    map=server._map,
                    use_poll=adj.asyncore_use_poll,
                    count=1,
                )
        finally:
            self._close_sockets()

    def _wake_loop(self) -> None:
        with self._sockets_lock:
            trigger = self._server.trigger
            if self._sockets_closed or trigger._closed:
                return
            try:
                trigger.pull_trigger()
            except OSError as exc:  # the loop is ending; it times out of select anyway
                log.debug("waking the page's server loop: %s", exc)

    def _close_sockets(self) -> None:
        server = self._server
        with self._sockets_lock:
            if self._sockets_closed:
                return
            self._sockets_closed = True
            server.asyncore.close_all(server._map, ignore_all=True)
