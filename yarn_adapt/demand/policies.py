"""Multi-tenant allocation policies (Cilantro §4.1 and the baselines of §7.1).

Every policy splits ``R`` integer units of one resource among the tenants each
round. It sees a :class:`RoundContext` (the tenants, their forecast loads -- the
upper end of the load forecast, as Cilantro allocates for -- the previous
allocation and the step limit ``B``) and, after the round, each tenant's
:class:`Feedback` (its allocation, load and measured performance). Policies keep
their own state (learners, archives); they do no I/O.

Cilantro's policies (§4.1.2):

- :class:`CilantroNJC`: each tenant's demand recommended from its learner's
  confidence band at the forecast load (eqs. 5-6: ``beta`` times the demand's
  upper bound plus ``1 - beta`` times the exploration point, clipped to the last
  demand ± ``B``), then the NJC water-filling of :func:`njc_allocation`.
- :class:`CilantroWelfare` (SW or EW): the welfare of the utilities of the
  performance *upper* bounds at the forecast load (optimism, eq. 4), maximised
  within ``previous ± B`` by the exact solvers of :mod:`.solvers`.

Oracles know the true curves (:class:`~yarn_adapt.demand.learner.ProfiledCurve`) and
see the same forecast loads: :class:`OracleNJC` (true demands), :class:`OracleWelfare`.

Baselines: :class:`ResourceFair` (equal shares); :class:`EvolutionaryWelfare`
(EvoAlg-SW/EW: appendix A.4 run online on the *measured* welfare);
:class:`GreedyEW` (one unit from each tenant of the better-off half to the worse-off
half per round); :class:`EpsilonGreedy` (a random allocation with probability
``epsilon``, else the best measured so far); and three demand-based ones feeding
NJC -- :class:`MIAD` (demand 1.5x the allocation on a violated SLO, allocation - 1
otherwise), :class:`Parties` (demand +20 when the SLO is violated or nearly so, -5
when met comfortably, unchanged otherwise) and :class:`QuasarLike` (demands read off
curves completed by low-rank collaborative filtering over all tenants' measurements).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from yarn_adapt.demand.learner import (
    MonotoneLearner,
    PerformanceModel,
    demand_bounds,
    point_demand,
)
from yarn_adapt.demand.solvers import (
    Box,
    EvolutionaryArchive,
    max_egalitarian_welfare,
    max_social_welfare,
    mutate,
    random_allocation,
)
from yarn_adapt.demand.utility import Utility

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

DEFAULT_STEP = 10
"""§6: 'we set the parameter B which controls the deviation from the previous
allocation to 10' (CPUs, on a 1,000-CPU cluster)."""
DEFAULT_BETA = 0.75
"""§6: 'we set the parameter beta ... to 3/4'."""


class Objective(StrEnum):
    SOCIAL = "sw"
    EGALITARIAN = "ew"


@dataclass(frozen=True)
class Tenant:
    """A job / queue sharing the cluster: its name, utility and entitlement weight."""

    name: str
    utility: Utility
    weight: float = 1.0


@dataclass(frozen=True, eq=False)
class RoundContext:
    """What a policy sees when it allocates: ``loads`` are the forecast (upper)
    loads; ``previous`` the last allocation (``None`` in the first round);
    ``max_step`` the limit ``B`` on a tenant's change (``None``: no limit)."""

    resources: int
    tenants: tuple[Tenant, ...]
    loads: FloatArray
    previous: IntArray | None = None
    max_step: int | None = DEFAULT_STEP
    round: int = 0
    minimum: int = 0

    @property
    def size(self) -> int:
        return len(self.tenants)

    def box(self) -> Box:
        """``previous ± max_step`` (everything when unlimited), never below ``minimum``."""
        if self.previous is None or self.max_step is None:
            box = Box.unbounded(self.size, self.resources)
        else:
            box = Box.around(self.previous, self.max_step, self.resources)
        lower = np.maximum(box.lower, self.minimum)
        return Box(lower, np.maximum(box.upper, lower))


@dataclass(frozen=True)
class Feedback:
    """One tenant's report on the round that ended: what it had, its load, its
    measured performance and the standard error of that measurement."""

    allocation: int
    load: float
    performance: float
    sigma: float

    @property
    def per_unit_load(self) -> float:
        return self.allocation / self.load if self.load > 0 else math.inf


class Policy(Protocol):
    name: str

    def allocate(self, context: RoundContext) -> IntArray: ...

    def observe(self, context: RoundContext, feedback: Sequence[Feedback]) -> None: ...


# --------------------------------------------------------------------------- shared pieces


