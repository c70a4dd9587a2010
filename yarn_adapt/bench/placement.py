"""``yarn-adapt bench placement``: Tarcil against YARN, Sparrow-like sampling,
least-loaded and the centralised greedy optimum, in the RU cluster model
(:mod:`yarn_adapt.placement.cluster_model`), at 100 servers (800 RUs) and 12,000
servers (96,000 RUs), load 72% (70-75%).

The workload is the synthetic mix of short tasks, Spark stages, Hadoop jobs and
services over 20 interference classes (:mod:`yarn_adapt.placement.workloads`), or
``--trace PATH`` (any format ``load_trace`` reads; arrivals rescaled to the load).
The scheduler knows 60% of the classes from full profiles and the rest from 3
probes each, completed by collaborative filtering; the model runs on the true
profiles. Every policy replays the same jobs from the same resident population.

Figures per scale and policy (``scales[i].policies[name]``):

* ``perf_vs_optimal``: mean job performance / the greedy optimum's; performance is
  ideal duration / (end - arrival), so it counts queueing and interference.
* ``worst_degradation``: ``1 - min(performance / the same job's performance under
  the optimum)`` -- Tarcil §6.3 normalises each job to its performance on the best
  available resources; ``p99_degradation`` the 99th percentile of the same, and
  ``worst_degradation_vs_ideal`` ``1 - min(performance)``.
* ``decision_ms`` (mean), ``decision_ms_median``, ``decision_ms_p99``: wall time of
  one scheduling call (admission check, sampling, choice, commit, retries);
  ``decision_cpu_ms`` the thread's CPU time for it (steadier on a busy machine).
* ``queued_share``: share of jobs admission control queued; ``waited_share``: any
  wait (also for lack of room); ``utilisation``: mean busy RUs / RUs;
  ``conflict_rate``: commits of the agents that met a taken RU; ``wait_estimate``:
  the admission wait estimate against the waits that followed.

``sample_size_check``: the §3.3 examples recomputed by the formula. ``targets``:
the issue's three targets at the largest scale, with the gap (positive = missed).

``--set`` keys: ``scales=100,12000``, ``policies=tarcil,yarn,...``, ``load=0.72``,
``horizon_100=1800``, ``horizon_12000=40`` (simulated seconds per scale; any
``horizon_N``), ``slope=1``, ``agents=10``, ``sync_interval_s=0.1``, ``cap=32``,
``miss_probability=0.001``, ``classes=20``, ``protect=yes`` (see
:class:`~yarn_adapt.placement.policies.Scorer`; ``no`` scores with Tarcil's ``Q``
alone, for Tarcil and the optimum alike).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from yarn_adapt.bench import BenchOptions, BenchResult, benchmark
from yarn_adapt.errors import SettingsError
from yarn_adapt.placement.cluster_model import ModelResult
from yarn_adapt.placement.experiment import Scenario, Workbench, prepare, run_policy
from yarn_adapt.placement.policies import POLICY_NAMES
from yarn_adapt.placement.sampling import paper_examples

FULL_SCALES = (100, 12_000)
QUICK_SCALES = (100,)
DEFAULT_HORIZON = {100: 1800.0, 12_000: 40.0}
QUICK_HORIZON = {100: 600.0}
KNOWN = {
    "scales", "policies", "load", "slope", "agents", "sync_interval_s", "cap",
    "miss_probability", "classes", "protect",
}  # fmt: skip
TARGETS = {"perf_vs_optimal": (">=", 0.97), "worst_degradation": ("<=", 0.05),
           "decision_ms": ("<=", 0.2)}  # fmt: skip


@benchmark("placement", "Tarcil placement vs YARN, sampling, least-loaded, greedy (RU model)")
def run(options: BenchOptions) -> BenchResult:
    _check_keys(options.extra)
    scales = _scales(options)
    policies = _policies(options.extra)
    load_before = _machine_load()
    results: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for servers in scales:
        scenario = _scenario(options, servers)
        began = time.perf_counter()
        bench = prepare(scenario)
        runs = {name: run_policy(bench, name) for name in policies}
        figures = scale_figures(bench, runs)
        figures["wall_s"] = round(time.perf_counter() - began, 1)
        results.append(figures)
        rows.extend(_rows(figures))
    summary: dict[str, Any] = {
        "scales": results,
        "sample_size_check": sample_size_check(),
        "targets": targets(results[-1]) if results else {},
        "machine": {
            "cpus": os.cpu_count(),
            "load_before": load_before,
            "load_after": _machine_load(),
        },
    }
    return BenchResult(summary, rows)


def scale_figures(bench: Workbench, runs: Mapping[str, ModelResult]) -> dict[str, Any]:
    scenario = bench.scenario
    optimum = runs.get("greedy")
    policies = {name: policy_figures(result, optimum) for name, result in runs.items()}
    return {
        "servers": scenario.servers,
        "rus": scenario.ru_count,
        "load": scenario.load,
        "horizon_s": scenario.horizon_s,
        "jobs": len(bench.jobs),
        "resident_jobs": len(bench.residents),
        "measured_jobs": len(next(iter(runs.values())).jobs) if runs else 0,
        "trace": str(scenario.trace) if scenario.trace else "synthetic",
        "profile_error": round(bench.profile_error, 4),
        "policies": policies,
    }


def policy_figures(result: ModelResult, optimum: ModelResult | None) -> dict[str, Any]:
    performance = np.array([job.performance for job in result.jobs])
    figures: dict[str, Any] = {
        "mean_performance": _round(performance.mean()),
        "perf_vs_optimal": None,
        "worst_degradation": None,
        "p99_degradation": None,
        "worst_degradation_vs_ideal": _round(1.0 - performance.min()) if len(performance) else None,
        **_timing(result),
        "queued_share": _round(np.mean([j.admission_queued for j in result.jobs])),
        "waited_share": _round(
            np.mean([(j.start_s is None) or j.start_s > j.arrival_s for j in result.jobs])
        ),
        "rejected": sum(j.rejected for j in result.jobs),
        "utilisation": _round(result.utilisation),
        "conflict_rate": _round(result.conflict_rate),
        "wait_estimate": wait_estimate_figures(result.estimate_errors),
    }
    if optimum is not None:
        reference = np.array([job.performance for job in optimum.jobs])
        figures["perf_vs_optimal"] = _round(performance.mean() / reference.mean())
        both = reference > 0
        ratio = np.minimum(performance[both] / reference[both], 1.0)
        figures["worst_degradation"] = _round(1.0 - ratio.min()) if len(ratio) else None
        figures["p99_degradation"] = _round(1.0 - np.percentile(ratio, 1)) if len(ratio) else None
    return figures


def _timing(result: ModelResult) -> dict[str, float | None]:
    wall = np.asarray(result.decision_ns, dtype=np.float64) / 1e6
    cpu = np.asarray(result.decision_cpu_ns, dtype=np.float64) / 1e6
    if not len(wall):
        return {"decision_ms": None, "decision_ms_median": None, "decision_ms_p99": None,
                "decision_cpu_ms": None, "decisions": 0}  # fmt: skip
    return {
        "decision_ms": _round(wall.mean(), 5),
        "decision_ms_median": _round(np.median(wall), 5),
        "decision_ms_p99": _round(np.percentile(wall, 99), 5),
        "decision_cpu_ms": _round(cpu.mean(), 5),
        "decision_cpu_ms_median": _round(np.median(cpu), 5),
        "decisions": len(wall),
    }


def wait_estimate_figures(pairs: Sequence[tuple[float, float]]) -> dict[str, Any]:
    """The admission wait estimate (mu + 2 sigma, meant as a bound) against the
    actual waits: how often the wait stayed within it, and the errors."""
    if not pairs:
        return {"queued_jobs": 0}
    estimate = np.array([p[0] for p in pairs])
    actual = np.array([p[1] for p in pairs])
    error = estimate - actual
    return {
        "queued_jobs": len(pairs),
        "within_estimate": _round(np.mean(actual <= estimate + 1e-9)),
        "mean_error_s": _round(error.mean()),
        "median_abs_error_s": _round(np.median(np.abs(error))),
        "mean_actual_s": _round(actual.mean()),
    }


def sample_size_check() -> dict[str, Any]:
    check: dict[str, Any] = {}
    for example in paper_examples():
        derived = example.derived
        check[example.name] = {
            "acceptable_share": example.good_share,
            "miss_probability": example.miss_probability,
            "paper_r": example.paper_r,
            "derived_r": derived.r,
            "exact_r": round(derived.exact, 3),
            "miss_at_derived_r": float(f"{derived.miss_probability:.3g}"),
            "miss_at_paper_r": float(f"{example.paper_r_miss_probability:.3g}"),
        }
    return check


def targets(scale: Mapping[str, Any]) -> dict[str, Any]:
    tarcil = scale["policies"].get("tarcil")
    if tarcil is None:
        return {}
    out: dict[str, Any] = {"servers": scale["servers"]}
    for key, (sense, target) in TARGETS.items():
        value = tarcil.get(key)
        gap = None if value is None else (target - value if sense == ">=" else value - target)
        out[key] = {"target": f"{sense} {target}", "value": value,
                    "gap": None if gap is None else _round(gap, 5),
                    "met": None if gap is None else gap <= 0}  # fmt: skip
    return out


def _rows(figures: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for name, f in figures["policies"].items():
        rows.append({
            "servers": figures["servers"], "policy": name,
            "perf/opt": f["perf_vs_optimal"], "mean perf": f["mean_performance"],
            "worst deg": f["worst_degradation"], "p99 deg": f["p99_degradation"],
            "dec ms": f["decision_ms"], "dec ms p50": f["decision_ms_median"],
            "dec ms p99": f["decision_ms_p99"], "cpu ms": f["decision_cpu_ms"],
            "queued": f["queued_share"], "util": f["utilisation"],
            "conflicts": f["conflict_rate"],
        })  # fmt: skip
    return rows


# --------------------------------------------------------------------------- settings


def _check_keys(extra: Mapping[str, str]) -> None:
    unknown = sorted(k for k in extra if k not in KNOWN and not k.startswith("horizon_"))
    if unknown:
        raise SettingsError(f"bench placement: unknown --set {', '.join(unknown)}")


def _scales(options: BenchOptions) -> tuple[int, ...]:
    text = options.extra.get("scales")
    if text is None:
        return QUICK_SCALES if options.quick else FULL_SCALES
    try:
        scales = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise SettingsError(f"bench placement: scales={text!r} is not a list of integers") from exc
    if not scales or min(scales) < 1:
        raise SettingsError("bench placement: scales must be positive server counts")
    return scales


def _policies(extra: Mapping[str, str]) -> tuple[str, ...]:
    names = tuple(p.strip() for p in extra.get("policies", ",".join(POLICY_NAMES)).split(","))
    unknown = [n for n in names if n not in POLICY_NAMES]
    if unknown or not names:
        known = ", ".join(POLICY_NAMES)
        raise SettingsError(f"bench placement: unknown policy {unknown} (known: {known})")
    return names


def _scenario(options: BenchOptions, servers: int) -> Scenario:
    extra = options.extra
    horizons = QUICK_HORIZON if options.quick else DEFAULT_HORIZON
    default_horizon = horizons.get(servers, 40.0 if servers > 1000 else 1800.0)
    return Scenario(
        servers=servers,
        horizon_s=_number(extra, f"horizon_{servers}", default_horizon),
        load=_number(extra, "load", 0.72),
        slope=_number(extra, "slope", 1.0),
        agents=int(_number(extra, "agents", 10)),
        sync_interval_s=_number(extra, "sync_interval_s", 0.1),
        cap=int(_number(extra, "cap", 32)),
        miss_probability=_number(extra, "miss_probability", 1e-3),
        classes=int(_number(extra, "classes", 20)),
        protect=extra.get("protect", "yes").lower() in ("yes", "true", "1"),
        seed=options.seed,
        trace=options.trace,
    )


def _number(extra: Mapping[str, str], key: str, default: float) -> float:
    text = extra.get(key)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError as exc:
        raise SettingsError(f"bench placement: {key}={text!r} is not a number") from exc
    if not math.isfinite(value) or value < 0:
        raise SettingsError(f"bench placement: {key}={text!r} must be a non-negative number")
    return value


def _machine_load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _round(value: float | np.floating[Any], digits: int = 4) -> float:
    return round(float(value), digits)
