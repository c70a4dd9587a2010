"""A ResourceManager that refuses node resource updates: a forwarding proxy in front
of the real mini-cluster RM. Everything is passed through unchanged except
``POST /ws/v1/cluster/nodes/{id}/resource``, answered 403 with the RemoteException
body the RM sends when its admin ACL refuses the caller -- a refusal the test
cluster (ACLs off) cannot be made to give on demand."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

REFUSAL = {
    "RemoteException": {
        "exception": "ForbiddenException",
        "message": "java.lang.Exception: User dr.who is not authorized to update node resources",
        "javaClassName": "org.apache.hadoop.yarn.webapp.ForbiddenException",
    }
}


class RefusingRM:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.refused = 0
        handler = self._handler()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> RefusingRM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return

            def do_GET(self) -> None:
                reply = requests.get(proxy.upstream + self.path, timeout=30)
                self._answer(reply.status_code, reply.content)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                if self.path.split("?")[0].endswith("/resource"):
                    proxy.refused += 1
                    self._answer(403, json.dumps(REFUSAL).encode())
                    return
                kind = {"Content-Type": self.headers.get("Content-Type", "")}
                url = proxy.upstream + self.path
                reply = requests.post(url, data=body, headers=kind, timeout=30)
                self._answer(reply.status_code, reply.content)

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler
