"""The Google part of ``yarn-adapt bench adaptive-latency``: AdaptiveConfig §4.5.2's
multi-group experiment, group level and cluster level (paper: 1.94x).

Protocol.

* Workload: a Google 2011 trace directory (default the bundled part 0, ~1.5 h;
  ``--trace DIR`` another of the same format), best-effort jobs (priorities 2-8),
  queues by priority (§4.3's two queues). The task-time model learns from the first
  half of the jobs (by submission); the second half is replayed, submission times
  as traced (shifted to start at 0).
* Groups: users grouped by logical job name (:func:`group_by_application`); the
  ``groups`` largest by requested resources (memory x duration; ``--set
  google_groups=K``, default 16) are groups of their own, the rest folded into one.
  Each group is a parent queue under root with its two leaf queues.
* Cluster: nodes of the trace's largest machine (:class:`GoogleResourceMapping`:
  32 GiB, 12 vcores). Part 0 cannot load the paper's 12,000 nodes (its best-effort
  jobs need a few hundred), so by default the cluster is *scaled to the trace*: the
  nodes whose capacity over the replay's submission span equals the jobs' task work
  (dominant resource, ``--set google_load=X`` x it, default 1.0, the same load
  adaptive-latency uses). ``--set google_nodes=N`` fixes the node count instead;
  the trace is then *replicated* with fresh job ids (same submission times) until it
  offers that load (``--set google_replicas=R`` fixes the copies).
* Statics, as the paper's representative configurations: group level, each of
  adaptive-latency's 2-queue settings (Capacity c1..c7 held to their capacity; Fair
  Table 2) in every group; cluster level, each group's share of the cluster =
  its share of the replay's requested resources (Capacity ``capacity``, Fair
  ``weight``). A static the tuner's own validity rule refuses (a job that can never
  run) is no baseline, as in adaptive-latency.
* AdaptiveConfig: the same replay in segments of ``--set google_interval_min``
  (default 2) simulated minutes, starting from the first representative static the
  validity rule keeps (their order is fixed, not chosen by outcome: tuning starts
  from a configuration YARN runs without refusing submissions; the middle point of
  each group's space when none is kept); after each, :func:`propose` (group
  searches + Algorithm 3's DP over the groups' shares) sees the jobs in progress
  with estimated durations, and the next segment runs under its proposal.
* Figures: ``google_cluster_ratio`` = the mean over statics of (static mean job
  latency / adaptive mean job latency), averaged over the schedulers (the paper's
  metric), its geometric mean, median and minimum, the ratio to the best static,
  unfinished jobs (a job still running at the horizon, 10 x the longer of the
  submission span and an hour, or refused by the scheduler -- ``google_rejected``
  -- counts as finishing there), and how many proposals
  the tuned runs made and applied.
* ``--quick``: the first 24 replayed jobs, 2 groups and the rest (a few seconds).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from yarn_adapt.bench.adaptive_keys import SET_KEYS, Knobs
from yarn_adapt.bench.comparator import SchedulerSetting, censored_mean_latency
from yarn_adapt.bench.paper_configs import adaptive_space, fixed_space, static_settings
from yarn_adapt.errors import SettingsError
from yarn_adapt.model import (
    CapacityQueue,
    CapacitySchedulerConfig,
    FairQueue,
    FairSchedulerConfig,
    JobSpec,
    Percentage,
    SchedulerConfig,
    Workload,
)
from yarn_adapt.progress import report
from yarn_adapt.service.demo.simcluster import SimulatedCluster
from yarn_adapt.sim import ClusterSpec, JobInProgress, SimulationOptions, SimulationStart, simulate
from yarn_adapt.tuning.apply import apply_ratios, apply_setting
from yarn_adapt.tuning.settings import TunerSettings
from yarn_adapt.tuning.space import GridSpace, GroupSetting, Scheduler
from yarn_adapt.tuning.state import TuningState
from yarn_adapt.tuning.tuner import propose
from yarn_adapt.workload import TaskTimeModel, fit_task_time_model
from yarn_adapt.workload.google import GoogleResourceMapping, group_by_application, load_google
from yarn_adapt.workload.queues import QueueMapping

PAPER_NODES = 12_000
PAPER_RATIO = 1.94
NODE = GoogleResourceMapping().reference
GROUPS = 16
LOAD = 1.0
INTERVAL_MIN = 2.0
HORIZON_FACTOR = 10  # a job unfinished at 10 x the replay's span counts as ending there
QUICK_JOBS = 24
QUICK_GROUPS = 2


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class GoogleSettings:
    groups: int = GROUPS
    load: float = LOAD
    nodes: int | None = None
    replicas: int | None = None
    interval_s: float = 60.0 * INTERVAL_MIN
    max_jobs: int | None = None
    schedulers: tuple[Scheduler, ...] = (Scheduler.CAPACITY, Scheduler.FAIR)

    @classmethod
    def parse(cls, extra: Mapping[str, str], quick: bool) -> GoogleSettings:
        values = SET_KEYS.read(extra, quick=quick)
        found = cls(
            groups=QUICK_GROUPS if quick else GROUPS, max_jobs=QUICK_JOBS if quick else None
        )
        changes: dict[str, Any] = {
            "groups": values[Knobs.google_groups],
            "load": values[Knobs.google_load],
            "nodes": values[Knobs.google_nodes],
            "replicas": values[Knobs.google_replicas],
        }
        minutes = values[Knobs.google_interval_min]
        if minutes is not None:
            changes["interval_s"] = 60.0 * minutes
        only = values[Knobs.scheduler]
        if only is not None:
            changes["schedulers"] = (Scheduler(only),)
        return replace(found, **{k: v for k, v in changes.items() if v is not None})


# --------------------------------------------------------------------------- scenario


@dataclass(frozen=True)
class GoogleScenario:
    """The replay (jobs already in their group's leaf queues), the groups (parent
    path -> trace share of requested resources), the cluster and the model."""

    workload: Workload
    shares: Mapping[str, float]
    leaves: Mapping[str, tuple[str, ...]]
    cluster: ClusterSpec
    model: TaskTimeModel
    replicas: int
    scaling: str
    span_s: float

    @property
    def horizon_s(self) -> float:
        return HORIZON_FACTOR * max(self.span_s, 3600.0)


def build_scenario(path: Path, settings: GoogleSettings, seed: int) -> GoogleScenario:
    trace = load_google(path, queues=QueueMapping.paper_two_queues())
    half = len(trace.jobs) // 2
    if half < 4:
        raise SettingsError(f"{path}: too few best-effort jobs for the Google experiment")
    model = fit_task_time_model(replace(trace, jobs=trace.jobs[:half]), seed=seed)
    later = trace.jobs[half:]
    if settings.max_jobs is not None:
        later = later[: settings.max_jobs]
    first = later[0].submit_s
    replay = tuple(replace(j, submit_s=round(j.submit_s - first, 3)) for j in later)
    span = max(replay[-1].submit_s, 60.0)
    node_s = sum(_node_seconds(j) for j in replay)
    if settings.nodes is None:
        replicas = settings.replicas or 1
        nodes = max(2, math.ceil(replicas * node_s / (settings.load * span)))
        scaling = f"cluster scaled to the trace (load {settings.load:g} of its task work)"
    else:
        nodes = settings.nodes
        wanted = settings.load * nodes * span / node_s
        replicas = settings.replicas or max(1, round(wanted))
        scaling = f"trace replicated x{replicas} with fresh job ids"
    jobs = _replicated(replay, replicas)
    names = _group_names(jobs, settings.groups)
    placed, leaves = _placed(jobs, names)
    demand = _demand(placed)
    total = sum(demand.values())
    shares = {g: demand[g] / total for g in leaves}
    workload = Workload(tuple(sorted(placed, key=lambda j: (j.submit_s, j.id))), source=str(path))
    cluster = ClusterSpec.uniform(nodes, NODE)
    return GoogleScenario(workload, shares, leaves, cluster, model, replicas, scaling, span)


def _node_seconds(job: JobSpec) -> float:
    """The job's task work in node-seconds of its dominant resource."""
    return sum(
        t.duration_s * max(t.resources.memory_mb / NODE.memory_mb, t.resources.vcores / NODE.vcores)
        for t in job.tasks
    )


