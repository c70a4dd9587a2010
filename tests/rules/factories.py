"""Builders for comparator scenarios: jobs, mixes, group configurations."""

from __future__ import annotations

from rules.comparator import Comparator
from rules.engine import Algorithm1
from rules.inputs import (
    NO_CONSTRAINTS,
    GroupConfig,
    GroupConstraints,
    GroupResources,
    JobMix,
    MixJob,
    QueueConfig,
    RunningTasks,
)
from rules.rulebook import DEFAULT_BOOK, RuleBook
from rules.state import Estimate
from yarn_adapt.model import Resources

CONTAINER = Resources(1024, 1)


def job(
    job_id: str,
    queue: str,
    maps: int = 1,
    seconds: float = 100.0,
    *,
    submit: float = 0.0,
    reduces: int = 0,
    reduce_seconds: float = 10.0,
    priority: int = 0,
    deadline: float | None = None,
    user: str = "user",
    task: Resources = CONTAINER,
    allowed_share: float | None = None,
    running: tuple[RunningTasks, ...] = (),
    am_running: bool = False,
) -> MixJob:
    stages = (((maps, seconds),) if maps else (), ((reduces, reduce_seconds),) if reduces else ())
    return MixJob(
        job_id,
        queue,
        submit,
        stages,
        task=task,
        am=CONTAINER,
        priority=priority,
        deadline_s=deadline,
        allowed_share=allowed_share,
        user=user,
        running=running,
        am_running=am_running,
    )


def mix(*jobs: MixJob, am: bool = False, framework: str = "mapreduce") -> JobMix:
    return JobMix(tuple(jobs), am_containers=am, framework=framework)


def capacity(
    *queues: tuple[str, float, float], policy: str = "fifo", **extra: float
) -> GroupConfig:
    """(name, capacity %, maximum %) per queue."""
    return GroupConfig(
        "capacity",
        tuple(QueueConfig(n, policy, capacity=c, maximum=m, **extra) for n, c, m in queues),  # type: ignore[arg-type]
    )


def fair(*queues: tuple[str, float], policy: str = "fair", parent: str = "fair") -> GroupConfig:
    """(name, weight) per queue."""
    return GroupConfig(
        "fair", tuple(QueueConfig(n, policy, weight=w) for n, w in queues), parent_policy=parent
    )


def containers(count: int, per_node: int | None = None) -> GroupResources:
    return GroupResources.of_containers(count, CONTAINER, per_node)


def run(
    config: GroupConfig,
    jobs: JobMix,
    resources: GroupResources,
    constraints: GroupConstraints = NO_CONSTRAINTS,
    book: RuleBook = DEFAULT_BOOK,
) -> tuple[Estimate, list[tuple[float, str, bool]]]:
    """The estimate and the recorded grants (moment, job, is AM)."""
    comparator = Comparator(jobs, resources, constraints, book=book)
    engine = Algorithm1(
        comparator.mechanism(config), config, jobs, resources, constraints, record=True
    )
    estimate = engine.run()
    assert engine.grants is not None
    return estimate, engine.grants


def latencies(estimate: Estimate, jobs: JobMix) -> dict[str, float]:
    return {j.id: round(lat, 6) for j, lat in zip(jobs.jobs, estimate.latencies, strict=True)}


def granted_at(grants: list[tuple[float, str, bool]], moment: float) -> dict[str, int]:
    counts: dict[str, int] = {}
    for time, job_id, is_am in grants:
        if time == moment and not is_am:
            counts[job_id] = counts.get(job_id, 0) + 1
    return dict(sorted(counts.items()))
