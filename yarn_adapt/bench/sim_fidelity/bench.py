"""The bench itself: its settings and ``--set`` keys, the scenarios chosen, a run on one
cluster per scheduler kind, and the result's figures (agreement, repeats).
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from yarn_adapt.bench import BenchOptions, BenchResult, benchmark
from yarn_adapt.bench.sim_fidelity.compare import (
    compare,
    overheads_figures,
    percentile,
    scenario_row,
    summary_figures,
)
from yarn_adapt.bench.sim_fidelity.real import (
    RealRun,
    cluster_spec_for,
    nm_heartbeat_s,
    run_on_cluster,
)
from yarn_adapt.bench.sim_fidelity.scenarios import (
    AGREE_MAX_REL_ERR,
    AGREE_MEDIAN_REL_ERR,
    ALL_SCENARIOS,
    CALIBRATION,
    SUBMIT_WAYS,
    TRACE_APPS_PER_SCENARIO,
    Scenario,
    quick_scenarios,
    scenarios_from_trace,
)
from yarn_adapt.minicluster import (
    MiniCluster,
    MiniClusterError,
)
from yarn_adapt.progress import report
from yarn_adapt.set_keys import SetSpec, flag, whole, word
from yarn_adapt.sim.calibration import (
    RECORDED_OVERHEADS,
    YarnOverheads,
    estimate_overheads,
)
from yarn_adapt.workload import load_trace

log = logging.getLogger(__name__)


def calibrate(cluster: MiniCluster, via: str = "rest") -> YarnOverheads:
    """Run the calibration scenario and measure the overheads."""
    run = run_on_cluster(cluster, CALIBRATION, via)
    timelines = [real.timeline for real in run.apps if real.timeline is not None]
    return estimate_overheads(timelines, nm_heartbeat_s(cluster), source="measured")


@dataclass(frozen=True)
class FidelitySettings:
    """``--set`` keys: ``calibrate`` (measure the overheads first), ``keep_going``
    (report the scenarios that ran when one fails), ``submit`` (``rest`` or
    ``client``), ``apps_per_scenario`` (with ``--trace``), ``repeat`` (run each
    scenario that many times: later runs are also compared with the first, real
    against real, which measures how far YARN itself varies)."""

    calibrate: bool = False
    keep_going: bool = False
    submit: str = "rest"
    apps_per_scenario: int = TRACE_APPS_PER_SCENARIO
    repeat: int = 1

    @classmethod
    def parse(cls, extra: Mapping[str, str]) -> FidelitySettings:
        values = SET_KEYS.read(extra)
        return cls(
            calibrate=values[Knobs.calibrate],
            keep_going=values[Knobs.keep_going],
            submit=values[Knobs.submit],
            apps_per_scenario=values[Knobs.apps_per_scenario],
            repeat=values[Knobs.repeat],
        )


class Knobs:
    calibrate = flag("calibrate", False)
    keep_going = flag("keep_going", False)
    submit = word("submit", SUBMIT_WAYS, "rest")
    apps_per_scenario = whole("apps_per_scenario", TRACE_APPS_PER_SCENARIO, low=2)
    repeat = whole("repeat", 1, low=1)


SET_KEYS = SetSpec.of("sim-fidelity", Knobs)


def chosen_scenarios(options: BenchOptions, settings: FidelitySettings) -> list[Scenario]:
    templates = quick_scenarios(ALL_SCENARIOS) if options.quick else list(ALL_SCENARIOS)
    if options.trace is None:
        return templates
    workload = load_trace(options.trace, seed=options.seed)
    return scenarios_from_trace(workload, templates, settings.apps_per_scenario)


@benchmark("sim-fidelity", "Per-app latency: real YARN mini cluster vs the simulator", SET_KEYS)
def sim_fidelity(options: BenchOptions) -> BenchResult:
    began = time.monotonic()
    settings = FidelitySettings.parse(options.extra)
    scenarios = chosen_scenarios(options, settings)
    overheads = RECORDED_OVERHEADS
    runs: list[RealRun] = []
    failed: list[str] = []
    for kind in ("capacity", "fair"):
        mine = [s for s in scenarios if s.scheduler == kind]
        calibrating = kind == "capacity" and settings.calibrate
        if not mine and not calibrating:
            continue
        first_xml = (CALIBRATION if calibrating else mine[0]).queues_xml
        with MiniCluster(cluster_spec_for(kind, first_xml)) as cluster:
            if calibrating:
                overheads = calibrate(cluster, settings.submit)
                log.info("calibration: %s", overheads)
            runs.extend(_run_scenarios(cluster, mine, settings, failed))
    return _result(runs, overheads, options.seed, time.monotonic() - began, failed)


def _run_scenarios(
    cluster: MiniCluster,
    scenarios: Sequence[Scenario],
    settings: FidelitySettings,
    failed: list[str],
) -> list[RealRun]:
    """The scenarios' real runs; with ``keep_going`` a failed one (an app the RM did
    not finish in time, say) is named in ``failed`` and counts as not agreeing."""
    runs = []
    total, done = len(scenarios) * settings.repeat, 0
    for scenario in scenarios:
        for _ in range(settings.repeat):
            log.info("scenario %s: %d apps", scenario.name, len(scenario.apps))
            try:
                runs.append(run_on_cluster(cluster, scenario, settings.submit))
            except MiniClusterError as exc:
                if not settings.keep_going:
                    raise
                log.warning("scenario %s failed: %s", scenario.name, exc.one_line())
                failed.append(scenario.name)
            done += 1
            report("bench sim-fidelity run", done, total, scenario.name)
    return runs


def _result(
    runs: Sequence[RealRun],
    overheads: YarnOverheads,
    seed: int,
    wall_s: float,
    failed: Sequence[str] = (),
) -> BenchResult:
    if not runs:
        raise MiniClusterError("no scenario ran to completion")
    rows, everything = [], []
    for run in runs:
        comparisons = compare(run, overheads, seed)
        everything.extend(comparisons)
        rows.append(scenario_row(run, comparisons))
    figures = {
        **summary_figures(everything, len({run.scenario.name for run in runs})),
        **agreement_figures(rows, failed),
        **repeat_figures(runs),
        "calibration": overheads_figures(overheads),
        "wall_s": round(wall_s, 1),
    }
    return BenchResult(figures=figures, rows=rows)


def agreement_figures(
    rows: Sequence[Mapping[str, object]], failed: Sequence[str] = ()
) -> dict[str, object]:
    """How many scenario runs agree with the real RM, which do not (a scenario that
    failed on the RM among them, also named in ``scenarios_failed``), and the rule."""
    disagree = {str(row["scenario"]) for row in rows if not row["agrees"]} | set(failed)
    return {
        "scenarios_agree": sum(1 for row in rows if row["agrees"]),
        "scenarios_disagree": sorted(disagree),
        "scenarios_failed": sorted(set(failed)),
        "agree_rule": f"median_rel_err <= {AGREE_MEDIAN_REL_ERR:g} and "
        f"max_rel_err <= {AGREE_MAX_REL_ERR:g}",
    }


def repeat_differences(runs: Sequence[RealRun]) -> list[float]:
    """|latency - latency in the scenario's first run| / the first, for each app of
    every later run of a scenario (apps matched by name)."""
    first: dict[str, dict[str, float]] = {}
    differences = []
    for run in runs:
        earlier = first.setdefault(run.scenario.name, {})
        if not earlier:
            earlier.update({real.app.name: real.latency_s for real in run.apps})
            continue
        for real in run.apps:
            base = earlier[real.app.name]
            differences.append(abs(real.latency_s - base) / base)
    return differences


def repeat_figures(runs: Sequence[RealRun]) -> dict[str, float]:
    differences = repeat_differences(runs)
    if not differences:
        return {}
    return {
        "repeat_median_rel_diff": round(statistics.median(differences), 4),
        "repeat_p90_rel_diff": round(percentile(differences, 90), 4),
    }
