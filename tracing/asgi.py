"""ASGI middleware: a SERVER span per HTTP request, continuing the caller's trace.

    app = TracingASGIMiddleware(app, tracer)

As the WSGI middleware: the ``traceparent`` header makes the span a child of the
caller's; the span is current in the request's task while the application runs; a 5xx
response or an exception marks it an error. Lifespan and websocket scopes pass through.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from tracing.context import activate, deactivate, parse_traceparent
from tracing.model import SpanKind
from tracing.tracer import Tracer

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def default_operation(scope: Scope) -> str:
    return f"{scope.get('method', 'GET')} {scope.get('path') or '/'}"


class TracingASGIMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        tracer: Tracer,
        operation: Callable[[Scope], str] = default_operation,
    ) -> None:
        self.app = app
        self.tracer = tracer
        self.operation = operation

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        span = self.tracer.start_span(
            self.operation(scope),
            kind=SpanKind.SERVER,
            parent=parse_traceparent(_header(scope, b"traceparent")),
            inherit=False,
        )

        async def traced_send(message: Message) -> None:
            if (
                message.get("type") == "http.response.start"
                and int(message.get("status", 200)) >= 500
            ):
                span.set_error()
            await send(message)

        token = activate(span.context)
        try:
            await self.app(scope, receive, traced_send)
        except BaseException:
            span.set_error()
            raise
        finally:
            deactivate(token)
            span.end()


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if bytes(key).lower() == name:
            return bytes(value).decode("latin-1")
    return None
