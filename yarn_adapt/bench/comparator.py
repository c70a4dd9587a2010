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
  in time: the task-time model learns from the first half of the trace's jobs
  (fitted on all of it, its error measured by a model fitted on the first 80 % on
  the last 20 %: :func:`~yarn_adapt.workload.taskvalidation.fit_with_measured_error`);
  mixes are drawn from the second half, so the model never saw a mix's jobs. What it
  may know at a mix's start, as a running service would: the runs of the same
  logical jobs that had ended by then (``TaskTimeModel.with_history``).
* Mixes: 25 consecutive jobs (20 for Google) from a seeded random offset, each run on
  6 and on 8 containers; offered load cycles through 0.7, 1.0 and 1.3 of the cluster
  (:func:`yarn_adapt.tuning.paper.make_mix`). 8 mixes per trace: 32 mix cases; each is
  tested under the four scheduler settings. ``--quick``: 2 mixes per trace on 6
  containers, 8 samples, 3 truth seeds.
* Ground truth: the simulator (heartbeat mode, AM containers, YARN defaults) runs
  every candidate with the *real* task durations, on ``truth_seeds`` (5) seeds
  (each its own draw of the nodes' heartbeat phases); a candidate's truth is its mean
  over the seeds (jobs a configuration starves until the horizon count as waiting
  until then).
* The comparator sees the mix with the task-time model's *predictions* only (each
  stage's typical task and spread), and the cluster's nodes. It evaluates every
  candidate on the same ``samples`` (16) draws of what it cannot know -- the stage
  errors of its measured size and bias, the tasks' spread, heartbeat phases from a
  stream of its own (:mod:`rules.uncertainty`) -- and picks by ``rule``
  (``most-likely-best``: the candidate best in the most draws; ``expected``: the
  lowest mean; :mod:`rules.decision`).
* Ties, alike on both sides (0.5 %): a pick counts as the best when its truth is
  within 0.5 % of the true best's; when the comparator cannot tell candidates apart
  (equal win shares and expected latencies within 0.5 %) the case scores the share
  of them that count as the best -- what a random choice among them would score.
  ``best_share_untied`` is the share over the cases whose true best is alone (every
  other candidate more than 0.5 % worse); cases where all candidates tie are
  ``all_tied``.

Figures (percentages as numbers: 95.0 means 95 %): ``best_share`` over all cases,
``best_share_capacity``, ``best_share_fair``, ``best_share_untied``,
``best_share_<source>``; ``mean_excess_nonbest``: mean excess latency of the pick
over the true best in the cases it was not the best; ``mixes``: mix cases (mix x
cluster size); ``cases``: mix cases x settings; ``truth_seeds``. For insight:
``best_share_real_durations`` (the same comparator fed the true durations: what the
mechanism model alone achieves), the model's measured error per source
(``model_error``), the task-time model's held-out figures per trace in time order
(``task_model_held_out``: fitted on the first 75 % of the trace's jobs, measured on
the last 25 %), and the comparator's cost per candidate (all samples).
``real_rm_agree``: of ``real_rm_mixes`` cases run on a real mini YARN under the
simulator's best configuration and under the comparator's pick (or, where the pick
is the best, the simulator's runner-up), how many the real RM agrees on -- which
is faster, or a tie within its noise (:mod:`yarn_adapt.bench.real_rm`; ``--set
real_rm=N`` cases, default 8, 0 with ``--quick``: ``null`` with ``real_rm_note``).

``--set`` switches (for ablations): ``mixes=N``, ``samples=N``,
``rule=most-likely-best|expected``, ``truth_seeds=N``, ``phases=drawn|even``,
``spread=yes|no`` (the tasks' predicted spread), ``history=yes|no`` (the logical-job
history), ``error=yes|no`` (the measured stage error), ``real_rm=N`` (real-RM mixes).
Paper: 87.26 % (Capacity 93.33, Fair 81.19), 3.37 %.
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

from rules.comparator import Comparator
from rules.decision import Choice, DecisionRule
from rules.inputs import JobMix
from rules.mixes import mix_from_workload
from rules.uncertainty import Phases, Uncertainty
from yarn_adapt.bench import BenchOptions, BenchResult, benchmark
from yarn_adapt.bench.real_rm import (
    REAL_RM_MIXES,
    RealRmCase,
    mini_apps,
    real_rm_figures,
    run_real_rm_cases,
)
from yarn_adapt.errors import SettingsError
from yarn_adapt.model import Resources, Workload
from yarn_adapt.progress import report
from yarn_adapt.set_keys import SetSpec, flag, member, whole
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
    load_google,
    load_swim,
)
from yarn_adapt.workload.bundled import FB_2009, GOOGLE_2011, bundled_trace
from yarn_adapt.workload.taskhistory import LogicalHistory
from yarn_adapt.workload.taskmodel import ModelError
from yarn_adapt.workload.taskvalidation import (
    TimeOrderedReport,
    fit_with_measured_error,
    time_ordered_report,
)

log = logging.getLogger("yarn_adapt.bench")

TIE_TOLERANCE = 0.005
LOADS = (0.7, 1.0, 1.3)
CLUSTER_SIZES = (6, 8)
SWIM_TARGET_MACHINES = 6
GOOGLE_MAX_TASKS = 16
GOOGLE_UNIT = Resources(1024, 1)
SAMPLES = 16
TRUTH_SEEDS = 5
QUICK_SAMPLES = 8  # --quick: fewer samples and truth seeds, the same protocol otherwise
QUICK_TRUTH_SEEDS = 3
VALIDATION_FRACTION = 0.2
REAL_RM_NOTE = "not measured: --set real_rm=N runs N mixes on a real mini YARN"


@dataclass(frozen=True)
class AccuracySettings:
    """The protocol's knobs (``--set``); the defaults are the protocol."""

    mixes: int
    samples: int = SAMPLES
    rule: DecisionRule = DecisionRule.MOST_LIKELY_BEST
    truth_seeds: int = TRUTH_SEEDS
    phases: Phases = Phases.DRAWN
    spread: bool = True
    history: bool = True
    error: bool = True
    real_rm: int = 0


class Knobs:
    mixes = whole("mixes", 8, quick=2, low=1)
    samples = whole("samples", SAMPLES, quick=QUICK_SAMPLES, low=1)
    rule = member("rule", DecisionRule, DecisionRule.MOST_LIKELY_BEST)
    truth_seeds = whole("truth_seeds", TRUTH_SEEDS, quick=QUICK_TRUTH_SEEDS, low=1)
    phases = member("phases", Phases, Phases.DRAWN)
    spread = flag("spread", True)
    history = flag("history", True)
    error = flag("error", True)
    real_rm = whole("real_rm", REAL_RM_MIXES, quick=0, low=0)


SET_KEYS = SetSpec.of("comparator-accuracy", Knobs)


def accuracy_settings(options: BenchOptions) -> AccuracySettings:
    values = SET_KEYS.read(options.extra, quick=options.quick)
    return AccuracySettings(
        mixes=values[Knobs.mixes],
        samples=values[Knobs.samples],
        rule=values[Knobs.rule],
        truth_seeds=values[Knobs.truth_seeds],
        phases=values[Knobs.phases],
        spread=values[Knobs.spread],
        history=values[Knobs.history],
        error=values[Knobs.error],
        real_rm=values[Knobs.real_rm],
    )


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
    model_error: ModelError | None


@dataclass(frozen=True)
class Outcome:
    """A case's truth (``truth[seed][candidate]``) and the comparator's choices, on
    the estimated and on the real durations."""

    case: MixCase
    truth_by_seed: tuple[tuple[float, ...], ...]
    choice: Choice
    choice_real: Choice
    rule: DecisionRule
    evaluations: int
    comparator_s: float

    @property
    def truth(self) -> tuple[float, ...]:
        return tuple(float(v) for v in np.mean(self.truth_by_seed, axis=0))

    @property
    def best(self) -> float:
        return min(self.truth)

    def truly_best(self, candidate: int) -> bool:
        return self.truth[candidate] <= self.best * (1 + TIE_TOLERANCE)

    def tied_picks(self, choice: Choice) -> list[int]:
        """The candidates the comparator cannot tell from its pick."""
        pick = choice.index
        expected = choice.expected
        return [
            c
            for c in range(len(expected))
            if choice.win_share[c] == choice.win_share[pick] or self.rule is DecisionRule.EXPECTED
            if _within(expected[c], expected[pick])
        ]

    def hit(self, choice: Choice) -> float:
        """1 when the pick is truly best; among tied picks, the share truly best."""
        tied = self.tied_picks(choice)
        return sum(self.truly_best(c) for c in tied) / len(tied)

    def excess(self, choice: Choice) -> float:
        """Mean excess latency of the (tied) picks over the true best."""
        tied = self.tied_picks(choice)
        return statistics.fmean(self.truth[c] / self.best - 1.0 for c in tied)

    @property
    def all_tied(self) -> bool:
        return max(self.truth) <= self.best * (1 + TIE_TOLERANCE)

    @property
    def untied(self) -> bool:
        """The true best is alone: every other candidate is more than 0.5 % worse."""
        return sum(self.truly_best(c) for c in range(len(self.truth))) == 1


def _within(value: float, reference: float) -> bool:
    if value == reference:
        return True
    return abs(value - reference) <= TIE_TOLERANCE * abs(reference)


def mix_cases(
    source: TraceSource, settings: AccuracySettings, sizes: Sequence[int], seed: int
) -> Iterator[MixCase]:
    """Every (mix, cluster size, setting) of ``source``; the model is fitted on the
    trace's first half, mixes come from the second."""
    by_count = {n: source.load(SchedulerSetting(Scheduler.CAPACITY, n).mapping) for n in (2, 4)}
    trace = by_count[2]
    half = len(trace.jobs) // 2
    model = _model(trace, half, seed, settings)
    uncertainty = _uncertainty(model.error, settings, seed)
    offsets = _offsets(half, len(trace.jobs) - source.mix_size, settings.mixes, seed)
    for index, offset in enumerate(offsets):
        load = LOADS[index % len(LOADS)]
        known = _known_at(model, trace, offset, settings)
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
                    _estimated(real, known, settings),
                    mix_from_workload(real),
                    cluster,
                    uncertainty,
                    model.error,
                )


