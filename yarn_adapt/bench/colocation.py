"""``yarn-adapt bench colocation``: TopoSch's §6.2 comparison in the cluster
co-location simulator (:mod:`yarn_adapt.cosim.lra_model`).

12 nodes; a 12-service application (PiggyMetrics-shaped DAG, one service per node)
whose request rate follows the bundled twitter trace (``--set load_trace=PATH``);
batch jobs from a SWIM trace (``--trace``; the bundled FB-2009 by default) replayed
so they keep ``utilization`` of the cluster's batch slots busy. Policies:

* ``yarn`` -- Algorithm 1 with ``nu = 0`` (TopoSch switched off: YARN's placement);
* ``kube-auto`` -- YARN's placement; per node, batch killed whenever CPU
  utilisation is above ``kube_threshold``;
* ``toposch-n`` -- Algorithm 1 (``nu``, ``max_retry_time``) on tracing's risk;
* ``toposch-p`` -- toposch-n plus the QoS model's prediction driving the agent's
  gradual preemption (``strategy``, NLTF by default);
* ``yarn-adapt`` -- the yarn-adapt service as deployed
  (:mod:`yarn_adapt.cosim.service_guard`): its own guard round
  (:meth:`~yarn_adapt.colocation.guard.ColocationGuard.run_round`, which calls
  :func:`~yarn_adapt.colocation.decide.decide`) built from the service's settings
  -- their defaults (:func:`service_defaults`), so its cadence (``[colocation]
  period_s``), risk window (``[tracing] window_s``), SLO window, policy and demand
  are the service's -- with the application's name, services and target; YARN
  places batch over the totals the guard sets (no Algorithm 1 retry: YARN never
  places beyond what the RM shows), and each node's agent polls the guard's
  reclaim request as ``yarn-adapt agent`` does in service mode (the agent's
  default settings);
* ``yarn-adapt+retry`` -- the same guard and agents with Algorithm 1's retry on top
  of its totals (``nu``, ``max_retry_time``): a container held back
  ``max_retry_time`` passes goes to a local or the lowest-risk node whatever the
  node shows. **Not deployable**: YARN has no such retry (the guard can only lower
  what nodes advertise, through ``updateNodeResource``); it is here to show what the
  retry would buy.

Run-alone references: the application with no batch, and the batch with no
application (YARN placement). Figures per policy in ``policies``:
``lra_p95_vs_alone`` (mean end-to-end P95 / run-alone), with ``_median`` and
``_worst`` over the risk windows; ``batch_jct_increase`` (mean per-job JCT ratio
to run-alone, minus 1) with ``_median`` and ``_worst`` over jobs;
``qos_violation_s`` (simulated seconds with the end-to-end P95 above the target);
``batch_cpu_share`` (batch's mean share of the cluster's CPU over the horizon);
``beyond_visible`` (placements on a node beyond the total its guard left: 0 for
``yarn-adapt`` by construction, checked at every placement); ``guard_rounds``.
``best`` is the yarn-adapt row, ``gap`` its distance to the issue's target
(<= 1.10x at <= +20% JCT).

``frontier`` is, per policy, the best services' P95 (vs alone) it reaches at each
batch share: ``[[batch_cpu_share, lra_p95_vs_alone], ...]`` by share, the points
no other point of the policy beats on both. The sweep is of the *batch load*
(``frontier_loads``: fractions of ``utilization``, ``0.5,0.75,1`` by default,
``0.5,1`` with ``--quick``), the same for every policy, not of each policy's own
knob: ``yarn`` has none, the service's aggressiveness is several settings (the
slack watermarks, ``nu``, the floor) whose defaults are what is measured, and a
knob swept for one row but not the others would flatter it. So a policy's frontier
says what it makes of the same offered batch work at each load, with its settings
as they ship. Settings (``--set``): any ``NodeModel`` field, ``nodes``,
``nu``, ``max_retry_time``, ``risk_interval_s``, ``kube_threshold``,
``target_factor``, ``agent_interval_s``, ``strategy``, ``load_trace``,
``load_points`` (default 720, two simulated hours; ``--quick`` 180),
``profile_samples``, ``frontier_loads``, ``placement`` (how Algorithm 1's lowest-risk
node is chosen in the TopoSch rows and ``yarn-adapt+retry``: ``tarcil`` by default, sampling as
:func:`yarn_adapt.placement.guard_choice.lowest_risk_chooser` does; ``greedy``
scans every node). The services' interference is the per-core model
(:mod:`yarn_adapt.cosim.interference`) with the coefficients fitted to testbed sweeps
(:data:`yarn_adapt.cosim.interference.CORE_CALIBRATION`; ``model.calibration`` names it,
``model.interference`` gives them); ``interference_cpu``, ``interference_presence``,
``interference_memory`` and ``memory_hog_share`` (batch's memory-bound share, 0.5)
override them for one run.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, fields, replace
from functools import partial
from pathlib import Path
from typing import Any

from preemption.model import Amount
from preemption.qos import QosModel
from preemption.reclaim import ReclaimSettings
from preemption.strategies import Strategy
from tracing.risk import RiskSettings
from yarn_adapt.bench import BenchOptions, BenchResult, benchmark
from yarn_adapt.colocation.model import GuardMode
from yarn_adapt.cosim.colocation import NodeModel, batch_jobs, profile_samples
from yarn_adapt.cosim.interference import CORE_CALIBRATION, load_core_interference
from yarn_adapt.cosim.lra_model import (
    Cluster,
    ClusterModel,
    ClusterRun,
    Policy,
    app_target_ms,
    piggymetrics,
    service_model,
    summary,
)
from yarn_adapt.cosim.service_guard import APPLICATION, ServiceGuardSpec
from yarn_adapt.cosim.toposch import LowestRiskChooser, ToposchSettings
from yarn_adapt.errors import InputError, SettingsError, TraceError
from yarn_adapt.placement.baselines import POLICY_NAMES
from yarn_adapt.placement.guard_choice import lowest_risk_chooser
from yarn_adapt.progress import report
from yarn_adapt.service.guard.build import assemble_guard
from yarn_adapt.service.settings import Settings
from yarn_adapt.set_keys import (
    Key,
    SetSpec,
    SetValues,
    custom,
    field_keys,
    free_text,
    numeric,
    split_list,
    whole,
    word,
)
from yarn_adapt.workload.bundled import TWITTER, bundled_trace
from yarn_adapt.workload.swim import SwimReplaySettings, load_swim

TARGET_RATIO = 1.10
TARGET_JCT = 0.20
QUICK_POINTS = 180
FULL_POINTS = 720


def _fractions(text: str) -> tuple[float, ...]:
    found = tuple(sorted({float(part) for part in split_list(text)}))
    if not found or not all(math.isfinite(f) and 0 < f <= 2 for f in found):
        raise ValueError(text)
    return found


def _strategy(name: str) -> Strategy:
    try:
        return Strategy[name.upper()]
    except KeyError:
        raise ValueError(name) from None


class Knobs:
    nodes = whole("nodes", None)
    risk_interval_s = numeric("risk_interval_s", None)
    kube_threshold = numeric("kube_threshold", None)
    target_factor = numeric("target_factor", None)
    agent_interval_s = numeric("agent_interval_s", None)
    memory_hog_share = numeric("memory_hog_share", None)
    # the per-core coefficients (docs/calibration/core-model.json's unless set)
    interference_cpu = numeric("interference_cpu", None)
    interference_presence = numeric("interference_presence", None)
    interference_memory = numeric("interference_memory", None)
    nu = numeric("nu", 1.0)
    max_retry_time = whole("max_retry_time", 1)
    strategy = custom("strategy", _strategy, f"one of {', '.join(Strategy.__members__)}",
                      Strategy.NLTF)  # fmt: skip
    load_trace = free_text("load_trace", None)
    load_points = whole("load_points", FULL_POINTS, quick=QUICK_POINTS)
    profile_samples = whole("profile_samples", 1000, quick=300)
    placement = word("placement", POLICY_NAMES, "tarcil")
    frontier_loads = custom("frontier_loads", _fractions, "a comma list of numbers in (0, 2]",
                            (0.5, 0.75, 1.0), quick=(0.5, 1.0))  # fmt: skip


CLUSTER_KEYS: tuple[Key[Any], ...] = (
    Knobs.nodes, Knobs.risk_interval_s, Knobs.kube_threshold, Knobs.target_factor,
    Knobs.agent_interval_s, Knobs.memory_hog_share,
)  # fmt: skip
INTERFERENCE_KEYS: tuple[Key[Any], ...] = (
    Knobs.interference_cpu,
    Knobs.interference_presence,
    Knobs.interference_memory,
)
# every number of the node model but the node-wide interference, which the per-core
# model replaces here (docs/calibration/core-model.json)
NODE_KEYS = tuple(
    key for key in field_keys(NodeModel(), given_only=True) if key.name != "interference"
)
SET_KEYS = SetSpec.of("colocation", Knobs).with_keys(*NODE_KEYS)


@benchmark(
    "colocation",
    "cluster co-location sim: LRA tail vs alone and batch JCT under yarn, kube-auto, "
    "toposch-n/-p, yarn-adapt",
    SET_KEYS,
)
def colocation_bench(options: BenchOptions) -> BenchResult:
    started = time.perf_counter()
    values = SET_KEYS.read(options.extra, quick=options.quick)
    model = _cluster_model(values)
    placement = values[Knobs.placement]
    toposch = ToposchSettings(
        nu=values[Knobs.nu],
        max_retry_time=values[Knobs.max_retry_time],
        lowest_risk=_chooser(placement),
    )
    strategy = values[Knobs.strategy]
    load_path = Path(values[Knobs.load_trace] or bundled_trace(TWITTER))
    points, profiles = values[Knobs.load_points], values[Knobs.profile_samples]
    loads = read_loads(load_path)
    if points > 0:
        loads = loads[:points]
    horizon = len(loads) * model.node.load_interval_s
    trace = options.trace or bundled_trace()
    workload = load_swim(
        trace,
        settings=SwimReplaySettings.for_trace(Path(trace), target_machines=1),
        seed=options.seed,
    )
    slots = replace(model.node, batch_slots=model.node.batch_slots * model.nodes)
    jobs = batch_jobs(workload, slots, window_s=horizon, seed=options.seed)
    app = piggymetrics()
    settings = service_settings(service_defaults(), app.entry, [s.name for s in app.services],
                                app_target_ms(model, app))  # fmt: skip
    service = service_guard_spec(settings)
    qos_models = {
        s.name: QosModel("gbrt", seed=options.seed).fit(
            profile_samples(service_model(model, s), loads, count=profiles, seed=options.seed)
        )
        for s in app.services
    }
    reclaim = ReclaimSettings(
        per_task=Amount(1000, 0),
        mini_step=Amount(500, 0),
        floor=Amount(100, 0),
        grace_period_s=60.0,
        settle_s=2.0,
    )

    def run(policy: Policy, batch: bool = True, lc: bool = True) -> ClusterRun:
        cluster = Cluster(
            model,
            app,
            jobs if batch else [],
            loads,
            policy,
            reclaim=reclaim,
            qos_models=qos_models,
            seed=options.seed,
            lc_silent=not lc,
        )
        return cluster.run(horizon)

    yarn = Policy("yarn", ToposchSettings(nu=0.0, max_retry_time=0))
    chosen = list(policies(toposch, strategy, service))
    frontier_loads: tuple[float, ...] = values[Knobs.frontier_loads]
    loads_swept = [f for f in frontier_loads if f != 1.0]
    total = len(chosen) * (1 + len(loads_swept)) + 2
    lc_alone = run(yarn, batch=False)
    report("bench colocation run", 1, total, "application alone")
    batch_alone = run(yarn, lc=False)
    report("bench colocation run", 2, total, "batch alone")
    results = []
    for policy in chosen:
        results.append(run(policy))
        report("bench colocation run", len(results) + 2, total, policy.name)
    swept: list[ClusterRun] = []
    for fraction in loads_swept:
        lighter = replace(slots, utilization=slots.utilization * fraction)
        fewer = batch_jobs(workload, lighter, window_s=horizon, seed=options.seed)
        for policy in chosen:
            cluster = Cluster(model, app, fewer, loads, policy, reclaim=reclaim,
                              qos_models=qos_models, seed=options.seed)  # fmt: skip
            swept.append(cluster.run(horizon))
            report("bench colocation run", len(results) + len(swept) + 2, total,
                   f"{policy.name} at {fraction:g} of the batch load")  # fmt: skip
    rows = {r.policy: _figures(r, lc_alone, batch_alone, model) for r in results}
    best = rows["yarn-adapt"]
    figures: dict[str, Any] = {
        "policies": rows,
        "frontier": frontier(results + swept, lc_alone),
        "best": best,
        "gap": {
            "lra_p95_vs_alone": round(best["lra_p95_vs_alone"] - TARGET_RATIO, 4),
            "batch_jct_increase": round(best["batch_jct_increase"] - TARGET_JCT, 4),
            "met": best["lra_p95_vs_alone"] <= TARGET_RATIO
            and best["batch_jct_increase"] <= TARGET_JCT,
        },
        "alone": {
            "lra_p95_ms": round(statistics.fmean(lc_alone.e2e_p95_ms), 3),
            "batch_jct_s": summary(list(batch_alone.jct_s.values())),
            "target_ms": round(lc_alone.target_ms, 2),
        },
        "jobs": len(jobs),
        "simulated_s": horizon,
        "wall_s": round(time.perf_counter() - started, 2),
        "model": {f.name: getattr(model.node, f.name) for f in fields(model.node)}
        | {"nodes": model.nodes, "nu": toposch.nu, "max_retry_time": toposch.max_retry_time}
        | {"placement": placement}
        | {"calibration": CORE_CALIBRATION.name}
        | {"interference": asdict(model.interference)}
        | {"memory_hog_share": model.memory_hog_share}
        | {"frontier_loads": list(frontier_loads)}
        | {"service": service_view(settings)},
    }
    return BenchResult(figures=figures, rows=[{"policy": k, **_flat(v)} for k, v in rows.items()])


def _chooser(placement: str) -> LowestRiskChooser:
    """Algorithm 1's lowest-risk node, chosen by a placement policy (Tarcil's
    sampling by default; ``greedy`` scans every node)."""
    try:
        return lowest_risk_chooser(placement)
    except InputError as exc:
        raise SettingsError(f"colocation: --set placement={placement}: {exc}") from exc


def service_defaults() -> Settings:
    """The service's settings as they ship (every ``[colocation]``, ``[tracing]``
    default): what the ``yarn-adapt`` rows run, besides the application's name."""
    return Settings()


