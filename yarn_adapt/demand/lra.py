"""Latency-critical applications' demand, learned from their own feedback (the
co-location guard's caller of Cilantro, issue 10 caller (a)).

Each latency-critical application (LRA) is a Cilantro job with a latency SLO
(§4.1, §7.1): its *performance* is the fraction of its requests answered within
its latency target (so a P95 target means a goal of 0.95), its *load* the
requests per second it received, and its *allocation* the CPU it had. Every
feedback round (:class:`LraRound`, built by the observe side from the traces and
the CPU measurements) updates

- a :class:`~yarn_adapt.demand.learner.MonotoneLearner` of performance against
  vcores per request/s (the allocation per unit load), fed the fraction within
  target with its binomial standard error (Agresti-Coull: ``p~ = (k+2)/(n+4)``,
  ``sigma = sqrt(p~ (1 - p~) / (n + 4))``, never 0 even when every request made it);
- an :class:`~yarn_adapt.demand.forecast.ArmaForecaster` of the load.

The application's demand (:meth:`LraDemandLearner.snapshot`) is Fig. 6 at the
upper end of the load forecast: ``upper`` is where the performance *lower* bound
reaches the goal (what surely meets the SLO: the guard reserves it), ``lower``
where the upper bound does, ``estimate`` eq. 6's recommendation; each in
vcores, the allocation per unit load times the forecast load. Where the lower
bound never reaches the goal within the learned range, ``upper`` is the whole
range (no evidence that less would do).

**What the application "had"** (:func:`had_vcores`): on each node, the CPU its
processes used plus its share of the node's idle CPU -- the node's capacity less
what batch and every latency-critical application used, split among the
applications on the node in proportion to their use. With one application on a
node that is simply ``capacity - batch``: what batch left it. So more batch on
its nodes is less allocation, and the performance it gets for it is what the
learner learns; the guard's reservation (batch never sees it) is the same
quantity.

**Where the demand is** (:func:`node_shares`): an application's demand is split
over nodes in proportion to the CPU its processes used on each in the last round
(where its work runs is where it needs the CPU); before any CPU was measured,
equally over the nodes its services were traced on.

Fallbacks (§5, "when online feedback is unavailable"): an application with a
**stated demand** (vcores per request/s) and no feedback yet -- no latency
target, no round with enough requests -- gets ``stated x forecast load`` (lower,
estimate and upper alike, source ``stated``); with ``mode = "stated"`` every
application does. A **warm start** (a curve profiled offline, in vcores per
request/s) seeds the learner before its first round (source ``profiled`` until
feedback arrives). The learner's range is ``range_factor`` times the stated
demand, or the first round's allocation per unit load when none is stated.

**Memory** (:mod:`yarn_adapt.demand.memory`): each round also carries the working
set the application's processes held per node (MB, the round's peak); a
:class:`~yarn_adapt.demand.memory.MemoryLearner` per application learns it against
the load, and :meth:`LraDemandLearner.memory_demand` gives its bound at the upper
end of the load forecast, split over nodes by where the memory was held
(:meth:`LraDemandLearner.memory_shares`). Memory is learned with or without a
latency target: it needs only the load.

**Enough samples** (:meth:`LraDemandLearner.rounds`, ``memory_samples``): the
caller decides how many rounds make a learned figure trustworthy (the guard falls
back to observed usage below its ``learn_min_rounds``).

Pure decision code: no I/O; the observe side (``yarn_adapt/colocation/lra.py``)
builds the rounds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from yarn_adapt.demand.forecast import ArmaForecaster
from yarn_adapt.demand.learner import (
    DEFAULT_CONFIDENCE,
    LearnerSettings,
    MonotoneLearner,
    ProfiledCurve,
    demand_bounds,
)
from yarn_adapt.demand.memory import MEMORY_UNIT, MemoryLearner
from yarn_adapt.demand.model import Demand, DemandSnapshot, DemandSource
from yarn_adapt.demand.policies import DEFAULT_BETA

UNIT = "vcores"


class LraMode(StrEnum):
    LEARNED = "learned"  # learn from feedback; the stated demand until there is some
    STATED = "stated"  # §5's fallback for everyone: stated demand x forecast load


@dataclass(frozen=True)
class LraSpec:
    """One latency-critical application as the settings define it: its services
    (as the traces name them), the latency target of its requests and the
    percentile it applies to (``P95 <= target``: a goal of 95 % within target), a
    stated demand in vcores per request/s and a warm-start curve (both optional)."""

    name: str
    services: tuple[str, ...]
    target_ms: float | None = None
    percentile: float = 95.0
    stated: float | None = None
    warm_start: ProfiledCurve | None = None

    def __post_init__(self) -> None:
        if not self.services:
            raise ValueError(f"{self.name}: an application needs at least one service")
        if self.target_ms is not None and not (
            self.target_ms > 0 and math.isfinite(self.target_ms)
        ):
            raise ValueError(f"{self.name}: latency target must be positive, got {self.target_ms}")
        if not 0 < self.percentile < 100:
            raise ValueError(f"{self.name}: percentile must be in (0, 100), got {self.percentile}")
        if self.stated is not None and not (self.stated > 0 and math.isfinite(self.stated)):
            raise ValueError(f"{self.name}: stated demand must be positive, got {self.stated}")

    @property
    def goal(self) -> float:
        """The fraction of requests that must be within the target."""
        return self.percentile / 100.0


@dataclass(frozen=True)
class LraSettings:
    """``range_factor``: the learner covers ``[0, range_factor x`` the stated demand
    (else the first allocation per unit load)``]``; ``slope``: the steepest rise of
    the fraction within target over that range, as a multiple of ``1 / range`` (the
    learner's Lipschitz constant is ``slope / x_max``; generous is safe -- it only
    stops the learner extrapolating below its data); ``min_requests``: fewer
    requests in a round are no feedback; ``confidence``: of the band and of the
    load forecast's interval; ``beta``: eq. 6's weight of the upper demand."""

    mode: LraMode = LraMode.LEARNED
    range_factor: float = 4.0
    slope: float = 200.0
    min_requests: int = 50
    confidence: float = DEFAULT_CONFIDENCE
    beta: float = DEFAULT_BETA

    def __post_init__(self) -> None:
        if not (self.range_factor > 1 and math.isfinite(self.range_factor)):
            raise ValueError(f"range_factor must be above 1, got {self.range_factor}")
        if not (self.slope > 0 and math.isfinite(self.slope)):
            raise ValueError(f"slope must be positive, got {self.slope}")
        if self.min_requests < 1:
            raise ValueError(f"min_requests must be at least 1, got {self.min_requests}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence}")
        if not 0 <= self.beta <= 1:
            raise ValueError(f"beta must be in [0, 1], got {self.beta}")


@dataclass(frozen=True)
class NodeCpu:
    """One node over a round, in vcores: its capacity, what batch (YARN's
    containers) used, and what each latency-critical application's processes used."""

    node_id: str
    capacity: float
    batch: float
    applications: Mapping[str, float]


