"""The page's waitress server stops cleanly with connections still open: the
service's tests keep HTTP sessions alive across requests, as browsers do."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
import requests
from flask import Flask

from yarn_adapt.service.web.server import WebServer


@pytest.fixture
def thread_errors() -> Iterator[list[BaseException]]:
    seen: list[BaseException] = []
    previous = threading.excepthook

    def record(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is not None:
            seen.append(args.exc_value)

    threading.excepthook = record
    yield seen
    threading.excepthook = previous


def app() -> Flask:
    made = Flask("t")
    made.add_url_rule("/", "index", lambda: "ok")
    return made


def test_stopping_with_kept_alive_connections_leaves_no_error_in_the_server_thread(
    thread_errors: list[BaseException],
) -> None:
    for _ in range(30):
        server = WebServer(app(), "127.0.0.1", 0).start()
        sessions = [requests.Session() for _ in range(4)]
        for session in sessions:
            assert session.get(server.url, timeout=5).text == "ok"  # kept alive
        port = server.port
        server.stop()
        assert not server._thread.is_alive()
        with socket.socket() as probe, pytest.raises(OSError):
            probe.connect(("127.0.0.1", port))
        for session in sessions:
            session.close()
    assert thread_errors == []


def test_a_server_never_started_stops() -> None:
    server = WebServer(app(), "127.0.0.1", 0)
    port = server.port
    server.stop()
    with socket.socket() as probe, pytest.raises(OSError):
        probe.connect(("127.0.0.1", port))
