"""Speed measurement for the simulator (issue 3: the FB-2009 day on 600 nodes x 8
containers in at most 10 s) and a synthetic workload of the same shape for when no
trace is at hand."""

from __future__ import annotations

import math
import resource
import time
from collections import Counter
from dataclasses import replace
from typing import Any

import numpy as np

from yarn_adapt.errors import SettingsError
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.capacity import CapacityQueue, CapacitySchedulerConfig, Percentage
from yarn_adapt.model.resources import Resources
from yarn_adapt.model.workload import JobSpec, TaskSpec, Workload
from yarn_adapt.sim.native import select_core
from yarn_adapt.sim.results import latency_stats
from yarn_adapt.sim.run import simulate
from yarn_adapt.sim.spec import ClusterSpec, SimulationOptions

# The FB-2009 day as SWIM replays it (traces.md): 5,894 jobs over 86,400 s, 86 %
# with one map; maps p99 1,441 and at most 131,777.
FB_JOBS = 5894
FB_SPAN_S = 86_400.0
FB_TINY_SHARE = 0.86
FB_MAX_MAPS = 131_777
MAX_REPLICATED_JOBS = 10_000_000  # about 5 GB of job specs


def synthetic_fb_workload(seed: int = 0, jobs: int = FB_JOBS) -> Workload:
    """Jobs shaped like the FB-2009 sample: Poisson arrivals over a day, 86 % tiny
    (one map, one reduce), the rest with log-normal map counts (median 50, sigma
    2.3, capped at 131,777) and one reduce per 100 maps; a map runs 20-60 s and a
    reduce 30-120 s, the same for every task of a job. For speed tests only."""
    rng = np.random.default_rng(seed)
    submits = np.sort(rng.uniform(0.0, FB_SPAN_S, jobs))
    tiny = rng.random(jobs) < FB_TINY_SHARE
    maps = np.where(
        tiny, 1, np.minimum(FB_MAX_MAPS, np.ceil(rng.lognormal(math.log(50), 2.3, jobs)))
    )
    map_s = rng.uniform(20.0, 60.0, jobs)
    reduce_s = rng.uniform(30.0, 120.0, jobs)
    specs = tuple(
        _job(i, float(submits[i]), int(maps[i]), float(map_s[i]), float(reduce_s[i]))
        for i in range(jobs)
    )
    return Workload(specs, source=f"synthetic-fb2009(seed={seed})")


def _job(index: int, submit: float, maps: int, map_s: float, reduce_s: float) -> JobSpec:
    reduces = max(1, maps // 100)
    tasks = (TaskSpec(TaskType.MAP, round(map_s, 1)),) * maps + (
        TaskSpec(TaskType.REDUCE, round(reduce_s, 1)),
    ) * reduces
    return JobSpec(f"job{index}", round(submit, 3), "default", tasks)


def typical_container(workload: Workload) -> Resources:
    """The container size most jobs' first task asks for (1 GiB, 1 vcore if none)."""
    sizes = Counter(job.tasks[0].resources for job in workload.jobs if job.tasks)
    return sizes.most_common(1)[0][0] if sizes else Resources(1024, 1)


def equal_share_config(queues: list[str]) -> CapacitySchedulerConfig:
    """A Capacity Scheduler tree with one leaf per queue name, equal capacities."""
    names = queues or ["default"]
    base = math.floor(1000 / len(names)) / 10
    shares = [base] * len(names)
    shares[-1] = round(100 - base * (len(names) - 1), 1)
    leaves = tuple(
        CapacityQueue(f"root.{name}", capacity=Percentage(share))
        for name, share in zip(names, shares, strict=True)
    )
    return CapacitySchedulerConfig(CapacityQueue("root", children=leaves))


def replicate_workload(workload: Workload, copies: int) -> Workload:
    """The workload's jobs ``copies`` times, with fresh ids (``ID~K`` for copy K >= 1),
    interleaved over the same span: copy K is shifted by K / ``copies`` of the mean
    gap between submissions, so arrivals come ``copies`` times as often over the
    same day (scale the cluster with it to keep the load of the original). Copies
    share their tasks (no extra memory per task)."""
    if copies < 1:
        raise SettingsError(f"replicate must be at least 1, got {copies}")
    if copies * len(workload.jobs) > MAX_REPLICATED_JOBS:
        raise SettingsError(
            f"replicate={copies} would make {copies * len(workload.jobs):,} jobs, more than "
            f"the {MAX_REPLICATED_JOBS:,} a speed run builds"
        )
    if copies == 1 or not workload.jobs:
        return workload
    gap = workload.span_s / max(1, len(workload.jobs) - 1)
    jobs = [
        job
        if copy == 0
        else replace(job, id=f"{job.id}~{copy}", submit_s=job.submit_s + gap * copy / copies)
        for job in workload.jobs
        for copy in range(copies)
    ]
    jobs.sort(key=lambda job: job.submit_s)
    return Workload(tuple(jobs), f"{workload.source} x{copies}", workload.skipped_rows)


def peak_rss_mb() -> float:
    """The process's peak resident set so far (``ru_maxrss``, KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_speed_benchmark(
    workload: Workload,
    nodes: int = 600,
    containers_per_node: int = 8,
    config: CapacitySchedulerConfig | None = None,
    options: SimulationOptions | None = None,
) -> dict[str, Any]:
    """Simulate ``workload`` once and time it. Each node holds
    ``containers_per_node`` of the workload's most common task container; ``config``
    defaults to one Capacity Scheduler leaf per queue the workload names, equal
    shares."""
    names = list(dict.fromkeys(job.queue.removeprefix("root.") for job in workload.jobs))
    config = config or equal_share_config(names)
    container = typical_container(workload)
    cluster = ClusterSpec.uniform(nodes, container * containers_per_node)
    engine = select_core().kind
    began, began_cpu = time.perf_counter(), _cpu_s()
    result = simulate(workload, config, cluster, options, engine=engine)
    wall, cpu = time.perf_counter() - began, _cpu_s() - began_cpu
    stats = latency_stats(result.jobs)
    return {
        "engine": engine,
        "jobs": len(workload.jobs),
        "tasks": sum(len(job.tasks) for job in workload.jobs),
        "finished": stats.count,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "events": result.events,
        "events_per_s": round(result.events / wall) if wall > 0 else 0,
        "events_per_cpu_s": round(result.events / cpu) if cpu > 0 else 0,
        "simulated_s": round(result.end_s, 1),
        "mean_latency_s": round(stats.mean_s, 2),
        "utilisation_memory": round(result.utilisation.memory, 4),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }
