"""The demo's co-location half: latency-critical services on some of the simulated
nodes, traced into an in-process trace store, the co-location guard, and a simulated
node agent per node -- no Redis, no RM, no cgroups.

The guard is the service's own (:func:`yarn_adapt.service.guard.assemble_guard`, its
:class:`~yarn_adapt.service.guard.GuardLoop`, tables, metrics and page), fed by
simulated sources through the interfaces a real deployment fills:

- **the RM** (:class:`SimulatedResourceManager`): the simulated cluster's nodes as
  ``GET /nodes`` lists them (total, used, the NodeManager's utilization with the
  services' CPU outside the containers) and ``updateNodeResource``, which the
  guard's :class:`~yarn_adapt.colocation.actuate.RmNodeTotals` calls unchanged
  (journal, verify); the scheduler then places batch on the node within the new
  total from that moment (:meth:`SimulatedCluster.set_total`);
- **the traces**: the services' requests (:mod:`yarn_adapt.cosim.lc_services`, latency
  rising with batch on their node) in a :class:`~tracing.memstore.MemoryTraceStore`
  read by the guard's :class:`~yarn_adapt.colocation.observe.TraceStoreRisk`;
- **the agents** (:class:`SimulatedAgents`): each reads its node's reclaim request
  (the JSON ``GET /api/agent/nodes/NODE/reclaim`` serves, parsed by the agent's own
  :func:`~preemption.targets.parse_reclaim`), holds that much batch CPU back on its
  node, and reports in the agent's own words (:func:`preemption.status.status_lines`)
  through :meth:`GuardStep.note_agent_report`, what ``POST .../report`` does.

The clock is simulated: each configurator round's segment is cut into guard periods
(``period_s`` simulated seconds); after each the services' traces of that period are
stored, one guard cycle runs and the agents act. Times are the demo's start (wall
clock) plus the simulated seconds, so the page reads them as dates.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from preemption.status import status_document, status_lines
from preemption.targets import parse_reclaim
from tracing.memstore import MemoryTraceStore
from tracing.model import Span
from yarn_adapt.colocation.actuate import RmNodeTotals
from yarn_adapt.colocation.nodes import NodeCache
from yarn_adapt.cosim.lc_services import HostModel, LcApplication, LcTraffic, percentile_ms
from yarn_adapt.errors import YarnHTTPError
from yarn_adapt.model import (
    ClusterInfo,
    HAState,
    Node,
    NodeState,
    NodeUtilization,
    Resources,
)
from yarn_adapt.service.demo.simcluster import SimulatedCluster
from yarn_adapt.service.guard.build import assemble_guard, trace_risk
from yarn_adapt.service.guard.loop import GuardLoop
from yarn_adapt.service.guard.metrics import GuardCollector
from yarn_adapt.service.guard.records import GuardStore, ServiceRecorder
from yarn_adapt.service.guard.step import GuardStep, parse_agent_report
from yarn_adapt.service.metrics import ServiceMetrics
from yarn_adapt.service.settings import Settings
from yarn_adapt.service.state.store import Store
from yarn_adapt.yarn.apply import PollSettings

SERVICE_MEMORY_MB = 1024  # each service's memory outside the containers (the demand bound's)


class SimulatedResourceManager:
    """The simulated cluster as the guard's RM reads and changes it."""

    def __init__(
        self,
        cluster: SimulatedCluster,
        app: LcApplication,
        squeezed_cores: Mapping[str, float],
        started_ms: int,
    ) -> None:
        self.cluster = cluster
        self.app = app
        self.squeezed_cores = squeezed_cores  # the agents' holdings, by node (live)
        self.started_ms = started_ms
        self.updates = 0

    def cluster_info(self) -> ClusterInfo:
        return ClusterInfo("demo", "STARTED", HAState.ACTIVE, "simulated", "simulated",
                           self.started_ms)  # fmt: skip

    def nodes(self, *, states: Iterable[NodeState | str] = ()) -> tuple[Node, ...]:
        totals, used = self.cluster.totals(), self.cluster.used()
        return tuple(self._node(n, totals[n], used[n]) for n in sorted(totals))

    def node(self, node_id: str) -> Node:
        totals = self.cluster.totals()
        if node_id not in totals:
            raise YarnHTTPError("GET", f"/ws/v1/cluster/nodes/{node_id}", 404, "node not found")
        return self._node(node_id, totals[node_id], self.cluster.used()[node_id])

    def update_node_resource(
        self, node_id: str, resources: Resources, *, overcommit_timeout_ms: int = -1
    ) -> Resources:
        """The total from now on; answers the previous one, as the RM does."""
        previous = self.node(node_id).total
        self.cluster.set_total(node_id, resources)
        self.updates += 1
        return previous

    def _node(self, node_id: str, total: Resources, used: Resources) -> Node:
        services = [s for s in self.app.services if s.node_id == node_id]
        services_cpu = sum(self.app.rate_per_s * s.service_ms / 1000.0 for s in services)
        batch_cpu = batch_cores(used, self.squeezed_cores.get(node_id, 0.0))
        utilization = NodeUtilization(
            node_cpu=batch_cpu + services_cpu,
            node_memory_mb=used.memory_mb + SERVICE_MEMORY_MB * len(services),
            containers_cpu=batch_cpu,  # in vcores: one per core here
            containers_memory_mb=used.memory_mb,
        )
        return Node(node_id, node_id, "/default-rack", NodeState.RUNNING, total, used,
                    utilization=utilization)  # fmt: skip


