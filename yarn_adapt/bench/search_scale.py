"""``yarn-adapt bench search-scale``: the AdaptiveConfig §4.5.1 protocol, timing the
service's own tuning pass (:func:`yarn_adapt.tuning.tuner.propose`).

Ten cluster sizes from 300 to 12,000 nodes of 4 containers, with 10 to 500 groups
scaled together. The cluster's configuration is one Capacity or one Fair tree
(``--set scheduler=capacity|fair|both``, default both, each timed on its own): root
holds the groups, each a parent queue with 2 or 4 leaf queues (``--set
queues=2|4|mix``), all with equal shares. A group's jobs are what the trace (default:
the bundled FB-2009 SWIM day; ``--trace`` swaps it) submits in a random tuning
interval of ``--set window_s=120`` seconds, drawn from the trace's second half and
submitted in the interval before the tuning moment, so every group is triggered
(§3.1). Jobs go to queues by priority as in §4.3. A SWIM trace is replayed for the
group's share of the cluster (nodes / groups machines) the way SWIM replays a trace
on a smaller cluster (``--set scale_jobs=no`` keeps the original sizes).

Durations are estimates: the task-time model is fitted on the trace's first half,
the tuner sees only its predictions. Each group's space is the §4.3 candidate set
refined ten-fold (Capacity 2/4 queues: 50/100 splits; Fair: the same splits x
FIFO/Fair/DRF, 150/300). Everything else is the service's default
(:class:`~yarn_adapt.tuning.settings.TunerSettings`): RRS (p = 0.99, g0 = 1/27, gt =
1/270, gamma = 0.5, stopping after an iteration without improvement; a space no larger
than its samples is enumerated), 16 resource levels per group between its
Algorithm 3 bounds, each group searched once at its current resources and its best
candidate re-scored at the other levels (``--set rescored=N``: its N best) -- the
levels inside a span whose ends differ by at most ``--set flat=0.02`` left unscored
(``-1``: every level) --, candidates scored once per whole-container key, then
Algorithm 3.

Timed: exactly ``propose`` -- in this process (``wall_s``; ``cpu_s`` the process's
CPU time over it, which a busy machine inflates less), and on a process pool
(``wall_pool_s``, ``--set executor=...``, any ``--executor`` value; ``none`` skips
it). ``max_one_worker_per_group_s``: the slowest group's span of the in-process
run plus what follows the groups (the DP) -- the wall of the paper's own set-up,
one VM per group, without shipping the inputs (rows: ``slowest_group_s``,
``after_groups_s``). Not timed: loading the trace, fitting the model, building the
state, starting the pool (``pool_start_s``; a running service keeps its pool).

``latency_loss_vs_full`` (largest size; ``--set full=all|largest|no``): the same
pass with every level searched in full, no whole-container keys and RRS without
early stopping (Algorithm 3 as written), against the fast pass: the comparator's
predicted mean job latency of each proposal (every group under its proposed setting
and share, scored alike), the fast one's excess in percent.

Each row also counts ``changed_groups`` (a new setting proposed) and
``indifferent_groups``: triggered groups whose every candidate predicts the same
latency at their current resources -- their configuration does not matter there
(their jobs' demand fits in their share and no limit binds), so they keep it.
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from rules.comparator import Comparator
from rules.inputs import GroupConfig, JobMix, QueueConfig
from rules.mixes import mix_job
from yarn_adapt.bench import BenchOptions, BenchResult, benchmark
from yarn_adapt.errors import SettingsError
from yarn_adapt.model import (
    CapacityQueue,
    CapacitySchedulerConfig,
    FairQueue,
    FairSchedulerConfig,
    Percentage,
    SchedulerConfig,
)
from yarn_adapt.model.resources import Resources
from yarn_adapt.model.workload import JobSpec, Workload
from yarn_adapt.progress import report
from yarn_adapt.set_keys import SetSpec, flag, free_text, numeric, span, whole, word
from yarn_adapt.sim import ClusterSpec, JobInProgress, SimulationStart
from yarn_adapt.sim.bench import typical_container
from yarn_adapt.tuning.apply import groups_of
from yarn_adapt.tuning.bridge import group_config
from yarn_adapt.tuning.executors import ExecutorHandle, open_executor
from yarn_adapt.tuning.group_optimizer import (
    ComparatorObjective,
    GroupProblem,
    LevelSearch,
    resource_bounds,
)
from yarn_adapt.tuning.proposal import Proposal
from yarn_adapt.tuning.search import RRSSettings
from yarn_adapt.tuning.settings import TunerSettings
from yarn_adapt.tuning.space import (
    FAIR_POLICIES,
    ConfigSpace,
    GridSpace,
    Parameter,
    ParameterKind,
    Scheduler,
    paper_splits,
)
from yarn_adapt.tuning.state import TuningState, group_resources, group_share, state_mix
from yarn_adapt.tuning.tuner import GroupTuned, propose
from yarn_adapt.workload import (
    BEST_EFFORT_PRIORITIES,
    QueueMapping,
    SwimReplaySettings,
    TaskTimeModel,
    assign_queues,
    detect_format,
    fit_task_time_model,
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
PATH = "tuner.propose"


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
    levels: int
    rescored: int
    executor: str | None
    seed: int
    scale_jobs: bool = True
    full: str = "largest"
    flat: float | None = None

    @property
    def schedulers(self) -> tuple[Scheduler, ...]:
        return tuple(dict.fromkeys(kind.scheduler for kind in self.kinds))

    def queue_counts(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(kind.queues for kind in self.kinds))


def run(options: BenchOptions) -> BenchResult:
    settings = _settings(options)
    traces = _TraceCache(options.trace or bundled_trace(), options.seed, settings.scale_jobs)
    results = []
    pool_start_s = 0.0
    with _pool(settings.executor) as handle:
        if handle is not None:
            began = time.perf_counter()
            _warm_up(handle)
            pool_start_s = time.perf_counter() - began
        for index, size in enumerate(settings.sizes):
            loaded = traces.for_size(*size)
            last = index == len(settings.sizes) - 1
            for scheduler in settings.schedulers:
                results.append(_measure(size, scheduler, settings, loaded, handle, last))
                total = len(settings.sizes) * len(settings.schedulers)
                note = f"{size[0]} nodes, {size[1]} groups, {scheduler}"
                report("bench search-scale row", len(results), total, note)
    return BenchResult(_figures(results, pool_start_s, settings), [_row(r) for r in results])


SCHEDULERS = {
    "capacity": (Scheduler.CAPACITY,),
    "fair": (Scheduler.FAIR,),
    "both": (Scheduler.CAPACITY, Scheduler.FAIR),
    "mix": (Scheduler.CAPACITY, Scheduler.FAIR),
}
QUEUE_COUNTS = {"2": (2,), "4": (4,), "mix": (2, 4)}


class Knobs:
    scheduler = word("scheduler", tuple(SCHEDULERS), "both")
    queues = word("queues", tuple(QUEUE_COUNTS), "mix")
    window_s = whole("window_s", 120, low=1, high=86_400)
    levels = whole("levels", TunerSettings().levels, low=2, high=1000)
    rescored = whole("rescored", TunerSettings().rescored, low=1, high=1000)
    flat = numeric("flat", TunerSettings().level_flat or -1.0, low=-1.0, high=1.0)
    executor = free_text("executor", "process")
    sizes = span("sizes", len(FULL_SIZES), (1, len(FULL_SIZES)), quick=(1, len(QUICK_SIZES)))
    scale_jobs = flag("scale_jobs", True)
    full = word("full", ("all", "largest", "no"), "largest")


SET_KEYS = SetSpec.of("search-scale", Knobs)

benchmark(
    "search-scale", "§4.5.1: tuner.propose (group searches + DP), 300-12,000 nodes", SET_KEYS
)(run)


def _settings(options: BenchOptions) -> ScaleSettings:
    values = SET_KEYS.read(options.extra, quick=options.quick)
    first, last = values[Knobs.sizes]
    return ScaleSettings(
        sizes=FULL_SIZES[first - 1 : last],
        kinds=_kinds(values[Knobs.scheduler], values[Knobs.queues]),
        window_s=float(values[Knobs.window_s]),
        levels=values[Knobs.levels],
        rescored=values[Knobs.rescored],
        flat=None if values[Knobs.flat] < 0 else values[Knobs.flat],
        executor=values[Knobs.executor],
        seed=options.seed,
        scale_jobs=values[Knobs.scale_jobs],
        full=values[Knobs.full],
    )


def _kinds(scheduler: str, queues: str) -> tuple[GroupKind, ...]:
    return tuple(GroupKind(s, n) for s in SCHEDULERS[scheduler] for n in QUEUE_COUNTS[queues])


@dataclass(frozen=True)
class Loaded:
    """A trace replayed for one group size: the second half of its jobs by queue
    count (windows are drawn from it), and the task-time model fitted on its first
    half."""

    later: Mapping[int, Workload]
    model: TaskTimeModel


class _TraceCache:
    """The trace, loaded (and its model fitted) once per replay size.

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
        self._loaded: dict[int | None, Loaded] = {}

    def for_size(self, nodes: int, groups: int) -> Loaded:
        target = max(1, round(nodes / groups)) if self.swim else None
        if target not in self._loaded:
            self._loaded[target] = _split_halves(
                _workloads(self.trace, self.seed, target), self.seed
            )
        return self._loaded[target]


