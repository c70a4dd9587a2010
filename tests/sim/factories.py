"""Small builders for simulator scenarios: jobs, queue trees, clusters, and what
ran where."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from yarn_adapt.model import (
    CapacityQueue,
    CapacitySchedulerConfig,
    FairQueue,
    FairSchedulerConfig,
    JobFeatures,
    JobSpec,
    Percentage,
    Resources,
    TaskSpec,
    TaskType,
    Workload,
)
from yarn_adapt.model.fair import FairResources
from yarn_adapt.sim import ClusterSpec, SimulationOptions, SimulationResult, simulate
from yarn_adapt.sim.results import Allocation

CONTAINER = Resources(1024, 1)
NO_AMS = SimulationOptions(am_containers=False, record_allocations=True)


def job(
    job_id: str,
    queue: str,
    maps: int = 1,
    duration: float = 100.0,
    *,
    submit: float = 0.0,
    reduces: int = 0,
    reduce_duration: float = 10.0,
    user: str = "user",
    container: Resources = CONTAINER,
    priority: int = 0,
) -> JobSpec:
    tasks = (TaskSpec(TaskType.MAP, duration, container),) * maps + (
        TaskSpec(TaskType.REDUCE, reduce_duration, container),
    ) * reduces
    return JobSpec(job_id, submit, queue, tasks, user=user, features=JobFeatures(priority=priority))


def workload(*jobs: JobSpec) -> Workload:
    return Workload(tuple(sorted(jobs, key=lambda j: j.submit_s)))


def cluster(nodes: int, containers_per_node: int) -> ClusterSpec:
    return ClusterSpec.of_containers(nodes, containers_per_node, CONTAINER)


def capacity_leaf(
    name: str,
    capacity: float,
    maximum: float | None = None,
    **fields: object,
) -> CapacityQueue:
    return CapacityQueue(
        f"root.{name}",
        capacity=Percentage(capacity),
        maximum_capacity=None if maximum is None else Percentage(maximum),
        **fields,  # type: ignore[arg-type]
    )


def capacity_tree(
    *leaves: CapacityQueue, globals_: Iterable[tuple[str, str]] = ()
) -> CapacitySchedulerConfig:
    return CapacitySchedulerConfig(CapacityQueue("root", children=leaves), tuple(globals_))


def fair_leaf(name: str, weight: float = 1.0, policy: str = "fair", **fields: object) -> FairQueue:
    return FairQueue(f"root.{name}", weight=weight, scheduling_policy=policy, **fields)  # type: ignore[arg-type]


def fair_tree(
    *children: FairQueue,
    defaults: Iterable[tuple[str, str]] = (),
    root_policy: str | None = None,
) -> FairSchedulerConfig:
    root = FairQueue("root", scheduling_policy=root_policy, children=children)
    return FairSchedulerConfig(root, tuple(defaults))


def fair_amount(memory_mb: int, vcores: int) -> FairResources:
    return FairResources.absolute(Resources(memory_mb, vcores))


def granted_by(result: SimulationResult, time_s: float, tasks_only: bool = True) -> dict[str, int]:
    """Containers granted per job up to ``time_s`` (from recorded allocations)."""
    counts: Counter[str] = Counter()
    for allocation in _allocations(result, time_s, tasks_only):
        counts[allocation.job_id] += allocation.count
    return dict(sorted(counts.items()))


def _allocations(result: SimulationResult, time_s: float, tasks_only: bool) -> Iterable[Allocation]:
    return (a for a in result.allocations if a.time_s <= time_s and not (tasks_only and a.is_am))


def run(
    jobs: Iterable[JobSpec],
    config: CapacitySchedulerConfig | FairSchedulerConfig,
    nodes: int = 1,
    containers_per_node: int = 5,
    options: SimulationOptions = NO_AMS,
) -> SimulationResult:
    return simulate(workload(*jobs), config, cluster(nodes, containers_per_node), options)


def finish(result: SimulationResult) -> dict[str, float | None]:
    return {j.id: j.finish_s for j in result.jobs}