def equal_split(resources: int, weights: Sequence[float] | FloatArray) -> IntArray:
    """Shares proportional to ``weights``, rounded to integers summing to ``resources``."""
    w = np.asarray(weights, dtype=np.float64)
    return round_allocation(resources * w / w.sum(), resources)


def round_allocation(shares: FloatArray, resources: int) -> IntArray:
    """Integers close to ``shares``: floors, then the units still free to the
    largest fractional parts (ties to the lower index; deterministic)."""
    floors = np.floor(shares + 1e-9).astype(np.int64)
    free = min(resources - int(floors.sum()), len(shares))
    if free > 0:
        fractions = shares - floors
        order = np.argsort(-fractions, kind="stable")
        floors[order[:free]] += 1
    return floors


def njc_allocation(
    demands: Sequence[float] | FloatArray, resources: int, weights: Sequence[float] | None = None
) -> IntArray:
    """The NJC procedure of §4.1.1: each round, every tenant whose demand is below
    its share of what is left gets its demand; when none is, the rest is split by
    share. Weighted shares give weighted max-min fairness."""
    demand = np.maximum(np.asarray(demands, dtype=np.float64), 0.0)
    weight = np.ones(len(demand)) if weights is None else np.asarray(weights, dtype=np.float64)
    given = np.zeros(len(demand))
    active = np.ones(len(demand), dtype=bool)
    left = float(resources)
    while np.any(active):
        shares = left * weight / weight[active].sum()
        satisfied = active & (demand <= shares)
        if not np.any(satisfied):
            given[active] = shares[active]
            break
        given[satisfied] = demand[satisfied]
        left -= float(demand[satisfied].sum())
        active &= ~satisfied
    return _round_within(given, demand, resources)


def _round_within(given: FloatArray, demand: FloatArray, resources: int) -> IntArray:
    """Integer allocation close to ``given``; units left over after rounding go to
    tenants still below their demand (the NJC procedure leaves none idle that a
    tenant could use)."""
    total = min(resources, math.ceil(float(given.sum()) - 1e-9))
    allocation = round_allocation(given, total)
    left = resources - int(allocation.sum())
    hungry = np.flatnonzero(allocation < demand)
    for i in hungry[: max(0, left)]:
        allocation[i] += 1
    return allocation


def utility_table(
    models: Sequence[PerformanceModel],
    tenants: Sequence[Tenant],
    loads: FloatArray,
    resources: int,
    bound: str,
    box: Box | None = None,
) -> FloatArray:
    """``table[i, a]``: tenant ``i``'s utility with ``a`` units at its forecast load,
    read from its model's ``bound`` ('upper' for optimism, 'estimate' for an oracle).
    With a ``box`` only the allocations inside it are evaluated (the solvers read
    no others); outside, a row holds its value at the box's nearer end."""
    box = box or Box.unbounded(len(models), resources)
    table = np.empty((len(models), resources + 1))
    for i, (model, tenant) in enumerate(zip(models, tenants, strict=True)):
        low, high = int(box.lower[i]), int(box.upper[i])
        units = np.arange(low, high + 1, dtype=np.float64)
        band = model.band(units / max(float(loads[i]), 1e-9))
        values = np.maximum.accumulate(tenant.utility(getattr(band, bound)))
        table[i, :low] = values[0]
        table[i, low : high + 1] = values
        table[i, high + 1 :] = values[-1]
    return table


def measured_utilities(tenants: Sequence[Tenant], feedback: Sequence[Feedback]) -> FloatArray:
    return np.array([t.utility.of(f.performance) for t, f in zip(tenants, feedback, strict=True)])


def welfare(objective: Objective, utilities: FloatArray) -> float:
    if objective is Objective.SOCIAL:
        return float(np.mean(utilities))
    return float(np.min(utilities))


def solve(
    objective: Objective,
    table: FloatArray,
    resources: int,
    box: Box,
    previous: IntArray | None = None,
    then: FloatArray | None = None,
) -> IntArray:
    """The best allocation for ``objective``; ``previous`` when it is as good (a
    move needs a predicted gain: among equally good allocations, the solvers' tie
    breaks would otherwise shuffle resources for nothing). For the egalitarian
    welfare, ``then`` breaks the ties of ``table``'s maximin by its own maximin
    (see :class:`CilantroWelfare`)."""
    if objective is Objective.SOCIAL:
        found = max_social_welfare(table, resources, box)
    else:
        found = max_egalitarian_welfare(table, resources, box, then)
    if previous is None or int(previous.sum()) > resources:
        return found
    return found if _better(objective, table, found, previous, then) else previous.copy()


