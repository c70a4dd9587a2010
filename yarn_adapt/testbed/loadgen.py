"""An open-loop load generator: ``python -m yarn_adapt.testbed.loadgen``.

Requests arrive as a Poisson process of ``--rate`` per second on average, whatever the
answers do (open loop: a slow service does not slow the arrivals, as real users do not wait
for each other), spread round-robin over the ``--target`` URLs, until ``--duration``
or SIGTERM. Each request's latency counts from its *scheduled* arrival, so time a
request waited for a free client thread counts too. One JSON line per request goes
to ``--out``: ``[arrival epoch s, latency ms, ok]``; a request that fails or takes
longer than ``--timeout`` counts as not ok with the time it took.

``--profile steady`` (the default) keeps the rate; ``steps`` makes it change over a
cycle of ``--cycle`` seconds, repeated (:data:`STEPS`): low, high, low, then a burst,
in multiples of the rate that average 1, so a window of whole cycles sees the same
load whichever second it starts in.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

import requests

_local = threading.local()

# (share of the cycle, multiple of the rate): low, high, low, a burst; they average 1
STEPS = ((0.35, 0.5), (0.3, 1.5), (0.25, 0.5), (0.1, 2.5))
PROFILES = ("steady", "steps")


def rate_multiple(profile: str, cycle_s: float, since_s: float) -> float:
    """The rate's multiple ``since_s`` seconds into the run."""
    if profile == "steady" or cycle_s <= 0:
        return 1.0
    position = (since_s % cycle_s) / cycle_s
    for share, multiple in STEPS:
        if position < share:
            return multiple
        position -= share
    return STEPS[-1][1]


def _session() -> requests.Session:
    session: requests.Session | None = getattr(_local, "session", None)
    if session is None:
        session = requests.Session()
        _local.session = session
    return session


class Recorder:
    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.lock = threading.Lock()

    def request(self, url: str, arrival: float, timeout_s: float) -> None:
        ok = False
        try:
            ok = _session().get(url, timeout=timeout_s).status_code == 200
        except requests.RequestException:
            ok = False
        latency_ms = (time.time() - arrival) * 1000.0
        with self.lock:
            self.stream.write(json.dumps([round(arrival, 4), round(latency_ms, 3), ok]) + "\n")


def run(
    targets: Sequence[str],
    rate: float,
    duration_s: float,
    out: Path,
    *,
    timeout_s: float = 5.0,
    seed: int = 0,
    stop: threading.Event | None = None,
    profile: str = "steady",
    cycle_s: float = 0.0,
) -> None:
    stop = stop or threading.Event()
    rng = random.Random(seed)
    with out.open("w", buffering=1) as stream, ThreadPoolExecutor(max_workers=64) as pool:
        recorder = Recorder(stream)
        began = time.time()
        arrival = began
        index = 0
        while not stop.is_set() and arrival - began < duration_s:
            arrival += rng.expovariate(rate * rate_multiple(profile, cycle_s, arrival - began))
            delay = arrival - time.time()
            if delay > 0 and stop.wait(delay):
                break
            pool.submit(recorder.request, targets[index % len(targets)], arrival, timeout_s)
            index += 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m yarn_adapt.testbed.loadgen")
    parser.add_argument("--target", action="append", required=True)
    parser.add_argument("--rate", type=float, required=True, help="requests per second")
    parser.add_argument("--duration", type=float, default=3600.0, help="seconds")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", choices=PROFILES, default="steady")
    parser.add_argument("--cycle", type=float, default=0.0, help="seconds (--profile steps)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    run(args.target, args.rate, args.duration, args.out, timeout_s=args.timeout,
        seed=args.seed, stop=stop, profile=args.profile, cycle_s=args.cycle)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
