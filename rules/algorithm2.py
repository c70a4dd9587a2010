"""Algorithm 2: a job's execution time E(j_v, R_job) under a set of allocations.

Given the job's tasks ranked by execution order and its allocations ``(t_i, r_i)``
(``r_i`` containers become the job's at moment ``t_i``), tasks are assigned in order
to the container with the earliest available moment while some container is
available before the next allocation moment (the text's condition (1), "there
exists a container whose available moment is smaller than t_M"; the last
allocation's t_M is +inf). Tasks of the same execution order may run in any order.
The result is the interval from the first allocation to the last container's
available moment, plus every container's available (release) moment -- Fig. 5.

This is the estimator of jobs whose containers are reused for their next task; the
engine (:mod:`rules.engine`) applies the same assignment incrementally as
allocations happen, and returns containers to the scheduler between tasks for
MapReduce jobs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from yarn_adapt.errors import SettingsError


@dataclass(frozen=True)
class Allocation:
    """``containers`` given to the job at ``time_s``."""

    time_s: float
    containers: int


@dataclass(frozen=True)
class ExecutionEstimate:
    """E(j, R_job): execution time, and each container's available moment at the end
    (in allocation order) -- when the job releases it."""

    execution_s: float
    available_s: tuple[float, ...]
    assigned: tuple[int, ...]  # container (0-based) of each task, in rank order


def rank_tasks(orders: Sequence[Sequence[float]]) -> list[float]:
    """Line 1: tasks ranked by execution order. ``orders[k]`` holds the durations of
    the tasks of order ``k`` (parallel tasks share an order)."""
    return [duration for order in orders for duration in order]


def execution_time(tasks: Sequence[float], allocations: Sequence[Allocation]) -> ExecutionEstimate:
    """Algorithm 2 on ranked task durations ``tasks`` and ``allocations`` (sorted by
    time). Every task is assigned: the last allocation has no successor."""
    if not allocations:
        raise SettingsError("Algorithm 2 needs at least one allocation")
    if any(b.time_s < a.time_s for a, b in itertools.pairwise(allocations)):
        raise SettingsError("allocations must be in time order")
    available: list[float] = []
    assigned: list[int] = []
    next_task = 0
    for i, allocation in enumerate(allocations):
        next_moment = allocations[i + 1].time_s if i + 1 < len(allocations) else math.inf
        available.extend([allocation.time_s] * allocation.containers)
        while available and min(available) < next_moment and next_task < len(tasks):
            earliest = min(range(len(available)), key=available.__getitem__)
            available[earliest] += tasks[next_task]
            assigned.append(earliest)
            next_task += 1
    if next_task < len(tasks):
        raise SettingsError("no container was allocated to run the job's tasks")
    end = max(available) if available else allocations[0].time_s
    return ExecutionEstimate(end - allocations[0].time_s, tuple(available), tuple(assigned))
