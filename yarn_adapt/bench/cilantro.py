"""``yarn-adapt bench cilantro``: Cilantro §7.1 reproduced in simulation.

The environment is :mod:`yarn_adapt.demand.environment`: 1,000 CPUs, the 20 jobs
of Table 3 with the paper's SLOs and utility shapes, loads from the bundled
twitter trace (``--trace`` takes any file of one arrival rate per line), 180
two-minute rounds (6 simulated hours; ``--quick``: 30), each policy starting from
the equal split. Curves are synthesised from the paper's description unless
``--curves FILE.csv`` (or ``--set curves=FILE``) gives them (format:
:mod:`yarn_adapt.demand.curves`).

Per policy, time-averaged over the rounds: social welfare, egalitarian welfare,
NJC fairness and useful resource usage (eqs. 1, 2, 3, 8), and the wall time of
each allocation (``alloc_ms`` mean, with median and worst round) beside its CPU
time (``alloc_cpu_ms``...). The policies are
the classes the service's Cilantro proposer uses (:mod:`yarn_adapt.demand.policies`).

Also reported:

- ``njc_vs_oracle``, ``sw_vs_oracle``, ``ew_vs_oracle``: each Cilantro policy over
  its oracle, on its own metric (targets >= 0.98);
- ``solver_ms`` / ``solver_cpu_ms``: the SW and EW solvers' wall and CPU time on
  the whole problem without the step limit (20 jobs, 1,000 CPUs, every round's
  true curves at its forecast load; the targets are judged on CPU time, which a
  shared machine's load does not inflate), and
  ``solver_vs_evolutionary``: their welfare over the paper's evolutionary
  algorithm's (appendix A.4, ``--set evo_iterations=4000``) on the same problems;
- ``model_update_ms``: one learner update per job (the feedback, then the new band);
- ``strategy_proofness``: §7.1's check -- one job (``--set liar=db16``) reports its
  performance x2 or x1/2 under Cilantro-NJC, -SW and -EW; its true time-averaged
  utility each way, and whether lying paid.

Settings (``--set``): ``rounds``, ``resources``, ``step`` (B), ``beta``,
``confidence``, ``liar``, ``strategy=yes|no``, ``evo_iterations``,
``solver_problems``, ``curves``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from yarn_adapt.bench import BenchOptions, BenchResult, benchmark
from yarn_adapt.demand.curves import load_arrivals, load_curves
from yarn_adapt.demand.environment import (
    Environment,
    PolicyRun,
    build_environment,
    run_policy,
    synthetic_job_types,
)
from yarn_adapt.demand.policies import (
    DEFAULT_BETA,
    DEFAULT_STEP,
    MIAD,
    CilantroNJC,
    CilantroWelfare,
    EpsilonGreedy,
    EvolutionaryWelfare,
    Feedback,
    GreedyEW,
    Objective,
    OracleNJC,
    OracleWelfare,
    Parties,
    Policy,
    QuasarLike,
    Reporting,
    ResourceFair,
    RoundContext,
    utility_table,
)
from yarn_adapt.demand.solvers import (
    evolutionary_search,
    max_egalitarian_welfare,
    max_social_welfare,
    welfare_of,
)
from yarn_adapt.errors import SettingsError
from yarn_adapt.progress import report
from yarn_adapt.set_keys import SetSpec, flag, free_text, numeric, whole
from yarn_adapt.workload.bundled import TWITTER, bundled_trace

RATIO_TARGET = 0.98
ALLOC_MS_TARGET = 30.0


@dataclass(frozen=True)
class CilantroBenchSettings:
    rounds: int
    resources: int
    step: int
    beta: float
    confidence: float
    liar: str
    strategy: bool
    evo_iterations: int
    solver_problems: int
    curves: Path | None


class Knobs:
    rounds = whole("rounds", 180, quick=30, low=2, high=100_000)
    resources = whole("resources", 1000, low=20, high=1_000_000)
    step = whole("step", DEFAULT_STEP, low=1, high=1_000_000)
    beta = numeric("beta", DEFAULT_BETA, low=0.0, high=1.0)
    confidence = numeric("confidence", 0.9, low=0.01, high=0.999)
    liar = free_text("liar", "db16")
    strategy = flag("strategy", True)
    evo_iterations = whole("evo_iterations", 4000, quick=1000, low=10, high=10**6)
    solver_problems = whole("solver_problems", 30, quick=10, low=1, high=10_000)
    curves = free_text("curves", "")


SET_KEYS = SetSpec.of("cilantro", Knobs)


def _settings(options: BenchOptions) -> CilantroBenchSettings:
    values = SET_KEYS.read(options.extra, quick=options.quick)
    curves = values[Knobs.curves]
    return CilantroBenchSettings(
        rounds=values[Knobs.rounds],
        resources=values[Knobs.resources],
        step=values[Knobs.step],
        beta=values[Knobs.beta],
        confidence=values[Knobs.confidence],
        liar=values[Knobs.liar],
        strategy=values[Knobs.strategy],
        evo_iterations=values[Knobs.evo_iterations],
        solver_problems=values[Knobs.solver_problems],
        curves=Path(curves) if curves else None,
    )


# --------------------------------------------------------------------------- the run


@benchmark(
    "cilantro",
    "Cilantro §7.1: 20 jobs on 1,000 CPUs, 14 policies' welfare, fairness, solver times",
    SET_KEYS,
)
def run_cilantro(options: BenchOptions) -> BenchResult:
    settings = _settings(options)
    trace_path = options.trace or bundled_trace(TWITTER)
    trace = load_arrivals(trace_path)
    types = load_curves(settings.curves) if settings.curves else synthetic_job_types()
    env = build_environment(
        trace, types, resources=settings.resources, rounds=settings.rounds,
        max_step=settings.step, confidence=settings.confidence,
    )  # fmt: skip
    if settings.strategy:
        _liar(env, settings.liar)
    forecasts = env.forecasts()
    runs: dict[str, PolicyRun] = {}
    updates: list[float] = []
    policies = _policies(env, settings, options.seed, updates)
    for index, policy in enumerate(policies):
        rng = np.random.default_rng([options.seed, index])
        runs[policy.name] = run_policy(env, policy, forecasts, rng)
        report("bench cilantro policy", index + 1, len(policies), policy.name)
    figures: dict[str, Any] = {
        "rounds": env.rounds,
        "resources": env.resources,
        "jobs": len(env.jobs),
        "trace": str(trace_path),
        "curves": str(settings.curves) if settings.curves else "synthetic",
        "median_load_demand_cpus": round(float(env.demands(_median_loads(env)).sum()), 1),
        "policies": {name: _policy_figures(run) for name, run in runs.items()},
    }
    figures.update(_ratios(runs))
    solver_ms, solver_cpu_ms, figures["solver_vs_evolutionary"] = _solver_figures(
        env, forecasts, settings, options.seed
    )
    figures["solver_ms"], figures["solver_cpu_ms"] = solver_ms, solver_cpu_ms
    figures["model_update_ms"] = _stats(updates)
    if settings.strategy:
        figures["strategy_proofness"] = _strategy_proofness(env, forecasts, settings, options.seed)
    figures["targets"] = {"ratio": RATIO_TARGET, "alloc_ms": ALLOC_MS_TARGET}
    figures["gaps"] = _gaps(figures)
    return BenchResult(figures, _rows(runs))


def _median_loads(env: Environment) -> np.ndarray:
    return np.array([env.types[job.kind].load_p50 for job in env.jobs])


def _policies(
    env: Environment, settings: CilantroBenchSettings, seed: int, updates: list[float]
) -> list[Policy]:
    curves = env.curves()
    return [
        ResourceFair(),
        OracleNJC(curves),
        OracleWelfare(curves, Objective.SOCIAL),
        OracleWelfare(curves, Objective.EGALITARIAN),
        TimedLearning(CilantroNJC(env.learners(), beta=settings.beta), updates),
        CilantroWelfare(env.learners(), Objective.SOCIAL),
        CilantroWelfare(env.learners(), Objective.EGALITARIAN),
        EvolutionaryWelfare(Objective.SOCIAL, seed=seed),
        EvolutionaryWelfare(Objective.EGALITARIAN, seed=seed),
        GreedyEW(),
        EpsilonGreedy(Objective.SOCIAL, seed=seed),
        MIAD(),
        Parties(),
        QuasarLike(seed=seed),
    ]


class TimedLearning:
    """A Cilantro policy whose model updates are timed: each learner takes the
    feedback and recomputes its band."""

    def __init__(self, policy: CilantroNJC, updates: list[float]) -> None:
        self.policy = policy
        self.name = policy.name
        self.updates = updates

    def allocate(self, context: RoundContext) -> np.ndarray:
        return self.policy.allocate(context)

    def observe(self, context: RoundContext, feedback: Sequence[Feedback]) -> None:
        began = time.perf_counter()
        self.policy.observe(context, feedback)
        self.updates.append((time.perf_counter() - began) * 1000.0 / max(1, len(feedback)))


def _policy_figures(run: PolicyRun) -> dict[str, float]:
    times = run.allocate_ms or [0.0]
    cpu = run.allocate_cpu_ms or [0.0]
    return {
        "sw": round(run.mean("social"), 4),
        "ew": round(run.mean("egalitarian"), 4),
        "njc": round(run.mean("njc"), 4),
        "usage": round(run.mean("usage"), 4),
        "alloc_ms": round(float(np.mean(times)), 3),
        "alloc_ms_median": round(float(np.median(times)), 3),
        "alloc_ms_max": round(float(np.max(times)), 3),
        "alloc_cpu_ms": round(float(np.mean(cpu)), 3),
        "alloc_cpu_ms_median": round(float(np.median(cpu)), 3),
        "alloc_cpu_ms_max": round(float(np.max(cpu)), 3),
    }


def _ratios(runs: Mapping[str, PolicyRun]) -> dict[str, float]:
    pairs = {"njc": "njc", "sw": "social", "ew": "egalitarian"}
    result = {}
    for key, metric in pairs.items():
        oracle = runs[f"oracle-{key}"].mean(metric)
        mine = runs[f"cilantro-{key}"].mean(metric)
        result[f"{key}_vs_oracle"] = round(mine / oracle, 4) if oracle > 0 else math.nan
    return result


def _stats(values: Sequence[float]) -> dict[str, float]:
    data = np.asarray(values or [math.nan])
    return {
        "mean": round(float(np.mean(data)), 4),
        "median": round(float(np.median(data)), 4),
        "max": round(float(np.max(data)), 4),
    }


def _solver_figures(
    env: Environment,
    forecasts: np.ndarray,
    settings: CilantroBenchSettings,
    seed: int,
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]], dict[str, float]]:
    """Each solver on every picked round's whole problem: wall and CPU time (the
    CPU time of the process: what a quiet machine would take), and its welfare
    over the evolutionary reference's."""
    curves = env.curves()
    picks = np.linspace(0, env.rounds - 1, min(settings.solver_problems, env.rounds)).astype(int)
    solvers: dict[str, Callable[..., np.ndarray]] = {
        "sw": max_social_welfare,
        "ew": max_egalitarian_welfare,
    }
    times: dict[str, list[float]] = {"sw": [], "ew": []}
    cpu: dict[str, list[float]] = {"sw": [], "ew": []}
    ratios: dict[str, list[float]] = {"sw": [], "ew": []}
    rng = np.random.default_rng(seed)
    for r in picks:
        table = utility_table(curves, env.tenants, forecasts[:, r], env.resources, "estimate")
        for key, solver in solvers.items():
            began, began_cpu = time.perf_counter(), time.process_time()
            allocation = solver(table, env.resources)
            times[key].append((time.perf_counter() - began) * 1000.0)
            cpu[key].append((time.process_time() - began_cpu) * 1000.0)
            score = _score(key)

            def objective(
                a: np.ndarray, t: np.ndarray = table, s: Callable[[np.ndarray], float] = score
            ) -> float:
                return s(welfare_of(t, a))

            _, reference = evolutionary_search(
                objective, len(env.jobs), env.resources, settings.evo_iterations, rng
            )
            mine = score(welfare_of(table, allocation))
            ratios[key].append(mine / reference if reference > 0 else math.inf)
    return (
        {key: _stats(values) for key, values in times.items()},
        {key: _stats(values) for key, values in cpu.items()},
        {key: round(float(np.min(values)), 4) for key, values in ratios.items()},
    )


