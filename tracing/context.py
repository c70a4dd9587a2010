"""W3C Trace Context: the ``traceparent`` header and the span in progress.

``traceparent: 00-<trace id: 32 hex>-<parent span id: 16 hex>-<flags: 2 hex>``
(https://www.w3.org/TR/trace-context/). An invalid header is ignored (the request
starts a new trace), as the recommendation says; it never fails the request.

The span in progress lives in a :mod:`contextvars` variable, so threads (WSGI) and
asyncio tasks (ASGI) each see their own request's span.
"""

from __future__ import annotations

import contextvars
import secrets
from dataclasses import dataclass

from tracing.model import SPAN_ID_DIGITS, TRACE_ID_DIGITS, is_hex_id

HEADER = "traceparent"
SAMPLED = 0x01
_VERSION_00_LENGTH = 55


@dataclass(frozen=True, slots=True)
class SpanContext:
    trace_id: str
    span_id: str
    flags: int = SAMPLED


def parse_traceparent(value: str | None) -> SpanContext | None:
    """The context a ``traceparent`` header carries, or None when absent or invalid."""
    if not value:
        return None
    value = value.strip()
    parts = value[:_VERSION_00_LENGTH].split("-")
    if len(parts) != 4 or not _version_ok(parts[0], value):
        return None
    _, trace_id, span_id, flags = parts
    if not (is_hex_id(trace_id, TRACE_ID_DIGITS) and is_hex_id(span_id, SPAN_ID_DIGITS)):
        return None
    if len(flags) != 2 or not _is_lower_hex(flags):
        return None
    return SpanContext(trace_id, span_id, int(flags, 16))


def _version_ok(version: str, value: str) -> bool:
    if len(version) != 2 or not _is_lower_hex(version) or version == "ff":
        return False
    if version == "00":
        return len(value) == _VERSION_00_LENGTH
    # A later version may append fields after a dash; we read the ones we know.
    return len(value) == _VERSION_00_LENGTH or (
        len(value) > _VERSION_00_LENGTH and value[_VERSION_00_LENGTH] == "-"
    )


def _is_lower_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def format_traceparent(context: SpanContext) -> str:
    return f"00-{context.trace_id}-{context.span_id}-{context.flags:02x}"


def new_trace_id() -> str:
    return secrets.token_hex(16)


def new_span_id() -> str:
    span_id = secrets.token_hex(8)
    return span_id if span_id != "0" * SPAN_ID_DIGITS else new_span_id()


_current: contextvars.ContextVar[SpanContext | None] = contextvars.ContextVar(
    "tracing_current_span", default=None
)


def current_context() -> SpanContext | None:
    """The span in progress in this thread or task, if any."""
    return _current.get()


def activate(context: SpanContext | None) -> contextvars.Token[SpanContext | None]:
    return _current.set(context)


def deactivate(token: contextvars.Token[SpanContext | None]) -> None:
    _current.reset(token)
