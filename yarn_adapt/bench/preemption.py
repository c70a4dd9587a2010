"""``yarn-adapt bench preemption``: gradual preemption against YARN's Kill (TopoSch §6.3).

In the node co-location simulator (:mod:`yarn_adapt.cosim.colocation`) batch jobs from
a SWIM trace (``--trace``; the bundled FB-2009 by default) share a node with a
latency-critical service whose load follows the bundled twitter trace (``--set
load_trace=PATH`` for another). When the load spikes, the QoS model asks for a reclaim
and the agent's own code (:class:`preemption.node.NodeReclaimer`) serves it with each
strategy: Kill (YARN's), LP, RB, LTF, NTF, NLTF; ``none`` (no reclaim) is the
reference. The QoS model is trained first on profiling samples, and its accuracy is
reported as the paper's Table 3 (GBRT against linear and ElasticNet regression).

Figures: ``jct_by_strategy`` (mean batch JCT over every job of the run),
``jct_median_by_strategy``, ``jct_worst_by_strategy``, ``jct_vs_kill`` (best
gradual strategy / Kill − 1), ``jct_vs_lp``; the same over the *exposed* jobs
(``jct_exposed_by_strategy``, ``jct_vs_kill_exposed``, ``jct_vs_lp_exposed``):
the jobs that were in the system while the service missed its target in the run
without reclaim (``none``), one set for every strategy. TopoSch §6.3 measures the
JCT of the jobs placed beside MongoDB while it is under load, so every job it
counts meets the preemption; over a day of the twitter trace most jobs never do,
and their identical JCTs pull every ratio towards 0. ``qos_recovery_s`` (mean
length of a QoS violation episode), ``qos_recovery_median_s``,
``qos_recovery_worst_s``, ``qos_violation_s``, ``tasks_killed``,
``tasks_squeezed``, ``preemption_rate`` (tasks squeezed or killed / tasks, the
paper's Table 4), ``qos_model`` (RMSE, MAE, R² per regressor).

Reclaim settings: c = 600 millicores per task in mini-steps ω = 300 (each task is
one vcore), floor 100. The paper gives no value for c; its Table 4 does say how
many tasks each strategy touches for the same reclaim: the gradual ones 1.33x
(heavy load) to 1.76x (light) as many as LP, which takes each of its tasks to the
floor (900 millicores here), so c is 0.57 to 0.75 of that: 600. ω = c / 2 (two
mini-steps a task).

Settings (``--set KEY=VALUE``): any :class:`~yarn_adapt.cosim.colocation.NodeModel`
field (``utilization``, ``target_p95_ms``, ``kill_latency_s``, ``restart_delay_s``,
``cpu_fraction_low``/``cpu_fraction_high``, ...), the reclaim knobs ``per_task``,
``step``, ``floor``, ``grace_period_s``; ``load_trace``, ``load_points`` (how many
of its values to replay; ``--quick`` takes 180, 30 simulated minutes) and
``profile_samples``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from preemption.model import Amount
from preemption.qos import QosModel, compare_models
from preemption.reclaim import ReclaimSettings
from preemption.strategies import Strategy
from yarn_adapt.bench import BenchOptions, BenchResult, benchmark
from yarn_adapt.cosim.colocation import (
    ColocatedNode,
    NodeModel,
    RunResult,
    batch_jobs,
    load_series,
    profile_samples,
)
from yarn_adapt.errors import SettingsError
from yarn_adapt.progress import report
from yarn_adapt.workload.bundled import TWITTER, bundled_trace
from yarn_adapt.workload.swim import SwimReplaySettings, load_swim

STRATEGIES: tuple[Strategy | None, ...] = (
    None,
    Strategy.KILL,
    Strategy.LP,
    Strategy.RB,
    Strategy.LTF,
    Strategy.NTF,
    Strategy.NLTF,
)
GRADUAL = ("RB", "LTF", "NTF", "NLTF")
QUICK_LOAD_POINTS = 180  # 30 simulated minutes at 10 s per point


@benchmark(
    "preemption",
    "node co-location sim: batch JCT and QoS recovery under Kill, LP, RB, LTF, NTF, NLTF",
)
def preemption_bench(options: BenchOptions) -> BenchResult:
    started = time.perf_counter()
    extra = dict(options.extra)
    model = _model(extra)
    reclaim = _reclaim(extra)
    load_path = Path(extra.pop("load_trace", str(bundled_trace(TWITTER))))
    profiles = int(
        _number(
            "profile_samples",
            extra.pop("profile_samples", "1500" if options.quick else "4000"),
            int,
        )
    )
    points = extra.pop("load_points", str(QUICK_LOAD_POINTS) if options.quick else "0")
    load_points = int(_number("load_points", points, int))
    if extra:
        raise SettingsError(f"bench preemption: unknown settings {sorted(extra)}")
    loads = load_series(load_path)
    if load_points > 0:
        loads = loads[:load_points]
    horizon = len(loads) * model.load_interval_s
    trace = options.trace or bundled_trace()
    workload = load_swim(
        trace,
        settings=SwimReplaySettings.for_trace(Path(trace), target_machines=1),
        seed=options.seed,
    )
    jobs = batch_jobs(workload, model, window_s=horizon, seed=options.seed)
    samples = profile_samples(model, loads, count=profiles, seed=options.seed)
    table3 = compare_models(samples, seed=options.seed)
    qos_model = QosModel("gbrt", seed=options.seed).fit(samples)
    results = {}
    for strategy in STRATEGIES:
        node = ColocatedNode(
            model, jobs, loads, strategy=strategy, reclaim=reclaim, qos_model=qos_model,
            seed=options.seed,
        )  # fmt: skip
        result = node.run(horizon)
        results[result.strategy] = result
        report("bench preemption strategy", len(results), len(STRATEGIES), result.strategy)
    figures = _figures(results, table3, jobs_count=len(jobs), horizon=horizon)
    figures["wall_s"] = round(time.perf_counter() - started, 2)
    figures["model"] = {f.name: getattr(model, f.name) for f in fields(model)}
    exposed = figures["jct_exposed_by_strategy"]
    rows = [_row(r, exposed[r.strategy]) for r in results.values()]
    return BenchResult(figures=figures, rows=rows)


def _figures(
    results: dict[str, RunResult], table3: dict[str, Any], *, jobs_count: int, horizon: float
) -> dict[str, Any]:
    mean_jct = {name: _mean(r.jct_s) for name, r in results.items()}
    best = min(GRADUAL, key=lambda name: mean_jct[name])
    reference = results["none"]
    exposed = reference.jobs_running_during(reference.violation_spans_s)
    exposed_jct = {name: _exposed(r, exposed) for name, r in results.items()}
    mean_exposed = {name: _mean(values) for name, values in exposed_jct.items()}
    best_exposed = min(GRADUAL, key=lambda name: mean_exposed[name])
    return {
        "jobs": jobs_count,
        "simulated_s": horizon,
        "jct_by_strategy": mean_jct,
        "jct_median_by_strategy": {n: _median(r.jct_s) for n, r in results.items()},
        "jct_worst_by_strategy": {
            n: round(max(r.jct_s, default=0.0), 1) for n, r in results.items()
        },
        "best_gradual": best,
        "jct_vs_kill": _ratio(mean_jct[best], mean_jct["Kill"]),
        "jct_vs_lp": _ratio(mean_jct[best], mean_jct["LP"]),
        "jobs_exposed": len(exposed),
        "jct_exposed_by_strategy": mean_exposed,
        "jct_exposed_median_by_strategy": {n: _median(v) for n, v in exposed_jct.items()},
        "jct_exposed_worst_by_strategy": {
            n: round(max(v, default=0.0), 1) for n, v in exposed_jct.items()
        },
        "best_gradual_exposed": best_exposed,
        "jct_vs_kill_exposed": _ratio(mean_exposed[best_exposed], mean_exposed["Kill"]),
        "jct_vs_lp_exposed": _ratio(mean_exposed[best_exposed], mean_exposed["LP"]),
        "preemption_rate": {
            n: round((r.tasks_squeezed + r.tasks_killed) / r.tasks, 4) if r.tasks else 0.0
            for n, r in results.items()
        },
        "qos_recovery_s": {n: _mean(r.violation_episodes_s) for n, r in results.items()},
        "qos_recovery_median_s": {n: _median(r.violation_episodes_s) for n, r in results.items()},
        "qos_recovery_worst_s": {
            n: round(max(r.violation_episodes_s, default=0.0), 1) for n, r in results.items()
        },
        "qos_violation_s": {n: round(r.violation_s, 1) for n, r in results.items()},
        "qos_episodes": {n: len(r.violation_episodes_s) for n, r in results.items()},
        "tasks_killed": {n: r.tasks_killed for n, r in results.items()},
        "tasks_squeezed": {n: r.tasks_squeezed for n, r in results.items()},
        "tasks_blacklisted": {n: r.blacklisted for n, r in results.items()},
        "qos_model": {
            kind: {"rmse": round(s.rmse, 3), "mae": round(s.mae, 3), "r2": round(s.r2, 4)}
            for kind, s in table3.items()
        },
    }


def _row(result: RunResult, exposed_jct_s: float) -> dict[str, Any]:
    return {
        "strategy": result.strategy,
        "mean_jct_s": _mean(result.jct_s),
        "exposed_jct_s": exposed_jct_s,
        "median_jct_s": _median(result.jct_s),
        "worst_jct_s": round(max(result.jct_s, default=0.0), 1),
        "qos_recovery_s": _mean(result.violation_episodes_s),
        "violation_s": round(result.violation_s, 1),
        "killed": result.tasks_killed,
        "squeezed": result.tasks_squeezed,
        "blacklisted": result.blacklisted,
    }


def _exposed(result: RunResult, jobs: set[int]) -> list[float]:
    return [jct for job, jct in sorted(result.jct_by_job.items()) if job in jobs]


def _ratio(value: float, reference: float) -> float:
    return round(value / reference - 1.0, 4) if reference else 0.0


def _mean(values: list[float]) -> float:
    return round(statistics.fmean(values), 2) if values else 0.0


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 2) if values else 0.0


# ----------------------------------------------------------------- settings


def _model(extra: dict[str, str]) -> NodeModel:
    model = NodeModel()
    changes: dict[str, Any] = {}
    for f in fields(NodeModel):
        if f.name in extra:
            changes[f.name] = _number(f.name, extra.pop(f.name), type(getattr(model, f.name)))
    for name in ("cpu_fraction", "falter_cores"):
        low, high = getattr(model, name)
        low = _number(f"{name}_low", extra.pop(f"{name}_low", str(low)), float)
        high = _number(f"{name}_high", extra.pop(f"{name}_high", str(high)), float)
        if not 0 < low <= high:
            raise SettingsError(f"bench preemption: need 0 < {name}_low <= {name}_high")
        changes[name] = (low, high)
    return replace(model, **changes)


def _reclaim(extra: dict[str, str]) -> ReclaimSettings:
    settings = ReclaimSettings(
        per_task=Amount(600, 0), mini_step=Amount(300, 0), floor=Amount(100, 0),
        grace_period_s=60.0, settle_s=2.0,
    )  # fmt: skip
    changes: dict[str, Any] = {}
    for name in ("per_task", "step", "floor"):
        if name in extra:
            changes["mini_step" if name == "step" else name] = Amount(
                int(_number(name, extra.pop(name), int)), 0
            )
    for name in ("grace_period_s", "settle_s", "kill_cooldown_s"):
        if name in extra:
            changes[name] = _number(name, extra.pop(name), float)
    try:
        return replace(settings, **changes)
    except ValueError as error:
        raise SettingsError(f"bench preemption: {error}") from error


def _number(name: str, text: str, kind: type) -> Any:
    try:
        return kind(text) if kind in (int, float) else kind(float(text))
    except ValueError as exc:
        raise SettingsError(f"bench preemption: {name}={text!r} is not a number") from exc
