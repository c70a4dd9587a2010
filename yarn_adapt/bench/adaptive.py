"""``yarn-adapt bench adaptive-latency``: run-time adaptation against static
configurations (AdaptiveConfig §4.4).

Protocol.

* Workload: a time-varying SWIM FB-2009 mix (``--trace``: another SWIM tsv):
  consecutive jobs from the second half of the trace (the task-time model learns
  from the first half) until they offer ``load`` x the cluster's container-seconds
  of 20 minutes, their submission times stretched over those 20 simulated minutes
  (the trace's own order and gaps, scaled). Load 1.0 of task work (AMs come on
  top): more than the cluster serves, so queues build up over the run as in the
  paper's Fig. 11 (``--set load=X`` changes it).
* Scheduler settings: Capacity and Fair with 2 and 4 priority queues, on 6 and 8
  containers (§4.2 base configurations; :mod:`yarn_adapt.tuning.paper`).
* Static baselines, the paper's representative configurations: Capacity 2 queues
  c1..c7 (i and 8 - i of 8 containers; on 6 containers i and 6 - i), FIFO, each
  queue held to its capacity (maximum-capacity = capacity: "assigns i and 8 - i
  containers"); Capacity 4 queues the 10 ways to give each queue 1, 3 or 5 of 8
  containers (6: 1, 1, 1, 3 and 1, 1, 2, 2); Fair 2 queues weights (25, 75),
  (50, 50), (75, 25) x FIFO/Fair/DRF (9); Fair 4 queues Table 2 (18). Each runs the
  whole workload in the simulator (heartbeats, AM containers).
* AdaptiveConfig: the same simulation in segments of one tuning interval (1, 2, 4
  or 8 minutes), starting from the middle point of its space (even split; Fair:
  weights 50, policy Fair); at the end of each, the tuner (:func:`yarn_adapt.tuning.tuner.propose`)
  sees the jobs in progress (estimated durations only) and, if the group had new
  submissions, searches the §4.4 space -- Capacity: each queue's capacity in 7
  equal steps (eighths; sixths on 6 containers), held to it like the baselines;
  Fair: each queue's weight in {25, 50, 75} x FIFO/Fair/DRF -- for the jobs in
  progress, as the service's tuner sees them, and the next segment runs under its
  proposal. Segments continue after the last submission until every job finished
  (``--set forecast=yes`` adds the tuner's forecast of the next interval -- its last
  interval's submissions again -- and ``--set forecast=N`` N intervals of it: an
  experiment the service does not run, because its predictions must be checkable on
  the jobs that realise; the JSON's ``forecast_intervals`` says which ran; ``--set
  elastic=yes`` lets Capacity queues, baselines and tuned, reach the §4.2 maximum
  of 90 % instead of holding them to their capacity; ``--set
  scheduler=capacity|fair`` runs one scheduler).
* Figure: for each setting and size, the mean over the static configurations of
  (static mean job latency / adaptive mean job latency); ``ratio_Nmin`` averages
  it over settings and sizes. A static configuration that starves a queue (jobs
  still waiting at 50 x 20 minutes count as finishing then) makes that mean large,
  so ``median_ratio_Nmin`` (median over the statics, then over scenarios) and
  ``ratio_to_best_static_Nmin`` (the best static / adaptive) are reported too.
  Paper: 2.16x overall, 2.22x at 2 min, 2.40x at 1 min.
* ``interval_coverage``: every interval's prediction for the group -- under the
  configuration that then ran its jobs in progress -- carries the likely range the
  service states (:mod:`yarn_adapt.service.proposers.intervals`: 80 %, calibrated on the
  predictions already checked, a wide prior before 3). A scenario's record of checks
  starts empty (a service's does on a new cluster) and carries over from one
  interval's run to the next, as a service's carries over from round to round (the
  scenarios run side by side, each in its own process); a run's predictions check
  only once their jobs finish, so within one short run most would be stated under
  the prior. ``interval_coverage`` is the share
  of checked predictions whose jobs' realised mean fell inside the range,
  ``interval_coverage_calibrated`` the same over those ranged from checks
  (``ranges_checked``, ``ranges_calibrated``: how many); none with the forecast, whose
  hypothetical jobs never realise. ``prediction_log_error_mean_ratio`` and
  ``prediction_log_error_sd_ratio`` (of ``log(realised / predicted)`` over every check) are
  what a range's prior should assume before a service has checks of its own.
* Google (§4.5.2, paper 1.94x): the same comparison on a multi-group cluster,
  group level and cluster level (the DP), replaying a Google 2011 trace --
  :mod:`yarn_adapt.bench.google_cluster`; its figures are the ``google_*`` keys
  (``google_cluster_ratio`` the paper's metric).
"""

