"""``yarn-adapt bench comparator-accuracy``: does the comparator pick the truly best
group configuration? (AdaptiveConfig §4.3.)

Protocol.

* Scheduler settings: Capacity and Fair, with 2 queues (priorities 2-5, 6-8) and 4
  queues (2-3, 4-5, 6-7, 8); the paper's candidate sets: Capacity 5 / 9 splits with
  FIFO queues, Fair the same splits as weights x {FIFO, Fair, DRF}: 15 / 27
  (:func:`yarn_adapt.tuning.space.paper_space`). Candidates are written into the
  §4.2 base configurations (:mod:`yarn_adapt.tuning.paper`).
* Traces: SWIM FB-2009 (replayed for a 6-machine target, so jobs fit the small
  clusters) and Google 2011 part 0 (best-effort jobs, at most 16 tasks each), both
  bundled; ``--trace`` swaps in another SWIM tsv or Google directory. Jobs are split
  in time: the task-time model learns from the first half of the trace's jobs;
  mixes are drawn from the second half, so the model never saw a mix's jobs.
* Mixes: 25 consecutive jobs (20 for Google) from a seeded random offset, each run on
  6 and on 8 containers; offered load cycles through 0.7, 1.0 and 1.3 of the cluster
  (:func:`yarn_adapt.tuning.paper.make_mix`). 8 mixes per trace: 32 mix cases; each is
  tested under the four scheduler settings.
* Ground truth: the simulator (heartbeat mode, AM containers, YARN defaults) runs
  every candidate with the *real* task durations (jobs a configuration starves until
  the horizon count as waiting until then). The comparator sees the mix with the
  task-time model's *estimates* only, and the cluster's nodes, and picks the
  candidate with the lowest expected mean latency over 8 copies of the mix whose
  stage durations are off by log-normal factors of the model's error spread (its
  log-error standard deviation on held-out jobs of the training half: the model is
  fitted on the first 80 % of that half, the spread measured on the rest).
* A pick counts as the best when its true mean latency is within 0.5 % of the true
  best's (the tolerance stops candidates that the simulator cannot tell apart --
  e.g. every split when one queue is idle -- from being scored as misses; cases
  where all candidates tie are reported as ``all_tied``).

Figures (percentages as numbers: 95.0 means 95 %): ``best_share`` over all cases,
``best_share_capacity``, ``best_share_fair``; ``mean_excess_nonbest``: mean excess
latency of the pick over the true best in the cases it was not the best;
``mixes``: mix cases (mix x cluster size); ``cases``: mix cases x settings. For
insight also ``best_share_real_durations`` (the same comparator fed the true
durations: what the mechanism model alone achieves) and the comparator's cost per
candidate (all uncertainty samples; ``--set samples=1`` compares point estimates,
``--set mixes=N`` changes the number of mixes per trace). Paper: 87.26 % (Capacity
93.33, Fair 81.19), 3.37 %.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from rules.comparator import Comparator, Uncertainty
from rules.inputs import JobMix
from rules.mixes import mix_from_workload
from rules.uncertainty import log_error_spread
from yarn_adapt.bench import BenchOptions, BenchResult, benchmark
from yarn_adapt.errors import SettingsError
from yarn_adapt.model import Resources, Workload
from yarn_adapt.progress import report
from yarn_adapt.sim import SimulationOptions, SimulationResult, simulate
from yarn_adapt.tuning.paper import (
    Candidate,
    PaperCluster,
    base_config,
    candidates,
    leaf_paths,
    make_mix,
)
from yarn_adapt.tuning.space import Scheduler, paper_space
from yarn_adapt.workload import (
    QueueMapping,
    SwimReplaySettings,
    TaskTimeModel,
    fit_task_time_model,
    load_google,
    load_swim,
)
from yarn_adapt.workload.bundled import FB_2009, GOOGLE_2011, bundled_trace

log = logging.getLogger("yarn_adapt.bench")

TIE_TOLERANCE = 0.005
LOADS = (0.7, 1.0, 1.3)
CLUSTER_SIZES = (6, 8)
SWIM_TARGET_MACHINES = 6
GOOGLE_MAX_TASKS = 16
GOOGLE_UNIT = Resources(1024, 1)
UNCERTAINTY_SAMPLES = 8


@dataclass(frozen=True)
class SchedulerSetting:
    scheduler: Scheduler
    queue_count: int

    @property
    def mapping(self) -> QueueMapping:
        if self.queue_count == 2:
            return QueueMapping.paper_two_queues()
        return QueueMapping.paper_four_queues()

    @property
    def label(self) -> str:
        return f"{self.scheduler.value}-{self.queue_count}q"


SETTINGS = tuple(
    SchedulerSetting(s, n) for n in (2, 4) for s in (Scheduler.CAPACITY, Scheduler.FAIR)
)


@dataclass(frozen=True)
class TraceSource:
    """A trace and how to load it under a queue mapping."""

    name: str
    load: Callable[[QueueMapping], Workload]
    mix_size: int
    max_tasks: int | None
    unit: Resources


def swim_source(path: Path, seed: int) -> TraceSource:
    settings = SwimReplaySettings.for_trace(path, target_machines=SWIM_TARGET_MACHINES)
    return TraceSource(
        f"swim:{path.name}",
        lambda mapping: load_swim(path, settings=settings, queues=mapping, seed=seed),
        25,
        None,
        PaperCluster(1).unit,
    )


def google_source(path: Path) -> TraceSource:
    return TraceSource(
        f"google:{path.name}",
        lambda mapping: load_google(path, queues=mapping),
        20,
        GOOGLE_MAX_TASKS,
        GOOGLE_UNIT,
    )


def sources(options: BenchOptions) -> list[TraceSource]:
    if options.trace is None:
        return [
            swim_source(bundled_trace(FB_2009), options.seed),
            google_source(bundled_trace(GOOGLE_2011)),
        ]
    path = options.trace
    if path.is_dir() or "google" in path.name.lower():
        return [google_source(path)]
    if path.suffix.lower() in (".tsv", ".txt"):
        return [swim_source(path, options.seed)]
    raise SettingsError(f"{path}: --trace wants a SWIM .tsv or a Google 2011 directory")


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class MixCase:
    """One mix on one cluster size, under one scheduler setting."""

    source: str
    index: int
    containers: int
    load: float
    setting: SchedulerSetting
    real: Workload
    estimated: JobMix
    truth_view: JobMix
    cluster: PaperCluster
    uncertainty: Uncertainty


@dataclass(frozen=True)
class Outcome:
    case: MixCase
    truth: tuple[float, ...]
    estimate: tuple[float, ...]
    estimate_real: tuple[float, ...]
    evaluations: int
    comparator_s: float

    @property
    def best(self) -> float:
        return min(self.truth)

    def pick_ok(self, estimates: Sequence[float]) -> bool:
        return self.truth[int(np.argmin(estimates))] <= self.best * (1 + TIE_TOLERANCE)

    @property
    def excess(self) -> float:
        return self.truth[int(np.argmin(self.estimate))] / self.best - 1.0

    @property
    def all_tied(self) -> bool:
        return max(self.truth) <= self.best * (1 + TIE_TOLERANCE)


def mix_cases(
    source: TraceSource,
    mixes: int,
    sizes: Sequence[int],
    seed: int,
    samples: int = UNCERTAINTY_SAMPLES,
) -> Iterator[MixCase]:
    """Every (mix, cluster size, setting) of ``source``; the model is fitted on the
    trace's first half, mixes come from the second."""
    by_count = {n: source.load(SchedulerSetting(Scheduler.CAPACITY, n).mapping) for n in (2, 4)}
    half = len(by_count[2].jobs) // 2
    model, uncertainty = _model(by_count[2], half, seed, samples)
    offsets = _offsets(half, len(by_count[2].jobs) - source.mix_size, mixes, seed)
    for index, offset in enumerate(offsets):
        load = LOADS[index % len(LOADS)]
        for containers in sizes:
            cluster = PaperCluster(containers, unit=source.unit)
            for setting in SETTINGS:
                jobs = by_count[setting.queue_count].jobs[offset : offset + source.mix_size]
                real = make_mix(jobs, containers, load, source.max_tasks)
                yield MixCase(
                    source.name,
                    index,
                    containers,
                    load,
                    setting,
                    real,
                    mix_from_workload(real, model),
                    mix_from_workload(real),
                    cluster,
                    uncertainty,
                )