def _better(
    objective: Objective,
    table: FloatArray,
    new: IntArray,
    old: IntArray,
    then: FloatArray | None = None,
) -> bool:
    rows = np.arange(len(table))
    gained, lost = table[rows, new], table[rows, old]
    tolerance = 1e-6
    if objective is Objective.EGALITARIAN:
        if abs(gained.min() - lost.min()) > tolerance:
            return bool(gained.min() > lost.min())
        if then is not None:
            gained, lost = then[rows, new], then[rows, old]
            if abs(gained.min() - lost.min()) > tolerance:
                return bool(gained.min() > lost.min())
    return bool(gained.sum() > lost.sum() + tolerance)


# --------------------------------------------------------------------------- baselines


@dataclass
class ResourceFair:
    """Equal (entitlement-weighted) shares, whatever happens."""

    name: str = "resource-fair"

    def allocate(self, context: RoundContext) -> IntArray:
        return equal_split(context.resources, [t.weight for t in context.tenants])

    def observe(self, context: RoundContext, feedback: Sequence[Feedback]) -> None:
        return None


# --------------------------------------------------------------------------- oracles


@dataclass
class OracleNJC:
    """NJC on the true demands at the forecast load."""

    curves: Sequence[PerformanceModel]
    name: str = "oracle-njc"

    def allocate(self, context: RoundContext) -> IntArray:
        demands = [
            point_demand(curve, tenant.utility.slo) * load
            for curve, tenant, load in zip(self.curves, context.tenants, context.loads, strict=True)
        ]
        return njc_allocation(demands, context.resources, [t.weight for t in context.tenants])

    def observe(self, context: RoundContext, feedback: Sequence[Feedback]) -> None:
        return None


@dataclass
class OracleWelfare:
    """The welfare maximised on the true curves at the forecast load."""

    curves: Sequence[PerformanceModel]
    objective: Objective
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or f"oracle-{self.objective}"

    def allocate(self, context: RoundContext) -> IntArray:
        box = context.box()
        table = utility_table(
            self.curves, context.tenants, context.loads, context.resources, "estimate", box
        )
        return solve(self.objective, table, context.resources, box, context.previous)

    def observe(self, context: RoundContext, feedback: Sequence[Feedback]) -> None:
        return None


# --------------------------------------------------------------------------- Cilantro


@dataclass
class Reporting:
    """How a tenant reports its performance: truthfully (factor 1) or scaled (the
    strategy-proofness experiment of §7.1: x2 over-, x1/2 under-reporting)."""

    factors: dict[int, float] = field(default_factory=dict)

    def reported(self, index: int, performance: float) -> float:
        return performance * self.factors.get(index, 1.0)


@dataclass
class CilantroNJC:
    """Cilantro-NJC: learned demand recommendations fed to the NJC procedure."""

    models: Sequence[PerformanceModel]
    beta: float = DEFAULT_BETA
    reporting: Reporting = field(default_factory=Reporting)
    name: str = "cilantro-njc"
    demands: FloatArray | None = field(init=False, default=None)

    def allocate(self, context: RoundContext) -> IntArray:
        if context.previous is None:
            return equal_split(context.resources, [t.weight for t in context.tenants])
        recommended = np.array(
            [
                demand_bounds(model, tenant.utility.slo).recommendation(self.beta) * load
                for model, tenant, load in zip(
                    self.models, context.tenants, context.loads, strict=True
                )
            ]
        )
        if self.demands is not None and context.max_step is not None:
            recommended = np.clip(
                recommended, self.demands - context.max_step, self.demands + context.max_step
            )
        self.demands = np.maximum(recommended, context.minimum)
        return njc_allocation(recommended, context.resources, [t.weight for t in context.tenants])

    def observe(self, context: RoundContext, feedback: Sequence[Feedback]) -> None:
        _teach(self.models, feedback, self.reporting)


