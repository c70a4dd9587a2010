"""What a simulation reports: per job, per queue over time, and for the cluster.

A job's *start* is when its ApplicationMaster container was granted (its first
task container when AMs are off); *wait* is start - submit; *latency* is finish -
submit, the paper's job latency.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


class JobStatus(StrEnum):
    FINISHED = "FINISHED"
    REJECTED = "REJECTED"
    UNFINISHED = "UNFINISHED"


@dataclass(frozen=True, slots=True)
class JobResult:
    id: str
    queue: str
    user: str
    submit_s: float
    start_s: float | None
    finish_s: float | None
    status: JobStatus
    tasks: int
    reason: str = ""

    @property
    def wait_s(self) -> float | None:
        return None if self.start_s is None else self.start_s - self.submit_s

    @property
    def latency_s(self) -> float | None:
        return None if self.finish_s is None else self.finish_s - self.submit_s


@dataclass(frozen=True, eq=False)
class UsageSeries:
    """Resources in use at each sample time (read-only arrays of equal length)."""

    times_s: FloatArray
    memory_mb: FloatArray
    vcores: FloatArray

    def mean_memory_mb(self) -> float:
        return float(self.memory_mb.mean()) if len(self.memory_mb) else 0.0


@dataclass(frozen=True)
class Allocation:
    """``count`` containers granted to a job on a node at one moment (recorded only
    with ``SimulationOptions.record_allocations``)."""

    time_s: float
    job_id: str
    node_id: str
    count: int
    is_am: bool


@dataclass(frozen=True)
class Utilisation:
    """Time-averaged share of batch-visible capacity held by batch containers over
    the simulated span (from 0, or the snapshot time, to the end)."""

    memory: float
    vcores: float


@dataclass(frozen=True, eq=False)
class SimulationResult:
    """``jobs`` in submission order (jobs of a snapshot start first)."""

    jobs: tuple[JobResult, ...]
    queue_usage: Mapping[str, UsageSeries]
    cluster_usage: UsageSeries
    utilisation: Utilisation
    end_s: float
    events: int
    preempted_containers: int = 0
    allocations: tuple[Allocation, ...] = ()

    def job(self, job_id: str) -> JobResult:
        return next(j for j in self.jobs if j.id == job_id)

    def finished(self) -> tuple[JobResult, ...]:
        return tuple(j for j in self.jobs if j.status is JobStatus.FINISHED)

    def mean_latency_s(self) -> float:
        return latency_stats(self.finished()).mean_s


@dataclass(frozen=True)
class LatencyStats:
    count: int
    mean_s: float
    median_s: float
    p95_s: float
    mean_wait_s: float


_EMPTY = LatencyStats(0, float("nan"), float("nan"), float("nan"), float("nan"))


def latency_stats(jobs: Iterable[JobResult]) -> LatencyStats:
    """Latency statistics over the finished jobs among ``jobs``."""
    pairs = [
        (j.finish_s - j.submit_s, j.start_s - j.submit_s)
        for j in jobs
        if j.finish_s is not None and j.start_s is not None
    ]
    if not pairs:
        return _EMPTY
    latencies, waits = np.array(pairs, dtype=np.float64).T
    return LatencyStats(
        count=len(pairs),
        mean_s=float(latencies.mean()),
        median_s=float(np.median(latencies)),
        p95_s=float(np.percentile(latencies, 95)),
        mean_wait_s=float(waits.mean()),
    )


def latency_stats_by_queue(result: SimulationResult) -> dict[str, LatencyStats]:
    """Mean / median / p95 latency of finished jobs per leaf queue, in queue order."""
    by_queue: dict[str, list[JobResult]] = {q: [] for q in result.queue_usage}
    for job in result.jobs:
        by_queue.setdefault(job.queue, []).append(job)
    return {queue: latency_stats(jobs) for queue, jobs in by_queue.items()}


def read_only(values: Iterable[float]) -> FloatArray:
    array = np.fromiter(values, dtype=np.float64)
    array.flags.writeable = False
    return array
