"""The yarn-adapt service's co-location guard and node agents inside the cluster
simulator (:mod:`yarn_adapt.cosim.lra_model`): the ``yarn-adapt`` row of ``bench
colocation``.

What runs unchanged, and what stands in for the world around it:

* **The guard is the service's.** The service's own assembly
  (:func:`yarn_adapt.service.guard.build.assemble_guard`) builds the
  :class:`~yarn_adapt.colocation.guard.ColocationGuard` from the service's settings --
  their defaults, plus what a deployment must name: the application, its services and
  its latency target. This package sits below the service and imports none of it: the
  bench hands it a :class:`ServiceGuardSpec` (the assembly and the few settings the
  simulation reads; :func:`yarn_adapt.bench.colocation.service_guard_spec`). Every
  ``[colocation] period_s`` of simulated time the cluster runs one
  :meth:`~yarn_adapt.colocation.guard.ColocationGuard.run_round`, what the service's
  guard loop calls per cycle: observe (the service's demand provider, learned by
  default, is fed there), :func:`~yarn_adapt.colocation.decide.decide`, act, the
  agents' reclaim requests.
* **The traces** (:class:`SimulatedTraces`, a
  :class:`~yarn_adapt.colocation.observe.RiskSource`, the seam the Redis trace store
  fills in the service): each simulated step is one trace of the application, its
  spans the services' latencies on their nodes. A read covers the last ``[tracing]
  window_s``: risk by :func:`tracing.risk.assess` (eqs. 4-8, ``[tracing] alpha``
  and ``critical_min_share``; a latency at the model's ceiling is a failed
  request), with each node's self time on the entry service's critical path (the
  slack policy's "where"); the QoS reading is ``qos_percentile`` of the steps'
  end-to-end latency over the last ``slo_window_s``; the request tallies (the
  learners' feedback) count the application's request rate over the steps since
  the previous read, those within target by the model's exponential tail
  (:func:`within_target_share`).
* **The RM** (:class:`SimulatedNodeTotals`, an
  :class:`~yarn_adapt.colocation.actuate.Actuator`): ``updateNodeResource`` on the
  simulated nodes. The total it sets is all the cluster's YARN placement sees of the
  node from then on; the journal of originals is kept in memory (the service's is a
  file) and no NodeManager forgets a total (nothing to follow).
* **The node agents** poll their reclaim request as the agent does in service mode:
  each node's own :class:`preemption.targets.ServiceTarget` (the agent's
  ``poll_interval_s`` and ``ttl_s``) over :class:`GuardRoutes`, which answers what
  ``GET /api/agent/nodes/NODE/reclaim`` answers (the request's JSON, or 404 when
  nothing is asked). The agent's reclaimer then squeezes with the agent's default
  ``[reclaim]`` settings (no kill: ``[yarn] kill = "never"``). Of the agent's
  isolation loop, ``[priority]`` (batch's low CPU weight) is modelled where it acts,
  in the services' per-core pressure (:class:`~yarn_adapt.cosim.lra_model.Cluster`:
  batch's weight times ``weight_fraction``); ``[suppress]`` and ``[memory]`` are not.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import unquote

import numpy as np
import requests

from preemption.settings import AgentSettings
from preemption.targets import ServiceTarget
from tracing.model import RiskSnapshot
from tracing.risk import Request, RiskInputs, RiskSettings, assess
from yarn_adapt.colocation.actuate import ActOutcome, Actuator, Result
from yarn_adapt.colocation.follow import JournalChange
from yarn_adapt.colocation.guard import ColocationGuard, GuardRecorder, GuardRoundReport
from yarn_adapt.colocation.model import GuardPlan, QosReading, RequestTally, RiskReading
from yarn_adapt.colocation.observe import RiskSource
from yarn_adapt.colocation.originals import NodeOriginal
from yarn_adapt.model import Node, Resources

SIM_URL = "http://yarn-adapt.simulated"  # the agents' [service] url (never contacted)
APPLICATION = "application"  # the application's name in [colocation] applications


GuardAssembly = Callable[
    [RiskSource, Actuator, GuardRecorder, Callable[[], float]], ColocationGuard
]
"""The service's guard on these sources (its ``assemble_guard`` over its settings)."""


@dataclass(frozen=True)
class ServiceGuardSpec:
    """What the simulation takes of the service: how it assembles its guard, and the
    settings the simulated traces and cadence read (``[colocation] period_s``,
    ``slo_window_s``, ``qos_percentile``; ``[tracing] window_s``, ``alpha``,
    ``critical_min_share``)."""

    assemble: GuardAssembly
    period_s: float
    window_s: float
    slo_window_s: float
    qos_percentile: float
    risk: RiskSettings


# --------------------------------------------------------------------------- the traces


@dataclass(frozen=True)
class StepTrace:
    """One simulated step as a trace: each service's latency (its self time; the
    model's P95 at this step), the critical path, the end-to-end latency, and how
    many requests the application received during the step."""

    at_s: float
    latency_ms: Mapping[str, float]
    path: tuple[str, ...]
    e2e_ms: float
    requests: float