def batch_cores(used: Resources, squeezed_cores: float) -> float:
    """Batch CPU on a node: a core per vcore its containers hold, less what the agent
    holds back."""
    return max(0.0, used.vcores - squeezed_cores)


@dataclass
class SimulatedAgents:
    """A node agent per node: each takes its node's reclaim request as the real agent
    parses it and holds back that much batch CPU (never more than batch uses),
    within the guard period (the agent's mini-steps take seconds); with no request
    (none asked, or the guard's expired on its clock) it gives everything back.
    Memory is not modelled."""

    squeezed_cores: dict[str, float] = field(default_factory=dict)

    def act(self, step: GuardStep, cluster: SimulatedCluster, now_s: float) -> None:
        used = cluster.used()
        for node_id in sorted(used):
            desired = self._desired_millicores(step, node_id, now_s)
            held = min(desired, used[node_id].vcores * 1000)
            self.squeezed_cores[node_id] = held / 1000.0
            lines = report_lines(node_id, now_s, desired, held, used[node_id].vcores)
            step.note_agent_report(node_id, parse_agent_report({"lines": lines}, now_s))

    @staticmethod
    def _desired_millicores(step: GuardStep, node_id: str, now_s: float) -> int:
        request = step.guard.reclaim_for(node_id)
        if request is None:
            return 0
        target = parse_reclaim(request.to_json(), node=node_id, where="simulated agent",
                               received_at_s=now_s, default_ttl_s=request.ttl_s)  # fmt: skip
        return target.reclaim.cpu_millicores


def report_lines(
    node_id: str, now_s: float, desired_millicores: int, held_millicores: int, managed: int
) -> list[str]:
    """The agent's status in its own words (``agent status``), and that it is simulated."""
    squeezed = math.ceil(held_millicores / 1000)
    squeeze = {
        "mode": "service",
        "desired": {"cpu_millicores": desired_millicores, "memory_mb": 0},
        "reclaimed": {"cpu_millicores": held_millicores, "memory_mb": 0},
        "managed": managed,
        "containers": [{"id": f"batch-{i}"} for i in range(min(squeezed, managed))],
    }
    document = status_document(node=node_id, at_s=now_s, problem=None, isolation=None,
                               squeeze=squeeze, evictions=())  # fmt: skip
    return ["simulated agent (the demo): squeezing leaves the services the CPU; "
            "batch tasks keep their trace durations", *status_lines(document)[1:]]  # fmt: skip


@dataclass
class ColocationRecord:
    """What the services saw over the run, per guard period."""

    requests_ms: list[float] = field(default_factory=list)  # every traced request's latency
    periods: int = 0
    periods_met: int = 0
    batch_vcore_s: float = 0.0  # batch on the services' nodes (vcores held x period)
    capacity_vcore_s: float = 0.0  # those nodes' real vcores x period
    lowered: set[str] = field(default_factory=set)  # nodes the guard ever lowered