def _split_halves(workloads: Mapping[int, Workload], seed: int) -> Loaded:
    half = len(workloads[2].jobs) // 2
    model = fit_task_time_model(replace(workloads[2], jobs=workloads[2].jobs[:half]), seed=seed)
    later = {n: replace(w, jobs=w.jobs[half:]) for n, w in workloads.items()}
    return Loaded(later, model)


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


@contextmanager
def _pool(spec: str | None) -> Iterator[ExecutorHandle | None]:
    """The executor to time the pass on as well (``none``: only in process)."""
    if spec is None or spec == "none":
        yield None
        return
    with open_executor(spec) as handle:
        yield handle


def _warm_up(handle: ExecutorHandle) -> None:
    """Start every worker (fork, imports) before the clock runs."""
    futures = [handle.executor.submit(_ready) for _ in range(handle.workers * 2)]
    for future in futures:
        future.result()


def _ready() -> bool:
    return True


# --------------------------------------------------------------------------- groups


def refined_paper_space(
    kind: GroupKind,
    parent: str,
    refinement: int = REFINEMENT,
    queues: Sequence[str] | None = None,
) -> GridSpace:
    """The §4.3 candidate set with ``refinement`` times as many splits: the fractions
    x of :func:`paper_splits` spread evenly over the same range [1/6, 5/6]. Leaves:
    ``queues``, default ``{parent}.q1`` ..."""
    queues = tuple(queues or (f"{parent}.q{i}" for i in range(1, kind.queues + 1)))
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
    """``groups`` groups as standalone problems on the real durations (kind, problem,
    how many jobs its mix has): the comparator scenarios pinned in
    ``tests/rules/test_pinned_latencies.py`` are cut this way."""
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


