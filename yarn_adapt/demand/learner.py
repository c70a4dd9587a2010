"""Performance models: allocation per unit load -> performance, with confidence bounds.

Cilantro (§3, §6) learns each job's performance ``p(x)`` as a function of
``x = allocation / load`` online, assuming ``p`` is non-decreasing and L-Lipschitz,
with a tree-based binning estimator. :class:`MonotoneLearner` is that estimator:

- The range ``[0, x_max]`` is split into ``2**depth`` fine bins; every dyadic node
  (a bin, two neighbours, four, ... up to the whole range) keeps the
  inverse-variance weighted mean of the observations that fell in it
  (``S = sum 1/sigma**2``, mean ``sum (y/sigma**2) / S``, whose standard deviation
  is ``1/sqrt(S)``).
- A node ``[l, r]`` with mean ``m`` bounds ``p`` everywhere, not only inside it:
  monotonicity and the Lipschitz constant give ``p(x) >= m - L*(r - x)+`` and
  ``p(x) <= m + L*(x - l)+``, where ``l`` and ``r`` are the smallest and largest
  allocation per unit load observed in the node (at most its ends). Left of ``x``
  a node costs nothing for the lower bound, right of ``x`` nothing for the upper
  one; inside, the bias is at most ``L`` times the spread of its data. The band
  at ``x`` is the tightest over all nodes, each widened by ``z/sqrt(S)`` where
  ``z`` is the normal quantile that makes the nodes' intervals hold
  *simultaneously* with probability ``confidence`` (a union bound over the
  nodes). So the whole band covers the true curve at that rate, it is monotone by
  construction, and it narrows as data arrive: near data, a fine
  node's small bias wins; far from data, a coarse node or the Lipschitz slope does.
- Observations beyond ``x_max`` only say that ``p`` below them is no higher.

An update is O(1) (two additions); the band is recomputed lazily, once per batch
of updates, in O(nodes x bins) vectorised operations.

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


@dataclass
class MonotoneLearner:
    """The monotone, Lipschitz-bounded binned learner (see the module docstring)."""

    settings: LearnerSettings
    observations: int = 0
    _weight: FloatArray = field(init=False, repr=False)
    _weighted_sum: FloatArray = field(init=False, repr=False)
    _beyond: list[float] = field(init=False, repr=False)
    _edges_band: tuple[FloatArray, FloatArray] | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        bins = 2**self.settings.depth
        self._weight = np.zeros(bins)
        self._weighted_sum = np.zeros(bins)
        self._lowest = np.full(bins, np.inf)  # smallest x observed in each bin
        self._highest = np.full(bins, -np.inf)  # largest x observed in each bin
        self._beyond = [0.0, 0.0]  # weight, weighted sum of observations past x_max
        nodes = 2 ** (self.settings.depth + 1)  # every dyadic node, plus the one beyond
        tail = (1.0 - self.settings.confidence) / (2.0 * nodes)
        self._z = NormalDist().inv_cdf(1.0 - tail)

    @property
    def x_max(self) -> float:
        return self.settings.x_max

    @property
    def bins(self) -> int:
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
            index = min(self.bins - 1, int(x / self.settings.x_max * self.bins))
            self._weight[index] += weight
            self._weighted_sum[index] += weight * performance
            self._lowest[index] = min(self._lowest[index], x)
            self._highest[index] = max(self._highest[index], x)
        self.observations += 1
        self._edges_band = None

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
        """Recompute the band now (otherwise it is recomputed at the first
        question after new feedback)."""
        self._band_at_edges()

    def band(self, x: ArrayLike) -> Band:
        """The band at ``x``: the lower bound of the fine-bin edge left of ``x`` and
        the upper bound of the edge right of it (both valid by monotonicity)."""
        lower_edges, upper_edges = self._band_at_edges()
        points = np.asarray(x, dtype=np.float64)
        step = self.settings.x_max / self.bins
        left = np.clip(np.floor(points / step).astype(np.int64), 0, self.bins)
        right = np.clip(np.ceil(points / step).astype(np.int64), 0, self.bins)
        lower = lower_edges[left]
        upper = upper_edges[right]
        past = points > self.settings.x_max
        if np.any(past):
            slope = upper_edges[-1] + self.settings.lipschitz * (points - self.settings.x_max)
            upper = np.where(past, np.minimum(slope, self._beyond_upper()), upper)
        upper = np.minimum(upper, self.settings.ceiling)
        lower = np.minimum(np.maximum(lower, self.settings.floor), upper)
        return Band(lower, _estimate(lower, upper), upper)

    def _beyond_upper(self) -> float:
        weight, total = self._beyond
        if weight <= 0:
            return math.inf
        return total / weight + self._z / math.sqrt(weight)

    def _band_at_edges(self) -> tuple[FloatArray, FloatArray]:
        if self._edges_band is None:
            self._edges_band = self._compute_edges_band()
        return self._edges_band

    def _compute_edges_band(self) -> tuple[FloatArray, FloatArray]:
        settings = self.settings
        edges = np.linspace(0.0, settings.x_max, self.bins + 1)
        lower = np.full(self.bins + 1, settings.floor, dtype=np.float64)
        upper = np.full(self.bins + 1, settings.ceiling, dtype=np.float64)
        upper = np.minimum(upper, self._beyond_upper())
        for depth in range(settings.depth + 1):
            nodes = 2**depth
            weight = self._weight.reshape(nodes, -1).sum(axis=1)
            known = weight > 0
            if not np.any(known):
                continue
            total = self._weighted_sum.reshape(nodes, -1).sum(axis=1)
            mean = total[known] / weight[known]
            spread = self._z / np.sqrt(weight[known])
            left = self._lowest.reshape(nodes, -1).min(axis=1)[known]
            right = self._highest.reshape(nodes, -1).max(axis=1)[known]
            below = mean - spread
            above = mean + spread
            lipschitz = settings.lipschitz
            lower_bounds = below[:, None] - lipschitz * np.maximum(right[:, None] - edges, 0.0)
            upper_bounds = above[:, None] + lipschitz * np.maximum(edges - left[:, None], 0.0)
            lower = np.maximum(lower, lower_bounds.max(axis=0))
            upper = np.minimum(upper, upper_bounds.min(axis=0))
        return lower, upper


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