def _model(
    workload: Workload, half: int, seed: int, samples: int
) -> tuple[TaskTimeModel, Uncertainty]:
    """The task-time model fitted on the first 80 % of the first half of the jobs,
    and its error spread measured on the rest of that half."""
    cut = half * 4 // 5
    model = fit_task_time_model(replace(workload, jobs=workload.jobs[:cut]), seed=seed)
    spread = log_error_spread(model, workload.jobs[cut:half])
    return model, Uncertainty(spread, samples, seed)


def _offsets(low: int, high: int, count: int, seed: int) -> list[int]:
    if high <= low:
        raise SettingsError(f"the trace is too short for mixes ({low} to {high})")
    rng = np.random.default_rng(seed)
    picks = rng.choice(np.arange(low, high), size=min(count, high - low), replace=False)
    return sorted(int(p) for p in picks)


def run_case(case: MixCase) -> Outcome:
    """Simulate every candidate (truth) and let the comparator estimate each."""
    queues = case.setting.mapping.queues
    found = candidates(
        paper_space(case.setting.scheduler, "root", leaf_paths(queues)),
        base_config(case.setting.scheduler, queues),
    )
    spec = case.cluster.spec()
    horizon = _horizon(case.real, case.containers)
    options = SimulationOptions(horizon_s=horizon)
    truth = tuple(
        censored_mean_latency(simulate(case.real, c.config, spec, options), horizon) for c in found
    )
    resources = case.cluster.resources()
    began = time.perf_counter()
    comparator = Comparator(case.estimated, resources, uncertainty=case.uncertainty)
    estimate = _estimates(comparator, found)
    spent = time.perf_counter() - began
    estimate_real = _estimates(Comparator(case.truth_view, resources), found)
    return Outcome(case, truth, estimate, estimate_real, len(found), spent)


