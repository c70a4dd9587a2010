"""``python -m tracing ingest``: the ingest worker on its own, without yarn-adapt.

    python -m tracing ingest --redis-url redis://redis:6379/0 [--prefix yat] [--quiet-s 5]
        [--retention-s 3600] [--memory-budget-mb 256] [--max-clock-ahead-s 5]
        [--dead-letter-entries 1000]

The password comes from ``$TRACING_REDIS_PASSWORD``. SIGTERM / Ctrl-C stop the worker
after storing what it holds.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence

from tracing.errors import TracingError
from tracing.ingest import IngestConfig, IngestWorker
from tracing.redisconn import DEFAULT_URL, RedisConfig, make_client
from tracing.store import StoreLimits, TraceStore

PASSWORD_ENV = "TRACING_REDIS_PASSWORD"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tracing")
    commands = parser.add_subparsers(dest="command", required=True)
    ingest = commands.add_parser("ingest", help="run the ingest worker")
    ingest.add_argument("--redis-url", default=DEFAULT_URL)
    ingest.add_argument("--prefix", default="yat")
    ingest.add_argument("--tls", action="store_true")
    ingest.add_argument("--ca-bundle", default="")
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
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    config = RedisConfig(
        url=args.redis_url,
        password=os.environ.get(PASSWORD_ENV, ""),
        password_setting=f"${PASSWORD_ENV}",
        tls=args.tls,
        ca_bundle=args.ca_bundle,
        prefix=args.prefix,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        limits = StoreLimits(
            retention_s=args.retention_s,
            memory_budget_bytes=int(args.memory_budget_mb * (1 << 20)),
            dead_letter_entries=args.dead_letter_entries,
        )
        store = TraceStore(make_client(config), config, limits)
        options = {"consumer": args.consumer} if args.consumer else {}
        worker_config = IngestConfig(
            quiet_s=args.quiet_s,
            claim_idle_s=max(60.0, 4 * args.quiet_s + 1),
            max_clock_ahead_s=args.max_clock_ahead_s,
            **options,
        )
        IngestWorker(store, worker_config).run(stop)
    except KeyboardInterrupt:
        return 130
    except (TracingError, ValueError) as exc:
        print(f"tracing: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
