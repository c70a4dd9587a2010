"""Slows down token guessing, charging each failure to the client that made it.

The first ``free_failures`` failures of a client (its address) cost nothing (a typo);
every failure after that locks the client out for ``base_delay_s * 2**n`` seconds,
capped at ``max_delay_s``. A locked-out client's *operator-token* checks (API bearer,
sign-in) are answered 429 with ``Retry-After`` before the token is compared, so the
speed of guessing the operator token -- chosen by a person, maybe from a small space
-- is bounded by the lock-out, not by the server. An operator-token success clears
the client's record. The table is bounded: the least recently seen clients are
forgotten first.

Who pays, and who never does (:mod:`yarn_adapt.service.web.access` applies it):

- **Every failed check is charged to its client**, whatever it tried: an operator
  token, an agent token, anything at the agent endpoint. So a guesser locks out only
  itself, and operators elsewhere keep signing in.
- **Agent tokens are never locked out.** An agent token carries 256 random bits:
  guessing one is hopeless at any speed, so throttling its checks would protect
  nothing and would hand an attacker a weapon -- a tenant container on a NodeManager
  host shares the host's address with the node agent, and could otherwise lock the
  agent out by failing on purpose. An agent token is therefore verified even while
  its address is locked out, and a valid one is served.
- **An agent's success clears nothing**: it would wipe the record of a guesser on
  the same host every few seconds and give it unthrottled operator-token guesses.

Behind a reverse proxy every request comes from the proxy's address, so one guesser
there makes everyone behind it wait for operator-token checks (agents are not
affected, and signed-in sessions need no check): the safe direction to fail in until
the service is told which proxy to trust for the client's own address.
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