def _model(workload: Workload, half: int, seed: int, settings: AccuracySettings) -> TaskTimeModel:
    """The task-time model fitted on the first half of the jobs, with its error
    measured in time order (without the logical-job history when switched off)."""
    first = replace(workload, jobs=workload.jobs[:half])
    model = fit_with_measured_error(first, later_fraction=VALIDATION_FRACTION, seed=seed)
    if not settings.history:
        model = replace(model, history=LogicalHistory(window=0))
    return model


def _uncertainty(error: ModelError | None, settings: AccuracySettings, seed: int) -> Uncertainty:
    """Samples of the model's measured error (switched off, or not measured: none)."""
    if error is None or not settings.error:
        return Uncertainty(samples=settings.samples, seed=seed, phases=settings.phases)
    return Uncertainty(error.sigma, settings.samples, seed, error.bias, phases=settings.phases)


def _known_at(
    model: TaskTimeModel, trace: Workload, offset: int, settings: AccuracySettings
) -> TaskTimeModel:
    """The model as a service would hold it at the mix's start: also knowing the
    runs that had ended by then."""
    if not settings.history:
        return model
    start = trace.jobs[offset].submit_s
    return model.with_history(trace.jobs[:offset], as_of=start)


def _estimated(real: Workload, model: TaskTimeModel, settings: AccuracySettings) -> JobMix:
    mix = mix_from_workload(real, model)
    if settings.spread:
        return mix
    return replace(mix, jobs=tuple(replace(job, spreads=()) for job in mix.jobs))


