"""The §7.1 multi-tenant environment, simulated: 1,000 CPUs shared by 20 jobs
whose loads follow a query-arrival trace, each with a profiled performance curve.

Jobs (Table 3): ten database jobs (``db01``-``db03`` of type DB-0, ``db11``-``db17``
of type DB-1; P90/P95/P99 latency SLOs of 2 s, i.e. performance = the fraction of
queries under 2 s), three prediction-serving jobs (``prs1``-``prs3``) and seven
ML-training jobs (``mlt1``-``mlt7``, throughput SLOs of 400-500 QPS), each with the
paper's utility shape. A job's type is its name's prefix (``db0``, ``db1``,
``prs``, ``mlt``); a :class:`JobType` carries the type's curve (performance against
allocation per unit load, with its noise band), its median and 99th-percentile
load and the Lipschitz constant its learner assumes.

Loads: the trace (one arrival count per minute) mapped onto each type's load
range by the affine map that sends the trace's median to ``load_p50`` and its 99th
percentile to ``load_p99`` (a type with equal quantiles, ML training, has a
constant load); job ``k`` reads the trace from minute ``60*k`` on (so the jobs'
peaks do not all coincide) and each round's load is the mean over its minutes.
Before the first round the forecasters see ``warmup_rounds`` of history.

A round (2 minutes, as in the paper): each job's load forecast (the upper end of
the 90 % ARMA interval) goes to the policy, the policy allocates, each job then
runs under its true load: its performance is its curve at ``allocation / load``,
and it reports that plus Gaussian noise whose standard deviation is a quarter of
the curve's band there (the band is ±2 sigma, Fig. 7). Metrics use the true,
noiseless performance. Every policy starts from the equal split (50 CPUs each)
and then moves at most ``B`` per job and round where it applies the limit.

Nothing here reads files: the curves and the trace come in as data.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from yarn_adapt.demand.forecast import ArmaForecaster
from yarn_adapt.demand.learner import (
    LearnerSettings,
    MonotoneLearner,
    ProfiledCurve,
    point_demand,
)
from yarn_adapt.demand.policies import (
    DEFAULT_STEP,
    Feedback,
    Policy,
    RoundContext,
    Tenant,
    equal_split,
)
from yarn_adapt.demand.utility import (
    Utility,
    UtilityShape,
    egalitarian_welfare,
    njc_fairness,
    social_welfare,
    useful_usage,
)

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

JOB_TYPES = ("db0", "db1", "prs", "mlt")
MINUTES_PER_ROUND = 2
MIN_SIGMA = 1e-3


@dataclass(frozen=True, eq=False)
class JobType:
    name: str
    curve: ProfiledCurve
    load_p50: float
    load_p99: float
    lipschitz: float

    @property
    def is_fraction(self) -> bool:
        """Latency-SLO types report a fraction of queries (at most 1)."""
        return float(self.curve.estimate.max()) <= 1.0

    def learner(self, confidence: float) -> MonotoneLearner:
        ceiling = 1.0 if self.is_fraction else math.inf
        return MonotoneLearner(
            LearnerSettings(
                x_max=self.curve.x_max,
                lipschitz=self.lipschitz,
                ceiling=ceiling,
                confidence=confidence,
            )
        )


@dataclass(frozen=True)
class ClusterJob:
    name: str
    kind: str
    utility: Utility


def job_type_of(name: str) -> str:
    """``db0*`` -> ``db0``, ``db1*`` -> ``db1``, ``mlt*`` -> ``mlt``, ``prs*`` -> ``prs``."""
    for kind in JOB_TYPES:
        if name.startswith(kind):
            return kind
    raise ValueError(f"no job type for {name!r} (known prefixes: {', '.join(JOB_TYPES)})")


def _job(name: str, slo: float, shape: str) -> ClusterJob:
    return ClusterJob(name, job_type_of(name), Utility(slo, UtilityShape(shape)))


PAPER_JOBS: tuple[ClusterJob, ...] = (
    _job("db01", 0.9, "linear"),
    _job("db02", 0.9, "linear"),
    _job("db03", 0.95, "sqrt"),
    _job("db11", 0.9, "linear"),
    _job("db12", 0.9, "quadratic"),
    _job("db13", 0.95, "quadratic"),
    _job("db14", 0.95, "linear"),
    _job("db15", 0.95, "quadratic"),
    _job("db16", 0.99, "quadratic"),
    _job("db17", 0.99, "sqrt"),
    _job("prs1", 0.9, "linear"),
    _job("prs2", 0.9, "sqrt"),
    _job("prs3", 0.95, "sqrt"),
    _job("mlt1", 400.0, "sqrt"),
    _job("mlt2", 400.0, "sqrt"),
    _job("mlt3", 450.0, "linear"),
    _job("mlt4", 450.0, "linear"),
    _job("mlt5", 500.0, "quadratic"),
    _job("mlt6", 500.0, "quadratic"),
    _job("mlt7", 500.0, "quadratic"),
)
"""Table 3 of the paper."""


# --------------------------------------------------------------------------- synthetic curves


def synthetic_job_types() -> dict[str, JobType]:
    """Curves shaped after the paper's profiles (Fig. 7) and the public artifact's
    ranges, floors and loads: performance (the fraction of queries under 2 s) of
    DB-0, DB-1 and prediction serving rises from the artifact's floor through a
    few anchor points (piecewise linear, 200 grid points denser at small
    allocations); ML training's throughput saturates exponentially in CPUs (load
    1) from 58.9 to 497 QPS at 150 CPUs. The anchors put the 20 jobs' total demand
    at the median load near the paper's 1,637 CPUs (the bench reports it), with
    DB-0 needing less than an equal share and DB-1 far more."""
    db0 = [(0.0, 0.3), (0.5, 0.8), (1.0, 0.9), (1.5, 0.95), (2.5, 0.99), (8.0, 1.0)]
    db1 = [
        (0.0, 0.245),
        (0.6, 0.27),
        (1.19, 0.45),
        (1.8, 0.9),
        (2.3, 0.95),
        (3.2, 0.99),
        (4.0, 1.0),
    ]
    prs = [(0.0, 0.387), (0.5, 0.6), (1.0, 0.9), (1.6, 0.95), (2.5, 0.99), (4.2, 1.0)]
    return {
        "db0": _fraction_type("db0", 8.0, db0, p50=20.0, p99=23.5),
        "db1": _fraction_type("db1", 4.0, db1, p50=42.2, p99=49.6),
        "prs": _fraction_type("prs", 4.2, prs, p50=40.4, p99=47.5),
        "mlt": _throughput_type(),
    }


def _fraction_type(
    name: str, high: float, anchors: Sequence[tuple[float, float]], *, p50: float, p99: float
) -> JobType:
    grid = np.unique(np.concatenate([[0.0], np.geomspace(high / 200.0, high, 199)]))
    xs, ys = zip(*anchors, strict=True)
    estimate = np.interp(grid, xs, ys)
    sigma = 0.01 + 0.15 * estimate * (1.0 - estimate)
    curve = ProfiledCurve.of(
        grid, estimate, np.maximum.accumulate(np.clip(estimate - 2 * sigma, 0, 1)),
        np.maximum.accumulate(np.clip(estimate + 2 * sigma, 0, 1)),
    )  # fmt: skip
    return JobType(name, curve, p50, p99, 2.0 * curve.lipschitz())


def _throughput_type() -> JobType:
    grid = np.linspace(0.0, 150.0, 200)
    estimate = 58.9 + 491.7 * (1.0 - np.exp(-grid / 67.6))
    sigma = np.full_like(grid, 12.0)
    curve = ProfiledCurve.of(grid, estimate, estimate - 2 * sigma, estimate + 2 * sigma)
    return JobType("mlt", curve, 1.0, 1.0, 2.0 * curve.lipschitz())


# --------------------------------------------------------------------------- loads


def job_loads(trace: FloatArray, kind: JobType, offset_minutes: int, rounds: int) -> FloatArray:
    """The job's load in each of ``rounds`` rounds (see the module docstring)."""
    values = np.asarray(trace, dtype=np.float64)
    median, p99 = np.percentile(values, [50, 99])
    if kind.load_p99 <= kind.load_p50 or p99 <= median:
        return np.full(rounds, kind.load_p50)
    scale = (kind.load_p99 - kind.load_p50) / (p99 - median)
    minutes = offset_minutes + np.arange(rounds * MINUTES_PER_ROUND)
    per_minute = kind.load_p50 + (values[minutes % len(values)] - median) * scale
    per_round = per_minute.reshape(rounds, MINUTES_PER_ROUND).mean(axis=1)
    floored: FloatArray = np.maximum(per_round, 0.01 * kind.load_p50)
    return floored


