"""What demand learning tells the rest of yarn-adapt: a frozen snapshot of each
application's resource demand at its forecast load, with a pessimistic and an
optimistic bound (read by the co-location guard, shown by the configurator)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum


class DemandSource(StrEnum):
    LEARNED = "learned"  # from online feedback (the monotone learner)
    PROFILED = "profiled"  # from a curve profiled offline
    STATED = "stated"  # §5's fallback: the operator's stated demand
    UNKNOWN = "unknown"  # no feedback yet: the bounds are the whole range


@dataclass(frozen=True)
class Demand:
    """One application's demand, in ``unit`` (e.g. vcores), at ``load`` -- the upper
    end of its load forecast. ``lower`` is the least that could meet its SLO (the
    performance upper bound reaches it there), ``upper`` what surely meets it (the
    lower bound does): the pessimistic figure a guard should reserve. ``estimate``
    is the recommendation of Cilantro's eq. 6 (between the two)."""

    application: str
    load: float
    estimate: float
    lower: float
    upper: float
    source: DemandSource = DemandSource.LEARNED
    observations: int = 0

    def __post_init__(self) -> None:
        values = (self.load, self.estimate, self.lower, self.upper)
        if not all(math.isfinite(v) and v >= 0 for v in values):
            raise ValueError(f"{self.application}: a demand needs finite, non-negative figures")
        if not self.lower <= self.estimate <= self.upper:
            raise ValueError(f"{self.application}: need lower <= estimate <= upper, got {values}")

    @property
    def pessimistic(self) -> float:
        """What to reserve when being wrong is costly: the demand's upper bound."""
        return self.upper


@dataclass(frozen=True)
class DemandSnapshot:
    """Every application's demand at one moment (``taken_ms``), in one unit."""

    taken_ms: int
    unit: str
    demands: tuple[Demand, ...] = ()

    def of(self, application: str) -> Demand | None:
        return next((d for d in self.demands if d.application == application), None)

    @property
    def total_upper(self) -> float:
        return sum(d.upper for d in self.demands)

    @property
    def total_estimate(self) -> float:
        return sum(d.estimate for d in self.demands)
