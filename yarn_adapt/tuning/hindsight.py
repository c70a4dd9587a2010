"""The hindsight static: the static configuration of a group's space that would have
served the recent past best (pure; the simulator is decision code).

The tuner's own search predicts for the jobs in progress, one interval at a time: it
can hand every container to the queue that is busy this instant and starve the one
that is busy every other interval. A well-chosen static configuration does not make
that mistake. So the tuner replays the recent history -- the jobs submitted in the
last ``hindsight_window_s``, at their own arrival times, with the task-time model's
estimated durations (what the tuner knows of any job) -- in the fast simulator
(:func:`yarn_adapt.sim.simulate`) under each representative point of the group's
space (:func:`static_points`), from an empty cluster, and keeps the one whose
replayed jobs of the group finish soonest on average. The tuner holds that
configuration unless its prediction for the jobs in progress (and the horizon's
forecast) says a move gains enough (:mod:`yarn_adapt.tuning.tuner`).

One step per function: :func:`replayed_jobs` (the history as the tuner knows it),
:func:`static_points` (the candidates), :func:`replay_latency` (one candidate's
replay), :func:`hindsight_static` (the best of them).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from yarn_adapt.errors import ConfigValidationError
from yarn_adapt.model import JobSpec, SchedulerConfig, Workload
from yarn_adapt.sim import ClusterSpec, SimulationOptions, simulate
from yarn_adapt.tuning.apply import Group, apply_setting
from yarn_adapt.tuning.search import Point
from yarn_adapt.tuning.space import ConfigSpace, GroupSetting
from yarn_adapt.workload.taskmodel import TaskTimeModel

CENSOR_FACTOR = 2.0
"""A replay runs until ``CENSOR_FACTOR`` x the history's span (at least ten minutes)
after its last submission; a job still unfinished then counts as finishing then (a
configuration that starves a queue scores badly instead of being ignored, and the
simulator does not heartbeat through hours of a starved queue)."""


@dataclass(frozen=True)
class HindsightStatic:
    """The best static configuration over the recent history: its ``setting`` (a
    point of the group's space), the mean latency of the group's ``jobs`` replayed
    under it, and how many static configurations were replayed (``candidates``)."""

    point: Point
    setting: GroupSetting
    latency_s: float
    jobs: int
    candidates: int

    def describe(self) -> str:
        return (
            f"hindsight static ({self.setting.describe()}: best of {self.candidates} "
            f"static configurations replayed on the last {self.jobs} jobs)"
        )


def replayed_jobs(history: Sequence[JobSpec], model: TaskTimeModel) -> tuple[JobSpec, ...]:
    """``history`` in submission order, each task lasting what the task-time model
    estimates (the tuner never reads real durations)."""
    ordered = sorted(history, key=lambda job: job.submit_s)
    return tuple(_estimated(job, model) for job in ordered)


def _estimated(job: JobSpec, model: TaskTimeModel) -> JobSpec:
    seconds = model.estimate_job(job)
    tasks = tuple(replace(t, duration_s=s) for t, s in zip(job.tasks, seconds, strict=True))
    return replace(job, tasks=tasks)


def static_points(space: ConfigSpace, limit: int) -> tuple[Point, ...]:
    """The space's points when there are at most ``limit`` of them; else a lattice
    of each ordered dimension (its ends and evenly between, as many values as keep
    the product within ``limit``, at least the two ends) crossed with every value of
    the categorical ones. Points decoding to the same setting appear once."""
    if space.size <= limit:
        return _distinct(space, list(space.points()))
    dims = space.dimensions
    categorical = math.prod(d.size for d in dims if not d.ordered)
    ordered = sum(1 for d in dims if d.ordered)
    per = max(2, int((limit / categorical) ** (1.0 / max(ordered, 1)) + 1e-9))
    axes = [_lattice(d.size, per) if d.ordered else tuple(range(d.size)) for d in dims]
    return _distinct(space, _product(axes))


def _lattice(size: int, count: int) -> tuple[int, ...]:
    if count >= size:
        return tuple(range(size))
    return tuple(sorted({round(i * (size - 1) / (count - 1)) for i in range(count)}))


def _product(axes: Sequence[Sequence[int]]) -> list[Point]:
    points: list[Point] = [()]
    for axis in axes:
        points = [(*p, i) for p in points for i in axis]
    return points


def _distinct(space: ConfigSpace, points: Sequence[Point]) -> tuple[Point, ...]:
    seen: set[GroupSetting] = set()
    kept = []
    for point in points:
        setting = space.decode(point)
        if setting not in seen:
            seen.add(setting)
            kept.append(point)
    return tuple(kept)


def replay_latency(
    jobs: Sequence[JobSpec], config: SchedulerConfig, cluster: ClusterSpec, leaves: frozenset[str]
) -> float:
    """Mean latency of the jobs of ``leaves`` when ``jobs`` run on an empty
    ``cluster`` under ``config`` (censored, :data:`CENSOR_FACTOR`); infinite when
    YARN would refuse ``config``."""
    first, last = jobs[0].submit_s, jobs[-1].submit_s
    horizon = last + CENSOR_FACTOR * max(last - first, 600.0)
    try:
        result = simulate(
            Workload(tuple(jobs)), config, cluster, SimulationOptions(horizon_s=horizon)
        )
    except ConfigValidationError:
        return math.inf
    latencies = [
        (j.finish_s if j.finish_s is not None else horizon) - j.submit_s
        for j in result.jobs
        if _leaf(j.queue) in leaves
    ]
    return statistics.fmean(latencies) if latencies else math.nan


def _leaf(queue: str) -> str:
    return queue.rsplit(".", 1)[-1]


def hindsight_static(
    jobs: Sequence[JobSpec],
    current: SchedulerConfig,
    group: Group,
    space: ConfigSpace,
    cluster: ClusterSpec,
    limit: int,
) -> HindsightStatic | None:
    """The static configuration among :func:`static_points` whose replay of ``jobs``
    (already :func:`replayed_jobs`) gives the group's jobs the lowest mean latency,
    the other groups as configured now (ties: the first point); ``None`` when the
    history holds none of the group's jobs."""
    leaves = frozenset(group.leaf_names)
    mine = sum(1 for job in jobs if _leaf(job.queue) in leaves)
    if not mine:
        return None
    points = static_points(space, limit)
    scored = [(_scored(jobs, current, space.decode(p), cluster, leaves), p) for p in points]
    latency, point = min(scored, key=lambda pair: pair[0])
    return HindsightStatic(point, space.decode(point), latency, mine, len(points))


def _scored(
    jobs: Sequence[JobSpec],
    current: SchedulerConfig,
    setting: GroupSetting,
    cluster: ClusterSpec,
    leaves: frozenset[str],
) -> float:
    latency = replay_latency(jobs, apply_setting(current, setting), cluster, leaves)
    return latency if not math.isnan(latency) else math.inf