def service_settings(
    base: Settings, entry: str, services: Sequence[str], target_ms: float
) -> Settings:
    """``base`` (the service's defaults, or an operator's file) with the guard on in
    ``auto`` and the application named: ``qos_targets`` (its entry service's
    target) and ``applications`` (its services). Everything else is ``base``'s."""
    colocation = replace(
        base.colocation,
        enabled=True,
        mode=GuardMode.AUTO,
        qos_targets=(f"{entry}={target_ms:g}",),
        applications=(f"{APPLICATION}={','.join(services)}",),
    )
    return base.with_overrides(colocation=colocation)


def service_guard_spec(settings: Settings) -> ServiceGuardSpec:
    """The service as the simulation takes it: its own guard assembly over
    ``settings``, and the settings the simulated traces and cadence read."""
    return ServiceGuardSpec(
        assemble=partial(assemble_guard, settings),
        period_s=settings.colocation.period_s,
        window_s=settings.tracing.window_s,
        slo_window_s=settings.colocation.slo_window_s,
        qos_percentile=settings.colocation.qos_percentile,
        risk=RiskSettings(
            alpha=settings.tracing.alpha, min_share=settings.tracing.critical_min_share
        ),
    )


def policies(
    toposch: ToposchSettings, strategy: Strategy, service: ServiceGuardSpec
) -> list[Policy]:
    """The compared policies; ``service``: the yarn-adapt service, as the simulation
    takes it."""
    yarn_placement = ToposchSettings(nu=0.0, max_retry_time=0)
    return [
        Policy("yarn", yarn_placement),
        Policy("kube-auto", yarn_placement, agent="utilisation"),
        Policy("toposch-n", toposch),
        Policy("toposch-p", toposch, agent="qos", strategy=strategy),
        Policy("yarn-adapt", yarn_placement, agent="service", service=service, placement="yarn"),
        # not deployable: YARN cannot place beyond what the RM shows
        Policy("yarn-adapt+retry", toposch, agent="service", service=service),
    ]