def _score(key: str) -> Callable[[np.ndarray], float]:
    if key == "sw":
        return lambda u: float(np.mean(u))
    return lambda u: float(np.min(u))


def _liar(env: Environment, name: str) -> int:
    """The index of the job ``--set liar`` names (checked before the policies run)."""
    names = [job.name for job in env.jobs]
    if name not in names:
        raise SettingsError(f"cilantro: --set liar={name}: expected one of {', '.join(names)}")
    return names.index(name)


def _strategy_proofness(
    env: Environment,
    forecasts: np.ndarray,
    settings: CilantroBenchSettings,
    seed: int,
) -> dict[str, Any]:
    liar = _liar(env, settings.liar)
    result: dict[str, Any] = {"job": settings.liar}
    for name, make in _learning_policies(env, settings).items():
        utilities = {}
        for label, factor in (("truthful", 1.0), ("over_x2", 2.0), ("under_x0.5", 0.5)):
            policy = make(Reporting({liar: factor}))
            run = run_policy(env, policy, forecasts, np.random.default_rng([seed, 99]))
            utilities[label] = round(run.mean_utility(liar), 4)
        gain = max(utilities["over_x2"], utilities["under_x0.5"]) - utilities["truthful"]
        result[name] = {**utilities, "gain_by_lying": round(gain, 4), "lying_pays": gain > 0.005}
    return result