# --------------------------------------------------------------------------- the environment


@dataclass(frozen=True, eq=False)
class Environment:
    resources: int
    jobs: tuple[ClusterJob, ...]
    types: Mapping[str, JobType]
    loads: FloatArray  # (jobs, warmup + rounds)
    warmup_rounds: int
    max_step: int | None = DEFAULT_STEP
    confidence: float = 0.9

    @property
    def rounds(self) -> int:
        return int(self.loads.shape[1]) - self.warmup_rounds

    @property
    def tenants(self) -> tuple[Tenant, ...]:
        return tuple(Tenant(job.name, job.utility) for job in self.jobs)

    def curves(self) -> list[ProfiledCurve]:
        return [self.types[job.kind].curve for job in self.jobs]

    def learners(self) -> list[MonotoneLearner]:
        return [self.types[job.kind].learner(self.confidence) for job in self.jobs]

    def true_load(self, round_index: int) -> FloatArray:
        return self.loads[:, self.warmup_rounds + round_index]

    def forecasts(self) -> FloatArray:
        """(jobs, rounds): each round's forecast load (the interval's upper end)
        from the loads of the rounds before it, warm-up included."""
        result = np.empty((len(self.jobs), self.rounds))
        for i in range(len(self.jobs)):
            forecaster = ArmaForecaster(confidence=self.confidence)
            for value in self.loads[i, : self.warmup_rounds]:
                forecaster.observe(float(value))
            for r in range(self.rounds):
                forecast = forecaster.forecast()
                result[i, r] = forecast.upper if forecast else self.loads[i, self.warmup_rounds]
                forecaster.observe(float(self.loads[i, self.warmup_rounds + r]))
        return result

    def performance(self, allocation: IntArray, loads: FloatArray) -> FloatArray:
        return np.array(
            [
                float(self.types[job.kind].curve.band(a / load).estimate)
                for job, a, load in zip(self.jobs, allocation, loads, strict=True)
            ]
        )

    def noise_sigma(self, allocation: IntArray, loads: FloatArray) -> FloatArray:
        sigmas = []
        for job, a, load in zip(self.jobs, allocation, loads, strict=True):
            band = self.types[job.kind].curve.band(a / load)
            sigmas.append(max(MIN_SIGMA, float(band.upper - band.lower) / 4.0))
        return np.array(sigmas)

    def demands(self, loads: FloatArray) -> FloatArray:
        """Each job's true demand at ``loads``: the allocation where its utility
        stops rising (its SLO point, or the end of its curve when the SLO is out
        of reach)."""
        return np.array(
            [
                point_demand(self.types[job.kind].curve, job.utility.slo) * load
                for job, load in zip(self.jobs, loads, strict=True)
            ]
        )