from __future__ import annotations

import logging
import math
import os
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from yarn_adapt.bench import BenchOptions, BenchResult, benchmark
from yarn_adapt.bench.adaptive_figures import Row, figures
from yarn_adapt.bench.adaptive_keys import LOAD, SET_KEYS, Knobs
from yarn_adapt.bench.comparator import SETTINGS, SchedulerSetting, censored_mean_latency
from yarn_adapt.bench.google_cluster import run_google
from yarn_adapt.bench.paper_configs import adaptive_space, fixed_space, static_settings
from yarn_adapt.errors import SettingsError
from yarn_adapt.model import JobSpec, SchedulerConfig, Workload
from yarn_adapt.progress import report
from yarn_adapt.service.backend import FinishedJob
from yarn_adapt.service.demo.simcluster import SimulatedCluster
from yarn_adapt.service.proposers.intervals import (
    PredictionLedger,
    RoundPrediction,
)
from yarn_adapt.sim import (
    ClusterSpec,
    JobInProgress,
    SimulationOptions,
    SimulationStart,
    simulate,
)
from yarn_adapt.tuning.apply import apply_setting, groups_of
from yarn_adapt.tuning.executors import open_executor
from yarn_adapt.tuning.hindsight import hindsight_static, replayed_jobs
from yarn_adapt.tuning.paper import PaperCluster, base_config
from yarn_adapt.tuning.proposal import Proposal
from yarn_adapt.tuning.settings import TunerSettings
from yarn_adapt.tuning.space import (
    GroupSetting,
)
from yarn_adapt.tuning.state import TuningState
from yarn_adapt.tuning.tuner import propose
from yarn_adapt.workload import SwimReplaySettings, TaskTimeModel, fit_task_time_model, load_swim
from yarn_adapt.workload.bundled import FB_2009, GOOGLE_2011, bundled_trace

log = logging.getLogger("yarn_adapt.bench")

SPAN_S = 1200.0
INTERVALS_MIN = (1, 2, 4, 8)
SIZES = (6, 8)
SWIM_TARGET_MACHINES = 6


# --------------------------------------------------------------------------- workload


def window(jobs: Sequence[JobSpec], containers: int, load: float, span_s: float) -> Workload:
    """Consecutive ``jobs`` until they offer ``load`` x ``containers`` x ``span_s``
    container-seconds, their submissions stretched over ``span_s``."""
    budget = load * containers * span_s
    taken: list[JobSpec] = []
    for job in jobs:
        taken.append(job)
        budget -= job.total_task_seconds
        if budget <= 0:
            break
    start, end = taken[0].submit_s, taken[-1].submit_s
    scale = span_s / (end - start) if end > start else 1.0
    spread = tuple(replace(j, submit_s=round((j.submit_s - start) * scale, 3)) for j in taken)
    return Workload(spread, source=f"swim window ({len(spread)} jobs, load {load:g})")


@dataclass(frozen=True)
class Scenario:
    setting: SchedulerSetting
    containers: int
    workload: Workload
    model: TaskTimeModel
    elastic: bool = False

    @property
    def label(self) -> str:
        return f"{self.setting.label}/{self.containers}c"


