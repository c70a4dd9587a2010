"""A latency-critical application's memory demand, learned from its working set.

Memory is not Cilantro's fungible resource: a service given less CPU than it needs
gets slower, one given less memory than its working set is killed or swaps. So the
memory learner does not learn a performance curve; it learns how the working set
grows with the load and reserves an upper bound of it at the forecast load.

Every feedback round gives one sample: the load (requests per second) and the
working set the application's processes held (MB, the round's peak, summed over its
nodes). Over the last ``window`` samples :class:`MemoryLearner` fits

    working_set = base + slope x load,   slope >= 0

by least squares (a negative fitted slope is taken as 0: the mean). At a load ``L``
its demand (:meth:`MemoryLearner.demand`, a :class:`~yarn_adapt.demand.model.Demand`
in MB) is

- ``estimate``: the fit at ``L``;
- ``upper``: the one-sided prediction bound at ``confidence``,
  ``fit + z x sigma x sqrt(1 + 1/n + (L - mean load)^2 / Sxx)`` (``sigma`` the
  residuals' standard deviation), and never below the largest working set in the
  window: a service is never left less memory than it has been seen to hold;
- ``lower``: the fit less the same margin, at least 0.

Fewer than ``MIN_SAMPLES`` samples give no demand (the caller falls back). Pure
code: no I/O.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from statistics import NormalDist

from yarn_adapt.demand.learner import DEFAULT_CONFIDENCE
from yarn_adapt.demand.model import Demand, DemandSource

MEMORY_UNIT = "MB"
MIN_SAMPLES = 2
DEFAULT_WINDOW = 30


@dataclass(frozen=True)
class MemorySample:
    """One round: the load (requests/s) and the working set (MB) at it."""

    load: float
    working_set_mb: float


@dataclass(frozen=True)
class MemoryFit:
    """``working_set = base + slope x load`` over ``samples`` rounds, with the
    residuals' standard deviation and what the prediction bound needs."""

    base: float
    slope: float
    sigma: float
    samples: int
    mean_load: float
    spread: float  # sum of (load - mean load)^2
    peak_mb: float

    def at(self, load: float) -> float:
        return self.base + self.slope * load

    def margin(self, load: float, z: float) -> float:
        """``z`` standard deviations of a new round's working set at ``load``."""
        leverage = (load - self.mean_load) ** 2 / self.spread if self.spread > 0 else 0.0
        return z * self.sigma * math.sqrt(1.0 + 1.0 / self.samples + leverage)


def fit_working_set(samples: tuple[MemorySample, ...]) -> MemoryFit | None:
    """The least-squares line through ``samples`` (slope at least 0), or None
    with fewer than :data:`MIN_SAMPLES`."""
    if len(samples) < MIN_SAMPLES:
        return None
    loads = [s.load for s in samples]
    sets = [s.working_set_mb for s in samples]
    n = len(samples)
    mean_load, mean_set = sum(loads) / n, sum(sets) / n
    spread = sum((x - mean_load) ** 2 for x in loads)
    covariance = sum((x - mean_load) * (y - mean_set) for x, y in zip(loads, sets, strict=True))
    slope = max(0.0, covariance / spread) if spread > 0 else 0.0
    base = mean_set - slope * mean_load
    residuals = [y - (base + slope * x) for x, y in zip(loads, sets, strict=True)]
    freedom = max(1, n - 2)
    sigma = math.sqrt(sum(r * r for r in residuals) / freedom)
    return MemoryFit(base, slope, sigma, n, mean_load, spread, max(sets))


class MemoryLearner:
    """One application's working set against its load (see the module docstring)."""

    def __init__(
        self, *, window: int = DEFAULT_WINDOW, confidence: float = DEFAULT_CONFIDENCE
    ) -> None:
        if window < MIN_SAMPLES:
            raise ValueError(f"window must be at least {MIN_SAMPLES}, got {window}")
        if not 0 < confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {confidence}")
        self._samples: deque[MemorySample] = deque(maxlen=window)
        self._z = NormalDist().inv_cdf(confidence)

    @property
    def samples(self) -> int:
        return len(self._samples)

    def observe(self, load: float, working_set_mb: float) -> None:
        """One round's sample; a figure that is not finite or is negative is no sample."""
        values = (load, working_set_mb)
        if all(math.isfinite(v) and v >= 0 for v in values):
            self._samples.append(MemorySample(load, working_set_mb))

    def fit(self) -> MemoryFit | None:
        return fit_working_set(tuple(self._samples))

    def demand(self, application: str, load: float) -> Demand | None:
        """The working set at ``load`` with its bounds, in MB; None with too few samples."""
        fit = self.fit()
        if fit is None or not (math.isfinite(load) and load >= 0):
            return None
        margin = fit.margin(load, self._z)
        upper = max(fit.at(load) + margin, fit.peak_mb)
        lower = min(max(0.0, fit.at(load) - margin), upper)
        estimate = min(max(fit.at(load), lower), upper)
        return Demand(application, load, estimate, lower, upper, DemandSource.LEARNED, fit.samples)