def build_environment(
    trace: Sequence[float] | FloatArray,
    types: Mapping[str, JobType] | None = None,
    *,
    jobs: Sequence[ClusterJob] = PAPER_JOBS,
    resources: int = 1000,
    rounds: int = 180,
    warmup_rounds: int = 30,
    max_step: int | None = DEFAULT_STEP,
    confidence: float = 0.9,
) -> Environment:
    types = dict(types or synthetic_job_types())
    values = np.asarray(trace, dtype=np.float64)
    loads = np.vstack(
        [
            job_loads(values, types[job.kind], 60 * k, warmup_rounds + rounds)
            for k, job in enumerate(jobs)
        ]
    )
    return Environment(resources, tuple(jobs), types, loads, warmup_rounds, max_step, confidence)


# --------------------------------------------------------------------------- running a policy


@dataclass
class RoundMetrics:
    social: float
    egalitarian: float
    njc: float
    usage: float
    utilities: FloatArray


@dataclass
class PolicyRun:
    name: str
    rounds: list[RoundMetrics] = field(default_factory=list)
    allocate_ms: list[float] = field(default_factory=list)  # wall time
    allocate_cpu_ms: list[float] = field(default_factory=list)  # CPU time of the process
    allocations: list[IntArray] = field(default_factory=list)

    def mean(self, metric: str) -> float:
        return float(np.mean([getattr(r, metric) for r in self.rounds]))

    def mean_utility(self, job: int) -> float:
        return float(np.mean([r.utilities[job] for r in self.rounds]))