def within_target_share(latency_ms: float, target_ms: float, percentile: float) -> float:
    """The share of a step's requests within target when ``latency_ms`` is the step's
    ``percentile``: the model's latency tail is exponential (M/M/c waiting), so the
    share above ``t`` is ``(1 - q) ** (t / latency)`` with ``q = percentile / 100``
    (exactly ``1 - q`` at the target)."""
    if latency_ms <= 0:
        return 1.0
    return 1.0 - float((1.0 - percentile / 100.0) ** (target_ms / latency_ms))


class SimulatedTraces:
    """The application's steps as the guard's risk source (see the module docstring)."""

    def __init__(
        self,
        home: Mapping[str, str],
        ceilings_ms: Mapping[str, float],
        *,
        entry: str,
        target_ms: float,
        window_s: float,
        slo_window_s: float,
        percentile: float,
        risk_settings: RiskSettings,
    ) -> None:
        self.home = dict(home)
        self.ceilings_ms = dict(ceilings_ms)
        self.entry = entry
        self.target_ms = target_ms
        self.window_s = window_s
        self.slo_window_s = min(slo_window_s or window_s, window_s)
        self.percentile = percentile
        self.risk_settings = risk_settings
        self.steps: deque[StepTrace] = deque()
        self.tallied_to_s: float | None = None
        self.last: RiskSnapshot | None = None

    def record(self, step: StepTrace) -> None:
        self.steps.append(step)
        while self.steps and self.steps[0].at_s <= step.at_s - self.window_s:
            self.steps.popleft()

    def read(self, now_s: float) -> RiskReading:
        window = [s for s in self.steps if now_s - self.window_s < s.at_s <= now_s]
        self.last = self._snapshot(window, now_s)
        since_s = now_s - self.window_s if self.tallied_to_s is None else self.tallied_to_s
        fresh = [s for s in window if s.at_s > since_s]
        self.tallied_to_s = now_s
        return RiskReading(
            self.last, self._qos(window, now_s), "", self._tallies(fresh, since_s, now_s)
        )

    def close(self) -> None:
        """Nothing to release."""

    def _snapshot(self, window: Sequence[StepTrace], now_s: float) -> RiskSnapshot:
        requests = tuple(
            Request(name, "request", ms * 1000.0, ms >= self.ceilings_ms[name] * 0.999)
            for step in window
            for name, ms in step.latency_ms.items()
        )
        critical: dict[str, int] = {}
        self_us: dict[str, float] = {}
        path_us: dict[tuple[str, str, str], float] = {}
        for step in window:
            for name in step.path:
                critical[name] = critical.get(name, 0) + 1
                us = step.latency_ms[name] * 1000.0
                self_us[name] = self_us.get(name, 0.0) + us
                key = (self.entry, self.home[name], name)
                path_us[key] = path_us.get(key, 0.0) + us
        start_s = window[0].at_s if window else now_s
        inputs = RiskInputs(
            requests=requests,
            placements=frozenset(self.home.items()),
            critical_traces=critical,
            critical_self_us=self_us,
            traces=len(window),
            spans=len(requests),
            window_start_us=int(start_s * 1e6),
            window_end_us=int(now_s * 1e6),
            path_self_us=path_us,
            entry_traces={self.entry: len(window)} if window else {},
        )
        return assess(inputs, self.risk_settings)

    def _qos(self, window: Sequence[StepTrace], now_s: float) -> tuple[QosReading, ...]:
        recent = [s for s in window if s.at_s > now_s - self.slo_window_s]
        if not recent:
            return ()
        requests = sum(s.requests for s in recent)
        return (
            QosReading(
                application=self.entry,
                latency_ms=float(np.percentile([s.e2e_ms for s in recent], self.percentile)),
                percentile=self.percentile,
                requests=int(requests),
                load_rps=requests / self.slo_window_s,
                nodes=tuple(sorted(set(self.home.values()))),
                measured_at_s=now_s,
                target_ms=self.target_ms,
            ),
        )

    def _tallies(
        self, fresh: Sequence[StepTrace], since_s: float, now_s: float
    ) -> tuple[RequestTally, ...]:
        if not fresh or now_s <= since_s:
            return ()
        requests = sum(s.requests for s in fresh)
        within = sum(
            s.requests * within_target_share(s.e2e_ms, self.target_ms, self.percentile)
            for s in fresh
        )
        return (
            RequestTally(
                service=self.entry,
                requests=round(requests),
                within_target=min(round(requests), round(within)),
                target_ms=self.target_ms,
                since_us=int(since_s * 1e6),
                until_us=int(now_s * 1e6),
                hosts=tuple(sorted(set(self.home.values()))),
            ),
        )


# --------------------------------------------------------------------------- the RM


