"""The OTLP/HTTP trace receiver: ``POST /v1/traces`` from OpenTelemetry SDKs and
Collectors into the span stream, so any service (Java, Go, Node, Python...) is traced
without the project's own middleware.

A request is answered as OTLP/HTTP says (opentelemetry-specification, protocol/otlp.md):

==================================  =====  ==========================================
the request                         HTTP   the answer
==================================  =====  ==========================================
spans stored in the stream          200    ``ExportTraceServiceResponse``
some spans invalid, the rest stored 200    ``partial_success{rejected_spans, error_message}``
not an ExportTraceServiceRequest,   400    ``google.rpc.Status`` naming the problem,
a truncated or broken gzip / deflate       with a ``google.rpc.BadRequest`` detail
body, broken chunked framing               (not retried by the exporter)
no or a wrong bearer token          401    (only when a token is configured)
another path / method               404 / 405
no Content-Length and not chunked   411
a body over ``max_body_bytes`` (or  413
over ``max_decoded_bytes`` inflated)
a Content-Type other than           415    protobuf and JSON only; a Content-Encoding
``application/x-protobuf`` or              other than gzip, deflate or identity (with
``application/json``                       ``Accept-Encoding``)
more spans per second than          429    ``Retry-After``: when the debt is paid
``max_spans_per_s``
a failure of the receiver itself    500    (a bug: logged with its traceback)
a Transfer-Encoding but chunked     501
the stream holds more than          503    ``Retry-After: retry_after_s``: the ingest
``max_backlog_entries``, Redis down,       worker is behind or down, or Redis is
too many connections                       unreachable; exporters retry, nothing lost
==================================  =====  ==========================================

Every answer has the request's content type (protobuf or JSON). A 200 means the
request's spans are in Redis: the entries of one request are added in one MULTI/EXEC,
in batches of at most ``batch_spans`` spans (:mod:`tracing.wire`; a request of 10,000
spans is three entries of the default 4096), so a refused one stores none of them and
the exporter's retry is the only copy (a span received twice, should a retry follow a
reply lost on the way, counts once: the ingest worker assembles by span id). The
ingest worker then assembles and stores them like the instrumentation's spans.

Bodies: ``Content-Length`` or ``Transfer-Encoding: chunked`` (OpenTelemetry Java's
exporters stream gzip bodies chunked), both read only up to ``max_body_bytes``. A
request answered before its body is read (every refusal but 400, 413 after
inflating, 500 and 503 on a failed write) closes the connection: the answer goes out,
then what the client still sends is read and dropped for up to ``LINGER_S`` so that it
reads the answer rather than a reset; an ``Expect: 100-continue`` request is answered
so before it sends its body. Other answers keep the connection alive.

Listening: ``host`` must be a loopback address unless a ``token`` is set or the
operator says ``public`` (:func:`exposure_problem`); with ``tls_cert_file`` and
``tls_key_file`` it speaks HTTPS (the handshake runs in the connection's thread, so a
slow client never holds the listener). At most ``max_connections`` connections are
served at once (the next is answered 503 and closed); a connection idle for
``idle_timeout_s`` is closed.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import math
import re
import socket
import socketserver
import ssl
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import redis
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc.error_details_pb2 import BadRequest
from google.rpc.status_pb2 import Status as RpcStatus
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)

from tracing.errors import ReceiverError
from tracing.otlp_decode import Decoded, Encoding, OtlpBadData, decode_request
from tracing.wire import FIELD, MAX_SPANS_PER_BATCH
from tracing.wire_columns import WireSpans

log = logging.getLogger("tracing.receiver")
DEFAULT_PORT = 4318  # OTLP/HTTP's
TRACES_PATH = "/v1/traces"
LOG_EVERY_S = 60.0  # per kind of refusal
LINGER_S = 2.0  # reading what a refused client still sends before closing
ACCEPTED_ENCODINGS = ("gzip", "deflate", "identity")
_Refusal = tuple[int, str, dict[str, str]]  # HTTP status, message, extra headers
_GRPC_CODES = {
    400: 3,  # INVALID_ARGUMENT
    401: 16,  # UNAUTHENTICATED
    404: 5,  # NOT_FOUND
    405: 12,  # UNIMPLEMENTED
    411: 3,
    413: 8,  # RESOURCE_EXHAUSTED
    415: 3,
    429: 8,
    500: 13,  # INTERNAL
    501: 12,
    503: 14,  # UNAVAILABLE
}
_STORE_DOWN = "the trace store is unavailable; retry later"
_CHUNK_SIZE = re.compile(rb"^[0-9A-Fa-f]{1,16}$")


@dataclass(frozen=True, kw_only=True)
class ReceiverConfig:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    path: str = TRACES_PATH
    token: str = field(default="", repr=False)
    public: bool = False
    tls_cert_file: str = ""
    tls_key_file: str = ""
    max_body_bytes: int = 4 << 20  # as sent
    max_decoded_bytes: int = 32 << 20  # gunzipped
    max_spans_per_s: float = 200_000.0  # 0: no limit
    max_backlog_entries: int = 20_000
    retry_after_s: int = 5
    max_connections: int = 64
    idle_timeout_s: float = 30.0
    batch_spans: int = 4096
    reuse_port: bool = False  # SO_REUSEPORT: several receiver processes on one address

    def __post_init__(self) -> None:
        problem = config_problem(self)
        if problem:
            raise ValueError(problem)

    @property
    def uses_tls(self) -> bool:
        return bool(self.tls_cert_file)


def config_problem(config: ReceiverConfig) -> str | None:
    """Why ``config`` cannot work, or None."""
    checks = [
        (0 <= config.port <= 65535, f"port {config.port} is not in 0..65535"),
        (config.path.startswith("/"), f"path {config.path!r} must start with /"),
        (config.max_body_bytes > 0, "max_body_bytes must be positive"),
        (config.max_decoded_bytes >= config.max_body_bytes, "max_decoded_bytes < max_body_bytes"),
        (config.max_spans_per_s >= 0, "max_spans_per_s must be 0 (no limit) or more"),
        (config.max_backlog_entries >= 1, "max_backlog_entries must be 1 or more"),
        (config.retry_after_s >= 1, "retry_after_s must be 1 or more"),
        (config.max_connections >= 1, "max_connections must be 1 or more"),
        (config.idle_timeout_s > 0, "idle_timeout_s must be positive"),
        (1 <= config.batch_spans <= MAX_SPANS_PER_BATCH, f"batch_spans: 1..{MAX_SPANS_PER_BATCH}"),
        (
            bool(config.tls_cert_file) == bool(config.tls_key_file),
            "tls_cert_file and tls_key_file go together",
        ),
    ]
    return next((problem for ok, problem in checks if not ok), None)


def exposure_problem(config: ReceiverConfig) -> str | None:
    """Why listening on ``config.host`` is refused: off loopback, anyone who reaches
    the port could write spans (and so steer the guard) unless a token is required."""
    if _is_loopback(config.host) or config.token or config.public:
        return None
    return (
        f"host {config.host!r} is not a loopback address and no token is set: anyone who "
        "reaches it could write spans; set a token (exporters send it as "
        "'Authorization: Bearer <token>'), or public = true to accept that"
    )


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


# --------------------------------------------------------------------------- answers


@dataclass(frozen=True)
class Reply:
    status: int
    content_type: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    close: bool = False  # the body was not (wholly) read: the connection cannot be reused


@dataclass(frozen=True)
class ReceiverStats:
    answers: Mapping[int, int]  # by HTTP status
    spans_accepted: int
    spans_rejected: int  # invalid spans of partially accepted requests
    entries_written: int


class _SpanDebt:
    """A rate limit in spans per second that never starves a large request: a request
    passes while the limiter is not in debt, and its spans are then owed."""

    def __init__(self, per_s: float, clock: Any) -> None:
        self.per_s = per_s
        self.clock = clock
        self.tokens = per_s
        self.updated = clock()
        self.lock = threading.Lock()

    def wait_s(self) -> int:
        """0 when a request may pass now, else the seconds until it may."""
        if not self.per_s:
            return 0
        with self.lock:
            now = self.clock()
            self.tokens = min(self.per_s, self.tokens + (now - self.updated) * self.per_s)
            self.updated = now
            return 0 if self.tokens >= 0 else max(1, math.ceil(-self.tokens / self.per_s))

    def owe(self, spans: int) -> None:
        if self.per_s:
            with self.lock:
                self.tokens -= spans


class OtlpReceiver:
    """Answers OTLP/HTTP trace requests (see the module docstring) and writes the
    accepted spans to ``stream`` on ``client``. The HTTP server around it is
    :class:`ReceiverServer`; this class knows no sockets."""

    def __init__(
        self,
        client: redis.Redis,
        stream: str,
        config: ReceiverConfig | None = None,
        clock: Any = time.monotonic,
    ) -> None:
        self.client = client
        self.stream = stream
        self.config = config or ReceiverConfig()
        self.clock = clock
        self._debt = _SpanDebt(self.config.max_spans_per_s, clock)
        self._lock = threading.Lock()
        self._answers: Counter[int] = Counter()
        self._accepted = 0
        self._rejected = 0
        self._entries = 0
        self._backlog = (-1e18, 0)  # (when read, XLEN)
        self._logged: dict[str, float] = {}

    # ------------------------------------------------------------------ the steps

    def before_body(self, method: str, path: str, headers: Mapping[str, str]) -> Reply | None:
        """An answer that needs no body (refusals), or None: read the body and call
        :meth:`with_body`. ``headers``: lower-case names."""
        encoding = _encoding_of(headers.get("content-type", ""))
        checks: tuple[Callable[[], _Refusal | None], ...] = (
            lambda: self._route(method, path),
            lambda: self._authorised(headers),
            lambda: self._content(headers, encoding),
            lambda: self._size(headers),
            self._rate,
            self._room,
        )
        for check in checks:
            refusal = check()
            if refusal is not None:
                status, message, extra = refusal
                reply = self._refuse(status, message, encoding or Encoding.PROTOBUF, extra)
                return replace(reply, close=True)  # the body is not read
        return None

    def with_body(self, body: bytes, headers: Mapping[str, str]) -> Reply:
        """Decode, store and answer a request :meth:`before_body` let through."""
        encoding = _encoding_of(headers.get("content-type", "")) or Encoding.PROTOBUF
        try:
            return self._decode_and_store(body, headers, encoding)
        except Exception:  # a bug: answered (500 is not retried), never a dropped connection
            log.exception("OTLP receiver failed on a request of %d bytes", len(body))
            message = "the receiver failed on this request; its log has the details"
            return self._refuse(500, message, encoding)

    def _decode_and_store(
        self, body: bytes, headers: Mapping[str, str], encoding: Encoding
    ) -> Reply:
        if len(body) > self.config.max_body_bytes:  # a chunked body, read whole by a caller
            limit = self.config.max_body_bytes
            return self._refuse(
                413, f"the body has more than {limit} bytes; send smaller", encoding
            )
        try:
            decoded = decode_request(self._inflated(body, headers), encoding)
        except _TooLarge as exc:
            return self._refuse(413, str(exc), encoding)
        except OtlpBadData as exc:
            return self._refuse(400, str(exc), encoding)
        self._debt.owe(decoded.received)
        try:
            self._store(decoded.spans)
        except (redis.RedisError, OSError) as exc:
            log.warning("OTLP receiver cannot write to the span stream: %s", exc)
            return self._refuse(503, _STORE_DOWN, encoding, self._retry_after())
        return self._accept(decoded, encoding)

    def refusal(self, status: int, message: str, headers: Mapping[str, str]) -> Reply:
        """A refusal the HTTP layer makes itself (a body too long or badly framed), in
        the request's encoding."""
        encoding = _encoding_of(headers.get("content-type", "")) or Encoding.PROTOBUF
        return replace(self._refuse(status, message, encoding), close=True)

    def answer(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """Both steps at once, for a caller with the body at hand (the tests)."""
        refused = self.before_body(method, path, headers)
        return refused if refused is not None else self.with_body(body, headers)

    def stats(self) -> ReceiverStats:
        with self._lock:
            return ReceiverStats(dict(self._answers), self._accepted, self._rejected, self._entries)

    # ------------------------------------------------------------------ checks

    def _route(self, method: str, path: str) -> _Refusal | None:
        if path.split("?", 1)[0] != self.config.path:
            return 404, f"no such path {path!r:.80}; OTLP traces go to {self.config.path}", {}
        if method != "POST":
            return 405, f"{method} is not allowed; send POST", {"Allow": "POST"}
        return None

    def _authorised(self, headers: Mapping[str, str]) -> _Refusal | None:
        if not self.config.token:
            return None
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), self.config.token.encode()
        ):
            return None
        message = "no valid bearer token: send 'Authorization: Bearer <token>'"
        return 401, message, {"WWW-Authenticate": "Bearer"}

    def _content(self, headers: Mapping[str, str], encoding: Encoding | None) -> _Refusal | None:
        if encoding is None:
            given = headers.get("content-type", "") or "none"
            return 415, f"Content-Type {given!r:.80}: send application/x-protobuf or json", {}
        coding = _content_coding(headers)
        if coding not in ACCEPTED_ENCODINGS:
            accepted = ", ".join(ACCEPTED_ENCODINGS)
            message = f"Content-Encoding {coding!r:.40}: send {accepted}"
            return 415, message, {"Accept-Encoding": accepted}
        return None

    def _size(self, headers: Mapping[str, str]) -> _Refusal | None:
        framing = headers.get("transfer-encoding", "").strip().lower()
        if framing == "chunked":
            return None  # its size is checked while it is read
        if framing:
            return 501, f"Transfer-Encoding {framing!r:.40}: send chunked or a Content-Length", {}
        length = headers.get("content-length", "").strip()
        if not length.isdigit():
            return 411, "a Content-Length (or Transfer-Encoding: chunked) is required", {}
        if int(length) > self.config.max_body_bytes:
            limit = self.config.max_body_bytes
            return 413, f"the body has {int(length)} bytes, more than {limit}; send smaller", {}
        return None

    def _rate(self) -> _Refusal | None:
        wait = self._debt.wait_s()
        if not wait:
            return None
        limit = f"{self.config.max_spans_per_s:g}"
        return 429, f"more than {limit} spans/s; retry after {wait} s", {"Retry-After": str(wait)}

    def _room(self) -> _Refusal | None:
        try:
            backlog = self._stream_length()
        except (redis.RedisError, OSError) as exc:
            log.warning("OTLP receiver cannot read the span stream's length: %s", exc)
            return 503, _STORE_DOWN, self._retry_after()
        if backlog < self.config.max_backlog_entries:
            return None
        message = (
            f"the span stream holds {backlog} entries not yet ingested (limit "
            f"{self.config.max_backlog_entries}): the ingest worker is behind or down"
        )
        return 503, message, self._retry_after()

    def _stream_length(self) -> int:
        """XLEN, read at most every 0.25 s (a request costs no round trip for it)."""
        read_at, length = self._backlog
        now = self.clock()
        if now - read_at < 0.25:
            return length
        length = int(self.client.xlen(self.stream))
        self._backlog = (now, length)
        return length

    def _retry_after(self) -> dict[str, str]:
        return {"Retry-After": str(self.config.retry_after_s)}

    def _inflated(self, body: bytes, headers: Mapping[str, str]) -> bytes:
        """The body decompressed, at most ``max_decoded_bytes``: gzip (every member of
        it), or deflate (zlib's format, which HTTP calls deflate)."""
        coding = _content_coding(headers)
        if coding == "identity":
            return body
        wbits = 16 + zlib.MAX_WBITS if coding == "gzip" else zlib.MAX_WBITS
        limit = self.config.max_decoded_bytes
        parts: list[bytes] = []
        size = 0
        rest = body
        while True:
            inflater = zlib.decompressobj(wbits)
            try:
                part = inflater.decompress(rest, limit + 1 - size)
            except zlib.error as exc:
                raise OtlpBadData(f"the {coding} body does not decompress: {exc}") from None
            size += len(part)
            if size > limit:
                raise _TooLarge(f"the body inflates to more than {limit} bytes; send smaller")
            if not inflater.eof:
                raise OtlpBadData(f"the {coding} body is truncated")
            parts.append(part)
            rest = inflater.unused_data
            if not rest:
                return b"".join(parts)
            if coding == "deflate":
                raise OtlpBadData("the deflate body has bytes after its end")

    # ------------------------------------------------------------------ acting

    def _store(self, spans: WireSpans) -> None:
        if not len(spans):
            return
        pipe = self.client.pipeline(transaction=True)
        entries = 0
        for payload in spans.payloads(self.config.batch_spans):
            pipe.xadd(self.stream, {FIELD: payload})
            entries += 1
        pipe.execute()
        with self._lock:
            self._entries += entries
            read_at, length = self._backlog
            self._backlog = (read_at, length + entries)

    def _accept(self, decoded: Decoded, encoding: Encoding) -> Reply:
        response = ExportTraceServiceResponse()
        if decoded.rejected:
            message = (
                f"rejected {decoded.rejected} of {decoded.received} spans; the first: "
                f"{decoded.problem}"
            )
            response.partial_success.CopyFrom(
                ExportTracePartialSuccess(rejected_spans=decoded.rejected, error_message=message)
            )
            self._log("partial", f"partial success: {message}")
        with self._lock:
            self._answers[200] += 1
            self._accepted += len(decoded.spans)
            self._rejected += decoded.rejected
        return Reply(200, encoding.value, _serialised(response, encoding))

    def _refuse(
        self,
        status: int,
        message: str,
        encoding: Encoding,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        with self._lock:
            self._answers[status] += 1
        self._log(str(status), f"answered {status} {HTTPStatus(status).phrase}: {message}")
        status_message = RpcStatus(code=_GRPC_CODES.get(status, 2), message=message)
        if status == 400:  # OTLP: the details SHOULD hold a BadRequest
            violation = BadRequest.FieldViolation(field="", description=message)
            status_message.details.add().Pack(BadRequest(field_violations=[violation]))
        body = _serialised(status_message, encoding)
        return Reply(status, encoding.value, body, dict(headers or {}))

    def _log(self, kind: str, message: str) -> None:
        now = self.clock()
        if now - self._logged.get(kind, -1e18) < LOG_EVERY_S:
            return
        self._logged[kind] = now
        log.warning("OTLP receiver %s (logged once a minute per kind)", message)


class _TooLarge(ValueError):
    pass


def _content_coding(headers: Mapping[str, str]) -> str:
    return headers.get("content-encoding", "").strip().lower() or "identity"


def _encoding_of(content_type: str) -> Encoding | None:
    media = content_type.split(";", 1)[0].strip().lower()
    if media == Encoding.PROTOBUF.value:
        return Encoding.PROTOBUF
    if media == Encoding.JSON.value:
        return Encoding.JSON
    return None


def _serialised(message: Message, encoding: Encoding) -> bytes:
    if encoding is Encoding.JSON:
        return json_format.MessageToJson(message, indent=None).encode()
    return message.SerializeToString()


# --------------------------------------------------------------------------- HTTP


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as exporters expect
    server: _Server
    server_version = "yarn-adapt-otlp"

    def setup(self) -> None:
        self.request.settimeout(self.server.config.idle_timeout_s)  # idle connections end
        if isinstance(self.request, ssl.SSLSocket):
            self.request.do_handshake()
        super().setup()
        self.checked = False  # before_body passed in handle_expect_100

    def handle_expect_100(self) -> bool:
        """Refuse before the client sends its body (``Expect: 100-continue``)."""
        refused = self.server.receiver.before_body(self.command, self.path, self._headers())
        if refused is not None:
            self._refuse_unread(refused)
            return False
        self.checked = True
        return super().handle_expect_100()

    def do_POST(self) -> None:
        self._serve()

    def do_GET(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def _serve(self) -> None:
        receiver = self.server.receiver
        headers = self._headers()
        checked, self.checked = self.checked, False
        refused = None if checked else receiver.before_body(self.command, self.path, headers)
        if refused is not None:
            self._refuse_unread(refused)
            return
        try:
            body = self._body(headers)
        except _FramingError as exc:
            self._refuse_unread(receiver.refusal(exc.status, str(exc), headers))
            return
        if body is None:  # the client went away mid-body: nobody to answer
            self.close_connection = True
            return
        self._send(receiver.with_body(body, headers))

    def _headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def _body(self, headers: Mapping[str, str]) -> bytes | None:
        """The request's body, or None when the connection ended before all of it."""
        if headers.get("transfer-encoding", "").strip().lower() == "chunked":
            return self._chunked_body()
        length = int(headers["content-length"])
        body = self.rfile.read(length)
        return body if len(body) == length else None

    def _chunked_body(self) -> bytes | None:
        limit = self.server.config.max_body_bytes
        parts: list[bytes] = []
        size = 0
        while True:
            line = self.rfile.readline(1024)
            if not line:
                return None
            digits = line.split(b";", 1)[0].strip()
            if not line.endswith(b"\n") or not _CHUNK_SIZE.match(digits):
                raise _FramingError(400, f"a chunk size line {line[:40]!r} is not hex digits")
            length = int(digits, 16)
            if length == 0:
                break
            size += length
            if size > limit:
                raise _FramingError(413, f"the body has more than {limit} bytes; send smaller")
            chunk = self.rfile.read(length)
            if len(chunk) != length:
                return None
            parts.append(chunk)
            if self.rfile.readline(3).rstrip(b"\r\n") != b"":
                raise _FramingError(400, "a chunk does not end in CRLF where its size says")
        for _ in range(100):  # trailer fields, up to the empty line
            if self.rfile.readline(8192).strip() == b"":
                break
        return b"".join(parts)

    def _refuse_unread(self, reply: Reply) -> None:
        """Answer, then read what the client still sends for up to ``LINGER_S`` before
        the connection closes: closing with its body unread would reset the connection
        and could destroy the answer before the client reads it."""
        self._send(replace(reply, close=True))
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + LINGER_S
            left = 4 * self.server.config.max_body_bytes + (1 << 16)
            while left > 0 and (wait := deadline - time.monotonic()) > 0:
                self.connection.settimeout(wait)
                chunk = self.connection.recv(min(left, 1 << 16))
                if not chunk:
                    return
                left -= len(chunk)
        except OSError:
            pass

    def _send(self, reply: Reply) -> None:
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if reply.close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(reply.body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)


class _FramingError(ValueError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, receiver: OtlpReceiver, context: ssl.SSLContext | None) -> None:
        self.receiver = receiver
        self.config = receiver.config
        self.slots = threading.BoundedSemaphore(self.config.max_connections)
        family = socket.AF_INET6 if ":" in self.config.host else socket.AF_INET
        self.address_family = family
        super().__init__((self.config.host.strip("[]"), self.config.port), _Handler)
        if context is not None:
            self.socket = context.wrap_socket(
                self.socket, server_side=True, do_handshake_on_connect=False
            )

    def server_bind(self) -> None:
        # HTTPServer's own also looks the host's name up (getfqdn: DNS), which nothing uses
        if self.config.reuse_port:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            _turn_away(request, self.config.retry_after_s)
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("OTLP connection from %s ended with an error", client_address, exc_info=True)


def _turn_away(request: Any, retry_after_s: int) -> None:
    """503 to a connection over ``max_connections`` (best effort: no TLS handshake)."""
    if isinstance(request, ssl.SSLSocket):
        return
    answer = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n"
        f"Retry-After: {retry_after_s}\r\n\r\n"
    )
    try:
        request.settimeout(1.0)
        request.sendall(answer.encode())
    except OSError:
        pass


class ReceiverServer:
    """The receiver on its port, served from a thread of its own: ``start``, ``stop``."""

    def __init__(self, receiver: OtlpReceiver) -> None:
        config = receiver.config
        context = _tls_context(config) if config.uses_tls else None
        try:
            self._server = _Server(receiver, context)
        except OSError as exc:
            where = f"{config.host}:{config.port}"
            problem = exc.strerror or str(exc)
            raise ReceiverError(f"the OTLP receiver cannot listen on {where}: {problem}") from exc
        self.receiver = receiver
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},  # how soon stop() is noticed
            name="otlp-receiver",
            daemon=True,
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        config = self.receiver.config
        host = f"[{config.host}]" if ":" in config.host else config.host
        scheme = "https" if config.uses_tls else "http"
        return f"{scheme}://{host}:{self.port}{config.path}"

    def start(self) -> ReceiverServer:
        self._thread.start()
        log.info("OTLP/HTTP receiver listening on %s", self.url)
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()


def _tls_context(config: ReceiverConfig) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(config.tls_cert_file, config.tls_key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ReceiverError(
            f"the OTLP receiver cannot load its TLS certificate {config.tls_cert_file} and "
            f"key {config.tls_key_file}: {getattr(exc, 'strerror', None) or exc}"
        ) from exc
    return context


__all__ = [
    "DEFAULT_PORT",
    "OtlpReceiver",
    "ReceiverConfig",
    "ReceiverServer",
    "ReceiverStats",
    "Reply",
    "exposure_problem",
]