def run_policy(
    env: Environment,
    policy: Policy,
    forecasts: FloatArray,
    rng: np.random.Generator,
    clock: Callable[[], float] = time.perf_counter,
    cpu_clock: Callable[[], float] = time.process_time,
) -> PolicyRun:
    """Run ``policy`` for the environment's rounds (see the module docstring)."""
    run = PolicyRun(policy.name)
    tenants = env.tenants
    previous: IntArray | None = None
    for r in range(env.rounds):
        context = RoundContext(env.resources, tenants, forecasts[:, r], previous, env.max_step, r)
        if previous is None:
            allocation = equal_split(env.resources, [t.weight for t in tenants])
        else:
            began, began_cpu = clock(), cpu_clock()
            allocation = np.asarray(policy.allocate(context), dtype=np.int64)
            run.allocate_ms.append((clock() - began) * 1000.0)
            run.allocate_cpu_ms.append((cpu_clock() - began_cpu) * 1000.0)
        _check_allocation(allocation, env.resources, policy.name)
        loads = env.true_load(r)
        truth = env.performance(allocation, loads)
        run.rounds.append(round_metrics(env, allocation, loads, truth))
        run.allocations.append(allocation)
        policy.observe(context, _feedback(env, allocation, loads, truth, rng))
        previous = allocation
    return run


def _check_allocation(allocation: IntArray, resources: int, name: str) -> None:
    if np.any(allocation < 0) or int(allocation.sum()) > resources:
        raise AssertionError(f"{name} allocated {allocation.tolist()} of {resources}")


def _feedback(
    env: Environment,
    allocation: IntArray,
    loads: FloatArray,
    truth: FloatArray,
    rng: np.random.Generator,
) -> list[Feedback]:
    sigma = env.noise_sigma(allocation, loads)
    measured = truth + rng.normal(0.0, sigma)
    feedback = []
    for job, a, load, value, s in zip(env.jobs, allocation, loads, measured, sigma, strict=True):
        if env.types[job.kind].is_fraction:
            value = min(1.0, max(0.0, float(value)))
        feedback.append(Feedback(int(a), float(load), float(value), float(s)))
    return feedback


def round_metrics(
    env: Environment, allocation: IntArray, loads: FloatArray, truth: FloatArray
) -> RoundMetrics:
    utilities = np.array([job.utility.of(p) for job, p in zip(env.jobs, truth, strict=True)])
    fair = np.full(len(env.jobs), env.resources / len(env.jobs))
    fair_truth = np.array(
        [
            float(env.types[job.kind].curve.band(f / load).estimate)
            for job, f, load in zip(env.jobs, fair, loads, strict=True)
        ]
    )
    fair_utilities = np.array(
        [job.utility.of(p) for job, p in zip(env.jobs, fair_truth, strict=True)]
    )
    return RoundMetrics(
        social_welfare(utilities),
        egalitarian_welfare(utilities),
        njc_fairness(utilities, fair_utilities),
        useful_usage(allocation.astype(np.float64), env.demands(loads), env.resources),
        utilities,
    )