# --------------------------------------------------------------------------- a round


@dataclass(frozen=True)
class Round:
    """One tuning moment: the configuration, the cluster's state and the tuner's
    settings (spaces per group), and the model of the trace."""

    config: SchedulerConfig
    state: TuningState
    settings: TunerSettings
    model: TaskTimeModel
    kinds: tuple[GroupKind, ...]
    jobs: int


def build_round(
    size: tuple[int, int],
    scheduler: Scheduler,
    settings: ScaleSettings,
    loaded: Loaded,
) -> Round:
    """``groups`` groups of ``scheduler`` on ``nodes`` nodes, every one triggered."""
    nodes, groups = size
    rng = np.random.default_rng(
        [settings.seed, groups, 0 if scheduler is Scheduler.CAPACITY else 1]
    )
    counts = settings.queue_counts()
    kinds = tuple(GroupKind(scheduler, counts[i % len(counts)]) for i in range(groups))
    now = settings.window_s
    jobs: list[JobInProgress] = []
    spaces: dict[str, ConfigSpace] = {}
    for index, kind in enumerate(kinds):
        parent = f"root.g{index}"
        leaves = _leaves(parent, kind.queues)
        window = _window(loaded.later[kind.queues], settings.window_s, rng)
        jobs.extend(_in_progress(window, parent, leaves, now, settings.window_s))
        spaces[parent] = refined_paper_space(kind, parent, queues=leaves)
    container = typical_container(loaded.later[2])
    cluster = ClusterSpec.of_containers(nodes, CONTAINERS_PER_NODE, container)
    state = TuningState(now, SimulationStart(now, tuple(jobs)), cluster)
    tuner = TunerSettings(
        interval_s=settings.window_s,
        spaces=spaces,
        levels=settings.levels,
        rescored=settings.rescored,
        level_flat=settings.flat,
    )
    config = _configuration(scheduler, kinds)
    return Round(config, state, tuner, loaded.model, kinds, len(jobs))


