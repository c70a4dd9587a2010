"""Fast exact solvers for the welfare policies, and the references they are checked
against.

Each job's utility is tabulated at every integer allocation: ``table[i, a]`` for
``a = 0..R`` (non-decreasing in ``a``; the policies build it from a performance
curve at the forecast load). Box constraints ``lower[i] <= a_i <= upper[i]`` carry
the paper's limit ``B`` on the change from the previous round; ``sum a_i <= R``.

- :func:`max_social_welfare` maximises ``sum_i table[i, a_i]`` exactly. Each job's
  range is cut at its *saturation* -- the first allocation where its utility
  reaches its maximum -- since more cannot add welfare. :func:`knapsack` then
  prices a unit (the Lagrangian dual, whose value bounds the optimum from
  above), builds a feasible allocation from the price (a bound from below),
  drops every choice of a job that cannot be in an optimal allocation given the
  two bounds, and runs the dynamic programme over the budget on the choices
  left -- a handful per job where the curves are concave near the price, all of
  them at worst (jobs whose choices tie at the price, a linear stretch, are
  merged first). The leftover is then handed out (:func:`spread_leftover`) so no
  resource idles. :func:`knapsack_reference` is the plain programme.
- :func:`max_egalitarian_welfare` maximises ``min_i table[i, a_i]`` exactly: the
  cheapest allocation reaching a level ``t`` is a per-job binary search, so the
  best level is a bisection over the distinct utility values; the resources left
  at that level are then placed by the social-welfare DP with every job held at
  its level (the min stays optimal, the sum is as large as it can be).
- :func:`evolutionary_search` is the paper's evolutionary algorithm (appendix A.4)
  on any objective of an allocation: the reference the solvers must not lose to,
  and the engine of the EvoAlg baselines. :func:`exhaustive_best` enumerates every
  allocation of a small problem.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

SATURATION_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Box:
    """Per-job bounds on the allocation (inclusive)."""

    lower: IntArray
    upper: IntArray

    @classmethod
    def unbounded(cls, jobs: int, resources: int) -> Box:
        return cls(np.zeros(jobs, dtype=np.int64), np.full(jobs, resources, dtype=np.int64))

    @classmethod
    def around(cls, previous: Sequence[int] | IntArray, step: int, resources: int) -> Box:
        """``previous ± step``, within ``[0, resources]``."""
        prev = np.asarray(previous, dtype=np.int64)
        return cls(np.maximum(prev - step, 0), np.minimum(prev + step, resources))


def saturation(table: FloatArray, box: Box) -> IntArray:
    """For each job, the first allocation within its box where its utility is as
    high as it gets within the box."""
    points = np.empty(len(table), dtype=np.int64)
    for i, row in enumerate(table):
        low, high = int(box.lower[i]), int(box.upper[i])
        segment = row[low : high + 1]
        top = segment.max()
        points[i] = low + int(np.argmax(segment >= top - SATURATION_TOLERANCE))
    return points


def max_social_welfare(table: FloatArray, resources: int, box: Box | None = None) -> IntArray:
    """The allocation maximising the sum of utilities (see the module docstring)."""
    jobs = len(table)
    box = box or Box.unbounded(jobs, resources)
    _check(box, resources)
    upper = np.minimum(saturation(table, box), box.upper)
    chosen = knapsack(table, box.lower, upper, resources - int(box.lower.sum()))
    return spread_leftover(box.lower + chosen, table, box, resources)


def knapsack(table: FloatArray, lower: IntArray, upper: IntArray, budget: int) -> IntArray:
    """Extra units above ``lower`` per job (at most ``upper - lower``), maximising
    the sum of ``table[i, lower[i] + extra[i]]`` within ``budget``: exact.

    1. Lagrangian bound: for a price ``lam`` per unit, ``phi_i(lam) = max_e g_i(e)
       - lam*e`` (``g_i`` the job's values above its lower bound) and ``D(lam) =
       sum phi_i + lam*budget`` bounds the optimum from above for every ``lam >=
       0``; a bisection on the subgradient finds the ``lam`` making it tightest.
    2. A feasible allocation from that price, greedily topped up, bounds it from
       below (``LB``).
    3. Pruning: a job's choice ``e`` with ``g_i(e) - lam*e < phi_i(lam) - (D - LB)``
       cannot be in an optimal allocation (every allocation with it is worth less
       than ``LB``), so it is dropped.
    4. The dynamic programme over the budget runs on the choices left: usually a
       few per job near the price's optimum; at worst all of them (the plain DP).
    """
    gains = _gains(table, lower, upper)
    if budget <= 0 or all(len(g) == 1 for g in gains):
        return np.zeros(len(table), dtype=np.int64)
    padded = _padded(gains)
    price, bound, fitting = _best_price(padded, budget)
    floor = _top_up(padded, fitting, budget)
    slack = bound - floor + 1e-9 * max(1.0, abs(bound))
    reduced = padded - price * np.arange(padded.shape[1])
    keep = reduced >= reduced.max(axis=1, keepdims=True) - slack
    choices = [np.flatnonzero(keep[i, : len(g)]) for i, g in enumerate(gains)]
    tie = 1e-12 * max(1.0, float(np.max(np.abs(padded[np.isfinite(padded)]))))
    linear = [
        i for i, options in enumerate(choices)
        if len(options) > 1 and options[-1] - options[0] + 1 == len(options)
        and float(np.ptp(reduced[i, options])) <= tie
    ]  # fmt: skip
    if len(linear) < 2:
        return _dynamic_programme(gains, choices, budget)
    return _with_linear_merged(gains, choices, linear, price, budget)


def _with_linear_merged(
    gains: Sequence[FloatArray],
    choices: Sequence[IntArray],
    linear: Sequence[int],
    price: float,
    budget: int,
) -> IntArray:
    """Jobs whose remaining choices all earn the same at ``price`` (a linear
    stretch of slope ``price``, e.g. equal stated demands) are one job to the
    dynamic programme: any split of their units is worth the same, so they are
    merged, and the merged job's units are split back over them in order."""
    others = [i for i in range(len(gains)) if i not in set(linear)]
    starts = np.array([int(choices[i][0]) for i in linear])
    ends = np.array([int(choices[i][-1]) for i in linear])
    base = float(sum(gains[i][int(choices[i][0])] for i in linear))
    low, high = int(starts.sum()), int(ends.sum())
    merged = np.full(high + 1, -np.inf)
    merged[low:] = base + price * np.arange(high - low + 1)
    chosen = _dynamic_programme(
        [*(gains[i] for i in others), merged],
        [*(choices[i] for i in others), np.arange(low, high + 1)],
        budget,
    )
    extra = np.zeros(len(gains), dtype=np.int64)
    extra[others] = chosen[:-1]
    left = int(chosen[-1]) - low
    for i, start, end in zip(linear, starts, ends, strict=True):
        give = min(left, int(end - start))
        extra[i] = start + give
        left -= give
    return extra


def _gains(table: FloatArray, lower: IntArray, upper: IntArray) -> list[FloatArray]:
    return [
        np.asarray(table[i, int(lower[i]) : int(upper[i]) + 1], dtype=np.float64)
        for i in range(len(table))
    ]


def _padded(gains: Sequence[FloatArray]) -> FloatArray:
    """The jobs' values side by side, ``-inf`` past each job's range."""
    width = max(len(g) for g in gains)
    padded = np.full((len(gains), width), -np.inf)
    for i, g in enumerate(gains):
        padded[i, : len(g)] = g
    return padded


def _at_price(padded: FloatArray, price: float) -> tuple[IntArray, float]:
    """At unit price ``price``: each job's best number of extra units (the
    smallest among equals) and ``D(price)``'s sum of ``max_e g(e) - price*e``."""
    reduced = padded - price * np.arange(padded.shape[1])
    units = np.argmax(reduced, axis=1)
    return units.astype(np.int64), float(reduced[np.arange(len(padded)), units].sum())


def _best_price(padded: FloatArray, budget: int) -> tuple[float, float, IntArray]:
    """The price ``lam >= 0`` minimising ``D(lam)`` (to bisection precision), ``D``
    there -- an upper bound on the best sum within ``budget`` -- and the units of
    the lowest price tried whose choices fit the budget."""
    units, total = _at_price(padded, 0.0)
    if int(units.sum()) <= budget:
        return 0.0, total, units
    steps = np.diff(np.where(np.isfinite(padded), padded, np.nan), axis=1)
    low, high = 0.0, max(float(np.nanmax(steps)) if np.any(np.isfinite(steps)) else 0.0, 1e-12)
    fitting, total = _at_price(padded, high)
    best = (high, total + high * budget)
    for _ in range(40):
        middle = (low + high) / 2.0
        units, total = _at_price(padded, middle)
        if total + middle * budget < best[1]:
            best = (middle, total + middle * budget)
        if int(units.sum()) > budget:
            low = middle
        else:
            high, fitting = middle, units
    return best[0], best[1], fitting


def _top_up(padded: FloatArray, units: IntArray, budget: int) -> float:
    """The value of a feasible allocation: ``units`` (which fit), then the units
    left given, a stretch at a time, where they add most per unit."""
    units = units.copy()
    rows = np.arange(len(padded))
    width = padded.shape[1]
    left = budget - int(units.sum())
    while left > 0:
        steps = np.arange(1, left + 1)
        columns = units[:, None] + steps[None, :]
        ahead = padded[rows[:, None], np.minimum(columns, width - 1)]
        ahead = np.where(columns < width, ahead, -np.inf) - padded[rows, units][:, None]
        rates = ahead / steps
        top = float(np.max(rates))
        if not top > 0:
            break
        longest = np.where(rates >= top - 1e-12 * top, steps, 0)  # equal rates: go far
        job, step = np.unravel_index(int(np.argmax(longest)), rates.shape)
        units[job] += step + 1
        left -= int(step) + 1
    return float(padded[rows, units].sum())


def _dynamic_programme(
    gains: Sequence[FloatArray], choices: Sequence[IntArray], budget: int
) -> IntArray:
    """``best[b]``: the largest sum using at most ``b`` units, one job at a time,
    each job taking one of its ``choices``; then back through the picks."""
    jobs = len(gains)
    best = np.zeros(budget + 1)
    picks: list[IntArray] = []
    for i in range(jobs):
        options = choices[i]
        values = gains[i][options]
        new = np.full(budget + 1, -np.inf)
        pick = np.zeros(budget + 1, dtype=np.int64)
        for units, value in zip(options.tolist(), values.tolist(), strict=True):
            if units > budget:
                break
            candidate = best[: budget + 1 - units] + value
            target = new[units:]
            better = candidate > target
            target[better] = candidate[better]
            pick[units:][better] = units
        best = new
        picks.append(pick)
    extra = np.zeros(jobs, dtype=np.int64)
    finite = np.isfinite(best)
    top = float(np.max(best[finite]))
    left = int(np.flatnonzero(finite & (best >= top - 1e-12 * max(1.0, abs(top))))[0])
    for i in range(jobs - 1, -1, -1):
        extra[i] = picks[i][left]
        left -= int(extra[i])
    return extra


def knapsack_reference(
    table: FloatArray, lower: IntArray, upper: IntArray, budget: int
) -> IntArray:
    """The plain dynamic programme over every choice (for tests and the bench)."""
    gains = _gains(table, lower, upper)
    if budget <= 0:
        return np.zeros(len(table), dtype=np.int64)
    return _dynamic_programme(gains, [np.arange(len(g)) for g in gains], budget)


def max_egalitarian_welfare(
    table: FloatArray,
    resources: int,
    box: Box | None = None,
    then: FloatArray | None = None,
) -> IntArray:
    """The allocation maximising the smallest utility, the rest placed for the
    largest sum at that minimum (see the module docstring). With ``then`` (a
    second table), the rest is placed by ``then``'s egalitarian welfare instead
    (lexicographic: every allocation returned is optimal for ``table``)."""
    jobs = len(table)
    box = box or Box.unbounded(jobs, resources)
    _check(box, resources)
    ladders = [
        np.maximum.accumulate(table[i, box.lower[i] : box.upper[i] + 1]) for i in range(jobs)
    ]
    ceiling = min(float(ladder[-1]) for ladder in ladders)
    levels = np.unique(np.concatenate(ladders))
    levels = levels[levels <= ceiling]
    budget = resources - int(box.lower.sum())
    low, high = 0, len(levels) - 1  # levels[low] is always affordable (box.lower is)
    while low < high:
        middle = (low + high + 1) // 2
        if _cost(ladders, box, float(levels[middle])).sum() <= budget:
            low = middle
        else:
            high = middle - 1
    floor = box.lower + _cost(ladders, box, float(levels[low]))
    if then is not None:
        return max_egalitarian_welfare(then, resources, Box(floor, box.upper))
    return max_social_welfare(table, resources, Box(floor, box.upper))


def _cost(ladders: Sequence[FloatArray], box: Box, level: float) -> IntArray:
    """Units above the box's lower bound each job needs to reach ``level``."""
    return np.array(
        [int(np.searchsorted(ladder, level, side="left")) for ladder in ladders], dtype=np.int64
    )


def spread_leftover(allocation: IntArray, table: FloatArray, box: Box, resources: int) -> IntArray:
    """Hand the unallocated resources out without lowering anyone: first to jobs
    whose utility is below 1 (most starved first), then to anyone below their box,
    one unit at a time round-robin."""
    result = allocation.copy()
    left = resources - int(result.sum())
    if left <= 0:
        return result
    utilities = table[np.arange(len(table)), result]
    order = sorted(range(len(result)), key=lambda i: (utilities[i] >= 1.0, utilities[i]))
    while left > 0:
        room = [i for i in order if result[i] < box.upper[i]]
        if not room:
            break
        share, extra = divmod(left, len(room))
        for rank, i in enumerate(room):
            give = min(int(box.upper[i] - result[i]), share + (1 if rank < extra else 0))
            result[i] += give
            left -= give
    return result


def _check(box: Box, resources: int) -> None:
    if np.any(box.lower > box.upper) or int(box.lower.sum()) > resources:
        raise ValueError("infeasible box: lower bounds above upper bounds or above the total")


def welfare_of(table: FloatArray, allocation: IntArray) -> FloatArray:
    """Each job's utility under ``allocation``."""
    return table[np.arange(len(table)), allocation]


# --------------------------------------------------------------------------- references

Objective = Callable[[IntArray], float]


def exhaustive_best(objective: Objective, jobs: int, resources: int) -> tuple[IntArray, float]:
    """Every allocation of exactly ``resources`` units (small problems only)."""
    best: tuple[IntArray, float] | None = None
    for cut in itertools.combinations(range(resources + jobs - 1), jobs - 1):
        bounds = (-1, *cut, resources + jobs - 1)
        allocation = np.array([b - a - 1 for a, b in itertools.pairwise(bounds)], dtype=np.int64)
        value = objective(allocation)
        if best is None or value > best[1]:
            best = (allocation, value)
    assert best is not None
    return best


@dataclass
class EvolutionaryArchive:
    """Appendix A.4's hash table: every allocation tried with its mean value."""

    totals: dict[tuple[int, ...], tuple[float, int]]

    def record(self, allocation: IntArray, value: float) -> None:
        key = tuple(int(a) for a in allocation)
        total, count = self.totals.get(key, (0.0, 0))
        self.totals[key] = (total + value, count + 1)

    def best(self) -> tuple[IntArray, float]:
        key, (total, count) = max(self.totals.items(), key=lambda kv: kv[1][0] / kv[1][1])
        return np.array(key, dtype=np.int64), total / count

    def sample(self, rng: np.random.Generator) -> IntArray:
        """An allocation with probability proportional to exp((y - mean) / std)."""
        keys = list(self.totals)
        values = np.array([t / c for t, c in self.totals.values()])
        spread = values.std()
        weights = np.exp((values - values.mean()) / spread) if spread > 0 else np.ones(len(keys))
        pick = rng.choice(len(keys), p=weights / weights.sum())
        return np.array(keys[pick], dtype=np.int64)


def random_allocation(jobs: int, resources: int, rng: np.random.Generator) -> IntArray:
    """A uniformly random split of exactly ``resources`` units."""
    cuts = np.sort(rng.integers(0, resources + 1, size=jobs - 1))
    return np.diff(np.concatenate([[0], cuts, [resources]])).astype(np.int64)


def mutate(allocation: IntArray, rng: np.random.Generator, max_steps: int = 20) -> IntArray:
    """A.4's mutation: 1-``max_steps`` moves of one unit from a job holding at
    least 2 to another job."""
    child = allocation.copy()
    for _ in range(int(rng.integers(1, max_steps + 1))):
        donors = np.flatnonzero(child >= 2)
        if len(donors) == 0 or len(child) < 2:
            break
        giver = int(rng.choice(donors))
        taker = int(rng.integers(0, len(child) - 1))
        taker += taker >= giver
        child[giver] -= 1
        child[taker] += 1
    return child


def evolutionary_search(
    objective: Objective,
    jobs: int,
    resources: int,
    iterations: int,
    rng: np.random.Generator,
    start: Sequence[IntArray] = (),
) -> tuple[IntArray, float]:
    """A.4 run on a cheap objective: equal split and ``start`` first, then random
    allocations with probability 0.1 and mutations of archive samples otherwise."""
    archive = EvolutionaryArchive({})
    equal = np.full(jobs, resources // jobs, dtype=np.int64)
    equal[: resources - int(equal.sum())] += 1
    for allocation in (equal, *start):
        archive.record(allocation, objective(allocation))
    for _ in range(iterations):
        if rng.random() < 0.1:
            candidate = random_allocation(jobs, resources, rng)
        else:
            candidate = mutate(archive.sample(rng), rng)
        if tuple(int(a) for a in candidate) not in archive.totals:
            archive.record(candidate, objective(candidate))
    return archive.best()
