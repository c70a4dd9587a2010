"""The trace ingest worker, and the OTLP/HTTP receiver beside it, inside ``yarn-adapt
serve`` when ``[tracing] ingest = true`` (and ``otlp_listen`` names an address): one
process less to run on a small cluster. A larger one runs them apart
(``conf/yarn-adapt-ingest.service``); the two ways store the same traces.

The worker runs in a thread of its own for as long as the service serves; the
receiver answers on ``otlp_listen``. On the way out the receiver stops taking
requests first, then the worker stores what it holds and what the receiver accepted
last (nothing an exporter was told is stored is lost).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tracing.ingest import IngestConfig, IngestWorker
from tracing.redisconn import make_client
from tracing.store import TraceStore
from yarn_adapt.errors import SettingsError
from yarn_adapt.service.guard.build import redis_config, store_limits
from yarn_adapt.service.settings import Settings, TracingSection, secret_lines

log = logging.getLogger(__name__)
JOIN_TIMEOUT_S = 30.0


def worker_config(section: TracingSection) -> IngestConfig:
    """The ingest worker's settings, as ``yarn-adapt trace ingest`` uses them."""
    quiet = section.quiet_s
    return IngestConfig(
        quiet_s=quiet,
        claim_idle_s=max(60.0, 4 * quiet + 1),
        max_clock_ahead_s=section.max_clock_ahead_s,
    )


@contextmanager
def ingesting(settings: Settings) -> Iterator[None]:
    """The ingest worker (and the receiver) while the block runs; nothing when
    ``[tracing] ingest`` is off."""
    section = settings.tracing
    if not section.ingest:
        yield
        return
    config = redis_config(settings)
    store = TraceStore(make_client(config), config, store_limits(section))
    worker = IngestWorker(store, worker_config(section))
    stop = threading.Event()
    with _receiver(settings, store):
        thread = threading.Thread(target=worker.run, args=(stop,), name="ingest", daemon=True)
        thread.start()
        log.info("trace ingest worker running (prefix %s)", section.prefix)
        try:
            yield
        finally:
            stop.set()
            thread.join(JOIN_TIMEOUT_S)
    if section.otlp_listen:
        worker.drain()  # what the receiver accepted while the worker was stopping
    store.close()


@contextmanager
def _receiver(settings: Settings, store: TraceStore) -> Iterator[None]:
    section = settings.tracing
    if not section.otlp_listen:
        yield
        return
    # protobuf only where a receiver runs
    from tracing.receiver import ReceiverConfig, exposure_problem
    from tracing.receiver_process import receiving

    host, _, port = section.otlp_listen.rpartition(":")
    receiver_config = ReceiverConfig(
        host=host, port=int(port), token=_token(settings), public=section.otlp_public
    )
    problem = exposure_problem(receiver_config)
    if problem:
        raise SettingsError(f"{settings.source}: [tracing] otlp_listen: {problem}")
    with receiving(
        redis_config(settings), store.keys.stream, receiver_config, section.otlp_processes
    ):
        yield


def _token(settings: Settings) -> str:
    """The bearer token exporters must send: the first line of ``otlp_token_file``."""
    token_file = settings.tracing.otlp_token_file
    if not token_file:
        return ""
    path = Path(token_file).expanduser()
    where = f"{settings.source}: [tracing] otlp_token_file {path}"
    lines = secret_lines(path, where)
    if not lines or not lines[0].strip():
        raise SettingsError(f"{where}: the file is empty")
    return lines[0].strip()