def _leaves(parent: str, count: int) -> tuple[str, ...]:
    """Leaf paths with names unique in the tree (the tuner finds a job's group by its
    leaf queue's name)."""
    short = parent.rsplit(".", 1)[-1]
    return tuple(f"{parent}.{short}q{i}" for i in range(1, count + 1))


def _in_progress(
    window: Sequence[JobSpec], parent: str, leaves: Sequence[str], now: float, span: float
) -> list[JobInProgress]:
    """The window's jobs, submitted in the interval before ``now`` to the group's
    leaves (a job of the trace's queue ``qK`` goes to the group's K-th leaf)."""
    first = window[0].submit_s
    moved = []
    for job in window:
        leaf = leaves[int(job.queue.rsplit("q", 1)[-1]) - 1]
        # inside the interval: a submission exactly at its start is not "in the last
        # interval" (state.triggered_groups)
        submit = now - span + (job.submit_s - first) * (1 - 1e-6) + 1e-3
        moved.append(
            JobInProgress(replace(job, id=f"{parent}/{job.id}", queue=leaf, submit_s=submit))
        )
    return moved


def _configuration(scheduler: Scheduler, kinds: Sequence[GroupKind]) -> SchedulerConfig:
    """Equal shares everywhere: each group 1/G of root, each leaf 1/n of its group
    (Capacity: maximum-capacity 90 % per leaf, §4.2)."""
    if scheduler is Scheduler.CAPACITY:
        groups = tuple(
            CapacityQueue(
                f"root.g{i}",
                capacity=Percentage(share),
                children=tuple(
                    CapacityQueue(leaf, capacity=Percentage(s), maximum_capacity=Percentage(90.0))
                    for leaf, s in zip(
                        _leaves(f"root.g{i}", kind.queues), _shares(kind.queues), strict=True
                    )
                ),
            )
            for i, (kind, share) in enumerate(zip(kinds, _shares(len(kinds)), strict=True))
        )
        return CapacitySchedulerConfig(CapacityQueue("root", children=groups))
    fair_groups = tuple(
        FairQueue(
            f"root.g{i}",
            weight=1.0,
            children=tuple(
                FairQueue(leaf, weight=1.0) for leaf in _leaves(f"root.g{i}", kind.queues)
            ),
        )
        for i, kind in enumerate(kinds)
    )
    return FairSchedulerConfig(FairQueue("root", children=fair_groups))


def _shares(count: int) -> list[float]:
    """``count`` percentages of two decimals adding up to 100."""
    share = math.floor(10_000 / count) / 100
    return [share] * (count - 1) + [round(100.0 - share * (count - 1), 2)]


# --------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class RoundResult:
    nodes: int
    groups: int
    scheduler: Scheduler
    jobs: int
    wall_s: float
    cpu_s: float
    wall_pool_s: float | None
    proposal: Proposal
    spans: GroupSpans
    loss_vs_full: float | None
    full_wall_s: float | None