def _offsets(low: int, high: int, count: int, seed: int) -> list[int]:
    if high <= low:
        raise SettingsError(f"the trace is too short for mixes ({low} to {high})")
    rng = np.random.default_rng(seed)
    picks = rng.choice(np.arange(low, high), size=min(count, high - low), replace=False)
    return sorted(int(p) for p in picks)


def run_case(case: MixCase, settings: AccuracySettings) -> Outcome:
    """Simulate every candidate on every truth seed, and let the comparator choose
    (on the estimated durations, and for insight on the real ones)."""
    queues = case.setting.mapping.queues
    found = candidates(
        paper_space(case.setting.scheduler, "root", leaf_paths(queues)),
        base_config(case.setting.scheduler, queues),
    )
    truth = tuple(_truth(case, found, seed) for seed in range(settings.truth_seeds))
    resources = case.cluster.resources()
    groups = [c.group for c in found]
    began = time.perf_counter()
    comparator = Comparator(case.estimated, resources, uncertainty=case.uncertainty)
    choice = comparator.choose(groups, settings.rule)
    spent = time.perf_counter() - began
    real_view = Uncertainty(samples=settings.samples, seed=case.uncertainty.seed)
    real_view = replace(real_view, phases=settings.phases)
    choice_real = Comparator(case.truth_view, resources, uncertainty=real_view).choose(
        groups, settings.rule
    )
    return Outcome(case, truth, choice, choice_real, settings.rule, len(found), spent)