@dataclass
class CilantroWelfare:
    """Cilantro-SW / -EW: the welfare of the performance upper bounds, maximised
    within the step limit (eq. 4, optimism in the face of uncertainty).

    The egalitarian welfare of the upper bounds fixes only its minimum: every
    allocation giving each tenant at least what it needs to reach that level is
    an argmax. ``tie_break`` says which of them: ``"lower"`` (the default) the one
    whose performance *lower* bounds have the largest minimum utility -- the rest
    of the resources go where the pessimistic view is worst -- ``"upper"`` the
    largest sum of the upper bounds (the social welfare of the optimistic view).
    Either way the allocation is optimal for the optimistic objective."""

    models: Sequence[PerformanceModel]
    objective: Objective
    reporting: Reporting = field(default_factory=Reporting)
    name: str = ""
    tie_break: str = "lower"

    def __post_init__(self) -> None:
        self.name = self.name or f"cilantro-{self.objective}"
        if self.tie_break not in ("lower", "upper"):
            raise ValueError(f"tie_break must be lower or upper, got {self.tie_break!r}")

    def allocate(self, context: RoundContext) -> IntArray:
        if context.previous is None:
            return equal_split(context.resources, [t.weight for t in context.tenants])
        box = context.box()
        args = (self.models, context.tenants, context.loads, context.resources)
        table = utility_table(*args, "upper", box)
        then = None
        if self.objective is Objective.EGALITARIAN and self.tie_break == "lower":
            then = utility_table(*args, "lower", box)
        return solve(self.objective, table, context.resources, box, context.previous, then)

    def observe(self, context: RoundContext, feedback: Sequence[Feedback]) -> None:
        _teach(self.models, feedback, self.reporting)


def _teach(
    models: Sequence[PerformanceModel], feedback: Sequence[Feedback], reporting: Reporting
) -> None:
    for index, (model, report) in enumerate(zip(models, feedback, strict=True)):
        if isinstance(model, MonotoneLearner):
            performance = reporting.reported(index, report.performance)
            model.observe(report.per_unit_load, performance, report.sigma)
            model.refresh()  # the update is complete before the next allocation


# --------------------------------------------------------------------------- feedback heuristics


@dataclass
class EvolutionaryWelfare:
    """EvoAlg-SW / -EW (appendix A.4) on the welfare measured each round: two
    rounds of resource-fair, eight random, then a random allocation with
    probability 0.1 and otherwise a mutation of an archived allocation sampled by
    its measured welfare."""

    objective: Objective
    seed: int = 0
    name: str = ""
    archive: EvolutionaryArchive = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.name or f"evoalg-{self.objective}"
        self.archive = EvolutionaryArchive({})
        self.rng = np.random.default_rng(self.seed)

    def allocate(self, context: RoundContext) -> IntArray:
        if context.round < 2:
            return equal_split(context.resources, [t.weight for t in context.tenants])
        if context.round < 10 or self.rng.random() < 0.1 or not self.archive.totals:
            return random_allocation(context.size, context.resources, self.rng)
        return mutate(self.archive.sample(self.rng), self.rng)

    def observe(self, context: RoundContext, feedback: Sequence[Feedback]) -> None:
        allocation = np.array([f.allocation for f in feedback], dtype=np.int64)
        measured = measured_utilities(context.tenants, feedback)
        self.archive.record(allocation, welfare(self.objective, measured))


@dataclass
class EpsilonGreedy:
    """With probability ``epsilon`` a random allocation, else the one with the
    best measured welfare so far (the ε-greedy baseline of §7.2, ε = 1/3)."""

    objective: Objective = Objective.SOCIAL
    epsilon: float = 1.0 / 3.0
    seed: int = 0
    name: str = "epsilon-greedy"
    archive: EvolutionaryArchive = field(init=False)

    def __post_init__(self) -> None:
        self.archive = EvolutionaryArchive({})
        self.rng = np.random.default_rng(self.seed)

    def allocate(self, context: RoundContext) -> IntArray:
        if context.previous is None:
            return equal_split(context.resources, [t.weight for t in context.tenants])
        if not self.archive.totals or self.rng.random() < self.epsilon:
            return random_allocation(context.size, context.resources, self.rng)
        return self.archive.best()[0]

    def observe(self, context: RoundContext, feedback: Sequence[Feedback]) -> None:
        allocation = np.array([f.allocation for f in feedback], dtype=np.int64)
        measured = measured_utilities(context.tenants, feedback)
        self.archive.record(allocation, welfare(self.objective, measured))


@dataclass
class GreedyEW:
    """Starts equal; each round, one unit (``step``) from each tenant in the half
    with the higher measured utility to one in the lower half."""

    step: int = 1
    name: str = "greedy-ew"
    utilities: FloatArray | None = field(init=False, default=None)

    def allocate(self, context: RoundContext) -> IntArray:
        if context.previous is None or self.utilities is None:
            return equal_split(context.resources, [t.weight for t in context.tenants])
        allocation = context.previous.copy()
        order = np.argsort(self.utilities, kind="stable")
        half = context.size // 2
        poorer, richer = order[:half], order[::-1][:half]
        for giver, taker in zip(richer, poorer, strict=True):
            if allocation[giver] > self.step and self.utilities[giver] > self.utilities[taker]:
                allocation[giver] -= self.step
                allocation[taker] += self.step
        return allocation

    def observe(self, context: RoundContext, feedback: Sequence[Feedback]) -> None:
        self.utilities = measured_utilities(context.tenants, feedback)