def _measure(
    size: tuple[int, int],
    scheduler: Scheduler,
    settings: ScaleSettings,
    loaded: Loaded,
    handle: ExecutorHandle | None,
    last: bool,
) -> RoundResult:
    built = build_round(size, scheduler, settings, loaded)
    cpu_began = time.process_time()
    spans = GroupSpans()
    wall, proposal = _timed(built, built.settings, on_group_tuned=spans.heard)
    cpu = time.process_time() - cpu_began
    wall_pool = _timed(built, built.settings, handle)[0] if handle is not None else None
    loss = full_wall = None
    if settings.full == "all" or (settings.full == "largest" and last):
        full_wall, full = _timed(built, full_search(built.settings))
        loss = latency_loss(built, proposal, full)
    return RoundResult(
        size[0],
        size[1],
        scheduler,
        built.jobs,
        wall,
        cpu,
        wall_pool,
        proposal,
        spans.finished(wall),
        loss,
        full_wall,
    )


def full_search(settings: TunerSettings) -> TunerSettings:
    """Algorithm 3 as written: every level searched in full, every point scored, RRS
    without early stopping (or every point when RRS would draw as many), no
    coarse-to-fine."""
    return replace(
        settings,
        level_search=LevelSearch.FULL,
        canonical=False,
        rrs=RRSSettings(),
        strategy="auto",
    )


def _timed(
    built: Round,
    settings: TunerSettings,
    handle: ExecutorHandle | None = None,
    on_group_tuned: GroupTuned | None = None,
) -> tuple[float, Proposal]:
    began = time.perf_counter()
    proposal = propose(
        built.state,
        built.config,
        built.model,
        settings,
        executor=handle,
        on_group_tuned=on_group_tuned,
    )
    return time.perf_counter() - began, proposal


@dataclass
class GroupSpans:
    """Where an in-process ``propose`` spent its time: ``heard`` is its
    ``on_group_tuned`` callback; each group's span runs from the previous group's
    end. The first group's span is left out of ``slowest_s``: it also carries
    building every group's mix, work a worker per group would split.
    ``finished(wall)`` adds what followed the last group (Algorithm 3's DP, composing
    and validating the configuration)."""

    began: float = field(default_factory=time.perf_counter)
    marks: list[float] = field(default_factory=list)
    after_s: float = 0.0

    def heard(self, done: int, total: int, group: str) -> None:
        self.marks.append(time.perf_counter())

    def finished(self, wall_s: float) -> GroupSpans:
        end = self.began + wall_s
        self.after_s = max(0.0, end - self.marks[-1]) if self.marks else wall_s
        return self

    @property
    def slowest_s(self) -> float:
        return max((b - a for a, b in itertools.pairwise(self.marks)), default=0.0)

    @property
    def one_worker_per_group_s(self) -> float:
        """The wall a deployment with one worker per group would see (the paper's
        §4.5.1 set-up, one VM per group), leaving out shipping the inputs."""
        return self.slowest_s + self.after_s


def predicted_latency(built: Round, config: SchedulerConfig) -> float:
    """The comparator's mean job latency over every group, each under ``config``'s
    setting and share of the cluster (point estimates, scored alike for any
    configuration)."""
    found = _group_latencies(built, config)
    total = sum(jobs for _, jobs in found.values())
    return sum(latency * jobs for latency, jobs in found.values()) / total if total else math.nan


def _group_latencies(built: Round, config: SchedulerConfig) -> dict[str, tuple[float, int]]:
    """Each group with jobs: its predicted mean job latency and its job count."""
    found = {}
    for group in groups_of(config):
        mix = state_mix(built.state, built.model, group.leaf_names, built.settings)
        if not mix.jobs:
            continue
        resources = group_resources(built.state, group_share(config, group), whole=False)
        latency = Comparator(mix, resources).latency(group_config(config, group))
        found[group.parent] = (latency, len(mix.jobs))
    return found