def service_view(settings: Settings) -> dict[str, Any]:
    """What the ``yarn-adapt`` rows took from the service's settings."""
    section = settings.colocation
    return {
        "policy": str(section.policy),
        "period_s": section.period_s,
        "window_s": settings.tracing.window_s,
        "slo_window_s": section.slo_window_s,
        "demand": section.demand,
        "qos_targets": list(section.qos_targets),
    }


def frontier(runs: list[ClusterRun], lc_alone: ClusterRun) -> dict[str, list[list[float]]]:
    """Per policy, ``[batch_cpu_share, lra_p95_vs_alone]`` points no other point of
    the policy beats on both (more batch at no worse P95), by batch share."""
    alone = statistics.fmean(lc_alone.e2e_p95_ms)
    points: dict[str, list[tuple[float, float]]] = {}
    for run in runs:
        ratio = statistics.fmean(run.e2e_p95_ms) / alone
        points.setdefault(run.policy, []).append((run.batch_cpu_share, ratio))
    return {policy: _envelope(found) for policy, found in points.items()}


def _envelope(points: list[tuple[float, float]]) -> list[list[float]]:
    kept = [
        (share, ratio)
        for share, ratio in points
        if not any(s >= share and r < ratio for s, r in points if (s, r) != (share, ratio))
    ]
    return [[round(share, 4), round(ratio, 4)] for share, ratio in sorted(set(kept))]


