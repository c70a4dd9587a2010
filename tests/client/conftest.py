"""Fixtures for the REST client tests (helpers live in rest_faults.py)."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rest_faults import FAST, ScriptedServer, TlsFiles, make_certificate

from yarn_adapt.yarn.http import HttpSettings


@pytest.fixture
def fault_server() -> Iterator[Callable[..., ScriptedServer]]:
    """A factory: each call starts one more scripted server (``tls=`` for HTTPS), all
    stopped at the end."""
    started: list[ScriptedServer] = []

    def start(tls: TlsFiles | None = None) -> ScriptedServer:
        server = ScriptedServer(tls).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def closed_port_url() -> str:
    """An address where nothing listens (connection refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def fast_settings() -> HttpSettings:
    """Short timeouts and backoff so fault tests finish in well under a second."""
    return FAST


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    directory: Path = tmp_path_factory.mktemp("tls")
    server_cert, server_key = make_certificate(directory, "server")
    client_cert, client_key = make_certificate(directory, "client")
    return TlsFiles(server_cert, server_key, client_cert, client_key)
