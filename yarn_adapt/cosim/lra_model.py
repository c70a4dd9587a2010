"""A cluster where a latency-critical application (a DAG of services, each on a node)
shares the nodes with batch jobs: TopoSch's evaluation (§6) in the simulator.

Built from the one-node model (:mod:`yarn_adapt.cosim.colocation`), not beside it:

* **Each node** is a :class:`~yarn_adapt.cosim.colocation.ColocatedNode` (its batch
  slots, CFS sharing between batch and the services, task progress under CPU caps,
  the preemption agent's own code and kills); the cluster takes over its queue and
  job accounting (:class:`ClusterNode`).
* **Per service latency**: the per-core interference model
  (:func:`~yarn_adapt.cosim.interference.contended_p95_ms`): the service's own
  service time inflated by what batch does to each core of its node (runnable batch
  threads, their CFS weight over a service thread's, the memory-bandwidth hogs among
  them: ``memory_hog_share`` of batch), then queued at its load (the twitter trace's
  request rate times its CPU weight) on its share of the node's cores. A request's
  end-to-end P95 is the sum along the critical path of the DAG (the slowest chain of
  calls, made one after the other; a pessimistic composition of per-service tails,
  the same for every policy).
* **Risk** every ``risk_interval_s``: the window's per-service latencies and
  critical paths go through :func:`tracing.risk.assess` (eqs. 4-8) unchanged; a
  latency at the model's ceiling counts as a failed request (eq. 6).
* **Batch placement**: Algorithm 1 (:mod:`yarn_adapt.cosim.toposch`) every
  ``pass_interval_s`` over the cluster's waiting tasks. Maps have data on
  ``replicas`` random nodes (``local_share`` of them; the rest and reduces have no
  locality).
* **The guard** (policy ``guard``): :func:`yarn_adapt.colocation.decide.decide` every
  risk interval with the node views, the risk snapshot, the application's QoS and
  (``learned_demand``) each node's demand upper bound from a
  :class:`~yarn_adapt.demand.learner.MonotoneLearner` per service (performance
  ``min(1, target / p95)`` against allocation per unit load); its targets are the
  visible totals Algorithm 1 sees.
* **The service** (policy ``service``, :mod:`yarn_adapt.cosim.service_guard`): the
  yarn-adapt service's own guard, built from its settings, runs a round every
  ``[colocation] period_s`` over the last ``[tracing] window_s`` of the steps (as
  traces); the totals it sets are what YARN's placement sees (``placement
  "yarn"``: :data:`~yarn_adapt.cosim.toposch.YARN`, no Algorithm 1
  retry), and each node's agent polls its reclaim request as the agent does in
  service mode. ``placement "algorithm1"`` keeps Algorithm 1's retry on top of the
  guard's totals (a comparison: YARN cannot place beyond what the RM shows). Every
  placement beyond the total the guard left is counted (``beyond_visible``).
* **Calibration**: the per-core coefficients (``ClusterModel.interference``) are
  the ones fitted to testbed sweeps (:mod:`yarn_adapt.cosim.core_calibration`), read
  from the committed :data:`~yarn_adapt.cosim.interference.CORE_CALIBRATION`; the
  application's service times stay PiggyMetrics' (the testbed's own services are
  measured, not these).
* **Agents**: ``qos`` -- the one-node model's autoscaler (the QoS model's smallest
  reclaim that meets the node's service target) driving the agent's gradual
  strategy (every ``agent_interval_s``); ``utilisation`` -- Kubernetes-style:
  reclaim by killing batch whenever the node's CPU utilisation is above
  ``kube_threshold``.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from preemption.model import Amount, QosSignal, ReclaimTarget
from preemption.qos import QosModel
from preemption.reclaim import ReclaimSettings
from preemption.settings import AgentSettings
from preemption.strategies import Strategy
from preemption.targets import ServiceTarget
from tracing.model import RiskSnapshot
from tracing.risk import Request, RiskInputs, RiskSettings, assess
from yarn_adapt.colocation.decide import decide
from yarn_adapt.colocation.model import (
    Action,
    GuardInputs,
    GuardSettings,
    NodeDemand,
    NodeMemory,
    NodeView,
    QosReading,
)
from yarn_adapt.cosim.colocation import ColocatedNode, NodeModel, SimJob, SimTask
from yarn_adapt.cosim.interference import (
    CoreInterference,
    CorePressure,
    contended_p95_ms,
    load_core_interference,
)
from yarn_adapt.cosim.service_guard import (
    ServiceGuard,
    ServiceGuardSpec,
    SimulatedNodeTotals,
    SimulatedTraces,
    StepTrace,
)
from yarn_adapt.cosim.toposch import (
    ALGORITHM1,
    YARN,
    NodeState,
    ToposchSettings,
    WaitingContainer,
    place_in_order,
)
from yarn_adapt.demand.learner import LearnerSettings, MonotoneLearner, demand_bounds
from yarn_adapt.model import Node, NodeUtilization
from yarn_adapt.model import NodeState as YarnNodeState
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.resources import Resources

# --------------------------------------------------------------------------- the app


@dataclass(frozen=True)
class ServiceSpec:
    """A service: whom it calls, its CPU time per request, and its CPU load at the
    median request rate in units of ``NodeModel.lc_cores_at_median``."""

    name: str
    calls: tuple[str, ...]
    service_ms: float
    load_weight: float = 1.0


@dataclass(frozen=True)
class AppSpec:
    services: tuple[ServiceSpec, ...]
    entry: str

    def __post_init__(self) -> None:
        names = {s.name for s in self.services}
        unknown = {c for s in self.services for c in s.calls} - names
        if self.entry not in names or unknown:
            raise ValueError(f"app: unknown services {sorted(unknown) or [self.entry]}")

    def service(self, name: str) -> ServiceSpec:
        return next(s for s in self.services if s.name == name)

    def critical_path(self, latency: Mapping[str, float]) -> tuple[float, tuple[str, ...]]:
        """The slowest chain of calls from the entry: (its latency, its services)."""
        memo: dict[str, tuple[float, tuple[str, ...]]] = {}

        def longest(name: str) -> tuple[float, tuple[str, ...]]:
            if name not in memo:
                below = [longest(c) for c in self.service(name).calls]
                tail = max(below, default=(0.0, ()), key=lambda item: item[0])
                memo[name] = (latency[name] + tail[0], (name, *tail[1]))
            return memo[name]

        return longest(self.entry)


def piggymetrics() -> AppSpec:
    """A 12-service application shaped like PiggyMetrics (TopoSch §6.1)."""

    def s(name: str, calls: tuple[str, ...], ms: float, weight: float) -> ServiceSpec:
        return ServiceSpec(name, calls, ms, weight)

    return AppSpec(
        (
            s("gateway", ("registry", "auth", "account", "statistics", "notification"), 2, 0.6),
            s("registry", ("config",), 1.5, 0.3),
            s("config", (), 1.5, 0.3),
            s("auth", ("auth-mongo",), 4, 0.8),
            s("auth-mongo", (), 3, 0.8),
            s("account", ("account-mongo", "statistics"), 5, 1.0),
            s("account-mongo", (), 3, 1.0),
            s("statistics", ("statistics-mongo", "kafka"), 6, 1.2),
            s("statistics-mongo", (), 4, 1.2),
            s("notification", ("notification-mongo", "kafka"), 4, 0.6),
            s("notification-mongo", (), 3, 0.5),
            s("kafka", (), 2, 0.6),
        ),
        entry="gateway",
    )


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True, kw_only=True)
class ClusterModel:
    """``node``: every node's constants (the one-node model's); a service's target
    is ``target_factor`` x its service time, the application's the critical path
    of those targets."""

    nodes: int = 12
    node: NodeModel = field(default_factory=NodeModel)
    interference: CoreInterference = field(default_factory=load_core_interference)
    memory_hog_share: float = 0.5
    risk_interval_s: float = 60.0
    pass_interval_s: float = 1.0
    replicas: int = 3
    target_factor: float = 2.0
    kube_threshold: float = 0.8
    agent_interval_s: float = 5.0
    drain_s: float = 4 * 3600.0

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.replicas < 1 or self.risk_interval_s <= 0:
            raise ValueError("cluster model: need nodes >= 1, replicas >= 1, risk_interval_s > 0")
        if not 0.0 <= self.memory_hog_share <= 1.0:
            raise ValueError(
                f"cluster model: memory_hog_share {self.memory_hog_share} not in [0, 1]"
            )


SERVICE_MEMORY_MB = 1024  # each service's memory outside the containers (NodeManager's view)


@dataclass(frozen=True)
class Policy:
    """A co-location policy: Algorithm 1's settings (``nu = 0``: YARN's own), the
    node agent (none, QoS-driven gradual, or utilisation-driven kill), and the
    guard (with or without learned demand); or ``service``: the yarn-adapt
    service's guard and agents from its settings (the agents' from ``agents``),
    with batch placed by YARN over the totals it sets (``placement "yarn"``) or by
    Algorithm 1 with its retry on top of them (``"algorithm1"``)."""

    name: str
    toposch: ToposchSettings
    agent: Literal["none", "qos", "utilisation", "service"] = "none"
    strategy: Strategy = Strategy.NLTF
    guard: GuardSettings | None = None
    learned_demand: bool = False
    service: ServiceGuardSpec | None = None
    agents: AgentSettings | None = None
    placement: Literal["algorithm1", "yarn"] = "algorithm1"


@dataclass
class ClusterRun:
    policy: str
    e2e_p95_ms: list[float]  # per step within the horizon
    jct_s: dict[int, float]  # job index -> JCT
    violation_s: float
    target_ms: float
    placements: dict[str, int]  # reason -> count
    kills: int
    squeezed: int
    guard_reasons: list[str] = field(default_factory=list)
    batch_cpu_share: float = 0.0  # batch's mean share of the cluster's CPU in the horizon
    beyond_visible: int = 0  # placements beyond the total the guard left the node
    guard_rounds: int = 0


# --------------------------------------------------------------------------- a node


class ClusterNode(ColocatedNode):
    """One node of the cluster: the one-node model with the cluster's queue and
    jobs, the services' load set each step, and the kube-style target."""

    def __init__(
        self,
        node_id: str,
        model: NodeModel,
        loads: Sequence[float],
        *,
        strategy: Strategy | None,
        reclaim: ReclaimSettings,
        qos_model: QosModel | None,
        seed: int,
        on_finish: Callable[[SimTask], None],
        kube_threshold: float | None,
        target_source: ServiceTarget | None = None,
    ) -> None:
        super().__init__(
            model, [], loads, strategy=strategy, reclaim=reclaim, qos_model=qos_model, seed=seed
        )
        self.node_id = node_id
        self.on_finish = on_finish
        self.kube_threshold = kube_threshold
        self.target_source = target_source
        self.load_now = 0.0

    def _load_cores(self) -> float:
        return self.load_now

    def _finish(self, task: SimTask) -> None:
        del self.running[task.container_id]
        self.cgroups.drop(task.container_id)
        self.on_finish(task)

    def free_slots(self) -> int:
        return max(0, self.model.batch_slots - len(self.running) - self._blocked_slots())

    def _target(self, measured_p95: float) -> ReclaimTarget:
        if self.target_source is not None:  # the service's request, as the agent polls it
            return self.target_source.current().target
        if self.kube_threshold is None:
            return super()._target(measured_p95)
        utilisation = (self.load_now + self.batch_usage) / self.model.cores
        reclaimed = self._reclaimed_cpu()
        excess = (utilisation - self.kube_threshold) * self.model.cores * 1000
        total = max(0, int(reclaimed + excess))
        if abs(total - self.desired.cpu_millicores) > 500:
            self.desired = Amount(total, 0)
            self.generation += 1
        qos = QosSignal(
            service="lc",
            satisfied=utilisation <= self.kube_threshold,
            latency_ms=measured_p95,
            target_ms=self.model.target_p95_ms,
            load=self.load_now,
            measured_at_s=self.now,
        )
        return ReclaimTarget(self.desired, self.generation, qos, "kube-auto")


