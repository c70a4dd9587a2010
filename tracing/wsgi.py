"""WSGI middleware: a SERVER span per request, continuing the caller's trace.

    app = TracingMiddleware(app, tracer)

The caller's ``traceparent`` header (if valid) makes the span its child; otherwise the
request starts a trace. The span is current while the application runs and while its
body is iterated, so ``requests`` calls made meanwhile (with
:func:`tracing.requests_hook.instrument_session`) become its children. It ends when the
server closes the body; a 5xx status or an exception marks it an error. The operation
is ``METHOD path`` unless ``operation`` says otherwise (give it the route template when
paths carry ids: names are interned and must stay few).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any, Protocol

from tracing.context import activate, deactivate, parse_traceparent
from tracing.model import SpanKind
from tracing.tracer import ActiveSpan, Tracer

Environ = dict[str, Any]
ExcInfo = tuple[type[BaseException], BaseException, TracebackType] | tuple[None, None, None]


class StartResponse(Protocol):
    def __call__(
        self, status: str, headers: list[tuple[str, str]], exc_info: ExcInfo | None = ..., /
    ) -> Callable[[bytes], object]: ...


WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]


def default_operation(environ: Environ) -> str:
    return f"{environ.get('REQUEST_METHOD', 'GET')} {environ.get('PATH_INFO') or '/'}"


class TracingMiddleware:
    def __init__(
        self,
        app: WSGIApp,
        tracer: Tracer,
        operation: Callable[[Environ], str] = default_operation,
    ) -> None:
        self.app = app
        self.tracer = tracer
        self.operation = operation

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        span = self.tracer.start_span(
            self.operation(environ),
            kind=SpanKind.SERVER,
            parent=parse_traceparent(environ.get("HTTP_TRACEPARENT")),
            inherit=False,
        )

        def traced_start_response(
            status: str, headers: list[tuple[str, str]], exc_info: ExcInfo | None = None
        ) -> Callable[[bytes], object]:
            if _server_error(status):
                span.set_error()
            return start_response(status, headers, exc_info)

        token = activate(span.context)
        try:
            body = self.app(environ, traced_start_response)
        except BaseException:
            span.set_error()
            span.end()
            raise
        finally:
            deactivate(token)
        return _TracedBody(body, span)


def _server_error(status: str) -> bool:
    code = status.split(" ", 1)[0]
    return code.isdigit() and int(code) >= 500


class _TracedBody:
    """The application's body, iterated with the span current; ``close`` ends it."""

    def __init__(self, body: Iterable[bytes], span: ActiveSpan) -> None:
        self.body = body
        self.span = span

    def __iter__(self) -> Iterator[bytes]:
        iterator = iter(self.body)
        while True:
            token = activate(self.span.context)
            try:
                chunk = next(iterator)
            except StopIteration:
                return
            except BaseException:
                self.span.set_error()
                raise
            finally:
                deactivate(token)
            yield chunk

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            self.span.end()
