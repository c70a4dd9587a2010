"""Recording spans in a Python service.

A :class:`Tracer` belongs to one service process: it knows the service name, the host
(YARN node) and the container it runs in, and hands finished spans to a sink (the
Redis exporter, or anything with ``export(span)``)::

    tracer = Tracer("account-service", exporter, host="node-3", container=container_id)
    with tracer.span("load account", kind=SpanKind.INTERNAL):
        ...

The WSGI / ASGI middlewares and the ``requests`` adapter use ``start_span`` directly.
Recording never raises into the request: a failing sink only loses the span.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tracing.context import (
    SpanContext,
    activate,
    current_context,
    deactivate,
    new_span_id,
    new_trace_id,
)
from tracing.exporter import SpanSink
from tracing.model import Span, SpanKind, Status

log = logging.getLogger("tracing.tracer")
CONTAINER_ENV = "CONTAINER_ID"  # set by YARN's NodeManager in every container


def _now_us() -> int:
    return time.time_ns() // 1000


@dataclass
class ActiveSpan:
    """A span being recorded; ``end()`` sends it (once)."""

    tracer: Tracer
    context: SpanContext
    parent_id: str | None
    operation: str
    kind: SpanKind
    start_us: int
    follows_from: bool = False
    error: bool = False
    _ended: bool = False

    def set_error(self, error: bool = True) -> None:
        self.error = error

    def end(self, end_us: int | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        self.tracer.finish(self, end_us if end_us is not None else self.tracer.clock())


class Tracer:
    def __init__(
        self,
        service: str,
        sink: SpanSink,
        *,
        host: str | None = None,
        container: str | None = None,
        clock: Callable[[], int] = _now_us,
    ) -> None:
        self.service = service
        self.sink = sink
        self.host = host if host is not None else socket.gethostname()
        self.container = container if container is not None else os.environ.get(CONTAINER_ENV, "")
        self.clock = clock

    def start_span(
        self,
        operation: str,
        *,
        kind: SpanKind = SpanKind.INTERNAL,
        parent: SpanContext | None = None,
        follows_from: bool = False,
        start_us: int | None = None,
        inherit: bool = True,
    ) -> ActiveSpan:
        """A new span, child of ``parent``; without one, of the span in progress here
        (``inherit``), else the root of a new trace."""
        if parent is None and inherit:
            parent = current_context()
        trace_id = parent.trace_id if parent else new_trace_id()
        flags = parent.flags if parent else 1
        return ActiveSpan(
            tracer=self,
            context=SpanContext(trace_id, new_span_id(), flags),
            parent_id=parent.span_id if parent else None,
            operation=operation,
            kind=kind,
            start_us=start_us if start_us is not None else self.clock(),
            follows_from=follows_from,
        )

    @contextlib.contextmanager
    def span(
        self, operation: str, *, kind: SpanKind = SpanKind.INTERNAL, follows_from: bool = False
    ) -> Iterator[ActiveSpan]:
        """Record the block as a span (an error if it raises) and make it current."""
        active = self.start_span(operation, kind=kind, follows_from=follows_from)
        token = activate(active.context)
        try:
            yield active
        except BaseException:
            active.set_error()
            raise
        finally:
            deactivate(token)
            active.end()

    def finish(self, active: ActiveSpan, end_us: int) -> None:
        span = Span(
            trace_id=active.context.trace_id,
            span_id=active.context.span_id,
            parent_id=active.parent_id,
            service=self.service,
            operation=active.operation,
            start_us=active.start_us,
            end_us=max(end_us, active.start_us),
            kind=active.kind,
            status=Status.ERROR if active.error else Status.OK,
            host=self.host,
            container=self.container,
            follows_from=active.follows_from,
        )
        try:
            self.sink.export(span)
        except Exception:  # a broken sink must not break the request
            log.exception("could not record span %s", span.span_id)
