"""``python -m tracing ingest``: the ingest worker on its own, without yarn-adapt, and
with ``--otlp HOST:PORT`` the OTLP/HTTP receiver beside it (:mod:`tracing.receiver`).

    python -m tracing ingest --redis-url redis://redis:6379/0 [--prefix yat] [--quiet-s 5]
        [--retention-s 3600] [--memory-budget-mb 256] [--max-clock-ahead-s 5]
        [--dead-letter-entries 1000] [--tls] [--ca-bundle FILE] [--no-verify-tls]
        [--otlp 127.0.0.1:4318 [--otlp-token-file FILE] [--otlp-public]
         [--otlp-tls-cert FILE --otlp-tls-key FILE] [--otlp-max-body-mb 4]
         [--otlp-max-spans-per-s 200000] [--otlp-max-backlog 20000]
         [--otlp-processes 2]]

The Redis password comes from ``$TRACING_REDIS_PASSWORD``, the receiver's bearer token
from ``$TRACING_OTLP_TOKEN`` else ``--otlp-token-file`` (its first line). SIGTERM /
Ctrl-C: the receiver stops taking requests, then the worker stores what it holds and
what the receiver accepted last.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from tracing.errors import TracingError
from tracing.ingest import IngestConfig, IngestWorker
from tracing.receiver_process import RECEIVER_PROCESSES
from tracing.redisconn import DEFAULT_URL, RedisConfig, make_client
from tracing.store import StoreLimits, TraceStore

PASSWORD_ENV = "TRACING_REDIS_PASSWORD"
OTLP_TOKEN_ENV = "TRACING_OTLP_TOKEN"


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m tracing")
    commands = top.add_subparsers(dest="command", required=True)
    ingest = commands.add_parser("ingest", help="run the ingest worker (and the OTLP receiver)")
    ingest.add_argument("--redis-url", default=DEFAULT_URL)
    ingest.add_argument("--prefix", default="yat")
    ingest.add_argument("--tls", action="store_true")
    ingest.add_argument("--ca-bundle", default="")
    ingest.add_argument(
        "--no-verify-tls",
        action="store_true",
        help="do not check Redis's TLS certificate (tests only)",
    )
    ingest.add_argument("--quiet-s", type=float, default=5.0)
    ingest.add_argument("--retention-s", type=float, default=3600.0)
    ingest.add_argument("--memory-budget-mb", type=float, default=256.0)
    ingest.add_argument(
        "--max-clock-ahead-s",
        type=float,
        default=IngestConfig.max_clock_ahead_s,
        help="spans ending later than this after their entry was written are moved back",
    )
    ingest.add_argument(
        "--dead-letter-entries",
        type=int,
        default=StoreLimits.dead_letter_entries,
        help="records of bad entries kept (the dead-letter stream's MAXLEN)",
    )
    ingest.add_argument("--consumer", default=None, help="default: host-pid")
    _receiver_options(ingest)
    return top


def _receiver_options(ingest: argparse.ArgumentParser) -> None:
    otlp = ingest.add_argument_group("OTLP/HTTP receiver (off unless --otlp)")
    otlp.add_argument("--otlp", metavar="HOST:PORT", help="listen for OTLP/HTTP on HOST:PORT")
    otlp.add_argument("--otlp-token-file", default="", help="bearer token exporters must send")
    otlp.add_argument(
        "--otlp-public", action="store_true", help="allow a host off loopback with no token"
    )
    otlp.add_argument("--otlp-tls-cert", default="", help="serve HTTPS with this certificate")
    otlp.add_argument("--otlp-tls-key", default="", help="... and this key")
    otlp.add_argument("--otlp-max-body-mb", type=float, default=4.0)
    otlp.add_argument("--otlp-max-spans-per-s", type=float, default=200_000.0)
    otlp.add_argument("--otlp-max-backlog", type=int, default=20_000, help="stream entries")
    otlp.add_argument(
        "--otlp-processes", type=int, default=RECEIVER_PROCESSES,
        help="receiver processes on the address (about 120,000 spans/s each)",
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        config = _redis_config(args)
        store = TraceStore(make_client(config), config, _limits(args))
        worker = IngestWorker(store, _worker_config(args))
        with _receiver(args, config, store):
            worker.run(stop)
        if args.otlp:
            worker.drain()  # what the receiver accepted while the worker was stopping
    except KeyboardInterrupt:
        return 130
    except (TracingError, ValueError, OSError) as exc:
        print(f"tracing: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    return 0


def _redis_config(args: argparse.Namespace) -> RedisConfig:
    return RedisConfig(
        url=args.redis_url,
        password=os.environ.get(PASSWORD_ENV, ""),
        password_setting=f"${PASSWORD_ENV}",
        tls=args.tls,
        ca_bundle=args.ca_bundle,
        verify_tls=not args.no_verify_tls,
        prefix=args.prefix,
    )


def _limits(args: argparse.Namespace) -> StoreLimits:
    return StoreLimits(
        retention_s=args.retention_s,
        memory_budget_bytes=int(args.memory_budget_mb * (1 << 20)),
        dead_letter_entries=args.dead_letter_entries,
    )


def _worker_config(args: argparse.Namespace) -> IngestConfig:
    options = {"consumer": args.consumer} if args.consumer else {}
    return IngestConfig(
        quiet_s=args.quiet_s,
        claim_idle_s=max(60.0, 4 * args.quiet_s + 1),
        max_clock_ahead_s=args.max_clock_ahead_s,
        **options,
    )


@contextlib.contextmanager
def _receiver(args: argparse.Namespace, config: RedisConfig, store: TraceStore) -> Iterator[None]:
    """The OTLP receiver while the block runs, when ``--otlp`` asks for one. Its Redis
    client does not retry: the exporters do, and a request must not sit in back-off."""
    if not args.otlp:
        yield
        return
    # protobuf only where a receiver runs
    from tracing.receiver import ReceiverConfig, exposure_problem
    from tracing.receiver_process import receiving

    host, _, port = args.otlp.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--otlp {args.otlp!r}: expected HOST:PORT, e.g. 127.0.0.1:4318")
    receiver_config = ReceiverConfig(
        host=host,
        port=int(port),
        token=_otlp_token(args.otlp_token_file),
        public=args.otlp_public,
        tls_cert_file=args.otlp_tls_cert,
        tls_key_file=args.otlp_tls_key,
        max_body_bytes=int(args.otlp_max_body_mb * (1 << 20)),
        max_decoded_bytes=int(8 * args.otlp_max_body_mb * (1 << 20)),
        max_spans_per_s=args.otlp_max_spans_per_s,
        max_backlog_entries=args.otlp_max_backlog,
    )
    problem = exposure_problem(receiver_config)
    if problem:
        raise ValueError(f"--otlp: {problem} (--otlp-token-file, --otlp-public)")
    if args.otlp_processes < 1:
        raise ValueError(f"--otlp-processes {args.otlp_processes}: must be at least 1")
    with receiving(config, store.keys.stream, receiver_config, args.otlp_processes):
        yield


def _otlp_token(token_file: str) -> str:
    if os.environ.get(OTLP_TOKEN_ENV):
        return os.environ[OTLP_TOKEN_ENV].strip()
    if not token_file:
        return ""
    try:
        lines = Path(token_file).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ValueError(f"--otlp-token-file {token_file}: {exc.strerror or exc}") from exc
    if not lines or not lines[0].strip():
        raise ValueError(f"--otlp-token-file {token_file}: the file is empty")
    return lines[0].strip()


if __name__ == "__main__":
    sys.exit(main())
