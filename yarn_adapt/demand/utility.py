"""SLO-clipped utilities (Cilantro §4.1, Fig. 4) and the three cluster metrics.

A job's utility is a non-decreasing function of its performance, 1 at or above the
SLO. Below the SLO the normalised performance ``v = p / SLO`` (in [0, 1]) becomes
the utility through one of three shapes:

- ``linear``: ``v`` -- utility falls in proportion to the SLO violation;
- ``quadratic``: ``v**2`` -- small violations already cost a lot (external SLAs);
- ``sqrt``: ``v**0.5`` -- small violations hardly matter (soft, internal SLOs).

The metrics (eqs. 1-3 and 8): social welfare ``W_S`` (mean utility), egalitarian
welfare ``W_E`` (minimum utility), NJC fairness ``F_NJC`` (the worst ratio of a job's
utility to what its equal share ``R/n`` would give it) and useful resource usage
(``sum min(a_j, d_j)``, normalised by the cluster).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]


class UtilityShape(StrEnum):
    LINEAR = "linear"
    QUADRATIC = "quadratic"
    SQRT = "sqrt"


@dataclass(frozen=True)
class Utility:
    """``slo``: the performance at which the job is fully satisfied (a fraction of
    queries under a latency bound, a throughput); ``shape``: how the utility falls
    below it."""

    slo: float
    shape: UtilityShape = UtilityShape.LINEAR

    def __post_init__(self) -> None:
        if not self.slo > 0:
            raise ValueError(f"an SLO must be positive, got {self.slo!r}")

    def __call__(self, performance: ArrayLike) -> FloatArray:
        normalised = np.clip(np.asarray(performance, dtype=np.float64) / self.slo, 0.0, 1.0)
        if self.shape is UtilityShape.QUADRATIC:
            return normalised * normalised
        if self.shape is UtilityShape.SQRT:
            return np.sqrt(normalised)
        return normalised

    def of(self, performance: float) -> float:
        return float(self(performance))

    def describe(self) -> str:
        return f"{self.shape} up to SLO {self.slo:g}"


@dataclass(frozen=True)
class QueueObjective:
    """A queue's SLO: ``fraction`` of its applications finish within ``latency_s``;
    below that its utility falls with ``shape``. ``stated_vcores``: §5's fallback,
    the operator states the queue's demand instead of it being learned; its
    utility then rises linearly up to that demand."""

    queue: str
    latency_s: float
    fraction: float = 0.9
    shape: UtilityShape = UtilityShape.LINEAR
    stated_vcores: float | None = None

    @property
    def utility(self) -> Utility:
        if self.stated_vcores is not None:
            return Utility(self.fraction, UtilityShape.LINEAR)
        return Utility(self.fraction, self.shape)


def social_welfare(utilities: Sequence[float] | FloatArray) -> float:
    """Eq. 1: the mean utility."""
    return float(np.mean(np.asarray(utilities, dtype=np.float64)))


def egalitarian_welfare(utilities: Sequence[float] | FloatArray) -> float:
    """Eq. 2: the smallest utility."""
    return float(np.min(np.asarray(utilities, dtype=np.float64)))


def njc_fairness(
    utilities: Sequence[float] | FloatArray, fair_share_utilities: Sequence[float] | FloatArray
) -> float:
    """Eq. 3: ``min_j u_j(a_j) / u_j(R/n)``. A job whose equal share gives it no
    utility cannot complain (ratio 1); the metric's maximum is 1."""
    got = np.asarray(utilities, dtype=np.float64)
    fair = np.asarray(fair_share_utilities, dtype=np.float64)
    ratios = np.where(fair > 0, got / np.where(fair > 0, fair, 1.0), 1.0)
    return float(min(1.0, np.min(ratios)))


def useful_usage(
    allocations: Sequence[float] | FloatArray, demands: Sequence[float] | FloatArray, total: float
) -> float:
    """Eq. 8 over the cluster: resources given up to each job's demand (more does
    not raise its utility), as a fraction of ``total``."""
    given = np.minimum(np.asarray(allocations, dtype=np.float64), np.asarray(demands, dtype=float))
    return float(np.sum(given) / total)