def _learning_policies(
    env: Environment, settings: CilantroBenchSettings
) -> dict[str, Callable[[Reporting], Policy]]:
    return {
        "cilantro-njc": lambda r: CilantroNJC(env.learners(), beta=settings.beta, reporting=r),
        "cilantro-sw": lambda r: CilantroWelfare(env.learners(), Objective.SOCIAL, reporting=r),
        "cilantro-ew": lambda r: CilantroWelfare(
            env.learners(), Objective.EGALITARIAN, reporting=r
        ),
    }


def _gaps(figures: Mapping[str, Any]) -> dict[str, float]:
    gaps = {
        key: round(figures[key] - RATIO_TARGET, 4)
        for key in ("njc_vs_oracle", "sw_vs_oracle", "ew_vs_oracle")
    }
    for key in ("cilantro-sw", "cilantro-ew"):
        gaps[f"{key}_alloc_cpu_ms"] = round(
            ALLOC_MS_TARGET - figures["policies"][key]["alloc_cpu_ms_max"], 3
        )
    for key in ("sw", "ew"):
        gaps[f"solver_{key}_cpu_ms"] = round(
            ALLOC_MS_TARGET - figures["solver_cpu_ms"][key]["max"], 3
        )
    return gaps


def _rows(runs: Mapping[str, PolicyRun]) -> list[dict[str, Any]]:
    return [{"policy": name, **_policy_figures(run)} for name, run in runs.items()]