def _figures(
    run: ClusterRun, lc_alone: ClusterRun, batch_alone: ClusterRun, model: ClusterModel
) -> dict[str, Any]:
    alone_mean = statistics.fmean(lc_alone.e2e_p95_ms)
    per_window = _window_ratios(run.e2e_p95_ms, lc_alone.e2e_p95_ms, model)
    ratios = [
        run.jct_s[i] / batch_alone.jct_s[i] - 1.0
        for i in run.jct_s
        if i in batch_alone.jct_s and batch_alone.jct_s[i] > 0
    ]
    jct = summary(ratios)
    unfinished = len(batch_alone.jct_s) - len(run.jct_s)
    return {
        "lra_p95_vs_alone": round(statistics.fmean(run.e2e_p95_ms) / alone_mean, 4),
        "lra_p95_vs_alone_median": summary(per_window)["median"],
        "lra_p95_vs_alone_worst": summary(per_window)["worst"],
        "batch_jct_increase": jct["mean"],
        "batch_jct_increase_median": jct["median"],
        "batch_jct_increase_worst": jct["worst"],
        "qos_violation_s": round(run.violation_s, 1),
        "batch_cpu_share": round(run.batch_cpu_share, 4),
        "beyond_visible": run.beyond_visible,
        "guard_rounds": run.guard_rounds,
        "jobs_unfinished": unfinished,
        "tasks_killed": run.kills,
        "tasks_squeezed": run.squeezed,
        "placements": run.placements,
    }