def _replicated(jobs: Sequence[JobSpec], replicas: int) -> list[JobSpec]:
    if replicas == 1:
        return list(jobs)
    return [replace(j, id=f"{j.id}r{r}") for r in range(replicas) for j in jobs]


def _requested(job: JobSpec) -> float:
    return sum(t.duration_s * t.resources.memory_mb for t in job.tasks)


def _group_names(jobs: Sequence[JobSpec], groups: int) -> dict[str, int]:
    """Logical job name -> group index: the ``groups`` largest by requested
    resources alone, every other name in group ``groups`` (the rest)."""
    by_name = group_by_application(Workload(tuple(jobs)))
    ranked = sorted(by_name, key=lambda n: (-sum(_requested(j) for j in by_name[n].jobs), n))
    found = {name: index for index, name in enumerate(ranked[:groups])}
    rest = min(groups, len(ranked))
    found.update((name, rest) for name in ranked[groups:])
    return found


def _placed(
    jobs: Sequence[JobSpec], names: Mapping[str, int]
) -> tuple[list[JobSpec], dict[str, tuple[str, ...]]]:
    """Each job in its group's leaf for its priority queue (``q1``/``q2``)."""
    leaves: dict[str, tuple[str, ...]] = {}
    placed = []
    for index in sorted(set(names.values())):
        parent = f"root.g{index}"
        leaves[parent] = (f"{parent}.g{index}q1", f"{parent}.g{index}q2")
    for job in jobs:
        parent = f"root.g{names[job.features.job_type]}"
        leaf = leaves[parent][int(job.queue.rsplit("q", 1)[-1]) - 1]
        placed.append(replace(job, queue=leaf))
    return placed, leaves