def latency_loss(built: Round, fast: Proposal, full: Proposal) -> float:
    """The fast proposal's predicted latency over the full search's, in percent, over
    the groups both leave with a bounded prediction (a group the comparator predicts
    starves under both would make every mean infinite); infinite when the fast pass
    starves a group the full search does not, NaN when no group is bounded under both."""
    ours, theirs = _group_latencies(built, fast.config), _group_latencies(built, full.config)
    if any(
        not math.isfinite(ours[g][0]) and math.isfinite(theirs[g][0]) for g in ours if g in theirs
    ):
        return math.inf
    both = [g for g in ours if g in theirs and math.isfinite(ours[g][0] + theirs[g][0])]
    jobs = sum(ours[g][1] for g in both)
    if not jobs:
        return math.nan
    mean_ours = sum(ours[g][0] * ours[g][1] for g in both) / jobs
    mean_theirs = sum(theirs[g][0] * theirs[g][1] for g in both) / jobs
    return 100.0 * (mean_ours / mean_theirs - 1)


def _row(result: RoundResult) -> dict[str, Any]:
    decisions = [d for d in result.proposal.groups if d.triggered]
    return {
        "nodes": result.nodes,
        "groups": result.groups,
        "scheduler": str(result.scheduler),
        "containers": result.nodes * CONTAINERS_PER_NODE,
        "jobs_per_group": round(result.jobs / result.groups, 2),
        "wall_s": round(result.wall_s, 3),
        "cpu_s": round(result.cpu_s, 3),
        "wall_pool_s": None if result.wall_pool_s is None else round(result.wall_pool_s, 3),
        "slowest_group_s": round(result.spans.slowest_s, 3),
        "after_groups_s": round(result.spans.after_s, 3),
        "evals_per_group": round(statistics.fmean(d.evaluations for d in decisions), 1)
        if decisions
        else 0.0,
        "changed_groups": sum(d.changed for d in decisions),
        "indifferent_groups": sum(d.indifferent for d in decisions),
        "full_wall_s": None if result.full_wall_s is None else round(result.full_wall_s, 3),
        "latency_loss_vs_full": _loss_figure(result.loss_vs_full),
    }


def _known(loss: float | None) -> bool:
    return loss is not None and not math.isnan(loss)


def _loss_figure(loss: float | None) -> float | str | None:
    """JSON has no NaN or infinity: ``None`` when unknown, ``"unbounded"`` when the
    fast pass starves a group the full search does not."""
    if not _known(loss):
        return None
    assert loss is not None
    return round(loss, 3) if math.isfinite(loss) else "unbounded"


def _figures(
    results: Sequence[RoundResult], pool_start_s: float, settings: ScaleSettings
) -> dict[str, Any]:
    largest = [r for r in results if (r.nodes, r.groups) == settings.sizes[-1]]
    pool = [r.wall_pool_s for r in largest if r.wall_pool_s is not None]
    losses = [r.loss_vs_full for r in largest if r.loss_vs_full is not None]
    losses = [loss for loss in losses if not math.isnan(loss)]
    return {
        "path": PATH,
        "max_wall_s": round(max(r.wall_s for r in largest), 3),
        "max_cpu_s": round(max(r.cpu_s for r in largest), 3),
        "max_wall_pool_s": round(max(pool), 3) if pool else None,
        "max_one_worker_per_group_s": round(
            max(r.spans.one_worker_per_group_s for r in largest), 3
        ),
        "pool": settings.executor if settings.executor != "none" else None,
        "largest": {"nodes": largest[0].nodes, "groups": largest[0].groups},
        "wall_s_by_scheduler": {str(r.scheduler): round(r.wall_s, 3) for r in largest},
        "latency_loss_vs_full": _loss_figure(max(losses)) if losses else None,
        "latency_loss_vs_full_by_scheduler": {
            str(r.scheduler): _loss_figure(r.loss_vs_full)
            for r in largest
            if r.loss_vs_full is not None
        },
        "full_wall_s": {
            str(r.scheduler): round(r.full_wall_s, 3) for r in largest if r.full_wall_s is not None
        },
        "pool_start_s": round(pool_start_s, 3),
        "space_points": {k.label: refined_paper_space(k, "root.g").size for k in settings.kinds},
        "paper_samples": {k.label: PAPER_SAMPLES[k.label] for k in settings.kinds},
        "rows": [_row(r) for r in results],
    }