def _truth(case: MixCase, found: Sequence[Candidate], seed: int) -> tuple[float, ...]:
    spec = case.cluster.spec()
    horizon = _horizon(case.real, case.containers)
    options = SimulationOptions(horizon_s=horizon, seed=seed)
    return tuple(
        censored_mean_latency(simulate(case.real, c.config, spec, options), horizon) for c in found
    )


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


# --------------------------------------------------------------------------- real RM


def real_rm_cases(outcomes: Sequence[Outcome], count: int) -> list[RealRmCase]:
    """Up to ``count`` cases for the real-RM check: those whose pick is not truly
    best first, one per mix before a mix's second setting; cases where every
    candidate ties are left out (nothing to tell apart)."""
    misses = [o for o in outcomes if not o.truly_best(o.choice.index)]
    hits = [o for o in outcomes if o.truly_best(o.choice.index) and not o.all_tied]
    chosen: list[Outcome] = []
    for pool in (misses, hits):
        for first_pass in (True, False):
            seen = {_mix_key(o) for o in chosen}
            for outcome in pool:
                if len(chosen) >= count:
                    break
                if outcome in chosen or (first_pass and _mix_key(outcome) in seen):
                    continue
                chosen.append(outcome)
                seen.add(_mix_key(outcome))
    return [_real_rm_case(o) for o in chosen]


def _mix_key(outcome: Outcome) -> tuple[str, int, int]:
    return (outcome.case.source, outcome.case.index, outcome.case.containers)


def _real_rm_case(outcome: Outcome) -> RealRmCase:
    case = outcome.case
    queues = case.setting.mapping.queues
    found = candidates(
        paper_space(case.setting.scheduler, "root", leaf_paths(queues)),
        base_config(case.setting.scheduler, queues),
    )
    truth = outcome.truth
    best = min(range(len(truth)), key=lambda c: truth[c])
    pick = outcome.choice.index
    if outcome.truly_best(pick):
        others = [c for c in range(len(truth)) if not outcome.truly_best(c)]
        other, versus = min(others, key=lambda c: truth[c]), "runner-up"
    else:
        other, versus = pick, "pick"
    return RealRmCase(
        label=f"{case.source.split(':')[0]}-m{case.index}-{case.containers}c-{case.setting.label}",
        scheduler="capacity" if case.setting.scheduler is Scheduler.CAPACITY else "fair",
        containers=case.containers,
        best=found[best],
        other=found[other],
        versus="pick" if versus == "pick" else "runner-up",
        truth_best_s=truth[best],
        truth_other_s=truth[other],
        apps=mini_apps(case.real),
    )


def real_rm_check(
    outcomes: Sequence[Outcome], settings: AccuracySettings, seed: int
) -> dict[str, Any]:
    if settings.real_rm == 0:
        return {"real_rm_agree": None, "real_rm_note": REAL_RM_NOTE}
    cases = real_rm_cases(outcomes, settings.real_rm)
    return real_rm_figures(run_real_rm_cases(cases, seed), settings.real_rm)


# --------------------------------------------------------------------------- report


