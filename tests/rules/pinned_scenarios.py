"""Fixed comparator scenarios whose latencies ``test_pinned_latencies`` pins: groups
cut from the FB-2009 sample as the search-scale bench cuts them (every scheduler
kind, queue count and Fair policy, at several resource levels), and hand-built mixes
that take the engine's other paths (heartbeats, container reuse, running tasks,
user limits, queue bounds, deadlines)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import numpy as np

from rules.comparator import Comparator
from rules.inputs import GroupConfig, GroupConstraints, GroupResources, JobMix, RunningTasks
from tests.rules.factories import capacity, containers, fair, job
from yarn_adapt.bench import BenchOptions
from yarn_adapt.bench import search_scale as bench
from yarn_adapt.tuning.group_optimizer import ComparatorObjective, candidate_levels

FB_SAMPLE = (
    Path(__file__).parents[1] / "fixtures/workload/FB-2009_samples_24_times_1hr_0_first50jobs.tsv"
)
Case = tuple[str, Callable[[], list[float]]]


def bench_cases() -> Iterator[Case]:
    """Each kind's group, scaled for 24 and 100 machines and unscaled: 6 points at 4
    levels."""
    options = BenchOptions(trace=FB_SAMPLE, seed=2, extra={"window_s": "600"})
    settings = bench._settings(options)
    for machines in (24, 100, None):
        workloads = bench._workloads(FB_SAMPLE, seed=2, target_machines=machines)
        for kind, problem, _ in bench.build_problems(4, (machines or 100) * 4, settings, workloads):
            assert isinstance(problem.objective, ComparatorObjective)
            yield f"{kind.label}@{machines}", partial(_levels, problem.objective, problem.bounds)


def _levels(objective: ComparatorObjective, bounds: object) -> list[float]:
    points = list(objective.space.points())
    chosen = [points[i] for i in np.linspace(0, len(points) - 1, 6).round().astype(int)]
    latencies: list[float] = []
    for level in candidate_levels(bounds, 4):  # type: ignore[arg-type]
        latencies.extend(objective(level, chosen))
    return latencies


def _varied(count: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in rng.uniform(5.0, 60.0, count).round(3)]


def ten_jobs(seed: int, *, am: bool = True, framework: str = "mapreduce") -> JobMix:
    """Ten jobs over queues a and b, two users, distinct task times, a running job."""
    times = _varied(40, seed)
    jobs = [
        job(
            f"j{i}",
            "ab"[i % 2],
            maps=3 + i % 4,
            seconds=times[i],
            submit=float(i * 7 % 23),
            reduces=i % 3,
            reduce_seconds=times[20 + i],
            priority=i % 3,
            deadline=200.0 + times[30 + i % 10] * 3,
            user=f"u{i % 2}",
        )
        for i in range(9)
    ]
    jobs.append(
        job(
            "r",
            "a",
            maps=4,
            seconds=12.5,
            reduces=2,
            running=(RunningTasks(2, 3.25),),
            am_running=True,
        )
    )
    return JobMix(tuple(jobs), am_containers=am, framework=framework)


def _estimate(
    config: GroupConfig,
    mix: JobMix,
    resources: GroupResources,
    constraints: GroupConstraints | None = None,
) -> list[float]:
    comparator = Comparator(mix, resources, constraints or GroupConstraints())
    return list(comparator.estimate(config).latencies)


def engine_cases() -> Iterator[Case]:
    cap = capacity(("a", 30.0, 100.0), ("b", 70.0, 100.0))
    cap_static = capacity(("a", 40.0, 40.0), ("b", 60.0, 60.0), minimum_user_limit_percent=50.0)
    bounds = GroupConstraints(queue_min={"a": 0.1}, queue_max={"a": 0.9, "b": 0.9})
    for seed in (1, 2):
        mix = ten_jobs(seed)
        yield f"capacity-continuous-{seed}", partial(_estimate, cap, mix, containers(9))
        yield f"capacity-heartbeat-{seed}", partial(_estimate, cap, mix, containers(12, 4))
        yield f"capacity-static-{seed}", partial(_estimate, cap_static, mix, containers(10))
        yield (
            f"capacity-edf-{seed}",
            partial(
                _estimate,
                capacity(("a", 50.0, 80.0), ("b", 50.0, 80.0), policy="edf"),
                mix,
                containers(8),
            ),
        )
        for policy, parent in (("fifo", "fair"), ("fair", "fair"), ("drf", "drf")):
            config = fair(("a", 1.0), ("b", 3.0), policy=policy, parent=parent)
            yield f"fair-{policy}-{seed}", partial(_estimate, config, mix, containers(24))
            yield (
                f"fair-{policy}-heartbeat-{seed}",
                partial(_estimate, config, mix, containers(16, 4)),
            )
            yield (
                f"fair-{policy}-bounded-{seed}",
                partial(_estimate, config, mix, containers(11), bounds),
            )
        reuse = ten_jobs(seed, framework="reuse")
        yield f"capacity-reuse-{seed}", partial(_estimate, cap, reuse, containers(9))
        yield (
            f"fair-reuse-heartbeat-{seed}",
            partial(_estimate, fair(("a", 2.0), ("b", 1.0)), reuse, containers(24, 4)),
        )
        no_am = ten_jobs(seed, am=False)
        yield (
            f"fair-no-am-{seed}",
            partial(_estimate, fair(("a", 1.0), ("b", 1.0)), no_am, containers(6)),
        )