def _demand(jobs: Sequence[JobSpec]) -> dict[str, float]:
    found: dict[str, float] = {}
    for job in jobs:
        parent = job.queue.rsplit(".", 1)[0]
        found[parent] = found.get(parent, 0.0) + _requested(job)
    return found


# --------------------------------------------------------------------------- configurations


def _relocated(setting: GroupSetting, parent: str, leaves: Sequence[str]) -> GroupSetting:
    """A root-level 2-queue ``setting`` written for the group ``parent``."""
    queues = tuple(replace(q, path=leaf) for q, leaf in zip(setting.queues, leaves, strict=True))
    return replace(setting, parent=parent, queues=queues)


def _relocated_space(space: GridSpace, parent: str, leaves: Sequence[str]) -> GridSpace:
    moved = dict(zip(space.queues, leaves, strict=True))
    parameters = tuple(
        replace(
            p,
            name=p.name.replace(p.queues[0], moved[p.queues[0]]) if len(p.queues) == 1 else p.name,
            queues=tuple(moved[q] for q in p.queues),
        )
        for p in space.parameters
    )
    return replace(space, parent=parent, queues=tuple(leaves), parameters=parameters)


def base_config(scenario: GoogleScenario, scheduler: Scheduler) -> SchedulerConfig:
    """root -> groups at their trace shares -> two leaves each, even (Capacity: a
    group may grow to the whole cluster, its leaves to 90 % of it, §4.2)."""
    if scheduler is Scheduler.CAPACITY:
        groups = tuple(
            CapacityQueue(
                parent,
                capacity=Percentage(50.0),
                children=tuple(
                    CapacityQueue(leaf, capacity=Percentage(50.0), maximum_capacity=Percentage(90))
                    for leaf in leaves
                ),
            )
            for parent, leaves in scenario.leaves.items()
        )
        config: SchedulerConfig = CapacitySchedulerConfig(CapacityQueue("root", children=groups))
    else:
        fair = tuple(
            FairQueue(parent, weight=1.0, children=tuple(FairQueue(leaf) for leaf in leaves))
            for parent, leaves in scenario.leaves.items()
        )
        config = FairSchedulerConfig(FairQueue("root", children=fair))
    return apply_ratios(config, scenario.shares)


def static_configs(
    scenario: GoogleScenario, scheduler: Scheduler
) -> list[tuple[str, SchedulerConfig, dict[str, GroupSetting]]]:
    """Each representative group-level setting in every group, at the trace shares."""
    base = base_config(scenario, scheduler)
    found = []
    for setting in static_settings(SchedulerSetting(scheduler, 2)):
        config = base
        per_group = {}
        for parent, leaves in scenario.leaves.items():
            per_group[parent] = _relocated(setting, parent, leaves)
            config = apply_setting(config, per_group[parent])
        found.append((setting.describe(), config, per_group))
    return found


