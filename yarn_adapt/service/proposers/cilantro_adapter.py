"""The Cilantro proposer (``[tuning] proposer = "cilantro"``): each round it learns
every leaf queue's performance from what the cluster did since the last round,
lets a Cilantro policy split the managed resources between the queues, and hands
the result to the service as queue capacities / weights, through the same path as
the AdaptiveConfig tuner (YARN validation, the diff, a reason per change, the
review page).

Where the feedback comes from (:mod:`yarn_adapt.demand.queues`):

- a real RM (:class:`~yarn_adapt.model.ClusterSnapshot`): the RM's application list
  (``/ws/v1/cluster/apps``, the ``[yarn] app_window_s`` the observation already
  reads): finished applications with their submit and finish times, and the
  applications still waiting or running with their submit times. Failed and killed
  applications are left out;
- the simulated cluster (:class:`~yarn_adapt.service.backend.SimulatedView`):
  the finished jobs the backend reports and the jobs in progress.

A queue's load is its submissions per interval; its performance the fraction of
its applications decided in the interval that finished within the queue's latency
bound (``[cilantro] latency_s``, ``fraction``, ``utility``; per-queue ``queues``).
Its allocation is its guaranteed share of the managed vcores (the vcores the
groups' queues hold now), split into at least 100 units. Learners (one
:class:`~yarn_adapt.demand.learner.MonotoneLearner` per leaf, in vcores per
application) and load forecasters (ARMA(1,1)) live as long as the proposer.

The proposal's objective (what the service's gates judge, instead of predicted
latency, which Cilantro does not model): the predicted social or egalitarian
welfare (SW, EW policies) or the predicted share of the queues' demand met (NJC),
from the learners' estimates at the forecast loads, running against proposed.
:attr:`CilantroProposer.snapshot` keeps each queue's demand for other readers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from yarn_adapt.demand.forecast import ArmaForecaster
from yarn_adapt.demand.learner import (
    LearnerSettings,
    MonotoneLearner,
    PerformanceModel,
    StatedDemand,
    demand_bounds,
)
from yarn_adapt.demand.model import Demand, DemandSnapshot, DemandSource
from yarn_adapt.demand.policies import (
    CilantroNJC,
    CilantroWelfare,
    Objective,
    Policy,
    RoundContext,
    Tenant,
    round_allocation,
    utility_table,
)
from yarn_adapt.demand.queues import (
    AppOutcome,
    QueueRound,
    configure,
    leaf_units,
    managed_leaves,
    queue_rounds,
)
from yarn_adapt.demand.solvers import welfare_of
from yarn_adapt.demand.utility import QueueObjective
from yarn_adapt.model import AppState, ClusterSnapshot, SchedulerConfig
from yarn_adapt.service.backend import Observed, SimulatedView
from yarn_adapt.service.cilantro_settings import CilantroSection, queue_objectives
from yarn_adapt.service.proposers.tuner_adapter import reason_lines
from yarn_adapt.service.settings import Settings
from yarn_adapt.service.state.records import ObjectiveChange, Suggestion
from yarn_adapt.tuning.apply import groups_of
from yarn_adapt.tuning.proposal import GroupDecision, finish_proposal

MIN_UNITS = 100
"""The managed resources are split in at least this many units (a unit may be a
fraction of a vcore on a small cluster)."""
NO_LOAD = 0.5
"""The forecast load of a queue with no submissions: a queue without load needs
little, but its allocation per unit load must stay finite."""
FINISHED_STATES = (AppState.FAILED, AppState.KILLED)
LEARNER_DEPTH = 9
"""512 bins over ``max_vcores_per_app``: an eighth of a vcore per application by default."""


@dataclass
class QueueState:
    """What the proposer remembers about one leaf queue."""

    learner: MonotoneLearner
    forecaster: ArmaForecaster


@dataclass
class CilantroProposer:
    settings: Settings
    queues: dict[str, QueueState] = field(default_factory=dict)
    snapshot: DemandSnapshot | None = None
    last_taken_ms: int | None = None
    held_vcores: dict[str, float] = field(default_factory=dict)
    demands: dict[str, float] = field(default_factory=dict)

    @property
    def section(self) -> CilantroSection:
        return self.settings.cilantro

    # ------------------------------------------------------------------ a round

    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        config = observed.config
        leaves = managed_leaves(config)
        vcores = total_vcores(observed.view)
        if not leaves or vcores <= 0:
            return None
        objectives = queue_objectives(self.section, leaves, self.settings.source)
        running = leaf_units(config, 1)  # each leaf's share of the cluster now
        now_vcores = {leaf: share * vcores for leaf, share in running.items()}
        start_ms = self.last_taken_ms
        if start_ms is None:
            start_ms = observed.taken_ms - int(self.settings.service.interval_s * 1000)
        rounds = queue_rounds(outcomes_of(observed), objectives, start_ms, observed.taken_ms)
        # what the queues held during the interval: the split observed last round
        self._learn(rounds, {**now_vcores, **self.held_vcores})
        self.last_taken_ms, self.held_vcores = observed.taken_ms, now_vcores
        managed = sum(now_vcores.values())
        active = {leaf for leaf, r in rounds.items() if r.arrivals or r.decided}
        if not active:
            return None
        plan = self._plan(config, objectives, running, managed, frozen)
        return self._suggestion(config, plan, rounds, active, frozen, observed.taken_ms)

    def _learn(self, rounds: Mapping[str, QueueRound], held: Mapping[str, float]) -> None:
        for leaf, feedback in rounds.items():
            state = self._state(leaf)
            state.forecaster.observe(float(feedback.arrivals))
            if feedback.arrivals and feedback.decided:
                x = held[leaf] / feedback.arrivals
                state.learner.observe(x, feedback.performance, feedback.sigma)
                state.learner.refresh()

    def _state(self, leaf: str) -> QueueState:
        if leaf not in self.queues:
            learner = MonotoneLearner(
                LearnerSettings(
                    x_max=self.section.max_vcores_per_app,
                    lipschitz=self.section.lipschitz,
                    depth=LEARNER_DEPTH,
                    ceiling=1.0,
                    confidence=self.section.confidence,
                )
            )
            self.queues[leaf] = QueueState(
                learner, ArmaForecaster(confidence=self.section.confidence)
            )
        return self.queues[leaf]

    # ------------------------------------------------------------------ the policy

    def _plan(
        self,
        config: SchedulerConfig,
        objectives: Mapping[str, QueueObjective],
        running: Mapping[str, float],
        managed_vcores: float,
        frozen: frozenset[str],
    ) -> Plan:
        leaves = tuple(objectives)
        units = max(MIN_UNITS, round(managed_vcores))
        unit_vcores = managed_vcores / units
        total_share = sum(running.values())
        shares = np.array([running[leaf] / total_share for leaf in leaves])
        current = round_allocation(shares * units, units)
        loads = np.array([self._load(objectives[leaf]) for leaf in leaves])
        fixed = _frozen_leaves(config, frozen)
        movable = [i for i, leaf in enumerate(leaves) if leaf not in fixed]
        allocation = current.copy()
        if movable:
            allocation[movable] = self._allocate(
                [leaves[i] for i in movable], objectives, current[movable],
                loads[movable], units - int(current.sum() - current[movable].sum()), unit_vcores,
            )  # fmt: skip
        return Plan(leaves, current, allocation, loads, unit_vcores)

    def _load(self, objective: QueueObjective) -> float:
        """The forecast submissions; 1 for a queue with a stated demand (its
        demand is in vcores, not per application)."""
        if objective.stated_vcores is not None:
            return 1.0
        forecast = self.queues[objective.queue].forecaster.forecast()
        return max(NO_LOAD, forecast.upper if forecast else NO_LOAD)

    def _model(self, objective: QueueObjective) -> PerformanceModel:
        if objective.stated_vcores is not None:
            return StatedDemand(objective.stated_vcores, objective.fraction)
        return self.queues[objective.queue].learner

    def _allocate(
        self,
        leaves: Sequence[str],
        objectives: Mapping[str, QueueObjective],
        current: np.ndarray,
        loads: np.ndarray,
        units: int,
        unit_vcores: float,
    ) -> np.ndarray:
        tenants = tuple(Tenant(leaf, objectives[leaf].utility) for leaf in leaves)
        models = [self._model(objectives[leaf]) for leaf in leaves]
        policy = self._policy(models, leaves, unit_vcores)
        step = max(1, round(self.section.max_step * units))
        context = RoundContext(
            units, tenants, loads, previous=current, max_step=step, round=1,
            minimum=1,
        )  # fmt: skip
        allocation = np.asarray(policy.allocate(context), dtype=np.int64)
        if isinstance(policy, CilantroNJC) and policy.demands is not None:
            self.demands.update(zip(leaves, policy.demands * unit_vcores, strict=True))
        return allocation

    def _policy(
        self, models: list[PerformanceModel], leaves: Sequence[str], unit_vcores: float
    ) -> Policy:
        scaled = [_InUnits(model, unit_vcores) for model in models]
        if self.section.policy == "njc":
            policy = CilantroNJC(scaled, beta=self.section.beta)  # type: ignore[arg-type]
            if all(leaf in self.demands for leaf in leaves):
                policy.demands = np.array([self.demands[leaf] / unit_vcores for leaf in leaves])
            return policy
        objective = Objective.SOCIAL if self.section.policy == "sw" else Objective.EGALITARIAN
        return CilantroWelfare(scaled, objective)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ the suggestion

    def _suggestion(
        self,
        config: SchedulerConfig,
        plan: Plan,
        rounds: Mapping[str, QueueRound],
        active: set[str],
        frozen: frozenset[str],
        taken_ms: int,
    ) -> Suggestion:
        objectives = queue_objectives(self.section, plan.leaves, self.settings.source)
        self.snapshot = self._demand_snapshot(plan, objectives, taken_ms)
        changed = plan.changed_groups(config)
        allocation = dict(zip(plan.leaves, plan.allocation.tolist(), strict=True))
        proposed, settings = configure(config, allocation) if changed else (config, {})
        decisions = []
        for group in groups_of(config):
            triggered = any(leaf in active for leaf in group.queues)
            arrivals = sum(rounds[leaf].arrivals for leaf in group.queues)
            why = "frozen while a recent change settles" if group.parent in frozen else (
                f"Cilantro-{self.section.policy.upper()} on {arrivals} submission(s) since "
                "the last round"
            )  # fmt: skip
            setting = settings.get(group.parent) if group.parent in changed else None
            decisions.append(
                GroupDecision(group.parent, group.queues, triggered, why, arrivals, setting=setting)
            )
        proposal = finish_proposal(config, proposed, decisions)
        objective = self._objective(plan, objectives)
        lines = (*reason_lines(proposal), *self._queue_lines(plan, rounds, objectives))
        return Suggestion(
            proposal.config, (), math.nan, math.nan, (f"predicted {objective.describe()}", *lines),
            proposal.triggered, objective,
        )  # fmt: skip

    def _objective(self, plan: Plan, objectives: Mapping[str, QueueObjective]) -> ObjectiveChange:
        tenants = tuple(Tenant(leaf, objectives[leaf].utility) for leaf in plan.leaves)
        models = [_InUnits(self._model(objectives[leaf]), plan.unit_vcores) for leaf in plan.leaves]
        units = int(max(plan.current.max(), plan.allocation.max(), 1))
        loads = plan.loads
        if self.section.policy == "njc":
            demands = np.array(
                [self.demands.get(leaf, math.inf) / plan.unit_vcores for leaf in plan.leaves]
            )
            before, after = (_demand_met(a, demands) for a in (plan.current, plan.allocation))
            return ObjectiveChange("share of demand met", before, after)
        table = utility_table(models, tenants, loads, units, "estimate")  # type: ignore[arg-type]
        score = np.mean if self.section.policy == "sw" else np.min
        name = "social" if self.section.policy == "sw" else "egalitarian"
        before, after = (
            float(score(welfare_of(table, a))) for a in (plan.current, plan.allocation)
        )
        return ObjectiveChange(f"{name} welfare", before, after)

    def _queue_lines(
        self, plan: Plan, rounds: Mapping[str, QueueRound], objectives: Mapping[str, QueueObjective]
    ) -> list[str]:
        lines = []
        for i, leaf in enumerate(plan.leaves):
            fed = rounds[leaf]
            objective = objectives[leaf]
            measured = (
                f"{fed.met}/{fed.decided} within {objective.latency_s:g} s"
                if fed.decided
                else "no application decided"
            )
            demand = self.snapshot.of(leaf) if self.snapshot else None
            need = f"; demand {demand.lower:.1f}-{demand.upper:.1f} vcores" if demand else ""
            lines.append(
                f"{leaf}: {fed.arrivals} submitted, {measured} (SLO {objective.fraction:.0%}, "
                f"{objective.shape}); forecast load {plan.loads[i]:.1f}{need}; "
                f"{plan.current[i] * plan.unit_vcores:.1f} -> "
                f"{plan.allocation[i] * plan.unit_vcores:.1f} vcores"
            )
        return lines

    def _demand_snapshot(
        self, plan: Plan, objectives: Mapping[str, QueueObjective], taken_ms: int
    ) -> DemandSnapshot:
        demands = []
        for leaf, load in zip(plan.leaves, plan.loads, strict=True):
            stated = objectives[leaf].stated_vcores
            if stated is not None:
                demands.append(
                    Demand(leaf, float(load), stated, stated, stated, DemandSource.STATED)
                )
                continue
            learner = self.queues[leaf].learner
            bounds = demand_bounds(learner, objectives[leaf].fraction)
            lower, upper = float(bounds.lower * load), float(bounds.upper * load)
            estimate = min(
                upper, max(lower, float(bounds.recommendation(self.section.beta) * load))
            )
            source = DemandSource.LEARNED if learner.observations else DemandSource.UNKNOWN
            demands.append(
                Demand(leaf, float(load), estimate, lower, upper, source, learner.observations)
            )
        return DemandSnapshot(taken_ms, "vcores", tuple(demands))


@dataclass(frozen=True, eq=False)
class Plan:
    """The leaves, their allocation now and proposed (in units), their forecast
    loads, and how many vcores a unit is."""

    leaves: tuple[str, ...]
    current: np.ndarray
    allocation: np.ndarray
    loads: np.ndarray
    unit_vcores: float

    def changed_groups(self, config: SchedulerConfig) -> set[str]:
        moved = {
            leaf
            for leaf, a, b in zip(self.leaves, self.current, self.allocation, strict=True)
            if a != b
        }
        return {g.parent for g in groups_of(config) if moved & set(g.queues)}


@dataclass(frozen=True)
class _InUnits:
    """A model in vcores per application, asked in units per application."""

    model: PerformanceModel
    unit_vcores: float

    @property
    def x_max(self) -> float:
        return self.model.x_max / self.unit_vcores

    def band(self, x: object) -> object:
        return self.model.band(np.asarray(x, dtype=np.float64) * self.unit_vcores)


def _demand_met(allocation: np.ndarray, demands: np.ndarray) -> float:
    finite = np.isfinite(demands)
    if not np.any(finite) or demands[finite].sum() <= 0:
        return 0.0
    return float(np.minimum(allocation[finite], demands[finite]).sum() / demands[finite].sum())


def _frozen_leaves(config: SchedulerConfig, frozen: frozenset[str]) -> set[str]:
    return {leaf for group in groups_of(config) if group.parent in frozen for leaf in group.queues}


# --------------------------------------------------------------------------- the views


def total_vcores(view: object) -> float:
    if isinstance(view, ClusterSnapshot):
        return float(view.schedulable_resources.vcores)
    if isinstance(view, SimulatedView):
        return float(view.cluster.total.vcores)
    raise TypeError(f"the Cilantro proposer cannot read a {type(view).__name__}")


def outcomes_of(observed: Observed) -> list[AppOutcome]:
    """Every application the observation saw, finished or not (see the module
    docstring for where they come from)."""
    view = observed.view
    if isinstance(view, ClusterSnapshot):
        return [
            AppOutcome(app.queue, app.submitted_ms, app.finished_ms if app.is_finished else None)
            for app in view.apps
            if app.state not in FINISHED_STATES
        ]
    if isinstance(view, SimulatedView):
        finished = [AppOutcome(j.queue, j.submitted_ms, j.finished_ms) for j in observed.finished]
        waiting = [
            AppOutcome(p.job.queue, int(p.job.submit_s * 1000), None) for p in view.start.jobs
        ]
        return finished + waiting
    raise TypeError(f"the Cilantro proposer cannot read a {type(view).__name__}")
