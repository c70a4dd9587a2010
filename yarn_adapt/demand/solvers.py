"""Fast exact solvers for the welfare policies, and the references they are checked
against.

Each job's utility is tabulated at every integer allocation: ``table[i, a]`` for
``a = 0..R`` (non-decreasing in ``a``; the policies build it from a performance
curve at the forecast load). Box constraints ``lower[i] <= a_i <= upper[i]`` carry
the paper's limit ``B`` on the change from the previous round; ``sum a_i <= R``.

- :func:`max_social_welfare` maximises ``sum_i table[i, a_i]`` exactly by dynamic
  programming over the budget (a max-plus convolution per job, vectorised). Each
  job's range is cut at its *saturation* -- the first allocation where its
  utility reaches its maximum -- since more cannot add welfare; the leftover is
  then handed out (:func:`spread_leftover`) so no resource idles. Cost: the sum
  over jobs of ``budget x range``.
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
from numpy.lib.stride_tricks import sliding_window_view
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
    chosen = _knapsack(table, box.lower, upper, resources - int(box.lower.sum()))
    return spread_leftover(box.lower + chosen, table, box, resources)


def _knapsack(table: FloatArray, lower: IntArray, upper: IntArray, budget: int) -> IntArray:
    """Extra units above ``lower`` per job, maximising the sum, within ``budget``."""
    jobs = len(table)
    spans = upper - lower
    order = np.argsort(spans, kind="stable")
    values32 = table.astype(np.float32)  # half the memory traffic; sums exact to ~1e-6
    best = np.zeros(1, dtype=np.float32)  # best[b]: best value using at most b units
    choices: list[IntArray] = []
    reachable = 0
    for i in order:
        span = int(spans[i])
        values = values32[i, lower[i] : lower[i] + span + 1]
        reachable = min(budget, reachable + span)
        padded = np.concatenate(
            [np.full(span, -np.inf, dtype=np.float32), best, np.full(reachable + 1, best[-1])]
        )
        windows = sliding_window_view(padded[: reachable + span + 1], span + 1)
        totals = windows + values[::-1]
        pick = np.argmax(totals, axis=1)
        best = totals[np.arange(reachable + 1), pick]
        choices.append((span - pick).astype(np.int64))
    extra = np.zeros(jobs, dtype=np.int64)
    left = int(np.argmax(best))  # the smallest budget reaching the best value
    for i, choice in zip(order[::-1], choices[::-1], strict=True):
        extra[i] = choice[min(left, len(choice) - 1)]
        left -= int(extra[i])
    return extra


def max_egalitarian_welfare(table: FloatArray, resources: int, box: Box | None = None) -> IntArray:
    """The allocation maximising the smallest utility, the rest placed for the
    largest sum at that minimum (see the module docstring)."""
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