def _share(outcomes: Sequence[Outcome], real: bool = False) -> float:
    if not outcomes:
        return float("nan")
    hits = sum(o.hit(o.choice_real if real else o.choice) for o in outcomes)
    return round(100.0 * hits / len(outcomes), 2)


def figures(outcomes: Sequence[Outcome], settings: AccuracySettings) -> dict[str, Any]:
    capacity = [o for o in outcomes if o.case.setting.scheduler is Scheduler.CAPACITY]
    fair = [o for o in outcomes if o.case.setting.scheduler is Scheduler.FAIR]
    misses = [o.excess(o.choice) for o in outcomes if o.hit(o.choice) < 1.0]
    evaluations = sum(o.evaluations for o in outcomes)
    spent = sum(o.comparator_s for o in outcomes)
    mixes = {(o.case.source, o.case.index, o.case.containers) for o in outcomes}
    return {
        "best_share": _share(outcomes),
        "best_share_capacity": _share(capacity),
        "best_share_fair": _share(fair),
        "best_share_untied": _share([o for o in outcomes if o.untied]),
        "mean_excess_nonbest": round(100.0 * statistics.fmean(misses), 2) if misses else 0.0,
        "mixes": len(mixes),
        "cases": len(outcomes),
        "untied_cases": sum(o.untied for o in outcomes),
        "all_tied": sum(o.all_tied for o in outcomes),
        "truth_seeds": settings.truth_seeds,
        "best_share_real_durations": _share(outcomes, real=True),
        **{f"best_share_{name}": _share(group) for name, group in _by_source(outcomes)},
        "decision_rule": str(settings.rule),
        "samples": settings.samples,
        "model_error": _model_errors(outcomes),
        "comparator_evaluations": evaluations,
        "comparator_ms_per_candidate": round(1000.0 * spent / evaluations, 3)
        if evaluations
        else 0.0,
    }


def _model_errors(outcomes: Sequence[Outcome]) -> dict[str, dict[str, float] | None]:
    found: dict[str, dict[str, float] | None] = {}
    for outcome in outcomes:
        error = outcome.case.model_error
        name = outcome.case.source.split(":")[0]
        found[name] = (
            None
            if error is None
            else {"bias": round(error.bias, 3), "sigma": round(error.sigma, 3)}
        )
    return found


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
            "pick_s": round(o.truth[o.choice.index], 1),
            "hit": round(o.hit(o.choice), 2),
            "untied": o.untied,
        }
        for o in outcomes
    ]


def task_model_figures(source: TraceSource, seed: int) -> dict[str, float | int]:
    """The task-time model on the trace in time order: fitted on the first 75 % of
    its jobs, measured on the last 25 % (log errors are natural logs)."""
    report: TimeOrderedReport = time_ordered_report(
        source.load(SchedulerSetting(Scheduler.CAPACITY, 2).mapping), seed=seed
    )
    model, baseline = report.model, report.baseline
    return {
        "test_jobs": report.test_jobs,
        "stage_log_mae": round(model.stage_log_mae, 3),
        "baseline_stage_log_mae": round(baseline.stage_log_mae, 3),
        "task_log_mae": round(model.task_log_mae, 3),
        "coverage_80": round(model.coverage_80, 3),
        "bias": round(model.error.bias, 3),
        "sigma": round(model.error.sigma, 3),
    }


@benchmark(
    "comparator-accuracy",
    "§4.3: share of mixes where the comparator picks the best config",
    SET_KEYS,
)
def comparator_accuracy(options: BenchOptions) -> BenchResult:
    settings = accuracy_settings(options)
    sizes = (6,) if options.quick else CLUSTER_SIZES
    outcomes = []
    held_out: dict[str, dict[str, float | int]] = {}
    for source in sources(options):
        held_out[source.name.split(":")[0]] = task_model_figures(source, options.seed)
        for case in mix_cases(source, settings, sizes, options.seed):
            outcomes.append(run_case(case, settings))
            log.info("%s", rows(outcomes[-1:])[0])
            report("comparator-accuracy mix", len(outcomes))
    found = {
        **figures(outcomes, settings),
        **real_rm_check(outcomes, settings, options.seed),
        "task_model_held_out": held_out,
    }
    return BenchResult(found, rows(outcomes))
