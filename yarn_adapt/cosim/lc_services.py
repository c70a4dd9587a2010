"""Latency-critical services beside the demo's simulated batch: their latency from the
batch work on their node, and the request traces they would send.

An application is an entry service that calls its other services one after another
(each on its own node) for every request. A service's P95 is the one-node model's
queueing + interference formula (:func:`yarn_adapt.cosim.colocation.lc_p95_ms`): its
load is the request rate times its CPU time per request; it gets the host's cores
that batch leaves (``host_cores`` less the batch CPU on the node); the interference
term grows with batch's share of the host's cores. Batch CPU is what batch's
containers hold on the node (one core per vcore) less what the node's agent holds
back from them (``squeezed_cores``).

Modelled, not measured: a request's time in each service is drawn from a lognormal
whose 95th percentile is that service's P95 (``spread``: its sigma); squeezing batch
lowers the interference the services see but does not slow the simulator's batch
tasks (its task durations are fixed), as in :mod:`yarn_adapt.cosim.lra_model`.

Every request is one trace: a SERVER span of the entry service on its node with a
SERVER span per callee inside it, on the callee's node (the host the guard maps to a
NodeManager). Everything is drawn from one seeded generator: the same seed and the
same batch, the same traces.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from tracing.model import Span, SpanKind
from yarn_adapt.cosim.colocation import NodeModel, lc_p95_ms

Z95 = 1.6448536269514722  # the standard normal's 95th percentile


@dataclass(frozen=True)
class LcService:
    """A service on ``node_id`` needing ``service_ms`` of CPU per request."""

    name: str
    node_id: str
    service_ms: float


@dataclass(frozen=True)
class LcApplication:
    """``entry`` calls each of ``callees`` in turn for each request: ``rate_per_s``
    requests a second (the services' load), ``traced_per_s`` of them traced (a
    sample, evenly spread); ``target_ms`` is the entry service's P95 target (its SLO)."""

    entry: LcService
    callees: tuple[LcService, ...]
    rate_per_s: float
    traced_per_s: float
    target_ms: float

    def __post_init__(self) -> None:
        if not 0 < self.traced_per_s <= self.rate_per_s or not self.target_ms > 0:
            raise ValueError("application: need 0 < traced_per_s <= rate_per_s, target_ms > 0")

    @property
    def services(self) -> tuple[LcService, ...]:
        return (self.entry, *self.callees)


@dataclass(frozen=True)
class HostModel:
    """A NodeManager's host: ``host_cores`` in all, ``interference`` (the node model's
    coefficient), a service's latency capped at ``max_latency_factor`` x its time."""

    host_cores: float = 12.0
    interference: float = 1.5
    max_latency_factor: float = 20.0
    spread: float = 0.25

    def __post_init__(self) -> None:
        if not (self.host_cores > 0 and self.interference >= 0 and self.spread > 0):
            raise ValueError("host model: host_cores and spread > 0, interference >= 0")


def service_p95_ms(
    service: LcService, rate_per_s: float, batch_cores: float, host: HostModel
) -> float:
    """The service's P95 with ``batch_cores`` of batch CPU on its host."""
    batch = min(max(batch_cores, 0.0), host.host_cores)
    model = NodeModel(
        cores=host.host_cores,
        lc_service_ms=service.service_ms,
        interference=host.interference,
        max_latency_factor=host.max_latency_factor,
    )
    load_cores = rate_per_s * service.service_ms / 1000.0
    left = max(host.host_cores - batch, 1.0)  # CFS leaves a service at least a core
    return lc_p95_ms(load_cores, left, batch / host.host_cores, model)


class LcTraffic:
    """The application's requests over time, as traces."""

    def __init__(self, app: LcApplication, host: HostModel, seed: int) -> None:
        self.app = app
        self.host = host
        self.rng = random.Random(seed)
        self._ids = 0

    def p95s_ms(self, batch_cores: Mapping[str, float]) -> dict[str, float]:
        """Each service's P95 now, by the batch CPU on each node."""
        return {
            s.name: service_p95_ms(s, self.app.rate_per_s, batch_cores.get(s.node_id, 0.0),
                                   self.host)
            for s in self.app.services
        }  # fmt: skip

    def traces(
        self, start_us: int, end_us: int, batch_cores: Mapping[str, float]
    ) -> list[list[Span]]:
        """The traced requests that arrive in [start_us, end_us) (evenly spaced at
        ``traced_per_s``, a random phase), each a trace."""
        p95s = self.p95s_ms(batch_cores)
        gap_us = 1e6 / self.app.traced_per_s
        count = int((end_us - start_us) / gap_us)
        phase = self.rng.random() * gap_us
        return [self._trace(int(start_us + phase + i * gap_us), p95s) for i in range(count)]

    def _time_us(self, p95_ms: float) -> int:
        sigma = self.host.spread
        median_ms = p95_ms / math.exp(Z95 * sigma)
        return max(1, int(1000.0 * median_ms * math.exp(sigma * self.rng.gauss(0.0, 1.0))))

    def _trace(self, start_us: int, p95s: Mapping[str, float]) -> list[Span]:
        trace_id = f"{self.rng.getrandbits(128) | 1:032x}"
        root_id = self._span_id()
        entry = self.app.entry
        own = self._time_us(p95s[entry.name])
        now = start_us + own // 2  # half its own work before the calls, half after
        children = []
        for callee in self.app.callees:
            took = self._time_us(p95s[callee.name])
            children.append(self._span(trace_id, root_id, callee, now, now + took))
            now += took
        root = self._span(trace_id, None, entry, start_us, now + own - own // 2)
        return [replace(root, span_id=root_id), *children]

    def _span(
        self, trace_id: str, parent: str | None, service: LcService, start: int, end: int
    ) -> Span:
        return Span(trace_id, self._span_id(), parent, service.name, "GET /", start, end,
                    SpanKind.SERVER, host=service.node_id)  # fmt: skip

    def _span_id(self) -> str:
        self._ids += 1
        return f"{self._ids:016x}"


def percentile_ms(values_ms: Sequence[float], percentile: float = 95.0) -> float | None:
    """The ``percentile`` of ``values_ms`` (nearest rank); None when empty."""
    if not values_ms:
        return None
    ordered = sorted(values_ms)
    rank = max(1, math.ceil(percentile / 100.0 * len(ordered)))
    return ordered[rank - 1]