# --------------------------------------------------------------------------- runs


def static_run(scenario: GoogleScenario, config: SchedulerConfig) -> tuple[float, int]:
    horizon = scenario.horizon_s
    result = simulate(
        scenario.workload, config, scenario.cluster, SimulationOptions(horizon_s=horizon)
    )
    unfinished = sum(1 for j in result.jobs if j.finish_s is None)
    unfinished += len(scenario.workload.jobs) - len(result.jobs)
    return censored_mean_latency(result, horizon), unfinished


def refused(
    scenario: GoogleScenario, config: SchedulerConfig, per_group: Mapping[str, GroupSetting]
) -> bool:
    """adaptive-latency's validity rule for a multi-group static: with every job in
    view, :func:`propose` over one-point spaces predicts it never finishes some job."""
    spaces = {g: fixed_space(s, elastic=False) for g, s in per_group.items()}
    start = SimulationStart(0.0, tuple(JobInProgress(j) for j in scenario.workload.jobs))
    state = TuningState(0.0, start, scenario.cluster)
    # YARN's own admission rule (app_headroom 1.0), not the tuner's safety margin
    tuner = TunerSettings(
        interval_s=scenario.horizon_s, spaces=spaces, min_improvement=0.0, app_headroom=1.0
    )
    return not math.isfinite(propose(state, config, scenario.model, tuner).cluster_before_s)


@dataclass(frozen=True)
class Tuned:
    latency_s: float
    proposals: int
    applied: int
    unfinished: int
    propose_s: tuple[float, ...]
    rejected: int = 0


