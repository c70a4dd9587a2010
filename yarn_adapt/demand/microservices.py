"""Resources across the services of one application (Cilantro §4.2, §7.2).

One end-to-end signal (the application's P99 latency at its load) must steer an
``n``-dimensional allocation. :class:`CilantroEndToEnd` models the performance
``p(a, load)`` directly -- a Gaussian process with a Matérn-5/2 kernel (§6: kernel
ridge regression with a Matérn kernel of smoothness 2.5; the GP gives the same
mean plus a posterior standard deviation; its length scale and noise are fixed
settings, as a kernel ridge regression's are, so a round costs milliseconds) on
the allocation shares and the load --
and picks, within ``previous ± B``, the allocation with the largest upper
confidence bound ``mean + beta * std`` (optimism, eq. 7). The performance it
learns is ``-log(P99)``: higher is better, and the logarithm keeps the rare
overloaded rounds from dominating the fit. Candidates are the paper's
evolutionary mutations of the best allocations seen and random allocations,
scored in one batch.

Baselines (§7.2): :class:`EndToEndResourceFair` (equal shares),
:class:`EndToEndEvolutionary` (appendix A.4 run online on the measured P99) and
:class:`EndToEndEpsilonGreedy` (a random allocation with probability 1/3, else the
one with the smallest P99 measured so far).

:class:`ServiceGraph` is a synthetic application for tests and experiments: each
service is a queue whose latency grows as its CPUs approach its offered load, and
the P99 is that of the slowest path through the call graph.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from yarn_adapt.demand.solvers import EvolutionaryArchive, mutate, random_allocation

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class AppRound:
    """What an end-to-end policy sees: the CPUs to split, the services, the
    application's forecast load, the previous allocation and the step limit."""

    resources: int
    services: int
    load: float
    previous: IntArray | None = None
    max_step: int | None = None
    round: int = 0
    minimum: int = 1


class EndToEndPolicy(Protocol):
    name: str

    def allocate(self, context: AppRound) -> IntArray: ...

    def observe(self, allocation: IntArray, load: float, p99_s: float) -> None: ...


