"""One running service: settings, store, backend, proposer, desk, loop and metrics,
wired once. The CLI (``yarn-adapt serve`` / ``demo``) builds it, the web app reads and
acts through it, tests build it against a real mini cluster.

Beside a real RM the co-location guard runs on its own clock (``[colocation]
period_s``) in a thread of its own, started by :meth:`Service.run_forever` (or
:meth:`Service.start_guard`) and stopped -- every node given back -- by
:meth:`Service.close`; it and the configurator's observe read the nodes through one
:class:`~yarn_adapt.colocation.nodes.NodeCache`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from yarn_adapt.colocation.guard import GuardRoundReport
from yarn_adapt.colocation.nodes import NodeCache
from yarn_adapt.errors import YarnError
from yarn_adapt.service.backend import ClusterBackend, YarnBackend
from yarn_adapt.service.guard.build import build_guard
from yarn_adapt.service.guard.loop import GuardLoop
from yarn_adapt.service.guard.metrics import GuardCollector
from yarn_adapt.service.guard.records import GuardStore
from yarn_adapt.service.guard.step import GuardStep
from yarn_adapt.service.loop.actuators import actuator_for
from yarn_adapt.service.loop.desk import ProposalDesk
from yarn_adapt.service.loop.reconcile import reconcile
from yarn_adapt.service.loop.rounds import TuningLoop
from yarn_adapt.service.metrics import ServiceMetrics
from yarn_adapt.service.proposers.planning import GuardOwned, OnRealCapacity, services_reserved
from yarn_adapt.service.proposers.seam import Proposer
from yarn_adapt.service.settings import Settings
from yarn_adapt.service.state.store import Store

log = logging.getLogger(__name__)

GuardBuilder = Callable[[Store, ServiceMetrics], GuardStep]
"""Builds the service's guard step on the store and metrics the service made."""


@dataclass
class Service:
    settings: Settings
    store: Store
    backend: ClusterBackend
    desk: ProposalDesk
    loop: TuningLoop
    metrics: ServiceMetrics
    token: str | None
    guard: GuardStep | None = None

    @classmethod
    def build(
        cls,
        settings: Settings,
        backend: ClusterBackend,
        proposer: Proposer,
        *,
        token: str | None,
        store: Store | None = None,
        guard_builder: GuardBuilder | None = None,
    ) -> Service:
        """``guard_builder``: the guard on sources of the caller's (the demo's
        simulated ones); by default the guard beside a real RM, or none."""
        store = store or Store(settings.state.database_path)
        metrics = ServiceMetrics(store)
        desk = ProposalDesk(store, backend, metrics, guard_owned=GuardOwned.of(settings))
        actuator = actuator_for(
            settings.service.mode, store, desk, metrics, auto_approve=settings.service.auto_approve
        )
        loop = TuningLoop(
            settings, store, backend, proposer, actuator, metrics, in_flight=desk.in_flight
        )
        if guard_builder is not None:
            guard: GuardStep | None = guard_builder(store, metrics)
        else:
            guard = _guard_step(settings, backend, store, metrics, proposer)
        if guard is not None and isinstance(proposer, OnRealCapacity):
            proposer.reserve_for(services_reserved(guard.guard))
        return cls(settings, store, backend, desk, loop, metrics, token, guard)

    def start(self) -> list[str]:
        """Reconcile interrupted applies before anything else; when the RM cannot
        be read yet, the first round that reaches it does it."""
        try:
            done = reconcile(self.store, self.backend)
        except YarnError as exc:
            log.warning("reconcile postponed, the RM cannot be read: %s", exc.one_line())
            return [f"postponed: {exc.one_line()}"]
        self.loop.reconciled = True
        return done

    def run_forever(self, stop: threading.Event) -> None:
        """The configurator's rounds until ``stop``, the guard's cycles beside them."""
        self.start_guard()
        try:
            self.loop.run_forever(stop)
        finally:
            self.stop_guard()

    def start_guard(self) -> None:
        """The guard's own loop, in its thread (nothing without a real RM)."""
        if self.guard is not None and self.guard.loop is not None:
            self.guard.loop.start()

    def stop_guard(self) -> None:
        """No further guard cycle (the nodes stay as they are until :meth:`close`)."""
        if self.guard is not None and self.guard.loop is not None:
            self.guard.loop.stop()

    def run_guard_cycle(self) -> GuardRoundReport | None:
        """One guard cycle now, in this thread (``None``: no guard, or it failed)."""
        if self.guard is None or self.guard.loop is None:
            return None
        return self.guard.loop.run_cycle()

    def drain(self) -> bool:
        """Refuse new operator actions and wait for the applies in progress (at most
        ``[service] shutdown_grace_s``), logging what it waits for; whether none is
        left running. ``serve`` drains before it stops the page, so the operator who
        approved still gets the answer."""
        running = self.desk.in_flight()
        grace = self.settings.service.shutdown_grace_s
        if running:
            log.warning(
                "stopping: waiting up to %g s for the apply in progress (%s)",
                grace,
                ", ".join(sorted(running)),
            )
        if not self.desk.wait_idle(grace):
            log.error(
                "stopping: apply %s still running after %g s; exiting without closing the "
                "database under it: the next start finishes or rolls it back from the journal",
                ", ".join(sorted(self.desk.in_flight())),
                grace,
            )
            return False
        if running:
            log.warning("stopping: the apply in progress has finished")
        return True

    def close(self) -> None:
        """Give back every node the guard changed, drain, then close the backend and
        the database. An apply still running after the grace is left to its journal --
        exactly as if the process had crashed -- and the next start finishes or rolls
        it back; its connections are not closed under it."""
        if self.guard is not None:
            self.guard.stop()  # its loop, then every node it changed back to its original
            self.guard.store.close()
        if not self.drain():
            return
        self.backend.close()
        self.store.close()


def _guard_step(
    settings: Settings,
    backend: ClusterBackend,
    store: Store,
    metrics: ServiceMetrics,
    proposer: Proposer,
) -> GuardStep | None:
    """The co-location guard beside a real RM (off unless ``[colocation] enabled``; an
    off guard still gives back nodes a previous run left changed), with its loop and
    the node cache the configurator's observe shares."""
    if not isinstance(backend, YarnBackend):
        return None
    section = settings.colocation
    nodes = NodeCache(backend.rm.nodes, max_age_s=section.period_s)
    backend.node_list = nodes.nodes  # the configurator's observe reads the same cache
    guard_store = GuardStore(settings.state.database_path)
    guard = build_guard(settings, backend, store, guard_store, proposer)
    loop = GuardLoop(guard, nodes, period_s=section.period_s,
                     failure_budget=section.failure_budget, registry=metrics.registry)  # fmt: skip
    metrics.registry.register(GuardCollector(guard, loop))
    return GuardStep(guard, guard_store, loop)