def tuned_run(
    scenario: GoogleScenario,
    scheduler: Scheduler,
    interval_s: float,
    start: SchedulerConfig | None = None,
) -> Tuned:
    """The replay re-configured by :func:`propose` every ``interval_s``, from
    ``start`` (default: every group at its space's middle point)."""
    root_space = adaptive_space(SchedulerSetting(scheduler, 2))
    spaces = {p: _relocated_space(root_space, p, ls) for p, ls in scenario.leaves.items()}
    config = base_config(scenario, scheduler)
    for space in spaces.values():
        config = apply_setting(config, space.decode(tuple(d.size // 2 for d in space.dimensions)))
    if start is not None:
        config = start
    simulated = SimulatedCluster(scenario.workload, scenario.cluster, config)
    settings = TunerSettings(interval_s=interval_s, spaces=spaces, min_improvement=0.0)
    proposals = applied = 0
    timings = []
    while not simulated.done and simulated.clock_s < scenario.horizon_s:
        simulated.advance(interval_s)
        view = simulated.view()
        state = TuningState(view.time_s, view.start, view.cluster, view.recent)
        began = time.perf_counter()
        proposal = propose(state, simulated.config, scenario.model, settings)
        timings.append(time.perf_counter() - began)
        proposals += 1
        if proposal.changed:
            simulated.load(proposal.config)
            applied += 1
    latencies = [j.latency_s for j in simulated.ended.values() if j.latency_s is not None]
    unfinished = len(scenario.workload.jobs) - len(latencies)
    latencies += [scenario.horizon_s] * unfinished
    # the rest of the unfinished were refused by the scheduler on a (re)submission
    rejected = unfinished - simulated.backlog
    return Tuned(
        statistics.fmean(latencies), proposals, applied, unfinished, tuple(timings), rejected
    )


# --------------------------------------------------------------------------- figures


@dataclass(frozen=True)
class SchedulerResult:
    scheduler: Scheduler
    statics: tuple[tuple[str, float, int], ...]  # label, mean latency, unfinished
    refused: int
    tuned: Tuned
    wall_s: float

    @property
    def ratios(self) -> list[float]:
        return [s / self.tuned.latency_s for _, s, _ in self.statics]


def run_scheduler(
    scenario: GoogleScenario, scheduler: Scheduler, interval_s: float
) -> SchedulerResult:
    began = time.perf_counter()
    kept = []
    refusals = 0
    first_kept: SchedulerConfig | None = None
    for label, config, per_group in static_configs(scenario, scheduler):
        if refused(scenario, config, per_group):
            refusals += 1
            continue
        latency, unfinished = static_run(scenario, config)
        kept.append((label, latency, unfinished))
        first_kept = first_kept or config
        report("adaptive-latency google static", len(kept) + refusals)
    # Tuning starts where an operator's cluster would: from a configuration YARN runs
    # without refusing submissions (the first representative one the validity rule
    # keeps, in their fixed order, not chosen by its outcome).
    tuned = tuned_run(scenario, scheduler, interval_s, first_kept)
    return SchedulerResult(scheduler, tuple(kept), refusals, tuned, time.perf_counter() - began)


def google_figures(scenario: GoogleScenario, results: Sequence[SchedulerResult]) -> dict[str, Any]:
    counted = [r for r in results if r.statics]
    found: dict[str, Any] = {
        "google_nodes": len(scenario.cluster.nodes),
        "google_node": f"{NODE.memory_mb} MiB, {NODE.vcores} vcores",
        "google_nodes_paper": PAPER_NODES,
        "google_scaling": scenario.scaling,
        "google_replicas": scenario.replicas,
        "google_jobs": len(scenario.workload.jobs),
        "google_groups": len(scenario.leaves),
        "google_span_s": round(scenario.span_s, 1),
        "google_cluster_ratio": None,
        "google_cluster_ratio_geomean": None,
        "google_cluster_ratio_median": None,
        "google_cluster_ratio_min": None,
        "google_cluster_ratio_to_best_static": None,
        "google_paper_ratio": PAPER_RATIO,
    }
    if counted:
        found["google_cluster_ratio"] = round(
            statistics.fmean(statistics.fmean(r.ratios) for r in counted), 3
        )
        found["google_cluster_ratio_geomean"] = round(
            statistics.geometric_mean([x for r in counted for x in r.ratios]), 3
        )
        found["google_cluster_ratio_median"] = round(
            statistics.median([x for r in counted for x in r.ratios]), 3
        )
        found["google_cluster_ratio_min"] = round(min(x for r in counted for x in r.ratios), 3)
        found["google_cluster_ratio_to_best_static"] = round(
            statistics.fmean(min(s for _, s, _ in r.statics) / r.tuned.latency_s for r in counted),
            3,
        )
    found["google_unfinished"] = sum(r.tuned.unfinished for r in results)
    found["google_rejected"] = sum(r.tuned.rejected for r in results)
    found["google_static_unfinished"] = sum(u for r in results for _, _, u in r.statics)
    found["google_statics_kept"] = sum(len(r.statics) for r in results)
    found["google_statics_refused"] = sum(r.refused for r in results)
    found["google_proposals"] = sum(r.tuned.proposals for r in results)
    found["google_proposals_applied"] = sum(r.tuned.applied for r in results)
    timings = [t for r in results for t in r.tuned.propose_s]
    found["google_propose_median_s"] = round(statistics.median(timings), 3) if timings else None
    found["google_propose_max_s"] = round(max(timings), 3) if timings else None
    found["google_by_scheduler"] = {
        str(r.scheduler): {
            "adaptive_s": round(r.tuned.latency_s, 1),
            "static_mean_s": round(statistics.fmean(s for _, s, _ in r.statics), 1)
            if r.statics
            else None,
            "static_best_s": round(min(s for _, s, _ in r.statics), 1) if r.statics else None,
            "static_worst_s": round(max(s for _, s, _ in r.statics), 1) if r.statics else None,
            "ratio": round(statistics.fmean(r.ratios), 3) if r.statics else None,
            "statics": len(r.statics),
            "statics_refused": r.refused,
            "proposals": r.tuned.proposals,
            "applied": r.tuned.applied,
            "wall_s": round(r.wall_s, 1),
        }
        for r in results
    }
    return found


def run_google(path: Path, extra: Mapping[str, str], quick: bool, seed: int) -> dict[str, Any]:
    settings = GoogleSettings.parse(extra, quick)
    scenario = build_scenario(path, settings, seed)
    results = [run_scheduler(scenario, s, settings.interval_s) for s in settings.schedulers]
    return google_figures(scenario, results)