# --------------------------------------------------------------------------- the cluster


@dataclass
class _Waiting:
    """A waiting task: its container as first asked (retry 0), and the pass from which
    its retries count (the first pass it was ready in; None: not ready yet). Retries
    are counted, not stored: a task ready and waiting is held in every pass until
    placed, so at pass ``k`` it was held ``k - counted_from`` times."""

    container: WaitingContainer
    task: SimTask
    counted_from: int | None

    def at_pass(self, index: int) -> WaitingContainer:
        assert self.counted_from is not None
        retry = index - self.counted_from
        return self.container if retry == 0 else self.container.with_retry(retry)


class Cluster:
    """One run of a policy over the horizon, then the batch drains with the services at
    their median load: risk rounds and the guard go on through the drain (a deployed
    guard knows no horizon); the figures are the horizon's, JCT every job's."""

    def __init__(
        self,
        model: ClusterModel,
        app: AppSpec,
        jobs: Sequence[SimJob],
        loads: Sequence[float],
        policy: Policy,
        *,
        reclaim: ReclaimSettings,
        qos_models: Mapping[str, QosModel],
        seed: int,
        lc_silent: bool = False,
    ) -> None:
        self.model = model
        self.app = app
        self.policy = policy
        self.loads = list(loads)
        self.median_load = float(np.median(self.loads))
        self.lc_silent = lc_silent
        self.rng = random.Random(seed)
        self.node_ids = [f"node-{i:02d}" for i in range(model.nodes)]
        self.home = {s.name: self.node_ids[i % model.nodes] for i, s in enumerate(app.services)}
        self.service_models = {s.name: service_model(model, s) for s in app.services}
        self.targets = {n: m.target_p95_ms for n, m in self.service_models.items()}
        self.target_ms = app_target_ms(model, app)
        self.jobs = [
            SimJob(j.submit_s, [_fresh(t) for t in j.maps], [_fresh(t) for t in j.reduces], j.left)
            for j in jobs
        ]
        self.now = 0.0
        self.visible_total = {n: self._capacity() for n in self.node_ids}
        self.service = self._service_guard() if policy.service is not None else None
        # what of its CPU weight batch keeps: the service's agents lower it
        # ([priority] weight_fraction) when their isolation is on
        priority = (policy.agents or AgentSettings()).isolation_settings().priority
        self.batch_weight_fraction = (
            priority.weight_fraction if self.service is not None and priority.enabled else 1.0
        )
        self.nodes = [
            self._node(node_id, reclaim, qos_models, seed + i)
            for i, node_id in enumerate(self.node_ids)
        ]
        # in the order they asked (the pass's order: longest waiting first)
        self.waiting: dict[str, _Waiting] = {}
        self.not_ready: set[str] = set()  # waiting, not ready yet (restarted after a kill)
        self.passes = 0
        node = model.node
        self.task_request = Resources(node.task_memory_mb, node.task_vcores)  # every task's
        self.sequence = 0
        self.beyond_visible = 0
        self.batch_share_sum = 0.0
        self.memory: dict[str, NodeMemory] = {}
        self.risk: dict[str, float] = dict.fromkeys(self.node_ids, 0.0)
        self.violated_nodes: set[str] = set()
        self.learners = {s.name: _learner() for s in app.services}
        self.window: dict[str, list[float]] = {s.name: [] for s in app.services}
        self.window_loads: dict[str, list[float]] = {s.name: [] for s in app.services}
        self.critical: dict[str, list[float]] = {s.name: [] for s in app.services}
        self.window_e2e: list[float] = []
        self.placements: dict[str, int] = {}
        self.guard_reasons: list[str] = []

    # ----------------------------------------------------------------- setup

    def _node(
        self, node_id: str, reclaim: ReclaimSettings, qos_models: Mapping[str, QosModel], seed: int
    ) -> ClusterNode:
        hosted = [s for s in self.app.services if self.home[s.name] == node_id]
        heaviest = max(hosted, key=lambda s: s.load_weight, default=None)
        node_model = self.model.node
        if heaviest is not None:
            node_model = self.service_models[heaviest.name]
        agent = self.policy.agent if hosted else "none"
        target_source = None
        if agent == "service":
            assert self.service is not None
            reclaim = self.service.agent.reclaim_settings()
            target_source = self.service.target_source(node_id)
        strategy = {"none": None, "qos": self.policy.strategy, "utilisation": Strategy.KILL,
                    "service": reclaim.strategy}[agent]  # fmt: skip
        qos_model = qos_models.get(heaviest.name) if heaviest is not None else None
        return ClusterNode(
            node_id,
            node_model,
            self.loads,
            strategy=strategy,
            reclaim=reclaim,
            qos_model=qos_model if agent == "qos" else None,
            seed=seed,
            on_finish=self._finished,
            kube_threshold=self.model.kube_threshold if agent == "utilisation" else None,
            target_source=target_source,
        )

    def _service_guard(self) -> ServiceGuard:
        """The yarn-adapt service's guard over this cluster (``policy.service``)."""
        spec = self.policy.service
        assert spec is not None
        traces = SimulatedTraces(
            self.home,
            {n: m.lc_service_ms * m.max_latency_factor for n, m in self.service_models.items()},
            entry=self.app.entry,
            target_ms=self.target_ms,
            window_s=spec.window_s,
            slo_window_s=spec.slo_window_s,
            percentile=spec.qos_percentile,
            risk_settings=spec.risk,
        )
        totals = SimulatedNodeTotals(
            self.visible_total, dict.fromkeys(self.node_ids, self._capacity()), lambda: self.now
        )
        return ServiceGuard(spec, self.policy.agents or AgentSettings(), traces, totals,
                            lambda: self.now)  # fmt: skip

    def _capacity(self) -> Resources:
        node = self.model.node
        return Resources(
            node.batch_slots * node.task_memory_mb, node.batch_slots * node.task_vcores
        )

    # ----------------------------------------------------------------- driving

    def run(self, horizon_s: float) -> ClusterRun:
        dt = self.model.node.dt_s
        next_job = 0
        next_pass = 0.0
        agent_interval = self._agent_interval_s()
        next_agent = agent_interval
        risk_interval = self._risk_interval_s()
        next_risk = risk_interval
        e2e: list[float] = []
        violation_s = 0.0
        end = horizon_s + self.model.drain_s
        while self.now < end:
            while next_job < len(self.jobs) and self.jobs[next_job].submit_s <= self.now:
                for task in self.jobs[next_job].maps:
                    self._enqueue(task, self._locality(task))
                next_job += 1
            for node in self.nodes:
                node.now = self.now
                node._execute_kills()
                while node.queue:
                    self._enqueue(node.queue.popleft(), ())
            if self.now >= next_pass - 1e-9:
                self._pass()
                next_pass += self.model.pass_interval_s
            latency = self._step()
            total, path = self.app.critical_path(latency)
            self._observe(latency, total, path, within_horizon=self.now < horizon_s)
            if self.now < horizon_s:
                e2e.append(total)
                if total > self.target_ms:
                    violation_s += dt
            self.now += dt
            if self.now >= next_agent - 1e-9:
                for node in self.nodes:
                    node.now = self.now
                    node._interval()
                next_agent += agent_interval
            if self.now >= next_risk - 1e-9:  # the drain too: the services still run
                self._risk_round()
                next_risk += risk_interval
            drained = next_job >= len(self.jobs) and not self.waiting
            if drained and self.now >= horizon_s and not any(n.running for n in self.nodes):
                break
        return ClusterRun(
            policy=self.policy.name,
            e2e_p95_ms=e2e,
            jct_s={
                i: j.finished_s - j.submit_s
                for i, j in enumerate(self.jobs)
                if j.finished_s is not None
            },
            violation_s=violation_s,
            target_ms=self.target_ms,
            placements=self.placements,
            kills=sum(n.kills for n in self.nodes),
            squeezed=sum(len(n.squeezed) for n in self.nodes),
            guard_reasons=self.guard_reasons,
            batch_cpu_share=self.batch_share_sum / max(1, len(e2e)),
            beyond_visible=self.beyond_visible,
            guard_rounds=self.service.recorder.rounds if self.service is not None else 0,
        )

    def _agent_interval_s(self) -> float:
        """The agents tick every ``agent_interval_s``; the service's every ``[agent]
        interval_s`` of their own settings."""
        if self.service is not None:
            return self.service.agent.agent.interval_s
        return self.model.agent_interval_s

    def _risk_interval_s(self) -> float:
        """Risk rounds every ``risk_interval_s``; the service's guard every
        ``[colocation] period_s`` (its risk window is its own: ``[tracing] window_s``)."""
        if self.service is not None:
            return self.service.period_s
        return self.model.risk_interval_s

    # ----------------------------------------------------------------- batch

    def _locality(self, task: SimTask) -> tuple[str, ...]:
        if task.kind is TaskType.REDUCE or task.locality.name != "LOCAL":
            return ()
        count = min(self.model.replicas, len(self.node_ids))
        return tuple(self.rng.sample(self.node_ids, count))

    def _enqueue(self, task: SimTask, local: tuple[str, ...]) -> None:
        self.sequence += 1
        key = f"t{self.sequence}"
        ready = task.ready_at_s <= self.now
        container = WaitingContainer(key, self.task_request, self.now, 0, local)
        self.waiting[key] = _Waiting(container, task, self.passes if ready else None)
        if not ready:
            self.not_ready.add(key)

    def _pass(self) -> None:
        """One pass of the placement over the ready tasks, longest waiting first; it
        stops where no node has room for a task (they all ask the same)."""
        for key in [k for k in self.not_ready if self.waiting[k].task.ready_at_s <= self.now]:
            self.waiting[key].counted_from = self.passes
            self.not_ready.discard(key)
        if len(self.waiting) == len(self.not_ready):
            return
        index, self.passes = self.passes, self.passes + 1
        shift = self.rng.randrange(len(self.nodes))  # heartbeat order changes per pass
        order = self.nodes[shift:] + self.nodes[:shift]
        states = [self._state(node) for node in order]
        placer = YARN if self.policy.placement == "yarn" else ALGORITHM1
        ready = (w.at_pass(index) for w in self.waiting.values() if w.counted_from is not None)
        result = place_in_order(ready, states, self.policy.toposch, placer, self.task_request)
        by_id = {n.node_id: n for n in self.nodes}
        for placed in result.placements:
            waiting = self.waiting.pop(placed.container_id)
            target = by_id[placed.node_id]
            target._start(waiting.task)
            self.placements[placed.reason] = self.placements.get(placed.reason, 0) + 1
            if self._guarded() and not self._used(target).fits_in(
                self.visible_total[target.node_id]
            ):
                self.beyond_visible += 1

    def _state(self, node: ClusterNode) -> NodeState:
        available = self.task_request * node.free_slots()
        visible = None
        if self._guarded():
            visible = (self.visible_total[node.node_id] - self._used(node)).clamped()
        return NodeState(
            node.node_id,
            available,
            self.risk[node.node_id],
            node.node_id in self.violated_nodes,
            visible,
        )

    def _guarded(self) -> bool:
        """A guard sets what the nodes show batch (the paper's guard or the service's)."""
        return self.policy.guard is not None or self.service is not None

    def _used(self, node: ClusterNode) -> Resources:
        """What batch holds on ``node`` as the RM counts it (its containers)."""
        return self.task_request * len(node.running)

    def _finished(self, task: SimTask) -> None:
        job = self.jobs[task.job]
        job.left -= 1
        if task.kind is TaskType.MAP and all(t.remaining_s <= 0 for t in job.maps):
            for reduce in job.reduces:
                if reduce.remaining_s > 0 and not reduce.container_id:
                    self._enqueue(reduce, ())
        if job.left == 0:
            job.finished_s = self.now

    # ----------------------------------------------------------------- services

    def _request_rate(self) -> float:
        """The application's request rate now (the load trace's)."""
        if self.lc_silent:
            return 0.0
        index = int(self.now // self.model.node.load_interval_s)
        return self.loads[index] if index < len(self.loads) else self.median_load

    def _service_load(self, service: ServiceSpec) -> float:
        load = self._request_rate()
        return self.service_models[service.name].lc_cores_at_median * load / self.median_load

    def _step(self) -> dict[str, float]:
        """Advance every node one step; each service's P95 now."""
        loads = {s.name: self._service_load(s) for s in self.app.services}
        by_node: dict[str, float] = {}
        for name, load in loads.items():
            by_node[self.home[name]] = by_node.get(self.home[name], 0.0) + load
        by_id = {n.node_id: n for n in self.nodes}
        for node in self.nodes:
            node.load_now = by_node.get(node.node_id, 0.0)
            node._step()
        latency: dict[str, float] = {}
        for name, load in loads.items():
            node = by_id[self.home[name]]
            share = load / by_node[node.node_id] if by_node[node.node_id] > 0 else 1.0
            service = self.service_models[name]
            latency[name] = contended_p95_ms(
                service.lc_service_ms,
                1000.0 * load / service.lc_service_ms,
                node.model.cores * share,
                self._pressure(node),
                self.model.interference,
                ceiling_factor=service.max_latency_factor,
            )
        for node in self.nodes:
            hosted = [latency[s] for s in latency if self.home[s] == node.node_id]
            node.interval_p95.append(max(hosted, default=0.0))
        return latency

    def _pressure(self, node: ClusterNode) -> CorePressure:
        """What batch does to each core of ``node`` (spread evenly by CFS): runnable
        batch threads (a task's cores used), their CFS weight over a service
        thread's (flat, as the node's CPU split; lowered by the service's agents'
        isolation), the memory hogs among them."""
        cores = node.model.cores
        return CorePressure(
            weighted=node.batch_weighted_usage * self.batch_weight_fraction / cores,
            threads=node.batch_usage / cores,
            hogs=self.model.memory_hog_share * node.batch_usage / cores,
        )

    def _observe(
        self,
        latency: Mapping[str, float],
        total: float,
        path: tuple[str, ...],
        *,
        within_horizon: bool,
    ) -> None:
        """What the risk rounds and the guard read (traces, windows, learners), always;
        batch's CPU share, a figure of the horizon, only within it."""
        by_id = {n.node_id: n for n in self.nodes}
        self.window_e2e.append(total)
        cores = sum(n.model.cores for n in self.nodes)
        if within_horizon:
            self.batch_share_sum += sum(n.batch_usage for n in self.nodes) / cores
        if self.service is not None:
            requests = self._request_rate() * self.model.node.dt_s
            self.service.traces.record(StepTrace(self.now, dict(latency), path, total, requests))
        on_path = set(path)
        for name, value in latency.items():
            self.window[name].append(value)
            self.critical[name].append(value if name in on_path else -1.0)
            load = self._service_load(self.app.service(name))
            self.window_loads[name].append(load)
            if self.policy.learned_demand and load > 0:
                node = by_id[self.home[name]]
                x = min(node.lc_capacity / load, 4.0)
                performance = min(1.0, self.targets[name] / value)
                self.learners[name].observe(x, performance, 0.05)

    # ----------------------------------------------------------------- risk and guard

    def _risk_round(self) -> None:
        if self.service is not None:
            self._service_round()
            return
        if not self.window_e2e:
            return
        snapshot = self._snapshot()
        self.risk = {n: snapshot.node_risk().get(n, 0.0) for n in self.node_ids}
        e2e = float(np.mean(self.window_e2e))
        violated = e2e > self.target_ms
        self.violated_nodes = set(self.home.values()) if violated else set()
        if self.policy.guard is not None:
            self._guard(snapshot, e2e)
        for name in self.window:
            self.window[name], self.critical[name], self.window_loads[name] = [], [], []
        self.window_e2e = []

    def _service_round(self) -> None:
        """One round of the service's guard on the nodes as the RM lists them."""
        assert self.service is not None
        self.service.cycle([self._rm_node(node) for node in self.nodes])
        self.risk = {n: self.service.node_risk().get(n, 0.0) for n in self.node_ids}
        self.guard_reasons = self.service.recorder.first_reasons

    def _rm_node(self, node: ClusterNode) -> Node:
        """``node`` as the RM lists it: the total the guard left, the containers' use,
        and the NodeManager's utilization (the services' CPU and memory outside them)."""
        used = self._used(node)
        hosted = sum(1 for home in self.home.values() if home == node.node_id)
        services_cpu = min(node.load_now, node.lc_capacity)
        utilization = NodeUtilization(
            node_cpu=node.batch_usage + services_cpu,
            node_memory_mb=used.memory_mb + SERVICE_MEMORY_MB * hosted,
            containers_cpu=node.batch_usage,  # in vcores: one per core here
            containers_memory_mb=used.memory_mb,
        )
        return Node(node.node_id, node.node_id, "/default-rack", YarnNodeState.RUNNING,
                    self.visible_total[node.node_id], used, utilization=utilization)  # fmt: skip

    def _snapshot(self) -> RiskSnapshot:
        ceiling = {
            n: m.lc_service_ms * m.max_latency_factor for n, m in self.service_models.items()
        }
        requests = tuple(
            Request(name, "request", value * 1000.0, value >= ceiling[name] * 0.999)
            for name, values in self.window.items()
            for value in values
        )
        critical = {n: sum(1 for v in values if v >= 0) for n, values in self.critical.items()}
        self_us = {
            n: sum(v for v in values if v >= 0) * 1000.0 for n, values in self.critical.items()
        }
        steps = len(self.window_e2e)
        start = self.now - steps * self.model.node.dt_s
        inputs = RiskInputs(
            requests=requests,
            placements=frozenset((name, node) for name, node in self.home.items()),
            critical_traces=critical,
            critical_self_us=self_us,
            traces=steps,
            spans=len(requests),
            window_start_us=int(start * 1e6),
            window_end_us=int(self.now * 1e6),
        )
        return assess(inputs, RiskSettings())

    def _guard(self, snapshot: RiskSnapshot, e2e_ms: float) -> None:
        assert self.policy.guard is not None
        model = self.model.node
        views = []
        for node in self.nodes:
            used = Resources(
                len(node.running) * model.task_memory_mb, len(node.running) * model.task_vcores
            )
            views.append(
                NodeView(
                    node.node_id,
                    node.node_id,
                    True,
                    "RUNNING",
                    self._capacity(),
                    self.visible_total[node.node_id],
                    used,
                )
            )
        reading = QosReading(
            application="lra",
            latency_ms=e2e_ms,
            percentile=95.0,
            requests=len(self.window_e2e),
            load_rps=0.0,
            nodes=tuple(sorted(set(self.home.values()))),
            measured_at_s=self.now,
            target_ms=self.target_ms,
        )
        inputs = GuardInputs(
            now_s=self.now,
            nodes=tuple(views),
            risk=snapshot,
            demands=self._demands() if self.policy.learned_demand else (),
            qos=(reading,),
        )
        plan = decide(inputs, self.memory, self.policy.guard)
        for decision in plan.decisions:
            if decision.action in (Action.SKIP, Action.HOLD):
                continue
            before = self.memory.get(decision.node_id, NodeMemory())
            self.memory[decision.node_id] = before.after(decision, self.now)
            self.visible_total[decision.node_id] = decision.target
        if len(self.guard_reasons) < 3:
            self.guard_reasons.extend(d.reason for d in plan.decisions[:1])

    def _demands(self) -> tuple[NodeDemand, ...]:
        """Each node's LC demand (learned upper bound x forecast load) beyond the
        cores outside the batch slots, in batch vcores."""
        model = self.model.node
        outside = model.cores - model.batch_slots * model.task_vcores
        cores: dict[str, float] = {}
        for name, learner in self.learners.items():
            loads = self.window_loads[name]
            if not loads:
                continue
            x = demand_bounds(learner, 0.95).upper
            node = self.home[name]
            cores[node] = cores.get(node, 0.0) + x * max(loads)
        return tuple(
            NodeDemand(
                node,
                max(0.0, c - outside),
                max(0.0, c - outside) * model.task_memory_mb,
                "learned ucb",
            )
            for node, c in cores.items()
        )


def service_model(model: ClusterModel, service: ServiceSpec) -> NodeModel:
    """The node constants as one service sees them."""
    base = model.node
    return replace(
        base,
        lc_service_ms=service.service_ms,
        lc_cores_at_median=base.lc_cores_at_median * service.load_weight,
        target_p95_ms=model.target_factor * service.service_ms,
    )


def app_target_ms(model: ClusterModel, app: AppSpec) -> float:
    """The application's latency target: the critical path of its services' targets."""
    return app.critical_path({s.name: service_model(model, s).target_p95_ms for s in app.services})[
        0
    ]


def _learner() -> MonotoneLearner:
    return MonotoneLearner(LearnerSettings(x_max=4.0, lipschitz=5.0, floor=0.0, ceiling=1.0))


def _fresh(task: SimTask) -> SimTask:
    return SimTask(
        task.job,
        task.kind,
        task.duration_s,
        task.cpu_fraction,
        task.falter_cores,
        task.locality,
        remaining_s=task.duration_s,
    )


def summary(values: Sequence[float]) -> dict[str, float]:
    """Mean, median and worst of a list (0 when empty)."""
    if not values:
        return {"mean": 0.0, "median": 0.0, "worst": 0.0}
    return {
        "mean": round(statistics.fmean(values), 4),
        "median": round(statistics.median(values), 4),
        "worst": round(max(values), 4),
    }
