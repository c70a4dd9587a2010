"""Where the latency-critical demand on each node comes from (the observe side).

A :class:`DemandProvider` turns what a round observed into a :class:`NodeDemand` per
node: the pessimistic amount the latency-critical applications need there, which
batch must never see.

- :class:`LearnedDemand` -- the demand learners' snapshot
  (:class:`~yarn_adapt.demand.model.DemandSnapshot`: per application an estimate and
  an upper confidence bound at its forecast load, e.g. the Cilantro proposer's per
  leaf queue), spread over the nodes the application's services ran on in the risk
  window.
- :class:`ObservedUsageDemand` -- what the NodeManager measures running on its host
  outside YARN's containers (the RM's ``resourceUtilization``: node minus
  containers), its maximum over the last few rounds, plus headroom
  (``demand = "observed"``, and the learned demand's fallback on a node whose
  applications' learners have too few rounds).
- :class:`NoDemand` -- risk only.
- ``yarn_adapt.colocation.lra.LearnedLraDemand`` -- each latency-critical
  application's own learners, CPU and memory (``[colocation] demand = "learned"``,
  the default, or ``"stated"``), fed every round through :class:`FedDemandProvider`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from tracing.model import RiskSnapshot
from yarn_adapt.colocation.model import NodeDemand, NodeView, RiskReading
from yarn_adapt.demand.model import DemandSnapshot
from yarn_adapt.model import Node


class DemandProvider(Protocol):
    def demands(
        self, nodes: Sequence[Node], risk: RiskSnapshot | None, now_s: float
    ) -> tuple[NodeDemand, ...]: ...


@runtime_checkable
class FedDemandProvider(Protocol):
    """A provider that learns: the observer feeds it each round's reading (risk,
    QoS, the requests since the last read) and the nodes, then asks for demands."""

    def feed(
        self,
        reading: RiskReading,
        views: Sequence[NodeView],
        nodes: Sequence[Node],
        now_s: float,
    ) -> None: ...

    def demands(
        self, nodes: Sequence[Node], risk: RiskSnapshot | None, now_s: float
    ) -> tuple[NodeDemand, ...]: ...


class NoDemand:
    def demands(
        self, nodes: Sequence[Node], risk: RiskSnapshot | None, now_s: float
    ) -> tuple[NodeDemand, ...]:
        return ()


# --------------------------------------------------------------------------- observed


class ObservedUsageDemand:
    """Non-container usage on each node (max over ``window`` rounds) x (1 + headroom).

    ``vcores_per_core`` converts the NodeManager's CPU measure (cores used) into the
    vcores the node advertises."""

    def __init__(self, *, headroom: float = 0.25, window: int = 5, vcores_per_core: float = 1.0):
        self.headroom = headroom
        self.vcores_per_core = vcores_per_core
        self._seen: dict[str, deque[tuple[float, float]]] = {}
        self._window = window

    def demands(
        self, nodes: Sequence[Node], risk: RiskSnapshot | None, now_s: float
    ) -> tuple[NodeDemand, ...]:
        return tuple(d for d in (self._demand(node) for node in nodes) if d is not None)

    def _demand(self, node: Node) -> NodeDemand | None:
        use = node.utilization
        if use is None:
            return None
        cpu = use.outside_containers_cores(self.vcores_per_core) * self.vcores_per_core
        memory = float(max(0, use.node_memory_mb - use.containers_memory_mb))
        recent = self._seen.setdefault(node.id, deque(maxlen=self._window))
        recent.append((cpu, memory))
        peak_cpu, peak_memory = (max(values) for values in zip(*recent, strict=True))
        scale = 1.0 + self.headroom
        source = f"observed usage outside containers + {self.headroom:.0%}"
        return NodeDemand(node.id, peak_cpu * scale, peak_memory * scale, source, peak_cpu)


# --------------------------------------------------------------------------- learned


VCORE_UNITS = frozenset({"vcores", "vcore", "cores", "cpu"})


class LearnedDemand:
    """The learners' upper bounds, spread over each application's nodes.

    ``applications`` maps an application (as the learners name it) to its services
    (as the traces name them). An application's bound is split over the nodes in
    proportion to how many of its services ran on each in the risk window; an
    application with no service seen counts nowhere. Learned demand is CPU only
    (``unit`` vcores): the memory bound is 0.
    """

    def __init__(
        self,
        snapshot: Callable[[], DemandSnapshot | None],
        applications: Mapping[str, Sequence[str]],
        node_hosts: Mapping[str, str] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.applications = {app: tuple(services) for app, services in applications.items()}
        self.node_hosts = dict(node_hosts or {})

    def demands(
        self, nodes: Sequence[Node], risk: RiskSnapshot | None, now_s: float
    ) -> tuple[NodeDemand, ...]:
        learned = self.snapshot()
        if learned is None or risk is None or learned.unit.lower() not in VCORE_UNITS:
            return ()
        upper: dict[str, float] = {}
        estimate: dict[str, float] = {}
        for demand in learned.demands:
            if not (math.isfinite(demand.upper) and math.isfinite(demand.estimate)):
                continue
            for node_id, share in self._shares(demand.application, nodes, risk).items():
                upper[node_id] = upper.get(node_id, 0.0) + demand.upper * share
                estimate[node_id] = estimate.get(node_id, 0.0) + demand.estimate * share
        return tuple(
            NodeDemand(node_id, value, 0.0, "learned upper bound", estimate[node_id])
            for node_id, value in sorted(upper.items())
        )

    def _shares(
        self, application: str, nodes: Sequence[Node], risk: RiskSnapshot
    ) -> dict[str, float]:
        services = set(self.applications.get(application, (application,)))
        counts: dict[str, int] = {}
        for entry in risk.nodes:
            node_id = self._node_of(entry.node, nodes)
            hits = len(services & set(entry.services))
            if node_id is not None and hits:
                counts[node_id] = counts.get(node_id, 0) + hits
        total = sum(counts.values())
        return {node_id: count / total for node_id, count in counts.items()} if total else {}

    def _node_of(self, host: str, nodes: Sequence[Node]) -> str | None:
        return node_of(host, nodes, self.node_hosts)


def node_of(host: str, nodes: Sequence[Node], node_hosts: Mapping[str, str]) -> str | None:
    """The node a trace host stands for: ``node_hosts``, else the node with that
    id, else the one node on that host (None when ambiguous or unknown)."""
    if host in node_hosts:
        return node_hosts[host]
    for node in nodes:
        if host == node.id:
            return node.id
    same_host = [node.id for node in nodes if node.host == host]
    return same_host[0] if len(same_host) == 1 else None
