"""Slows down token guessing: failed sign-ins are counted per client address.

The first ``free_failures`` failures cost nothing (a typo); every failure after
that locks the address out for ``base_delay_s * 2**n`` seconds, capped at
``max_delay_s``. While locked out, a request is answered 429 with ``Retry-After``
before the token is even compared, so guessing speed is bounded by the lock-out,
not by the server. A success clears the address's record. The table is bounded:
the least recently seen addresses are forgotten first.

Behind a reverse proxy every request comes from the proxy's address, so one
guesser locks everyone out for a while: that is the safe direction to fail in.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class _Record:
    failures: int
    locked_until: float


class LoginThrottle:
    """Thread-safe (waitress serves from several threads)."""

    def __init__(
        self,
        *,
        free_failures: int = 5,
        base_delay_s: float = 1.0,
        max_delay_s: float = 300.0,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.free_failures = free_failures
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self._max_clients = max_clients
        self._clock = clock
        self._records: OrderedDict[str, _Record] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after_s(self, client: str) -> int | None:
        """Whole seconds until ``client`` may try again, or None if it may now."""
        with self._lock:
            record = self._records.get(client)
        if record is None:
            return None
        remaining = record.locked_until - self._clock()
        return math.ceil(remaining) if remaining > 0 else None

    def failed(self, client: str) -> None:
        with self._lock:
            record = self._records.pop(client, _Record(0, 0.0))
            failures = record.failures + 1
            self._records[client] = _Record(failures, self._clock() + self._delay_s(failures))
            while len(self._records) > self._max_clients:
                self._records.popitem(last=False)

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._records.pop(client, None)

    def _delay_s(self, failures: int) -> float:
        beyond = failures - self.free_failures
        if beyond <= 0:
            return 0.0
        return float(min(self.max_delay_s, self.base_delay_s * 2.0 ** min(beyond - 1, 40)))
