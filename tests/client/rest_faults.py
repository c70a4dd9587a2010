"""Fault injection for the REST client tests: a scripted local HTTP server.

It exists only to produce what a real ResourceManager cannot be made to do on demand
(a 500, a stalled answer, a standby redirect to an arbitrary host). Wherever a
scripted answer needs a *successful* RM body, the tests serve a body recorded from
the real cluster (tests/fixtures/rm, tests/fixtures/jhs) via :func:`recorded`.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from yarn_adapt.yarn.http import HttpSettings

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    content_type: str = "application/json"


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    body: str


class ScriptedServer:
    """Answers ``(method, path)`` from a queue of :class:`Answer`; the last answer of
    a queue repeats forever. Unscripted requests get 404."""

    def __init__(self, tls: TlsFiles | None = None) -> None:
        self.tls = tls
        self._script: dict[tuple[str, str], list[Answer]] = {}
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        if tls is not None:
            self._httpd.socket = tls.server_context().wrap_socket(
                self._httpd.socket, server_side=True
            )
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{host!s}:{port}"

    def on(self, method: str, path: str, *answers: Answer) -> ScriptedServer:
        with self._lock:
            self._script[(method, path)] = list(answers)
        return self

    def count(self, method: str, path: str) -> int:
        return sum(1 for s in self.seen if (s.method, s.path) == (method, path))

    def _next(self, method: str, path: str) -> Answer:
        with self._lock:
            queue = self._script.get((method, path))
            if not queue:
                return Answer(404, "no such path", content_type="text/plain")
            return queue.pop(0) if len(queue) > 1 else queue[0]

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                server.seen.append(Seen(self.command, parts.path, parse_qs(parts.query), body))
                answer = server._next(self.command, parts.path)
                time.sleep(answer.delay_s)
                payload = answer.body.encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", answer.content_type)
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up (timeout test): nothing to answer

            do_GET = do_PUT = do_POST = _serve  # noqa: N815 (http.server names)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler

    def start(self) -> ScriptedServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


@dataclass(frozen=True)
class TlsFiles:
    """A self-signed server certificate for 127.0.0.1 and, optionally, a client
    certificate the server requires (mutual TLS)."""

    server_cert: Path
    server_key: Path
    client_cert: Path | None = None
    client_key: Path | None = None

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.server_cert, self.server_key)
        if self.client_cert is not None:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(self.client_cert)
        return context


def make_certificate(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate valid for 127.0.0.1 and localhost (openssl CLI)."""
    cert, key = directory / f"{name}.pem", directory / f"{name}-key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


# read_timeout_s: under the suite's load (the plain tests niced beside the cluster
# tests) a scripted server's answer once took over 0.5 s (CI of this stop); the stalled
# answers of the timeout tests take 2 s, so 1.5 s still times them out.
FAST = HttpSettings(
    connect_timeout_s=1.0,
    read_timeout_s=1.5,
    retries=2,
    backoff_base_s=0.01,
    backoff_cap_s=0.05,
    user="yarn-adapt-test",
)


def recorded(relative: str) -> str:
    """The text of a response recorded from the real mini cluster."""
    path = FIXTURES / relative
    if not path.exists():
        raise FileNotFoundError(f"{path}: not recorded yet (tests/fixtures/record.py)")
    return path.read_text()


def recorded_json(relative: str) -> object:
    return json.loads(recorded(relative))


def replayed(
    name: str, location_port: int | None = None, location_host: str | None = None
) -> Answer:
    """A recorded real RM answer (tests/fixtures/rm-ha/NAME.json, from record_ha.py) as a
    scripted :class:`Answer`. A Location header is pointed at ``location_port`` (and
    ``location_host``) so that it names a local server of the test; nothing else changes."""
    recording = json.loads(recorded(f"rm-ha/{name}.json"))
    headers = dict(recording["headers"])
    content_type = headers.pop("Content-Type", "application/json")
    if "Location" in headers and location_port is not None:
        parts = urlsplit(headers["Location"])
        host = location_host or parts.hostname or ""
        headers["Location"] = parts._replace(netloc=f"{host}:{location_port}").geturl()
    return Answer(recording["status"], recording["body"], headers, content_type=content_type)


def port_of(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


def replayed_rm(name: str) -> Answer:
    """A real RM answer recorded by record_rm_extra.py (tests/fixtures/rm-client/NAME.json)."""
    recording = json.loads(recorded(f"rm-client/{name}.json"))
    return Answer(recording["status"], recording["body"], content_type=recording["content_type"])