class DemoColocation:
    """The services, the trace store, the RM, the agents and (once attached) the
    guard, stepped with the simulated cluster."""

    def __init__(
        self,
        cluster: SimulatedCluster,
        app: LcApplication,
        *,
        host: HostModel,
        seed: int,
        period_s: float,
        retention_s: float = 3600.0,
        epoch_s: float | None = None,
    ) -> None:
        if not period_s > 0:
            raise ValueError(f"period_s must be positive, got {period_s!r}")
        self.cluster = cluster
        self.app = app
        self.period_s = period_s
        self.epoch_s = time.time() if epoch_s is None else epoch_s
        self.traffic = LcTraffic(app, host, seed)
        self.store = MemoryTraceStore(retention_s=retention_s)
        self.agents = SimulatedAgents()
        self.rm = SimulatedResourceManager(cluster, app, self.agents.squeezed_cores,
                                           int(self.epoch_s * 1000))  # fmt: skip
        self.record = ColocationRecord()
        self.step: GuardStep | None = None

    def clock(self) -> float:
        """The demo's start plus the simulated seconds."""
        return self.epoch_s + self.cluster.elapsed_s

    @property
    def service_nodes(self) -> tuple[str, ...]:
        return tuple(sorted({s.node_id for s in self.app.services}))

    def advance(self, seconds: float) -> None:
        """Simulate ``seconds`` in guard periods: each period's batch, then the
        services' traces of it, a guard cycle and the agents."""
        left = seconds
        while left > 1e-9:
            period = min(self.period_s, left)
            began_us = int(self.clock() * 1e6)
            self.cluster.advance(period)
            self._serve(began_us, int(self.clock() * 1e6), period)
            self._cycle()
            left -= period

    def _serve(self, began_us: int, ended_us: int, period_s: float) -> None:
        used = self.cluster.used()
        batch = {n: batch_cores(used[n], self.agents.squeezed_cores.get(n, 0.0)) for n in used}
        traces = self.traffic.traces(began_us, ended_us, batch)
        self.store.write_spans([span for trace in traces for span in trace])
        latencies = [_root_ms(trace) for trace in traces]
        self.record.requests_ms += latencies
        p95 = percentile_ms(latencies)
        self.record.periods += 1
        self.record.periods_met += p95 is not None and p95 <= self.app.target_ms
        totals = {n.id: n.resources for n in self.cluster.cluster.nodes}
        for node_id in self.service_nodes:
            self.record.batch_vcore_s += used[node_id].vcores * period_s
            self.record.capacity_vcore_s += totals[node_id].vcores * period_s

    def _cycle(self) -> None:
        if self.step is None:
            return
        if self.step.loop is not None:
            self.step.loop.run_cycle()
        now_s = self.clock()
        self.agents.act(self.step, self.cluster, now_s)
        real = {n.id: n.resources for n in self.cluster.cluster.nodes}
        self.record.lowered |= {n for n, total in self.cluster.totals().items() if total != real[n]}

    def figures(self) -> dict[str, Any]:
        """The demo's closing figures of the co-location half."""
        record = self.record
        p95 = percentile_ms(record.requests_ms)
        return {
            "lc_services": [f"{s.name}@{s.node_id}" for s in self.app.services],
            "lc_requests": len(record.requests_ms),
            "lc_p95_ms": None if p95 is None else round(p95, 2),
            "lc_target_ms": self.app.target_ms,
            "lc_slo_met_ratio": round(record.periods_met / record.periods, 3)
            if record.periods else None,
            "lc_nodes_batch_vcore_s": round(record.batch_vcore_s, 1),
            "lc_nodes_capacity_vcore_s": round(record.capacity_vcore_s, 1),
            "guard_lowered_nodes": len(record.lowered),
            "guard_node_updates": self.rm.updates,
        }  # fmt: skip


def _root_ms(trace: list[Span]) -> float:
    root = trace[0]
    return (root.end_us - root.start_us) / 1000.0


# --------------------------------------------------------------------------- the guard


def demo_guard(
    settings: Settings, colocation: DemoColocation, store: Store, metrics: ServiceMetrics
) -> GuardStep:
    """The service's guard on the demo's simulated sources, its cycles driven by
    :meth:`DemoColocation.advance` (a :data:`~yarn_adapt.service.service.GuardBuilder`)."""
    section = settings.colocation
    clock = colocation.clock
    guard_store = GuardStore(settings.state.database_path)
    actuator = RmNodeTotals(colocation.rm, settings.state.state_dir,
                            verify=PollSettings(timeout_s=5.0, interval_s=0.05))  # fmt: skip
    guard = assemble_guard(settings, trace_risk(settings, lambda: colocation.store), actuator,
                           ServiceRecorder(store, guard_store), clock)  # fmt: skip
    nodes = NodeCache(colocation.rm.nodes, max_age_s=section.period_s, clock=clock)
    loop = GuardLoop(guard, nodes, period_s=section.period_s, failure_budget=section.failure_budget,
                     registry=metrics.registry, clock=clock)  # fmt: skip
    loop.drive()
    metrics.registry.register(GuardCollector(guard, loop))
    colocation.step = GuardStep(guard, guard_store, loop)
    return colocation.step