def _horizon(workload: Workload, containers: int) -> float:
    """Long enough for any configuration that makes progress: 20 times the mix's
    work spread over the cluster, at least an hour."""
    work = sum(job.total_task_seconds for job in workload.jobs)
    return max(3600.0, 20.0 * work / containers + workload.span_s)


def censored_mean_latency(result: SimulationResult, horizon: float) -> float:
    """Mean latency with a job still running at the horizon counted as waiting until
    then: a configuration that starves jobs (a Fair queue whose maxAMShare can
    never fit an AM, say) scores at least that badly instead of being ignored."""
    latencies = [
        (j.finish_s if j.finish_s is not None else horizon) - j.submit_s for j in result.jobs
    ]
    return statistics.fmean(latencies) if latencies else 0.0


def _estimates(comparator: Comparator, found: Sequence[Candidate]) -> tuple[float, ...]:
    return tuple(comparator.latency(c.group) for c in found)


# --------------------------------------------------------------------------- report


def _share(outcomes: Sequence[Outcome], real: bool = False) -> float:
    if not outcomes:
        return float("nan")
    hits = sum(o.pick_ok(o.estimate_real if real else o.estimate) for o in outcomes)
    return round(100.0 * hits / len(outcomes), 2)


def figures(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    capacity = [o for o in outcomes if o.case.setting.scheduler is Scheduler.CAPACITY]
    fair = [o for o in outcomes if o.case.setting.scheduler is Scheduler.FAIR]
    misses = [o.excess for o in outcomes if not o.pick_ok(o.estimate)]
    evaluations = sum(o.evaluations for o in outcomes)
    spent = sum(o.comparator_s for o in outcomes)
    mixes = {(o.case.source, o.case.index, o.case.containers) for o in outcomes}
    return {
        "best_share": _share(outcomes),
        "best_share_capacity": _share(capacity),
        "best_share_fair": _share(fair),
        "mean_excess_nonbest": round(100.0 * statistics.fmean(misses), 2) if misses else 0.0,
        "mixes": len(mixes),
        "cases": len(outcomes),
        "all_tied": sum(o.all_tied for o in outcomes),
        "best_share_real_durations": _share(outcomes, real=True),
        **{f"best_share_{name}": _share(group) for name, group in _by_source(outcomes)},
        "comparator_evaluations": evaluations,
        "uncertainty_sigma": sorted({round(o.case.uncertainty.sigma, 3) for o in outcomes}),
        "comparator_ms_per_candidate": round(1000.0 * spent / evaluations, 3)
        if evaluations
        else 0.0,
    }


def _by_source(outcomes: Sequence[Outcome]) -> list[tuple[str, list[Outcome]]]:
    names = dict.fromkeys(o.case.source.split(":")[0] for o in outcomes)
    return [(n, [o for o in outcomes if o.case.source.startswith(n + ":")]) for n in names]


def rows(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    return [
        {
            "source": o.case.source.split(":")[0],
            "mix": o.case.index,
            "containers": o.case.containers,
            "load": o.case.load,
            "setting": o.case.setting.label,
            "best_s": round(o.best, 1),
            "pick_s": round(o.truth[int(np.argmin(o.estimate))], 1),
            "ok": o.pick_ok(o.estimate),
            "tied": o.all_tied,
        }
        for o in outcomes
    ]


@benchmark("comparator-accuracy", "§4.3: share of mixes where the comparator picks the best config")
def comparator_accuracy(options: BenchOptions) -> BenchResult:
    mixes = int(options.extra.get("mixes", 2 if options.quick else 8))
    sizes = (6,) if options.quick else CLUSTER_SIZES
    samples = int(options.extra.get("samples", UNCERTAINTY_SAMPLES))
    outcomes = []
    for source in sources(options):
        for case in mix_cases(source, mixes, sizes, options.seed, samples):
            outcomes.append(run_case(case))
            log.info("%s", rows(outcomes[-1:])[0])
            report("comparator-accuracy mix", len(outcomes))
    return BenchResult(figures(outcomes), rows(outcomes))