def scenarios(
    path: Path,
    seed: int,
    sizes: Sequence[int],
    load: float = LOAD,
    settings: Sequence[SchedulerSetting] = SETTINGS,
) -> list[Scenario]:
    found = []
    for setting in settings:
        replay = SwimReplaySettings.for_trace(path, target_machines=SWIM_TARGET_MACHINES)
        trace = load_swim(path, settings=replay, queues=setting.mapping, seed=seed)
        half = len(trace.jobs) // 2
        if half < 10:
            raise SettingsError(f"{path}: too few jobs for the adaptive protocol")
        model = fit_task_time_model(replace(trace, jobs=trace.jobs[:half]), seed=seed)
        for containers in sizes:
            mix = window(trace.jobs[half:], containers, load, SPAN_S)
            found.append(Scenario(setting, containers, mix, model))
    return found


# --------------------------------------------------------------------------- runs


def static_latency(
    scenario: Scenario, config: SchedulerConfig, cluster: ClusterSpec
) -> tuple[float, int]:
    """Mean job latency of the whole workload under a static ``config`` (a job still
    waiting at 50 x the span counts as finishing then), and how many did not finish."""
    horizon = 50 * SPAN_S
    result = simulate(scenario.workload, config, cluster, SimulationOptions(horizon_s=horizon))
    unfinished = sum(1 for j in result.jobs if j.finish_s is None)
    unfinished += len(scenario.workload.jobs) - len(result.jobs)
    return censored_mean_latency(result, horizon), unfinished


def tuner_refuses(
    scenario: Scenario, base: SchedulerConfig, setting: GroupSetting, cluster: ClusterSpec
) -> bool:
    """The tuner's own validity rule applied to a static configuration: with every
    job of the workload in view (estimated durations, as the tuner sees them),
    :func:`~yarn_adapt.tuning.tuner.propose` predicts the configuration's mean
    latency -- infinite when its comparator finds a job that can never run (a queue
    held to one container, which the job's ApplicationMaster takes). The tuner never
    moves to such a configuration, so a static one it would refuse is no baseline
    (issue 14: "statics YARN would run without starving a queue")."""
    space = fixed_space(setting, scenario.elastic)
    config = apply_setting(base, setting)
    start = SimulationStart(0.0, tuple(JobInProgress(j) for j in scenario.workload.jobs))
    state = TuningState(0.0, start, cluster)
    settings = TunerSettings(
        interval_s=SPAN_S, spaces={setting.parent: space}, min_improvement=0.0, app_headroom=1.0
    )
    proposal = propose(state, config, scenario.model, settings)
    return not math.isfinite(proposal.cluster_before_s)


