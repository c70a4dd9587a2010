"""``yarn-adapt bench search-scale``: the AdaptiveConfig §4.5.1 protocol.

Ten cluster sizes from 300 to 12,000 nodes of 4 containers, with 10 to 500 groups
scaled together. Each group is a parent queue with 2 or 4 leaf queues under the
Capacity or the Fair scheduler (``--set scheduler=capacity|fair|mix``, ``--set
queues=2|4|mix``; ``mix`` cycles through the kinds). Its job mix is what the trace
(default: the bundled FB-2009 SWIM day; ``--trace`` swaps it) submits in a random
tuning interval of ``--set window_s=120`` seconds (the paper's 2-minute interval;
§3.1: a group is tuned when it has new submissions, so empty windows are redrawn).
Jobs go to queues by priority as in §4.3. A SWIM trace is replayed for the group's
share of the cluster (nodes / groups machines) the way SWIM replays a trace on a
smaller cluster: bytes, hence task counts, scale with the cluster
(``--set scale_jobs=no`` keeps the original sizes).

Every group searches the §4.3 candidate set refined ten-fold (Capacity 2/4 queues:
50/100 splits; Fair: the same splits x FIFO/Fair/DRF, 150/300) with RRS: p = 0.99,
initial granularity one point of the §4.3 set (1/5, 1/9, 1/15, 1/27), required
granularity ten times finer, scaling factor 0.5 -- once per candidate resource level
(``--set levels=N``, default 8). The searches run in a process pool (``--set
executor=...``, any ``--executor`` value), then Algorithm 3 splits the cluster.

Timed: all group searches plus the DP, per size (``wall_s``). Not timed: loading the
trace, building the groups, and starting the pool (reported as ``pool_start_s``; a
running service keeps its pool). Every latency comes from the rules comparator.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from rules.inputs import GroupConfig, JobMix, QueueConfig
from rules.mixes import mix_job
from yarn_adapt.bench import BenchOptions, BenchResult, benchmark
from yarn_adapt.errors import SettingsError
from yarn_adapt.model.resources import Resources
from yarn_adapt.model.workload import JobSpec, Workload
from yarn_adapt.sim.bench import typical_container
from yarn_adapt.tuning.executors import ExecutorHandle, open_executor
from yarn_adapt.tuning.group_optimizer import (
    ComparatorObjective,
    GroupOutcome,
    GroupProblem,
    GroupSearchSettings,
    TuningRound,
    candidate_levels,
    resource_bounds,
    tune_round,
)
from yarn_adapt.tuning.search import RRSSettings
from yarn_adapt.tuning.space import (
    FAIR_POLICIES,
    GridSpace,
    Parameter,
    ParameterKind,
    Scheduler,
    paper_splits,
)
from yarn_adapt.workload import (
    BEST_EFFORT_PRIORITIES,
    QueueMapping,
    SwimReplaySettings,
    assign_queues,
    detect_format,
    load_trace,
    random_priorities,
)
from yarn_adapt.workload.bundled import bundled_trace

CONTAINERS_PER_NODE = 4
REFINEMENT = 10
# §4.5.1: 10 sizes, 300 to 12,000 nodes, 10 to 500 groups, scaled together.
FULL_SIZES = tuple(
    (round(n), round(g))
    for n, g in zip(np.linspace(300, 12_000, 10), np.linspace(10, 500, 10), strict=True)
)
QUICK_SIZES = FULL_SIZES[:1]
# YARN defaults: maximum-am-resource-percent 0.1 (Capacity), maxAMShare 0.5 (Fair).
AM_SHARE = {Scheduler.CAPACITY: 0.1, Scheduler.FAIR: 0.5}
# §4.5.1: RRS needs 83 / 175 iterations (Capacity 2 / 4 queues), 267 / 488 (Fair).
PAPER_SAMPLES = {"capacity-2": 83, "capacity-4": 175, "fair-2": 267, "fair-4": 488}


@dataclass(frozen=True)
class GroupKind:
    scheduler: Scheduler
    queues: int

    @property
    def label(self) -> str:
        return f"{self.scheduler}-{self.queues}"


@dataclass(frozen=True)
class ScaleSettings:
    sizes: tuple[tuple[int, int], ...]
    kinds: tuple[GroupKind, ...]
    window_s: float
    max_levels: int
    executor: str | None
    seed: int
    scale_jobs: bool = True


def run(options: BenchOptions) -> BenchResult:
    settings = _settings(options)
    traces = _TraceCache(options.trace or bundled_trace(), options.seed, settings.scale_jobs)
    began = time.perf_counter()
    with open_executor(settings.executor) as handle:
        _warm_up(handle)
        pool_start_s = time.perf_counter() - began
        rows = [_measure(size, settings, traces.for_size(*size), handle) for size in settings.sizes]
    return BenchResult(_figures(rows, pool_start_s, settings), [_table_row(r) for r in rows])


benchmark("search-scale", "§4.5.1: RRS group searches + DP, 300-12,000 nodes")(run)


def _settings(options: BenchOptions) -> ScaleSettings:
    extra = options.extra
    known = {"scheduler", "queues", "window_s", "levels", "executor", "sizes", "scale_jobs"}
    unknown = set(extra) - known
    if unknown:
        raise SettingsError(f"search-scale: unknown --set {', '.join(sorted(unknown))}")
    sizes = QUICK_SIZES if options.quick else FULL_SIZES
    if "sizes" in extra:
        sizes = _size_range(extra["sizes"])
    return ScaleSettings(
        sizes=sizes,
        kinds=_kinds(extra.get("scheduler", "mix"), extra.get("queues", "mix")),
        window_s=float(_int_setting(extra, "window_s", 1, 86_400, default=120)),
        max_levels=_int_setting(extra, "levels", 2, 1000, default=8),
        executor=extra.get("executor"),
        seed=options.seed,
        scale_jobs=_yes_no(extra, "scale_jobs", default=True),
    )


def _yes_no(extra: Mapping[str, str], key: str, default: bool) -> bool:
    text = extra.get(key, "yes" if default else "no").lower()
    if text not in {"yes", "no"}:
        raise SettingsError(f"search-scale: --set {key}={text}: want yes|no")
    return text == "yes"


def _size_range(text: str) -> tuple[tuple[int, int], ...]:
    """``N``: the first N sizes; ``I-J``: sizes I to J (1-based, inclusive)."""
    first, _, last = text.partition("-")
    count = len(FULL_SIZES)
    if not (first.isdigit() and (last.isdigit() or not last)):
        raise SettingsError(f"search-scale: --set sizes={text}: want N or I-J within 1-{count}")
    low, high = (1, int(first)) if not last else (int(first), int(last))
    if not 1 <= low <= high <= count:
        raise SettingsError(f"search-scale: --set sizes={text}: want N or I-J within 1-{count}")
    return FULL_SIZES[low - 1 : high]


def _int_setting(
    extra: Mapping[str, str], key: str, low: int, high: int, default: int | None = None
) -> int:
    text = extra.get(key, str(default))
    if not text.isdigit() or not low <= int(text) <= high:
        raise SettingsError(f"search-scale: --set {key}={text}: want a whole number {low}-{high}")
    return int(text)


def _kinds(scheduler: str, queues: str) -> tuple[GroupKind, ...]:
    schedulers = {"capacity": [Scheduler.CAPACITY], "fair": [Scheduler.FAIR]}.get(
        scheduler, [Scheduler.CAPACITY, Scheduler.FAIR] if scheduler == "mix" else []
    )
    counts = {"2": [2], "4": [4], "mix": [2, 4]}.get(queues, [])
    if not schedulers:
        raise SettingsError(f"search-scale: --set scheduler={scheduler}: want capacity|fair|mix")
    if not counts:
        raise SettingsError(f"search-scale: --set queues={queues}: want 2|4|mix")
    return tuple(GroupKind(s, n) for s in schedulers for n in counts)


class _TraceCache:
    """The trace, loaded once per replay size.

    A SWIM trace is replayed for each group's own cluster share, as SWIM's replay
    generator does for a smaller cluster: bytes -- hence task counts -- scale by
    ``target machines / original machines`` with target = nodes / groups (24-30
    machines here, against FB-2009's 600). Arrivals stay as traced, so a 2-minute
    window still holds the trace's ~8 jobs, now sized for the group. ``--set
    scale_jobs=no`` replays the jobs at their original size; other formats are
    replayed as they are."""

    def __init__(self, trace: Path, seed: int, scale_jobs: bool) -> None:
        self.trace = trace
        self.seed = seed
        self.swim = scale_jobs and detect_format(trace) == "swim"
        self._loaded: dict[int | None, dict[int, Workload]] = {}

    def for_size(self, nodes: int, groups: int) -> dict[int, Workload]:
        target = max(1, round(nodes / groups)) if self.swim else None
        if target not in self._loaded:
            self._loaded[target] = _workloads(self.trace, self.seed, target)
        return self._loaded[target]


def _workloads(trace: Path, seed: int, target_machines: int | None = None) -> dict[int, Workload]:
    """The trace with queues by priority for 2 and for 4 queues (§4.3)."""
    options: dict[str, Any] = {}
    if target_machines is not None:
        options["settings"] = SwimReplaySettings.for_trace(trace, target_machines=target_machines)
    loaded = _best_effort(load_trace(trace, seed=seed, **options), seed)
    if not loaded.jobs:
        raise SettingsError(f"search-scale: the trace {trace} has no jobs")
    return {
        2: assign_queues(loaded, QueueMapping.paper_two_queues()),
        4: assign_queues(loaded, QueueMapping.paper_four_queues()),
    }


def _best_effort(workload: Workload, seed: int) -> Workload:
    """Jobs of the best-effort priorities 2-8 (§4.2); a trace without priorities (SLS,
    Rumen) gets them drawn uniformly, as the paper does for the Facebook jobs."""
    kept = tuple(j for j in workload.jobs if j.features.priority in BEST_EFFORT_PRIORITIES)
    if kept:
        return replace(workload, jobs=kept)
    drawn = random_priorities(len(workload.jobs), seed=seed)
    jobs = tuple(
        replace(job, features=replace(job.features, priority=p))
        for job, p in zip(workload.jobs, drawn, strict=True)
    )
    return replace(workload, jobs=jobs)


def _warm_up(handle: ExecutorHandle) -> None:
    """Start every worker (fork, imports) before the clock runs."""
    futures = [handle.executor.submit(_ready) for _ in range(handle.workers * 2)]
    for future in futures:
        future.result()


def _ready() -> bool:
    return True


# --------------------------------------------------------------------------- groups


def refined_paper_space(kind: GroupKind, parent: str, refinement: int = REFINEMENT) -> GridSpace:
    """The §4.3 candidate set with ``refinement`` times as many splits: the fractions
    x of :func:`paper_splits` spread evenly over the same range [1/6, 5/6]."""
    queues = tuple(f"{parent}.q{i}" for i in range(1, kind.queues + 1))
    coarse = len(paper_splits(2))
    fractions = np.linspace(1 / 6, 5 / 6, coarse * refinement)
    scale = 100.0 if kind.scheduler is Scheduler.CAPACITY else 12.0
    splits = tuple(
        dict.fromkeys(
            tuple(round(v * scale, 4) for v in vector)
            for x in fractions
            for vector in _split_vectors(float(x), kind.queues)
        )
    )
    parameters: tuple[Parameter, ...] = (
        Parameter("split", ParameterKind.SPLIT, queues, splits, True),
    )
    if kind.scheduler is Scheduler.FAIR:
        parameters += (Parameter("policy", ParameterKind.POLICY, queues, FAIR_POLICIES, False),)
    return GridSpace(kind.scheduler, parent, queues, parameters, default_policy="fifo")


def _split_vectors(x: float, queues: int) -> list[tuple[float, ...]]:
    """As :func:`paper_splits`: (x, 1-x), or its two halved four-queue arrangements."""
    if queues == 2:
        return [(x, 1 - x)]
    return [(x / 2, x / 2, (1 - x) / 2, (1 - x) / 2), (x / 2, (1 - x) / 2, x / 2, (1 - x) / 2)]


def rrs_settings(kind: GroupKind) -> RRSSettings:
    """p = 0.99, g0 = one point of the §4.3 set, gt = g0 / 10, gamma = 0.5."""
    coarse = len(paper_splits(kind.queues)) * (3 if kind.scheduler is Scheduler.FAIR else 1)
    return RRSSettings.for_levels(coarse, refinement=REFINEMENT)


def build_problems(
    groups: int, total: int, settings: ScaleSettings, workloads: Mapping[int, Workload]
) -> list[tuple[GroupKind, GroupProblem, int]]:
    """``groups`` groups: kind, problem, and how many jobs its mix has."""
    rng = np.random.default_rng([settings.seed, groups])
    container = typical_container(workloads[2])  # a node's 4 containers are of this size
    built = []
    for index in range(groups):
        kind = settings.kinds[index % len(settings.kinds)]
        jobs = _window(workloads[kind.queues], settings.window_s, rng)
        problem = _problem(f"root.g{index}", kind, jobs, total, container)
        built.append((kind, problem, len(jobs)))
    return built


def _window(workload: Workload, window_s: float, rng: np.random.Generator) -> list[JobSpec]:
    """The jobs submitted in a random interval that has any."""
    submits = np.asarray([job.submit_s for job in workload.jobs])
    while True:
        start = float(rng.uniform(submits[0], max(submits[0], submits[-1] - window_s) + 1e-9))
        low, high = np.searchsorted(submits, [start, start + window_s])
        if high > low:
            return list(workload.jobs[low:high])


def _problem(
    parent: str, kind: GroupKind, jobs: Sequence[JobSpec], total: int, container: Resources
) -> GroupProblem:
    space = refined_paper_space(kind, parent)
    now = min(job.submit_s for job in jobs)
    mix = JobMix(tuple(mix_job(job) for job in jobs), now_s=now)
    base = GroupConfig(
        str(kind.scheduler),
        tuple(
            QueueConfig(q.rsplit(".", 1)[-1], "fifo", am_share=AM_SHARE[kind.scheduler])
            for q in space.queues
        ),
    )
    objective = ComparatorObjective(space, mix, base, container)
    bounds = resource_bounds(jobs, total)
    return GroupProblem(
        parent, space, objective, bounds, rrs=rrs_settings(kind), key=objective.evaluation_key
    )


# --------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class SizeResult:
    nodes: int
    groups: int
    kinds: tuple[GroupKind, ...]
    round: TuningRound
    jobs: int
    levels: int


def _measure(
    size: tuple[int, int],
    settings: ScaleSettings,
    workloads: Mapping[int, Workload],
    handle: ExecutorHandle,
) -> SizeResult:
    nodes, groups = size
    total = nodes * CONTAINERS_PER_NODE
    built = build_problems(groups, total, settings, workloads)
    problems = [problem for _, problem, _ in built]
    search = GroupSearchSettings(strategy="rrs", max_levels=settings.max_levels, seed=settings.seed)
    costs = [_cost_estimate(problem, settings) for problem in problems]
    result = tune_round(problems, total, search, handle, costs)
    return SizeResult(
        nodes,
        groups,
        tuple(kind for kind, _, _ in built),
        result,
        jobs=sum(jobs for _, _, jobs in built),
        levels=sum(len(o.levels) for o in result.outcomes),
    )


def _cost_estimate(problem: GroupProblem, settings: ScaleSettings) -> float:
    """Comparator work of a group's search, roughly: tasks x levels x evaluations."""
    assert isinstance(problem.objective, ComparatorObjective)
    tasks = sum(job.task_count for job in problem.objective.mix.jobs)
    levels = len(candidate_levels(problem.bounds, settings.max_levels))
    space = math.prod(d.size for d in problem.space.dimensions)
    planned = problem.rrs.planned_samples if problem.rrs else space
    return float((1 + tasks) * levels * min(space, planned))


def _evaluations_by_kind(result: SizeResult) -> dict[str, float]:
    """Mean distinct comparator calls per group and resource level, per kind."""
    per_kind: dict[str, list[float]] = defaultdict(list)
    for kind, outcome in zip(result.kinds, result.round.outcomes, strict=True):
        per_kind[kind.label].append(_per_level(outcome))
    return {label: round(float(np.mean(v)), 1) for label, v in sorted(per_kind.items())}


def _per_level(outcome: GroupOutcome) -> float:
    return outcome.evaluations / len(outcome.levels)


def _row(result: SizeResult) -> dict[str, Any]:
    """One size. ``group_s_*``: each group's own search time (inside its worker); the
    paper ran one group per VM, where the wall time is about ``group_s_max + dp_s``."""
    timing = result.round
    elapsed = [outcome.elapsed_s for outcome in timing.outcomes]
    return {
        "nodes": result.nodes,
        "groups": result.groups,
        "containers": result.nodes * CONTAINERS_PER_NODE,
        "wall_s": round(timing.wall_s, 3),
        "group_search_s": round(timing.group_search_s, 3),
        "dp_s": round(timing.dp_s, 4),
        "group_s_sum": round(float(sum(elapsed)), 2),
        "group_s_median": round(float(np.median(elapsed)), 3),
        "group_s_max": round(float(max(elapsed)), 3),
        "jobs_per_group": round(result.jobs / result.groups, 2),
        "levels_per_group": round(result.levels / result.groups, 2),
        "evals_per_group": _evaluations_per_group(result),
        "evals_per_level": _evaluations_by_kind(result),
    }


def _evaluations_per_group(result: SizeResult) -> dict[str, float]:
    per_kind: dict[str, list[int]] = defaultdict(list)
    for kind, outcome in zip(result.kinds, result.round.outcomes, strict=True):
        per_kind[kind.label].append(outcome.evaluations)
    return {label: round(float(np.mean(v)), 1) for label, v in sorted(per_kind.items())}


def _table_row(result: SizeResult) -> dict[str, Any]:
    row = _row(result)
    flat = {k: v for k, v in row.items() if not isinstance(v, dict)}
    flat.update({f"evals/level {k}": v for k, v in row["evals_per_level"].items()})
    return flat


def _figures(
    results: Sequence[SizeResult], pool_start_s: float, settings: ScaleSettings
) -> dict[str, Any]:
    planned = {k.label: rrs_settings(k) for k in settings.kinds}
    return {
        "max_wall_s": round(results[-1].round.wall_s, 3),
        "largest": {"nodes": results[-1].nodes, "groups": results[-1].groups},
        "pool_start_s": round(pool_start_s, 3),
        "rrs_samples_per_level": {k: s.planned_samples for k, s in planned.items()},
        "proposition_samples": {
            k: math.floor(s.proposition_samples + 0.5) for k, s in planned.items()
        },
        "paper_samples": {k: PAPER_SAMPLES[k] for k in planned},
        "rows": [_row(r) for r in results],
    }
