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
from yarn_adapt.set_keys import SetSpec, SetValues, field_keys, free_text, numeric, whole
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


MODEL = NodeModel()


class Knobs:
    cpu_fraction_low = numeric("cpu_fraction_low", MODEL.cpu_fraction[0])
    cpu_fraction_high = numeric("cpu_fraction_high", MODEL.cpu_fraction[1])
    falter_cores_low = numeric("falter_cores_low", MODEL.falter_cores[0])
    falter_cores_high = numeric("falter_cores_high", MODEL.falter_cores[1])
    per_task = whole("per_task", None)
    step = whole("step", None)
    floor = whole("floor", None)
    grace_period_s = numeric("grace_period_s", None)
    settle_s = numeric("settle_s", None)
    kill_cooldown_s = numeric("kill_cooldown_s", None)
    load_trace = free_text("load_trace", None)
    profile_samples = whole("profile_samples", 4000, quick=1500)
    load_points = whole("load_points", 0, quick=QUICK_LOAD_POINTS)


NODE_KEYS = field_keys(MODEL, given_only=True)  # every number of the node model
RANGES = {
    "cpu_fraction": (Knobs.cpu_fraction_low, Knobs.cpu_fraction_high),
    "falter_cores": (Knobs.falter_cores_low, Knobs.falter_cores_high),
}
SET_KEYS = SetSpec.of("preemption", Knobs).with_keys(*NODE_KEYS)


@benchmark(
    "preemption",
    "node co-location sim: batch JCT and QoS recovery under Kill, LP, RB, LTF, NTF, NLTF",
    SET_KEYS,
)
def preemption_bench(options: BenchOptions) -> BenchResult:
    started = time.perf_counter()
    values = SET_KEYS.read(options.extra, quick=options.quick)
    model = _model(values)
    reclaim = _reclaim(values)
    load_path = Path(values[Knobs.load_trace] or bundled_trace(TWITTER))
    profiles, load_points = values[Knobs.profile_samples], values[Knobs.load_points]
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


def _model(values: SetValues) -> NodeModel:
    changes: dict[str, Any] = {key.name: values[key] for key in NODE_KEYS if values.given(key)}
    for name, (low_key, high_key) in RANGES.items():
        low, high = values[low_key], values[high_key]
        if not 0 < low <= high:
            raise SettingsError(f"preemption: need 0 < {name}_low <= {name}_high")
        changes[name] = (low, high)
    return replace(MODEL, **changes)


def _reclaim(values: SetValues) -> ReclaimSettings:
    settings = ReclaimSettings(
        per_task=Amount(600, 0), mini_step=Amount(300, 0), floor=Amount(100, 0),
        grace_period_s=60.0, settle_s=2.0,
    )  # fmt: skip
    amounts = {"per_task": Knobs.per_task, "mini_step": Knobs.step, "floor": Knobs.floor}
    changes: dict[str, Any] = {
        name: Amount(millicores, 0)
        for name, key in amounts.items()
        if (millicores := values[key]) is not None
    }
    for key in (Knobs.grace_period_s, Knobs.settle_s, Knobs.kill_cooldown_s):
        if (seconds := values[key]) is not None:
            changes[key.name] = seconds
    try:
        return replace(settings, **changes)
    except ValueError as error:
        raise SettingsError(f"preemption: {error}") from error
