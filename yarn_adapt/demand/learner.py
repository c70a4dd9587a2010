"""Performance models: allocation per unit load -> performance, with confidence bounds.

Cilantro (§3, §6) learns each job's performance ``p(x)`` as a function of
``x = allocation / load`` online, assuming ``p`` is non-decreasing and L-Lipschitz,
with a tree-based binning estimator. :class:`MonotoneLearner` is that estimator:

- The range ``[0, x_max]`` is split into ``2**depth`` fine bins; every dyadic node
  (a bin, two neighbours, four, ... up to the whole range) keeps the
  inverse-variance weighted mean ``m`` of the observations that fell in it
  (``S = sum w_i``, ``w_i = 1/sigma_i**2``; ``m`` has standard deviation
  ``1/sqrt(S)``). Observations are kept in cells, 32 to a bin, with their
  weighted x, so a node also knows how far its data lie from any point.
- A node bounds ``p`` everywhere, not only inside it. Its mean estimates the
  weighted average of ``p(x_i)``; monotonicity and the Lipschitz constant give
  ``p(x_i) >= p(x) - L*(x - x_i)+`` and ``p(x_i) <= p(x) + L*(x_i - x)+``, so

      p(x) <= m + z/sqrt(S) + L * sum w_i (x - x_i)+ / S
      p(x) >= m - z/sqrt(S) - L * sum w_i (x_i - x)+ / S

  -- data on the favourable side cost nothing, the others their weighted mean
  distance (not the node's width). The sums are exact over whole cells and use
  the chord of the convex ``(x - x_i)+`` inside the cell holding ``x``.
- The band at ``x`` is the tightest over the nodes. ``z`` is the normal quantile
  that makes the nodes' intervals hold *simultaneously* with probability
  ``confidence`` (a union bound over the nodes with data of their own: a node
  whose data all lie in one child repeats that child, one without data bounds
  nothing). So the whole band covers the true curve at that rate, it is
  monotone by construction, and it narrows as data arrive.
- Observations beyond ``x_max`` only say that ``p`` below them is no higher.

An update is O(1) (three additions); the nodes are rebuilt lazily, once per batch
of updates, and a question about ``q`` points costs O(nodes with data x q)
vectorised operations.

:class:`ProfiledCurve` is a curve profiled offline (the oracles' truth, the bench's
``--curves`` file, a warm start); :class:`StatedDemand` is §5's fallback for a job
that reports no performance, only a demand: utility rises linearly up to it.

Every model answers :meth:`PerformanceModel.band` (lower, estimate, upper at any
``x``) and the demand questions of §4.1.2 (Fig. 6, eqs. 5-6) through
:func:`demand_bounds`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

DEFAULT_CONFIDENCE = 0.9
"""§6: 'all confidence bounds were computed at the 90% level'."""
CELLS_PER_BIN = 32
"""Observations are kept per cell, 32 to a fine bin: a node's bias bound needs how
far its data lie from a point, which the cells give to 1/32 of a bin."""


@dataclass(frozen=True)
class Band:
    """Lower bound, estimate and upper bound of the performance at some points."""

    lower: FloatArray
    estimate: FloatArray
    upper: FloatArray


@dataclass(frozen=True)
class DemandBounds:
    """Allocation per unit load needed to reach a performance goal: ``lower``
    where the upper bound first reaches it (no less can do), ``upper`` where the
    lower bound first reaches it (surely enough), ``explore`` the point of eq. 5
    (inside the interval, where one allocation teaches most about the demand)."""

    lower: float
    explore: float
    upper: float

    def recommendation(self, beta: float) -> float:
        """Eq. 6 before clipping: ``beta * upper + (1 - beta) * explore``."""
        return beta * self.upper + (1.0 - beta) * self.explore


class PerformanceModel(Protocol):
    @property
    def x_max(self) -> float:
        """The largest allocation per unit load the model speaks about; beyond it
        the performance is taken to stay at its value there."""
        ...

    def band(self, x: ArrayLike) -> Band: ...


# --------------------------------------------------------------------------- learner


@dataclass(frozen=True)
class LearnerSettings:
    """``x_max``: the range of allocation per unit load learned; ``lipschitz``:
    the largest slope of the curve (performance per unit of x); ``depth``: fine
    bins ``2**depth``; ``floor``/``ceiling``: known bounds of the performance (a
    fraction lies in [0, 1]); ``confidence``: the probability that the whole band
    holds."""

    x_max: float
    lipschitz: float
    depth: int = 7
    floor: float = 0.0
    ceiling: float = math.inf
    confidence: float = DEFAULT_CONFIDENCE

    def __post_init__(self) -> None:
        if not (self.x_max > 0 and self.lipschitz > 0 and 1 <= self.depth <= 12):
            raise ValueError(f"invalid learner settings {self}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence}")


@dataclass(frozen=True, eq=False)
class _HeldNodes:
    """The dyadic nodes holding data, ready to bound the curve at any point:
    each node's first fine bin and the one past its last, its weight ``S``, its
    mean and its interval's half width ``z / sqrt(S)``; the cumulative weight and
    weighted x over the fine bins (index ``k``: the bins before ``k``)."""

    first: NDArray[np.int64]
    last: NDArray[np.int64]
    weight: FloatArray
    mean: FloatArray
    spread: FloatArray
    cumulative_weight: FloatArray
    cumulative_x: FloatArray
    beyond_upper: float


@dataclass
class MonotoneLearner:
    """The monotone, Lipschitz-bounded binned learner (see the module docstring)."""

    settings: LearnerSettings
    observations: int = 0
    _weight: FloatArray = field(init=False, repr=False)
    _weighted_sum: FloatArray = field(init=False, repr=False)
    _weighted_x: FloatArray = field(init=False, repr=False)
    _beyond: list[float] = field(init=False, repr=False)
    _held: _HeldNodes | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        cells = CELLS_PER_BIN << self.settings.depth
        self._weight = np.zeros(cells)
        self._weighted_sum = np.zeros(cells)
        self._weighted_x = np.zeros(cells)  # sum of w * x: where in its cell the data lie
        self._beyond = [0.0, 0.0]  # weight, weighted sum of observations past x_max
        self._tail = (1.0 - self.settings.confidence) / 2.0  # per side, shared by the nodes

    @property
    def x_max(self) -> float:
        return self.settings.x_max

    @property
    def bins(self) -> int:
        """The finest nodes (the statistical unit)."""
        return 1 << self.settings.depth

    @property
    def cells(self) -> int:
        """Where observations are kept: ``CELLS_PER_BIN`` per fine bin, so that the
        distance of a node's data to a point is known to a cell's width."""
        return len(self._weight)

    def observe(self, x: float, performance: float, sigma: float) -> None:
        """One feedback round: allocation per unit load ``x``, the performance
        measured, and its standard error ``sigma``. Rounds without a usable
        measurement (x < 0, sigma not positive, values not finite) are ignored."""
        if not (x >= 0 and sigma > 0 and math.isfinite(x + performance + sigma)):
            return
        weight = 1.0 / (sigma * sigma)
        if x >= self.settings.x_max:
            self._beyond[0] += weight
            self._beyond[1] += weight * performance
        else:
            index = min(self.cells - 1, int(x / self.settings.x_max * self.cells))
            self._weight[index] += weight
            self._weighted_sum[index] += weight * performance
            self._weighted_x[index] += weight * x
        self.observations += 1
        self._held = None

    def observe_many(self, xs: ArrayLike, performances: ArrayLike, sigmas: ArrayLike) -> None:
        for x, y, s in zip(np.ravel(xs), np.ravel(performances), np.ravel(sigmas), strict=True):
            self.observe(float(x), float(y), float(s))

    def warm_start(self, curve: ProfiledCurve, sigma_scale: float = 1.0) -> None:
        """Seed the learner with a profiled curve: each profiled point counts as
        one observation whose standard error is half its profiled band (the band
        is ±2 sigma, Fig. 7), times ``sigma_scale`` (>1 trusts the profile less)."""
        half_band = np.maximum((curve.upper - curve.lower) / 4.0, 1e-6) * sigma_scale
        self.observe_many(curve.grid, curve.estimate, half_band)

    def refresh(self) -> None:
        """Prepare the nodes now (otherwise it is done at the first question after
        new feedback)."""
        self._nodes()

    def tested_nodes(self) -> int:
        """How many nodes hold data (the dyadic nodes and the one beyond): the
        intervals the union bound has to make hold together."""
        return len(self._nodes().first) + (1 if self._beyond[0] > 0 else 0)

    def quantile(self) -> float:
        """The normal quantile ``z`` of each node's interval (see :meth:`_nodes`)."""
        return _quantile(self._tail, len(self._nodes().first) + (1 if self._beyond[0] > 0 else 0))

    def band(self, x: ArrayLike) -> Band:
        """The band at ``x``: the tightest of every node's bounds there."""
        points = np.asarray(x, dtype=np.float64)
        lower, upper = self._bounds(points.reshape(-1))
        lower, upper = lower.reshape(points.shape), upper.reshape(points.shape)
        upper = np.minimum(upper, self.settings.ceiling)
        lower = np.minimum(np.maximum(lower, self.settings.floor), upper)
        return Band(lower, _estimate(lower, upper), upper)

    def _bounds(self, points: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Each node's bounds at ``points`` (see the module docstring): the node's
        data ``x_i`` with weights ``w_i`` and mean ``m`` give

            p(x) <= m + z/sqrt(S) + L * sum w_i (x - x_i)+ / S
            p(x) >= m - z/sqrt(S) - L * sum w_i (x_i - x)+ / S

        The sums are exact over the fine bins wholly on one side of ``x``; within
        the bin holding ``x`` they use the chord of the convex ``(x - x_i)+`` over
        the bin (exact at its ends), which needs only the bin's weight and
        weighted x."""
        nodes = self._nodes()
        settings = self.settings
        lower = np.full(len(points), settings.floor, dtype=np.float64)
        upper = np.full(len(points), settings.ceiling, dtype=np.float64)
        upper = np.where(points <= settings.x_max, np.minimum(upper, nodes.beyond_upper), upper)
        if len(nodes.first) == 0:
            return lower, upper
        step = settings.x_max / self.cells
        index = np.clip(np.floor(points / step).astype(np.int64), 0, self.cells)
        inner = index < self.cells  # x lies in a cell (not at or past x_max)
        held = np.minimum(index, self.cells - 1)
        bin_low, bin_high = held * step, (held + 1) * step
        first, last = nodes.first[:, None], nodes.last[:, None]
        cw, cx = nodes.cumulative_weight, nodes.cumulative_x
        left_cut = np.clip(index[None, :], first, last)
        right_cut = np.clip(index[None, :] + 1, first, last)
        w_left = cw[left_cut] - cw[first]
        x_left = cx[left_cut] - cx[first]
        w_right = cw[last] - cw[right_cut]
        x_right = cx[last] - cx[right_cut]
        own = inner[None, :] & (index[None, :] >= first) & (index[None, :] < last)
        w_own = np.where(own, self._weight[held][None, :], 0.0)
        x_own = np.where(own, self._weighted_x[held][None, :], 0.0)
        below = points * w_left - x_left + (points - bin_low) * (bin_high * w_own - x_own) / step
        above = x_right - points * w_right + (bin_high - points) * (x_own - bin_low * w_own) / step
        weight = nodes.weight[:, None]
        lipschitz = settings.lipschitz
        highs = (nodes.mean + nodes.spread)[:, None] + lipschitz * np.maximum(below, 0.0) / weight
        lows = (nodes.mean - nodes.spread)[:, None] - lipschitz * np.maximum(above, 0.0) / weight
        return np.maximum(lower, lows.max(axis=0)), np.minimum(upper, highs.min(axis=0))

    def _nodes(self) -> _HeldNodes:
        """The nodes with data of their own. A node's bounds depend only on the data
        it holds, so a node whose data all lie in one of its children says exactly
        what that child says and is left out; so is a node without data (it
        bounds nothing). The remaining ``K`` intervals hold together with
        probability ``confidence`` when each uses the normal quantile of ``1 - (1
        - confidence) / (2 K)`` (a union bound over the distinct ones)."""
        if self._held is not None:
            return self._held
        cells = self.cells
        firsts, lasts, weights, sums = [], [], [], []
        for depth in range(self.settings.depth + 1):
            width = cells >> depth
            weight = self._weight.reshape(-1, width).sum(axis=1)
            if depth < self.settings.depth:
                halves = self._weight.reshape(-1, 2, width // 2).sum(axis=2)
                known = np.flatnonzero(np.all(halves > 0, axis=1))
            else:
                known = np.flatnonzero(weight > 0)
            firsts.append(known * width)
            lasts.append(known * width + width)
            weights.append(weight[known])
            sums.append(self._weighted_sum.reshape(-1, width).sum(axis=1)[known])
        weight = np.concatenate(weights)
        beyond_weight, beyond_total = self._beyond
        z = _quantile(self._tail, len(weight) + (1 if beyond_weight > 0 else 0))
        beyond = (
            beyond_total / beyond_weight + z / math.sqrt(beyond_weight)
            if beyond_weight > 0
            else math.inf
        )
        self._held = _HeldNodes(
            first=np.concatenate(firsts).astype(np.int64),
            last=np.concatenate(lasts).astype(np.int64),
            weight=weight,
            mean=np.concatenate(sums) / np.where(weight > 0, weight, 1.0),
            spread=z / np.sqrt(weight),
            cumulative_weight=np.concatenate([[0.0], np.cumsum(self._weight)]),
            cumulative_x=np.concatenate([[0.0], np.cumsum(self._weighted_x)]),
            beyond_upper=beyond,
        )
        return self._held


def _quantile(tail: float, intervals: int) -> float:
    return NormalDist().inv_cdf(1.0 - tail / max(1, intervals))


def _estimate(lower: FloatArray, upper: FloatArray) -> FloatArray:
    """The middle of the band; where one side is unbounded, the other side."""
    finite = np.isfinite(upper)
    return np.where(finite, (lower + np.where(finite, upper, 0.0)) / 2.0, lower)


# --------------------------------------------------------------------------- profiles


@dataclass(frozen=True, eq=False)
class ProfiledCurve:
    """A curve profiled offline: grid points of allocation per unit load, the mean
    performance there and its band (Fig. 7). Between grid points the curve is
    interpolated linearly; past the grid it stays at its last value."""

    grid: FloatArray
    estimate: FloatArray
    lower: FloatArray
    upper: FloatArray

    def __post_init__(self) -> None:
        arrays = (self.grid, self.estimate, self.lower, self.upper)
        if len({len(a) for a in arrays}) != 1 or len(self.grid) < 2:
            raise ValueError("a profiled curve needs two or more points, all columns alike")
        if np.any(np.diff(self.grid) <= 0):
            raise ValueError("a profiled curve's grid must increase")
        if any(np.any(np.diff(a) < 0) for a in (self.estimate, self.lower, self.upper)):
            raise ValueError("a profiled curve must be non-decreasing")

    @classmethod
    def of(
        cls,
        grid: Sequence[float] | FloatArray,
        estimate: Sequence[float] | FloatArray,
        lower: Sequence[float] | FloatArray | None = None,
        upper: Sequence[float] | FloatArray | None = None,
    ) -> ProfiledCurve:
        est = np.asarray(estimate, dtype=np.float64)
        return cls(
            np.asarray(grid, dtype=np.float64),
            est,
            est if lower is None else np.asarray(lower, dtype=np.float64),
            est if upper is None else np.asarray(upper, dtype=np.float64),
        )

    @property
    def x_max(self) -> float:
        return float(self.grid[-1])

    def band(self, x: ArrayLike) -> Band:
        points = np.asarray(x, dtype=np.float64)
        return Band(
            np.interp(points, self.grid, self.lower),
            np.interp(points, self.grid, self.estimate),
            np.interp(points, self.grid, self.upper),
        )

    def lipschitz(self) -> float:
        """The steepest slope between grid points."""
        return float(np.max(np.diff(self.estimate) / np.diff(self.grid)))


@dataclass(frozen=True)
class StatedDemand:
    """§5's fallback: a job reports only its demand, ``unit_demand`` resources per
    unit of load, and its utility is taken to rise linearly up to it. The model's
    performance is the SLO times the fraction of the demand met, so with a linear
    utility at that SLO the utility is ``min(1, x / unit_demand)``."""

    unit_demand: float
    slo: float

    @property
    def x_max(self) -> float:
        return self.unit_demand

    def band(self, x: ArrayLike) -> Band:
        points = np.asarray(x, dtype=np.float64)
        value = self.slo * np.clip(points / self.unit_demand, 0.0, 1.0)
        return Band(value, value, value)


# --------------------------------------------------------------------------- demand


def demand_bounds(model: PerformanceModel, goal: float, points: int = 257) -> DemandBounds:
    """Fig. 6 on a grid of ``points`` over ``[0, x_max]``: where the upper and the
    lower bound first reach ``goal``, and eq. 5's exploration point between them,
    ``argmax_x min(ucb(x) - goal, goal - lcb(x))``. A goal the lower bound never
    reaches in range has ``x_max`` as its upper demand (no evidence that more
    would help)."""
    grid = np.linspace(0.0, model.x_max, points)
    band = model.band(grid)
    upper = _first_reaching(grid, band.lower, goal)
    lower = min(_first_reaching(grid, band.upper, goal), upper)
    inside = (grid >= lower) & (grid <= upper)
    score = np.minimum(band.upper - goal, goal - band.lower)
    score = np.where(inside, score, -np.inf)
    explore = float(grid[int(np.argmax(score))]) if np.any(inside) else upper
    return DemandBounds(lower, explore, upper)


def _first_reaching(grid: FloatArray, values: FloatArray, goal: float) -> float:
    reached = np.flatnonzero(values >= goal)
    return float(grid[reached[0]]) if len(reached) else float(grid[-1])


def point_demand(model: PerformanceModel, goal: float, points: int = 1025) -> float:
    """Where the estimate first reaches ``goal`` (``x_max`` if it never does)."""
    grid = np.linspace(0.0, model.x_max, points)
    return _first_reaching(grid, model.band(grid).estimate, goal)
