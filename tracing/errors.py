"""The error tree of the ``tracing`` package.

``tracing`` is deployed on its own (a library inside each latency-critical service, an
ingest worker), so it does not import yarn-adapt's error tree; yarn-adapt's CLI maps
these errors onto its own in one place (``yarn_adapt/cli/trace.py``). Redis exceptions
are translated into this tree in one place too (``tracing/redisconn.py``).

::

    TracingError
    ├── TraceInputError (+ValueError)     a trace file or record is malformed:
    │                                     "<file>: <record or line>: <problem>"
    ├── StoreError                        the Redis trace store failed
    │   └── StoreUnavailable (+ConnectionError)   Redis does not answer
    ├── ReceiverError                     the OTLP receiver cannot start (its port,
    │                                     its TLS certificate)
    └── TraceNotFound (+KeyError)         no stored trace has that id
"""

from __future__ import annotations


class TracingError(Exception):
    """Root of every error the tracing package raises on purpose."""

    def one_line(self) -> str:
        return " ".join(str(self).split())


class TraceInputError(TracingError, ValueError):
    """A malformed trace file or record, named by file and record."""

    def __init__(self, source: str, where: str, problem: str) -> None:
        location = f"{source}: {where}" if where else source
        super().__init__(f"{location}: {problem}")
        self.source = source
        self.where = where
        self.problem = problem


class StoreError(TracingError):
    """Talking to the Redis trace store failed."""


class StoreUnavailable(StoreError, ConnectionError):
    """Redis does not answer (down, refused, timed out, wrong password)."""


class ReceiverError(TracingError):
    """The OTLP receiver cannot start: its port is taken, its certificate unreadable."""


class TraceNotFound(TracingError, KeyError):
    """No stored trace has that id."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "no such trace"
