"""Realized latency (pure): each group's mean job latency in a window, from the jobs
that finished in it, to set beside what the applied proposal predicted."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from yarn_adapt.model import SchedulerConfig
from yarn_adapt.service.backend import FinishedJob


@dataclass(frozen=True)
class GroupLatency:
    group: str
    jobs: int
    mean_s: float | None


def group_of_queue(queue: str, config: SchedulerConfig) -> str | None:
    """The group (parent path) of the leaf an app ran in. YARN reports the leaf by
    name under the Capacity Scheduler and by path under the Fair Scheduler."""
    for leaf in config.leaves():
        if queue in (leaf.path, leaf.name):
            return leaf.parent_path or "root"
    return None


def latency_by_group(
    jobs: Iterable[FinishedJob],
    config: SchedulerConfig,
    window: tuple[int, int],
    groups: Iterable[str],
) -> dict[str, GroupLatency]:
    """Mean latency per group of the jobs finished in ``(start, end]``; every group
    in ``groups`` appears, with ``mean_s=None`` when none of its jobs finished."""
    start, end = window
    latencies: dict[str, list[float]] = {group: [] for group in groups}
    for job in jobs:
        if not start < job.finished_ms <= end:
            continue
        group = group_of_queue(job.queue, config)
        if group in latencies:
            latencies[group].append(job.latency_s)
    return {group: _mean(group, values) for group, values in latencies.items()}


def _mean(group: str, values: list[float]) -> GroupLatency:
    return GroupLatency(group, len(values), sum(values) / len(values) if values else None)


def submitted_since(
    jobs: Iterable[FinishedJob], config: SchedulerConfig, since_ms: int
) -> dict[str, int]:
    """How many of the finished ``jobs`` were submitted after ``since_ms``, per group."""
    counts: dict[str, int] = {}
    for job in jobs:
        if job.submitted_ms <= since_ms:
            continue
        group = group_of_queue(job.queue, config)
        if group is not None:
            counts[group] = counts.get(group, 0) + 1
    return counts