def _window_ratios(values: list[float], alone: list[float], model: ClusterModel) -> list[float]:
    size = max(1, int(model.risk_interval_s / model.node.dt_s))
    out = []
    for start in range(0, min(len(values), len(alone)), size):
        mine, theirs = values[start : start + size], alone[start : start + size]
        out.append(statistics.fmean(mine) / statistics.fmean(theirs))
    return out


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not isinstance(v, dict)}


def read_loads(path: Path) -> list[float]:
    """One request rate per line; a broken row is a one-line error naming file:line."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise TraceError(str(path), 0, f"cannot read load trace: {exc.strerror}") from exc
    values = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = float(line)
        except ValueError:
            raise TraceError(
                str(path), number, f"not a request rate: {line.strip()[:40]!r}"
            ) from None
        if not (math.isfinite(value) and value >= 0):
            raise TraceError(str(path), number, f"request rate {value!r} is not a number >= 0")
        values.append(value)
    if not values or statistics.median(values) <= 0:
        raise TraceError(str(path), 0, "no positive request rates")
    return values


def _cluster_model(values: SetValues) -> ClusterModel:
    node = NodeModel()
    changes = {key.name: values[key] for key in NODE_KEYS if values.given(key)}
    cluster: dict[str, Any] = {"node": replace(node, **changes)}
    cluster.update({key.name: values[key] for key in CLUSTER_KEYS if values.given(key)})
    coefficients = {
        key.name.removeprefix("interference_"): values[key]
        for key in INTERFERENCE_KEYS
        if values.given(key)
    }
    try:
        cluster["interference"] = replace(load_core_interference(), **coefficients)
        return ClusterModel(**cluster)
    except ValueError as exc:
        raise SettingsError(f"colocation: {exc}") from exc