class SimulatedNodeTotals:
    """``updateNodeResource`` on the simulated nodes: ``totals`` (the cluster's own
    mapping, which its placement reads) takes each changed decision's target."""

    def __init__(
        self,
        totals: dict[str, Resources],
        capacity: Mapping[str, Resources],
        clock: Callable[[], float],
    ) -> None:
        self.totals = totals
        self.capacity = dict(capacity)
        self.clock = clock
        self._journal: dict[str, NodeOriginal] = {}
        self.updates = 0

    def journalled(self) -> dict[str, NodeOriginal]:
        return dict(self._journal)

    def follow(self, nodes: Sequence[Node]) -> list[JournalChange]:
        """No NodeManager restarts in the simulator: nothing forgotten, nothing to follow."""
        return []

    def act(self, plan: GuardPlan) -> dict[str, ActOutcome]:
        return {d.node_id: self.set_total(d.node_id, d.target) for d in plan.decisions if d.changes}

    def set_total(self, node_id: str, target: Resources) -> ActOutcome:
        capacity = self.capacity[node_id]
        if target.memory_mb < 0 or target.vcores < 0 or not target.fits_in(capacity):
            return ActOutcome(node_id, Result.REFUSED, f"not sent: {target} outside {capacity}",
                              self.totals[node_id])  # fmt: skip
        if target == capacity:
            self._journal.pop(node_id, None)
        else:
            since = self._journal[node_id].since_s if node_id in self._journal else self.clock()
            self._journal[node_id] = NodeOriginal(node_id, capacity, since, last_set=target)
        self.totals[node_id] = target
        self.updates += 1
        return ActOutcome(node_id, Result.DONE, "set", target)

    def restore_all(self) -> list[ActOutcome]:
        return [self.set_total(node_id, self.capacity[node_id]) for node_id in list(self._journal)]

    def pending_nodes(self) -> list[str]:
        return sorted(self._journal)


# --------------------------------------------------------------------------- the agents


@dataclass(frozen=True)
class _Answer:
    status_code: int
    text: str


class GuardRoutes:
    """The service's two agent routes as the agents' HTTP session: ``GET
    .../nodes/NODE/reclaim`` answers the guard's request for NODE (404 when none),
    ``POST .../report`` takes the report (204)."""

    def __init__(self, guard: ColocationGuard) -> None:
        self.guard = guard

    def get(self, url: str, **_: Any) -> _Answer:
        node = unquote(url.rstrip("/").rsplit("/", 2)[-2])
        request = self.guard.reclaim_for(node)
        if request is None:
            return _Answer(404, json.dumps({"error": f"nothing is asked of node {node}"}))
        return _Answer(200, json.dumps(request.to_json()))

    def post(self, url: str, **_: Any) -> _Answer:
        return _Answer(204, "")


class _Rounds:
    """The guard's recorder: counts the rounds (the service's store is not needed)."""

    def __init__(self) -> None:
        self.rounds = 0
        self.first_reasons: list[str] = []

    def record(self, round_id: int | None, report: GuardRoundReport) -> None:
        self.rounds += 1
        if report.plan is not None and len(self.first_reasons) < 3:
            self.first_reasons.extend(d.reason for d in report.plan.decisions[:1])

    def audit(self, action: str, detail: str) -> None:
        """The audit log is the service's store's; the bench keeps none."""


class ServiceGuard:
    """The service's guard over the simulated traces and node totals, with the
    agents' targets; :meth:`cycle` is one guard round on the simulated nodes."""

    def __init__(
        self,
        spec: ServiceGuardSpec,
        agent: AgentSettings,
        traces: SimulatedTraces,
        totals: SimulatedNodeTotals,
        clock: Callable[[], float],
    ) -> None:
        self.spec = spec
        self.agent = agent
        self.traces = traces
        self.totals = totals
        self.clock = clock
        self.recorder = _Rounds()
        self.guard = spec.assemble(traces, totals, self.recorder, clock)
        self.routes = GuardRoutes(self.guard)

    @property
    def period_s(self) -> float:
        return self.spec.period_s

    def cycle(self, nodes: Sequence[Node]) -> GuardRoundReport:
        return self.guard.run_round(nodes, self.recorder.rounds)

    def target_source(self, node_id: str) -> ServiceTarget:
        """``node_id``'s agent's target source, as ``yarn-adapt agent`` in service
        mode builds it (its poll interval, ttl and timeout from the agent's settings)."""
        section = self.agent.service
        return ServiceTarget(
            SIM_URL, node_id, "simulated",
            poll_interval_s=section.poll_interval_s, ttl_s=section.ttl_s,
            timeout_s=section.timeout_s, clock=self.clock,
            session=cast(requests.Session, self.routes),
        )  # fmt: skip

    def node_risk(self) -> dict[str, float]:
        """The newest read's normalised node risk (Algorithm 1's lowest-risk node)."""
        if self.traces.last is None:
            return {}
        return {n: r for n, r in self.traces.last.node_risk().items() if math.isfinite(r)}
