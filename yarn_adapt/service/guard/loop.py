"""The guard's own clock: :class:`GuardLoop` runs a step every ``period_s`` in its own
thread, apart from the configurator's round; its health (the last cycle's time and
duration, failures in a row, the nodes' age) is :class:`GuardHealth`. After
``failure_budget`` failures in a row every node is given back, and the loop keeps
trying.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from yarn_adapt.colocation.guard import ColocationGuard, GuardRoundReport
from yarn_adapt.colocation.model import (
    GuardMode,
)
from yarn_adapt.colocation.nodes import NodeCache
from yarn_adapt.errors import YarnAdaptError
from yarn_adapt.service.metrics import NAMESPACE

log = logging.getLogger(__name__)


CYCLE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60)


@dataclass(frozen=True)
class GuardHealth:
    """The guard loop's health: how recent and how fast its cycles are, how many
    failed in a row, and whether its error budget gave the nodes back."""

    period_s: float
    failure_budget: int
    running: bool
    cycles: int
    consecutive_failures: int
    last_cycle_at_s: float | None
    last_cycle_s: float | None
    last_ok_at_s: float | None
    last_error: str
    gave_back_at_s: float | None
    gave_back_why: str
    nodes_read_at_s: float | None

    @property
    def budget_spent(self) -> bool:
        return self.consecutive_failures >= self.failure_budget

    def healthy(self, now_s: float) -> bool:
        """Running, within its budget, and a cycle ended within three periods."""
        recent = self.last_cycle_at_s is not None and now_s - self.last_cycle_at_s < max(
            3 * self.period_s, (self.last_cycle_s or 0.0) + self.period_s
        )
        return self.running and recent and not self.budget_spent

    def to_json(self, now_s: float) -> dict[str, Any]:
        def age(at_s: float | None) -> float | None:
            return None if at_s is None else round(max(0.0, now_s - at_s), 3)

        return {
            "healthy": self.healthy(now_s),
            "running": self.running,
            "period_s": self.period_s,
            "cycles": self.cycles,
            "last_cycle_at_epoch_s": self.last_cycle_at_s,
            "last_cycle_age_s": age(self.last_cycle_at_s),
            "last_cycle_duration_s": self.last_cycle_s,
            "last_ok_at_epoch_s": self.last_ok_at_s,
            "consecutive_failures": self.consecutive_failures,
            "failure_budget": self.failure_budget,
            "error_budget_spent": self.budget_spent,
            "last_error": self.last_error,
            "gave_back_at_epoch_s": self.gave_back_at_s,
            "gave_back_reason": self.gave_back_why,
            "nodes_read_at_epoch_s": self.nodes_read_at_s,
            "nodes_age_s": age(self.nodes_read_at_s),
        }


class GuardLoop:
    """The guard on its own clock: a cycle every ``period_s`` in its own thread.

    A cycle reads the nodes from the shared cache (none while the guard is off: it
    only gives back) and runs one guard round on them. A failure is logged, counted
    and timed; at ``failure_budget`` failures in a row (and every failing cycle
    after) every node is given back, saying why; the loop keeps cycling, and the
    first cycle that succeeds decides afresh."""

    def __init__(
        self,
        guard: ColocationGuard,
        nodes: NodeCache,
        *,
        period_s: float,
        failure_budget: int,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.guard = guard
        self.nodes = nodes
        self.period_s = period_s
        self.failure_budget = failure_budget
        self.clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cycles = 0
        self._failures = 0
        self._last: tuple[float, float] | None = None  # (at, seconds) of the last cycle
        self._last_ok_at_s: float | None = None
        self._last_error = ""
        self._gave_back: tuple[float, str] | None = None
        self._driven = False  # cycles run by the caller (the demo's simulated clock)
        self._metrics = _LoopMetrics(registry or CollectorRegistry())

    # ------------------------------------------------------------------ thread

    def start(self) -> None:
        """Cycle in a thread of its own until :meth:`stop`."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self.run_forever, args=(self._stop,), name="guard-loop", daemon=True
        )
        self._thread.start()

    def drive(self) -> None:
        """The caller runs the cycles (:meth:`run_cycle`) on a clock of its own -- the
        demo's simulated one -- instead of a thread: the loop counts as running
        until :meth:`stop`."""
        self._driven = True

    def stop(self, timeout_s: float = 120.0) -> None:
        """No new cycle; wait for the one running (at most ``timeout_s``)."""
        self._driven = False
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout_s)
            if thread.is_alive():
                log.error("guard loop: a cycle still runs after %g s; stopping anyway", timeout_s)

    @property
    def running(self) -> bool:
        return self._driven or (self._thread is not None and self._thread.is_alive())

    def run_forever(self, stop: threading.Event) -> None:
        """A cycle every ``period_s`` (the next at once when one took longer)."""
        while not stop.is_set():
            began = time.monotonic()
            self.run_cycle()
            stop.wait(max(0.0, self.period_s - (time.monotonic() - began)))

    # ------------------------------------------------------------------ one cycle

    def run_cycle(self) -> GuardRoundReport | None:
        """One guard round on the cached nodes; None when it failed."""
        began, at_s = time.perf_counter(), self.clock()
        try:
            report = self._cycle()
        except YarnAdaptError as exc:
            self._failed(at_s, exc.one_line(), time.perf_counter() - began)
            return None
        except Exception as exc:  # a bug: keep its traceback, keep cycling
            log.exception("guard cycle failed unexpectedly")
            self._failed(at_s, f"unexpected {type(exc).__name__}: {exc}",
                         time.perf_counter() - began)  # fmt: skip
            return None
        self._succeeded(at_s, time.perf_counter() - began)
        return report

    def _cycle(self) -> GuardRoundReport:
        with self._lock:
            self._cycles += 1
            cycle = self._cycles
        if self.guard.mode is GuardMode.OFF:
            return self.guard.run_round((), cycle)  # gives back; reads no node
        snapshot = self.nodes.read(newer_than_s=self.guard.last_change_at_s)
        return self.guard.run_round(snapshot.nodes, cycle)

    def _succeeded(self, at_s: float, seconds: float) -> None:
        with self._lock:
            self._failures, self._last_error = 0, ""
            self._last, self._last_ok_at_s = (at_s, seconds), at_s
        self._metrics.cycle_seconds.labels(result="ok").observe(seconds)

    def _failed(self, at_s: float, why: str, seconds: float) -> None:
        with self._lock:
            self._failures += 1
            failures = self._failures
            self._last, self._last_error = (at_s, seconds), why
        self._metrics.cycle_seconds.labels(result="failed").observe(seconds)
        self._metrics.failures.inc()
        log.error("guard cycle failed (%d in a row): %s", failures, why)
        if failures >= self.failure_budget:
            self._spend_budget(at_s, failures, why)

    def _spend_budget(self, at_s: float, failures: int, why: str) -> None:
        reason = (f"{failures} guard cycles in a row failed (failure_budget "
                  f"{self.failure_budget}); the last: {why}")  # fmt: skip
        try:
            outcomes = self.guard.give_back(reason)
        except YarnAdaptError as exc:
            log.error("guard: cannot give the nodes back: %s", exc.one_line())
            return
        if not outcomes:
            return
        back = ", ".join(f"{o.node_id} {o.result}" for o in outcomes)
        with self._lock:
            self._gave_back = (at_s, f"{reason}: {back}")
        self._metrics.gave_back.inc()

    # ------------------------------------------------------------------ reading

    def health(self) -> GuardHealth:
        with self._lock:
            last, gave_back = self._last, self._gave_back
            latest = self.nodes.latest()
            return GuardHealth(
                period_s=self.period_s,
                failure_budget=self.failure_budget,
                running=self.running,
                cycles=self._cycles,
                consecutive_failures=self._failures,
                last_cycle_at_s=last[0] if last else None,
                last_cycle_s=round(last[1], 4) if last else None,
                last_ok_at_s=self._last_ok_at_s,
                last_error=self._last_error,
                gave_back_at_s=gave_back[0] if gave_back else None,
                gave_back_why=gave_back[1] if gave_back else "",
                nodes_read_at_s=latest.read_at_s if latest else None,
            )


class _LoopMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.cycle_seconds = Histogram(
            "guard_cycle_duration_seconds", "Wall time of a guard cycle, by result.",
            ["result"], namespace=NAMESPACE, buckets=CYCLE_BUCKETS, registry=registry,
        )  # fmt: skip
        self.failures = Counter(
            "guard_cycle_failures", "Guard cycles that failed.", namespace=NAMESPACE,
            registry=registry,
        )  # fmt: skip
        self.gave_back = Counter(
            "guard_gave_back", "Times the error budget gave every node back.",
            namespace=NAMESPACE, registry=registry,
        )  # fmt: skip
        for result in ("ok", "failed"):
            self.cycle_seconds.labels(result=result)