def equal_allocation(resources: int, services: int) -> IntArray:
    base = np.full(services, resources // services, dtype=np.int64)
    base[: resources - int(base.sum())] += 1
    return base


def _random_with_minimum(context: AppRound, rng: np.random.Generator) -> IntArray:
    spare = context.resources - context.minimum * context.services
    return random_allocation(context.services, spare, rng) + context.minimum


# --------------------------------------------------------------------------- Cilantro


@dataclass
class CilantroEndToEnd:
    """The §4.2 policy: the allocation maximising a GP upper confidence bound."""

    beta: float = 1.0
    length_scale: float = 0.2
    load_length_scale: float = 1.0
    noise: float = 0.05
    candidates: int = 300
    seed: int = 0
    name: str = "cilantro"
    inputs: list[FloatArray] = field(default_factory=list)
    outputs: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.archive = EvolutionaryArchive({})
        self.load_scale = 1.0

    def allocate(self, context: AppRound) -> IntArray:
        if context.round < 2 or len(self.outputs) < 2:
            return equal_allocation(context.resources, context.services)
        if context.round == 2:
            return _random_with_minimum(context, self.rng)
        model = self._fit()
        pool = self._candidates(context)
        features = np.column_stack(
            [pool / context.resources, np.full(len(pool), context.load / self.load_scale)]
        )
        mean, std = model.predict(features, return_std=True)
        chosen: IntArray = pool[int(np.argmax(mean + self.beta * std))]
        return chosen

    def observe(self, allocation: IntArray, load: float, p99_s: float) -> None:
        total = float(allocation.sum())
        self.load_scale = max(self.load_scale, load)
        self.inputs.append(np.concatenate([allocation / total, [load]]))
        performance = -math.log(max(p99_s, 1e-6))
        self.outputs.append(performance)
        self.archive.record(allocation, performance)

    def _fit(self) -> Any:  # sklearn is untyped
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

        x = np.array(self.inputs)
        x[:, -1] = x[:, -1] / self.load_scale
        scales = np.append(np.full(x.shape[1] - 1, self.length_scale), self.load_length_scale)
        kernel = ConstantKernel(1.0, "fixed") * Matern(scales, "fixed", nu=2.5) + WhiteKernel(
            self.noise, "fixed"
        )
        model = GaussianProcessRegressor(
            kernel, normalize_y=True, optimizer=None, random_state=self.seed
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(x, np.array(self.outputs))
        return model

    def _candidates(self, context: AppRound) -> IntArray:
        """Mutations of the previous and the best allocation (each a few moves of
        1-20 units between random services), and some random allocations."""
        parents = [context.previous] if context.previous is not None else []
        if self.archive.totals:
            parents.append(self.archive.best()[0])
        explore = max(1, self.candidates // 5)
        pool = [_random_with_minimum(context, self.rng) for _ in range(explore)]
        if parents:
            base = np.array(parents)[self.rng.integers(0, len(parents), self.candidates)]
            pool.extend(_moves(base, context.services, self.rng))
        return _feasible(np.array(pool), context)


def _moves(base: IntArray, services: int, rng: np.random.Generator, rounds: int = 3) -> IntArray:
    """Each row moved 1-3 times by 1-20 units from one random service to another."""
    moved = base.copy()
    rows = np.arange(len(base))
    for _ in range(rounds):
        giver = rng.integers(0, services, len(base))
        taker = (giver + rng.integers(1, services, len(base))) % services
        amount = rng.integers(1, 21, len(base)) * (rng.random(len(base)) < 0.7)
        amount = np.minimum(amount, moved[rows, giver])
        moved[rows, giver] -= amount
        moved[rows, taker] += amount
    return moved


def _feasible(pool: IntArray, context: AppRound) -> IntArray:
    """Candidates that respect the minimum and, with a previous allocation, the
    step limit (the previous allocation itself is always one)."""
    keep = np.all(pool >= context.minimum, axis=1)
    if context.previous is not None and context.max_step is not None:
        keep &= np.all(np.abs(pool - context.previous) <= context.max_step, axis=1)
    chosen = pool[keep]
    if context.previous is not None:
        chosen = np.vstack([chosen, context.previous[None, :]])
    return chosen


# --------------------------------------------------------------------------- baselines


@dataclass
class EndToEndResourceFair:
    name: str = "resource-fair"

    def allocate(self, context: AppRound) -> IntArray:
        return equal_allocation(context.resources, context.services)

    def observe(self, allocation: IntArray, load: float, p99_s: float) -> None:
        return None


@dataclass
class EndToEndEvolutionary:
    """Appendix A.4 online: two equal rounds, eight random, then random with
    probability 0.1, else a mutation of an archived allocation sampled by its
    measured performance (``-P99``)."""

    seed: int = 0
    name: str = "evoalg"

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.archive = EvolutionaryArchive({})

    def allocate(self, context: AppRound) -> IntArray:
        if context.round < 2:
            return equal_allocation(context.resources, context.services)
        if context.round < 10 or self.rng.random() < 0.1 or not self.archive.totals:
            return _random_with_minimum(context, self.rng)
        child = mutate(self.archive.sample(self.rng), self.rng)
        return child if child.min() >= context.minimum else self.archive.best()[0]

    def observe(self, allocation: IntArray, load: float, p99_s: float) -> None:
        self.archive.record(allocation, -p99_s)


@dataclass
class EndToEndEpsilonGreedy:
    """ε-greedy (§7.2): a random allocation with probability ``epsilon``,
    otherwise the one with the smallest P99 measured so far."""

    epsilon: float = 1.0 / 3.0
    seed: int = 0
    name: str = "epsilon-greedy"

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.archive = EvolutionaryArchive({})

    def allocate(self, context: AppRound) -> IntArray:
        if context.round == 0:
            return equal_allocation(context.resources, context.services)
        if not self.archive.totals or self.rng.random() < self.epsilon:
            return _random_with_minimum(context, self.rng)
        return self.archive.best()[0]

    def observe(self, allocation: IntArray, load: float, p99_s: float) -> None:
        self.archive.record(allocation, -p99_s)


# --------------------------------------------------------------------------- a synthetic app


@dataclass(frozen=True)
class ServiceGraph:
    """``work[i]``: CPU-seconds service ``i`` spends per application request
    (visits included); ``paths``: the call paths (service indices) a request may
    take. A service with ``c`` CPUs at ``lam`` requests/s is busy
    ``rho = lam*work/c``; its P99 sojourn is ``4.6 * work / (1 - rho)`` below
    saturation (an M/M/1-like tail) and grows steeply above it."""

    work: tuple[float, ...]
    paths: tuple[tuple[int, ...], ...]
    noise: float = 0.05

    def p99(
        self,
        allocation: Sequence[int] | IntArray,
        load: float,
        rng: np.random.Generator | None = None,
    ) -> float:
        cpus = np.maximum(np.asarray(allocation, dtype=np.float64), 1e-9)
        work = np.asarray(self.work)
        busy = load * work / cpus
        tail = np.where(
            busy < 0.95, 4.6 * work / (1.0 - np.minimum(busy, 0.95)), 4.6 * work * 20.0 * busy
        )
        latency = max(float(tail[list(path)].sum()) for path in self.paths)
        if rng is not None:
            latency *= float(np.exp(rng.normal(0.0, self.noise)))
        return latency


@dataclass
class EndToEndRun:
    name: str
    p99_s: list[float] = field(default_factory=list)

    @property
    def mean_p99_s(self) -> float:
        return float(np.mean(self.p99_s))


def run_end_to_end(
    app: ServiceGraph,
    policy: EndToEndPolicy,
    loads: Sequence[float],
    resources: int,
    max_step: int | None,
    rng: np.random.Generator,
) -> EndToEndRun:
    """Each round: the policy allocates for that round's load (the application's
    load is known to the policy, as the paper's forecaster provides it), the app
    answers with its measured P99."""
    run = EndToEndRun(policy.name)
    previous: IntArray | None = None
    for r, load in enumerate(loads):
        context = AppRound(resources, len(app.work), float(load), previous, max_step, r)
        allocation = np.asarray(policy.allocate(context), dtype=np.int64)
        if allocation.sum() > resources or allocation.min() < 0:
            raise AssertionError(f"{policy.name} allocated {allocation.tolist()}")
        measured = app.p99(allocation, float(load), rng)
        policy.observe(allocation, float(load), measured)
        run.p99_s.append(app.p99(allocation, float(load)))
        previous = allocation
    return run