def adaptive_latency(
    scenario: Scenario,
    base: SchedulerConfig,
    cluster: ClusterSpec,
    interval_s: float,
    forecast: int = 0,
    record: list[float] | None = None,
    hindsight: bool = False,
) -> TunedRun:
    """Mean job latency when the tuner re-configures every ``interval_s``
    (``forecast``: its horizon, how many intervals ahead it forecasts, 0 for none;
    ``hindsight``: the hindsight static as a candidate), how many times it changed
    the configuration, how many jobs did not finish, and each change's
    |predicted - realised| / realised on the jobs in progress it predicted for (the
    stated prediction, the forecast part apart).
    ``record``: the log ratios checked before (the likely ranges' calibration),
    extended with this run's."""
    space = adaptive_space(scenario.setting, scenario.containers, elastic=scenario.elastic)
    # start inside the tuner's own space (the even split), not from the base file:
    # a Capacity base lets queues reach 90 %, which the held baselines cannot
    start = apply_setting(base, space.decode(tuple(d.size // 2 for d in space.dimensions)))
    simulated = SimulatedCluster(scenario.workload, cluster, start)
    settings = TunerSettings(
        interval_s=interval_s,
        spaces={"root": space},
        min_improvement=0.0,
        forecast=forecast > 0,
        forecast_intervals=max(forecast, 1),
        hindsight=hindsight,
    )
    changes = 0
    predictions: list[tuple[tuple[str, ...], float]] = []
    ledger = PredictionLedger(earlier=record or ())
    prior = scenario.model.error.sigma if scenario.model.error is not None else 0.0
    while not simulated.done and simulated.clock_s < 50 * SPAN_S:
        simulated.advance(interval_s)
        view = simulated.view()
        ledger.observe(_finished(simulated), simulated.config, view.time_s)
        state = TuningState(view.time_s, view.start, view.cluster, view.recent, view.history)
        proposal = propose(state, simulated.config, scenario.model, settings)
        jobs = tuple(p.job.id for p in view.start.jobs)
        # the stated predictions are the jobs in progress alone, the forecast apart
        ledger.record(_stated(proposal, jobs, view.time_s, ledger, prior))
        if proposal.changed:
            simulated.load(proposal.config)
            changes += 1
            predictions.append((jobs, proposal.cluster_after_s))
    ledger.observe(_finished(simulated), simulated.config, math.inf)
    if record is not None:
        record[:] = ledger.log_ratios()
    latencies = [j.latency_s for j in simulated.finished if j.latency_s is not None]
    unfinished = len(scenario.workload.jobs) - len(latencies)
    latencies += [50 * SPAN_S] * unfinished
    return TunedRun(
        statistics.fmean(latencies),
        changes,
        unfinished,
        _errors(simulated, predictions),
        ledger.coverage(),
        ledger.coverage(calibrated_only=True),
        tuple(c.log_ratio for c in ledger.checks if c.predicted_s > 0),
    )


def _finished(simulated: SimulatedCluster) -> list[FinishedJob]:
    return [
        FinishedJob(j.id, j.queue, int(j.submit_s * 1000), int(j.finish_s * 1000))
        for j in simulated.ended.values()
        if j.finish_s is not None
    ]


def _stated(
    proposal: Proposal,
    jobs: tuple[str, ...],
    at_s: float,
    ledger: PredictionLedger,
    prior_sigma: float,
) -> list[RoundPrediction]:
    """The interval's predictions as the service states them: each triggered group's
    latency under the running and the proposed configuration, with likely ranges."""
    calibration = ledger.calibration(prior_sigma)
    proposed = proposal.config if proposal.changed else None
    return [
        RoundPrediction(
            at_s, d.group, jobs, d.before_s, d.after_s,
            calibration.range_of(d.before_s), calibration.range_of(d.after_s),
            proposed, calibration.calibrated,
        )
        for d in proposal.groups
        if d.triggered and jobs and math.isfinite(d.before_s)
    ]  # fmt: skip


@dataclass(frozen=True)
class TunedRun:
    latency_s: float
    changes: int
    unfinished: int
    errors: tuple[float, ...]
    ranges: tuple[int, int] = (0, 0)  # predictions inside their likely range, of checked
    calibrated: tuple[int, int] = (0, 0)  # the same, of those ranged from checks
    log_ratios: tuple[float, ...] = ()  # log(realised / predicted) of this run's checks


def _errors(
    simulated: SimulatedCluster, predictions: Sequence[tuple[tuple[str, ...], float]]
) -> tuple[float, ...]:
    errors = []
    for jobs, predicted in predictions:
        ended = [simulated.ended.get(j) for j in jobs]
        done = [e.latency_s for e in ended if e is not None and e.latency_s is not None]
        if jobs and len(done) == len(jobs) and math.isfinite(predicted):
            realised = statistics.fmean(done)
            errors.append(abs(predicted - realised) / realised)
    return tuple(errors)


@dataclass(frozen=True)
class Statics:
    """The static baselines of one scenario: the latencies of those the tuner's
    validity rule keeps, their unfinished jobs, and how many it refused."""

    latencies: tuple[float, ...]
    unfinished: int
    refused: int
    refused_unfinished: int


def run_statics(scenario: Scenario, base: SchedulerConfig, cluster: ClusterSpec) -> Statics:
    kept: list[float] = []
    unfinished = refused = refused_unfinished = 0
    for setting in static_settings(scenario.setting, scenario.containers, elastic=scenario.elastic):
        latency, left = static_latency(scenario, apply_setting(base, setting), cluster)
        if tuner_refuses(scenario, base, setting, cluster):
            refused += 1
            refused_unfinished += left
            continue
        kept.append(latency)
        unfinished += left
    return Statics(tuple(kept), unfinished, refused, refused_unfinished)


def hindsight_latency(scenario: Scenario, base: SchedulerConfig, cluster: ClusterSpec) -> float:
    """The realised mean latency of the hindsight static of the whole run: the static
    configuration of the tuner's space that its replay (every job, estimated
    durations) picks, run on the real durations. Beside the best static, it says
    how well the replay picks."""
    space = adaptive_space(scenario.setting, scenario.containers, elastic=scenario.elastic)
    jobs = replayed_jobs(scenario.workload.jobs, scenario.model)
    limit = TunerSettings().hindsight_points
    found = hindsight_static(jobs, base, groups_of(base)[0], space, cluster, limit)
    if found is None:
        return math.nan
    return static_latency(scenario, apply_setting(base, found.setting), cluster)[0]


def run_scenario(
    scenario: Scenario,
    intervals: Sequence[int],
    forecast: int = 0,
    record: list[float] | None = None,
    hindsight: bool = False,
) -> list[Row]:
    base = base_config(scenario.setting.scheduler, scenario.setting.mapping.queues)
    cluster = PaperCluster(scenario.containers).spec()
    statics = run_statics(scenario, base, cluster)
    hindsight_s = hindsight_latency(scenario, base, cluster)
    if not statics.latencies:
        log.warning("%s: the tuner refuses every static configuration; skipped", scenario.label)
        return [_skipped(scenario.label, statics)]
    rows = []
    for minutes in intervals:
        began = time.perf_counter()
        tuned = adaptive_latency(
            scenario, base, cluster, 60.0 * minutes, forecast, record, hindsight
        )
        adaptive = tuned.latency_s
        ratios = [s / adaptive for s in statics.latencies]
        rows.append(
            Row(
                scenario.label,
                minutes,
                adaptive,
                statistics.fmean(statics.latencies),
                min(statics.latencies),
                statistics.fmean(ratios),
                statistics.geometric_mean(ratios),
                statistics.median(ratios),
                len(statics.latencies),
                statics.refused,
                statics.unfinished,
                tuned.unfinished,
                tuned.changes,
                time.perf_counter() - began,
                tuned.errors,
                tuned.ranges,
                tuned.calibrated,
                tuned.log_ratios,
                hindsight_s,
            )
        )
        log.info("%s", rows[-1])
    return rows


def _skipped(label: str, statics: Statics) -> Row:
    """A scenario none of whose static configurations the tuner would run: no ratio."""
    nan = math.nan
    return Row(label, 0, nan, nan, nan, nan, nan, nan, 0, statics.refused, 0, 0, 0, 0.0)


@benchmark(
    "adaptive-latency",
    "§4.4-4.5.2: mean job latency, static configs / run-time tuning",
    SET_KEYS,
)
def adaptive_latency_bench(options: BenchOptions) -> BenchResult:
    """The SWIM scenarios (§4.4) and the Google multi-group experiment (§4.5.2,
    :mod:`yarn_adapt.bench.google_cluster`), each on its bundled trace. ``--trace``
    a SWIM .tsv runs the SWIM part on it, a Google 2011 directory the Google part;
    ``--set part=swim|google|both`` chooses (default: both without ``--trace``,
    the trace's own part with it; the other part then replays its bundled trace).
    The Google part and the SWIM scenarios run side by side on ``--set workers=N``
    processes (default: one per core), the longest first."""
    values = SET_KEYS.read(options.extra, quick=options.quick)
    given = options.trace
    default = "both" if given is None else "google" if given.is_dir() else "swim"
    part = values[Knobs.part] or default
    google_trace = given if given is not None and given.is_dir() else bundled_trace(GOOGLE_2011)
    if given is not None and given.is_dir() and part != "google":
        raise SettingsError(f"{given}: a directory is a Google trace; the SWIM part wants a .tsv")
    units = swim_units(options) if part != "google" else []
    workers = values[Knobs.workers] or os.cpu_count() or 1
    with open_executor("serial" if workers == 1 else f"process:{workers}") as handle:
        pool = handle.executor
        google = (
            pool.submit(run_google, google_trace, options.extra, options.quick, options.seed)
            if part != "swim"
            else None
        )
        futures = [pool.submit(unit_rows, unit) for unit in units]
        rows: list[Row] = []
        for done, future in enumerate(futures, 1):
            rows += future.result()
            report("adaptive-latency scenario", done, len(futures))
        found: dict[str, Any] = {}
        table: list[Mapping[str, Any]] = []
        if units:
            swim = swim_figures(rows, units[0])
            found, table = dict(swim.figures), list(swim.rows)
        if google is not None:
            found.update(google.result())
    return BenchResult(found, table)


@dataclass(frozen=True)
class SwimUnit:
    """One SWIM scenario's share of the bench, run in a worker process: the scenario
    is built there (trace, task-time model, window) and runs every interval."""

    path: Path
    seed: int
    setting: SchedulerSetting
    containers: int
    load: float
    elastic: bool
    intervals: tuple[int, ...]
    forecast: int
    hindsight: bool


def swim_units(options: BenchOptions) -> list[SwimUnit]:
    """§4.4's single-group scenarios on a SWIM trace, one unit per scheduler setting
    and cluster size."""
    path = options.trace if options.trace is not None else bundled_trace(FB_2009)
    values = SET_KEYS.read(options.extra, quick=options.quick)
    intervals = (2, 8) if options.quick else INTERVALS_MIN
    sizes = (8,) if options.quick else SIZES
    only = values[Knobs.scheduler]
    return [
        SwimUnit(
            path,
            options.seed,
            setting,
            containers,
            values[Knobs.load],
            values[Knobs.elastic],
            intervals,
            values[Knobs.forecast],
            values[Knobs.hindsight],
        )
        for setting in SETTINGS
        if not (options.quick and setting.queue_count == 4)
        and (only is None or setting.scheduler.value == only)
        for containers in sizes
    ]


def unit_rows(unit: SwimUnit) -> list[Row]:
    """Build the unit's scenario and run it. Its likely ranges' calibration starts
    empty, as a service's does on a new cluster, and carries over from one interval's
    run to the next."""
    [scenario] = scenarios(unit.path, unit.seed, (unit.containers,), unit.load, (unit.setting,))
    scenario = replace(scenario, elastic=unit.elastic)
    record: list[float] = []
    return run_scenario(scenario, unit.intervals, unit.forecast, record, unit.hindsight)


def swim_figures(rows: Sequence[Row], unit: SwimUnit) -> BenchResult:
    """The SWIM part's figures and table from every scenario's rows."""
    intervals = unit.intervals
    forecast, hindsight = unit.forecast, unit.hindsight
    table = [
        {
            "scenario": r.scenario,
            "interval_min": r.interval_min,
            "adaptive_s": round(r.adaptive_s, 1),
            "static_mean_s": round(r.static_mean_s, 1),
            "static_best_s": round(r.static_best_s, 1),
            "ratio": round(r.ratio, 3),
            "geomean_ratio": round(r.geomean_ratio, 3),
            "median_ratio": round(r.median_ratio, 3),
            "vs_best_static": round(r.vs_best_static, 3),
            "hindsight_static_s": round(r.hindsight_static_s, 1),
            "statics": r.statics,
            "statics_refused": r.statics_refused,
            "static_unfinished": r.static_unfinished,
            "unfinished": r.unfinished,
            "changes": r.changes,
            "wall_s": round(r.wall_s, 1),
        }
        for r in rows
        if r.statics > 0
    ]
    found = {
        **figures(rows, intervals),
        "forecast_intervals": forecast,
        "horizon_intervals": forecast,
        "hindsight": hindsight,
    }
    return BenchResult(found, table)
