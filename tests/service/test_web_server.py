"""The page's waitress server stops cleanly with connections still open: the
service's tests keep HTTP sessions alive across requests, as browsers do."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

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


def _in_loop_thread(server: WebServer, thunk: Callable[[], None]) -> None:
    """Run ``thunk`` in the server loop's own thread (waitress's trigger thunks)."""
    server._server.trigger.pull_trigger(thunk)


def _refused(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.connect(("127.0.0.1", port))
        except OSError:
            return True
    return False


def test_stop_after_the_loop_closed_its_sockets_while_its_thread_still_runs() -> None:
    """The CI race: waitress's loop had closed its map (the wake-up pipe with it)
    but its thread was still alive when stop() ran; stop wrote to the closed pipe
    and raised EBADF. Made deterministic by holding the loop thread right after
    the close."""
    server = WebServer(app(), "127.0.0.1", 0).start()
    port = server.port
    closed, release = threading.Event(), threading.Event()

    def close_then_hold() -> None:
        server._server.asyncore.close_all(server._server._map)
        closed.set()
        release.wait(10)

    _in_loop_thread(server, close_then_hold)
    assert closed.wait(5)
    threading.Timer(0.3, release.set).start()
    server.stop()  # raised OSError(EBADF) before the fix
    assert not server._thread.is_alive()
    assert _refused(port)


def test_stop_after_the_loop_ended_by_itself() -> None:
    server = WebServer(app(), "127.0.0.1", 0).start()
    port = server.port
    _in_loop_thread(server, lambda: server._server.asyncore.close_all(server._server._map))
    server._thread.join(5)
    assert not server._thread.is_alive()
    server.stop()
    server.stop()
    assert _refused(port)


def test_stop_twice_and_from_many_threads_at_once(thread_errors: list[BaseException]) -> None:
    server = WebServer(app(), "127.0.0.1", 0).start()
    session = requests.Session()
    assert session.get(server.url, timeout=5).text == "ok"
    port = server.port
    stoppers = [threading.Thread(target=server.stop) for _ in range(6)]
    for stopper in stoppers:
        stopper.start()
    for stopper in stoppers:
        stopper.join(10)
    server.stop()
    session.close()
    assert thread_errors == []
    assert not server._thread.is_alive()
    assert _refused(port)


def test_stop_from_the_loop_thread_itself_ends_the_loop() -> None:
    server = WebServer(app(), "127.0.0.1", 0).start()
    port = server.port
    _in_loop_thread(server, server.stop)
    server._thread.join(5)
    assert not server._thread.is_alive()
    assert _refused(port)
    server.stop()


def test_a_stopped_server_does_not_start_again() -> None:
    server = WebServer(app(), "127.0.0.1", 0)
    server.stop()
    with pytest.raises(RuntimeError, match="stopped"):
        server.start()
