"""Tracing outgoing ``requests`` calls: a CLIENT span per request, and the W3C
``traceparent`` header so the callee's server span becomes its child.

    session = instrument_session(requests.Session(), tracer)

The adapter is mounted for http:// and https://; the span is a child of the span in
progress (the request being served). 4xx and 5xx responses and connection errors mark
it an error (OpenTelemetry's rule for client spans). The operation is ``METHOD
host:port`` unless ``operation`` says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter

from tracing.context import HEADER, format_traceparent
from tracing.model import SpanKind
from tracing.tracer import Tracer


def default_operation(request: requests.PreparedRequest) -> str:
    return f"{request.method or 'GET'} {urlsplit(request.url or '').netloc}"


class TracingAdapter(HTTPAdapter):
    def __init__(
        self,
        tracer: Tracer,
        operation: Callable[[requests.PreparedRequest], str] = default_operation,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.tracer = tracer
        self.operation = operation

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: float | tuple[float, float] | tuple[float, None] | None = None,
        verify: bool | str = True,
        cert: bytes | str | tuple[bytes | str, bytes | str] | None = None,
        proxies: Mapping[str, str] | None = None,
    ) -> requests.Response:
        span = self.tracer.start_span(self.operation(request), kind=SpanKind.CLIENT)
        request.headers[HEADER] = format_traceparent(span.context)
        try:
            response = super().send(request, stream, timeout, verify, cert, proxies)
        except BaseException:
            span.set_error()
            span.end()
            raise
        if response.status_code >= 400:
            span.set_error()
        span.end()
        return response


def instrument_session(
    session: requests.Session,
    tracer: Tracer,
    operation: Callable[[requests.PreparedRequest], str] = default_operation,
) -> requests.Session:
    adapter = TracingAdapter(tracer, operation)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