@dataclass
class DemandHeuristic:
    """Base of MIAD and PARTIES: a demand per tenant from its last measurement,
    fed to NJC; the first round is resource-fair."""

    name: str = ""
    demands: FloatArray | None = field(init=False, default=None)

    def allocate(self, context: RoundContext) -> IntArray:
        if self.demands is None:
            return equal_split(context.resources, [t.weight for t in context.tenants])
        return njc_allocation(self.demands, context.resources, [t.weight for t in context.tenants])

    def observe(self, context: RoundContext, feedback: Sequence[Feedback]) -> None:
        self.demands = np.array(
            [
                max(1.0, self.next_demand(f.allocation, f.performance, t.utility.slo))
                for f, t in zip(feedback, context.tenants, strict=True)
            ]
        )

    def next_demand(self, allocation: int, performance: float, slo: float) -> float:
        raise NotImplementedError


@dataclass
class MIAD(DemandHeuristic):
    """Multiplicative increase, additive decrease (appendix A.3)."""

    name: str = "miad"
    increase: float = 1.5
    decrease: float = 1.0

    def next_demand(self, allocation: int, performance: float, slo: float) -> float:
        if performance < slo:
            return self.increase * allocation
        return allocation - self.decrease


@dataclass
class Parties(DemandHeuristic):
    """PARTIES' upsize / downsize logic (appendix A.3): +``upsize`` when the SLO is
    violated or within ``close`` of it, -``downsize`` when the performance beats
    the SLO by ``comfortable`` or more (relative), unchanged otherwise."""

    name: str = "parties"
    upsize: float = 20.0
    downsize: float = 5.0
    close: float = 0.02
    comfortable: float = 0.05

    def next_demand(self, allocation: int, performance: float, slo: float) -> float:
        slack = (performance - slo) / slo
        if slack < self.close:
            return allocation + self.upsize
        if slack >= self.comfortable:
            return allocation - self.downsize
        return float(allocation)


QUASAR_BINS = np.geomspace(0.05, 200.0, 32)


@dataclass
class QuasarLike:
    """Quasar-style demand estimation (appendix A.3): a matrix of measured
    normalised performance (rows: tenants; columns: bins of allocation per unit
    load) is completed by iterated rank-``rank`` SVD -- collaborative filtering
    across tenants -- made monotone, and each tenant's demand is where its row
    first reaches the SLO; NJC allocates. Two random rounds profile first."""

    rank: int = 2
    profiling_rounds: int = 2
    seed: int = 0
    name: str = "quasar"
    sums: FloatArray | None = field(init=False, default=None)
    counts: FloatArray | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def allocate(self, context: RoundContext) -> IntArray:
        if context.round < self.profiling_rounds or self.sums is None:
            return random_allocation(context.size, context.resources, self.rng)
        rows = self.completed()
        demands = []
        for row, load in zip(rows, context.loads, strict=True):
            reached = np.flatnonzero(row >= 1.0)
            x = QUASAR_BINS[reached[0]] if len(reached) else QUASAR_BINS[-1]
            demands.append(float(x) * float(load))
        return njc_allocation(demands, context.resources, [t.weight for t in context.tenants])

    def observe(self, context: RoundContext, feedback: Sequence[Feedback]) -> None:
        if self.sums is None or self.counts is None:
            self.sums = np.zeros((context.size, len(QUASAR_BINS)))
            self.counts = np.zeros((context.size, len(QUASAR_BINS)))
        for i, (report, tenant) in enumerate(zip(feedback, context.tenants, strict=True)):
            column = int(
                np.argmin(np.abs(np.log(QUASAR_BINS) - np.log(max(report.per_unit_load, 1e-9))))
            )
            self.sums[i, column] += report.performance / tenant.utility.slo
            self.counts[i, column] += 1

    def completed(self) -> FloatArray:
        assert self.sums is not None and self.counts is not None
        known = self.counts > 0
        matrix = np.where(known, self.sums / np.maximum(self.counts, 1), 0.0)
        filled = np.where(known, matrix, matrix[known].mean() if np.any(known) else 0.0)
        for _ in range(30):
            u, s, vt = np.linalg.svd(filled, full_matrices=False)
            low_rank = (u[:, : self.rank] * s[: self.rank]) @ vt[: self.rank]
            filled = np.where(known, matrix, np.clip(low_rank, 0.0, None))
        return np.maximum.accumulate(filled, axis=1)