@dataclass(frozen=True)
class LraRound:
    """One application's feedback over ``seconds``: its requests, how many were
    within its target, the CPU it had (vcores, :func:`had_vcores`), what its
    processes used per node (vcores) and the working set they held per node (MB,
    the round's peak; empty when not measured)."""

    application: str
    seconds: float
    requests: int
    within_target: int
    had: float
    used: Mapping[str, float] = field(default_factory=dict)
    memory_mb: Mapping[str, float] = field(default_factory=dict)

    @property
    def load(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0


# --------------------------------------------------------------------------- rules


def had_vcores(application: str, nodes: Sequence[NodeCpu]) -> float:
    """The CPU ``application`` had over the round (see the module docstring)."""
    total = 0.0
    for node in nodes:
        mine = max(0.0, node.applications.get(application, 0.0))
        if mine <= 0:
            continue
        everyone = sum(max(0.0, used) for used in node.applications.values())
        idle = max(0.0, node.capacity - max(0.0, node.batch) - everyone)
        total += mine + idle * mine / everyone
    return total


def node_shares(used: Mapping[str, float], seen_on: Sequence[str] = ()) -> dict[str, float]:
    """How an application's demand splits over nodes: in proportion to the CPU it
    used on each, else equally over the nodes it was traced on."""
    positive = {node: value for node, value in used.items() if value > 0}
    total = sum(positive.values())
    if total > 0:
        return {node: value / total for node, value in sorted(positive.items())}
    nodes = sorted(set(seen_on))
    return {node: 1.0 / len(nodes) for node in nodes}


def fraction_within(requests: int, within: int) -> tuple[float, float]:
    """The fraction of requests within target and its standard error
    (Agresti-Coull, see the module docstring)."""
    if requests <= 0:
        return math.nan, math.nan
    within = min(max(within, 0), requests)
    adjusted = (within + 2.0) / (requests + 4.0)
    return within / requests, math.sqrt(adjusted * (1.0 - adjusted) / (requests + 4.0))


# --------------------------------------------------------------------------- learner


@dataclass
class _Application:
    spec: LraSpec
    forecaster: ArmaForecaster
    memory: MemoryLearner
    learner: MonotoneLearner | None = None
    rounds: int = 0  # feedback rounds the learner took
    used: dict[str, float] = field(default_factory=dict)
    held_mb: dict[str, float] = field(default_factory=dict)


class LraDemandLearner:
    """Per application a learner and a forecaster; see the module docstring."""

    def __init__(self, specs: Sequence[LraSpec], settings: LraSettings | None = None) -> None:
        self.settings = settings or LraSettings()
        names = [spec.name for spec in specs]
        if len(set(names)) != len(names):
            raise ValueError(f"application names must be unique: {names}")
        self._apps = {
            spec.name: _Application(
                spec,
                ArmaForecaster(confidence=self.settings.confidence),
                MemoryLearner(confidence=self.settings.confidence),
            )
            for spec in specs
        }
        for app in self._apps.values():
            if app.spec.warm_start is not None:
                app.learner = self._learner(app.spec, app.spec.warm_start.x_max)
                app.learner.warm_start(app.spec.warm_start)

    @property
    def specs(self) -> tuple[LraSpec, ...]:
        return tuple(app.spec for app in self._apps.values())

    def observe(self, feedback: LraRound) -> None:
        """One round of one application (unknown applications are ignored)."""
        app = self._apps.get(feedback.application)
        if app is None or not feedback.seconds > 0:
            return
        load = feedback.load
        app.forecaster.observe(load)
        if feedback.used:
            app.used = dict(feedback.used)
        if feedback.memory_mb:
            app.held_mb = dict(feedback.memory_mb)
            app.memory.observe(load, sum(feedback.memory_mb.values()))
        spec = app.spec
        if spec.target_ms is None or feedback.requests < self.settings.min_requests:
            return
        if not (feedback.had > 0 and math.isfinite(feedback.had)):
            return
        x = feedback.had / load
        if app.learner is None:
            app.learner = self._learner(spec, spec.stated or x)
        performance, sigma = fraction_within(feedback.requests, feedback.within_target)
        app.learner.observe(x, performance, sigma)
        app.rounds += 1

    def _learner(self, spec: LraSpec, scale: float) -> MonotoneLearner:
        x_max = self.settings.range_factor * scale
        return MonotoneLearner(
            LearnerSettings(
                x_max=x_max,
                lipschitz=self.settings.slope / x_max,
                ceiling=1.0,
                confidence=self.settings.confidence,
            )
        )

    def demand(self, name: str) -> Demand | None:
        """The application's demand now, or None when nothing is known (no load
        seen, or neither feedback, warm start nor stated demand)."""
        app = self._apps.get(name)
        if app is None:
            return None
        forecast = app.forecaster.forecast()
        if forecast is None:
            return None
        load = max(0.0, forecast.upper)
        spec = app.spec
        learned = self.settings.mode is LraMode.LEARNED and app.learner is not None
        if learned:
            assert app.learner is not None
            bounds = demand_bounds(app.learner, spec.goal)
            estimate = min(
                max(bounds.recommendation(self.settings.beta), bounds.lower), bounds.upper
            )
            source = DemandSource.LEARNED if app.rounds else DemandSource.PROFILED
            return Demand(
                name,
                load,
                estimate * load,
                bounds.lower * load,
                bounds.upper * load,
                source,
                app.rounds,
            )
        if spec.stated is not None:
            value = spec.stated * load
            return Demand(name, load, value, value, value, DemandSource.STATED, app.rounds)
        return None

    def snapshot(self, taken_ms: int) -> DemandSnapshot:
        demands = tuple(d for d in (self.demand(name) for name in self._apps) if d is not None)
        return DemandSnapshot(taken_ms, UNIT, demands)

    def memory_demand(self, name: str) -> Demand | None:
        """The application's working set at the upper end of its load forecast,
        with its bounds (MB); None before enough memory samples or any load."""
        app = self._apps.get(name)
        forecast = app.forecaster.forecast() if app is not None else None
        if app is None or forecast is None:
            return None
        return app.memory.demand(name, max(0.0, forecast.upper))

    def memory_snapshot(self, taken_ms: int) -> DemandSnapshot:
        demands = tuple(
            d for d in (self.memory_demand(name) for name in self._apps) if d is not None
        )
        return DemandSnapshot(taken_ms, MEMORY_UNIT, demands)

    def rounds(self, name: str) -> int:
        """Feedback rounds ``name``'s performance learner took (0 when unknown)."""
        app = self._apps.get(name)
        return app.rounds if app else 0

    def memory_samples(self, name: str) -> int:
        app = self._apps.get(name)
        return app.memory.samples if app else 0

    def memory_shares(self, name: str, seen_on: Sequence[str] = ()) -> dict[str, float]:
        """How ``name``'s memory splits over nodes: by the working set it held on
        each in its last measured round, else as its CPU does."""
        app = self._apps.get(name)
        if app is not None and any(v > 0 for v in app.held_mb.values()):
            return node_shares(app.held_mb)
        return self.shares(name, seen_on)

    def shares(self, name: str, seen_on: Sequence[str] = ()) -> dict[str, float]:
        """How ``name``'s demand splits over nodes (:func:`node_shares`)."""
        app = self._apps.get(name)
        return node_shares(app.used if app else {}, seen_on)

    def learner(self, name: str) -> MonotoneLearner | None:
        app = self._apps.get(name)
        return app.learner if app else None
