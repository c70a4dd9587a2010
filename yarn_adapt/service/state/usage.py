"""Queue usage from one observation (pure): how much of the cluster each queue
uses, what it waits for, and what the configuration guarantees it.

A real RM reports usage in ``/ws/v1/cluster/scheduler`` (read into the snapshot's
:class:`~yarn_adapt.model.scheduler_state.SchedulerStatus`); the demo's simulated
cluster is read from its jobs in progress. Both give the same
:class:`~yarn_adapt.service.state.series.QueueUsage` rows, one per queue in tree order.

``used_percent`` always means one thing: the share of the whole cluster the queue's
containers hold, as the scheduler measures it -- memory alone under the Capacity
Scheduler's default resource calculator (what the RM's ``absoluteUsedCapacity``
reports), the dominant resource otherwise -- so a parent holds what its children
hold together. The RM's ``usedCapacity`` (percent of the queue's own guarantee) is a
different figure and is never called "used" alone.
"""

from __future__ import annotations

from collections.abc import Iterator

from yarn_adapt.model import (
    CapacitySchedulerConfig,
    ClusterSnapshot,
    FairSchedulerConfig,
    Percentage,
    Resources,
    SchedulerConfig,
)
from yarn_adapt.model.capacity import CapacityQueue, Weight
from yarn_adapt.model.fair import FairQueue
from yarn_adapt.model.resources import NO_RESOURCES
from yarn_adapt.model.scheduler_state import QueueStatus
from yarn_adapt.service.state.series import QueueUsage
from yarn_adapt.sim import JobInProgress


def guaranteed_shares(config: SchedulerConfig) -> dict[str, float | None]:
    """Each queue's configured guarantee as a percent of the cluster: Capacity
    percentages (or weights) multiplied down the tree; Fair weights as the steady
    share they give when every sibling is active. ``None`` below a queue whose
    guarantee is absolute resources."""
    shares: dict[str, float | None] = {config.root.path: 100.0}
    for queue in config.queues():
        parent = shares.get(queue.path)
        children = queue.children
        fractions = _child_fractions(config, children)
        for child, fraction in zip(children, fractions, strict=True):
            shares[child.path] = None if parent is None or fraction is None else parent * fraction
    return shares


def _child_fractions(
    config: SchedulerConfig, children: tuple[CapacityQueue, ...] | tuple[FairQueue, ...]
) -> list[float | None]:
    if isinstance(config, FairSchedulerConfig):
        weights = [q.effective_weight for q in children]  # type: ignore[union-attr]
        total = sum(weights)
        return [w / total if total > 0 else None for w in weights]
    capacities = [q.capacity for q in children]  # type: ignore[union-attr]
    weights = [c.weight for c in capacities if isinstance(c, Weight)]
    if capacities and len(weights) == len(capacities):
        total = sum(weights)
        return [w / total if total > 0 else None for w in weights]
    return [
        c.percent / 100.0 if isinstance(c, Percentage) else 0.0 if c is None else None
        for c in capacities
    ]


# --------------------------------------------------------------------------- a real RM


def usage_of_snapshot(snapshot: ClusterSnapshot, config: SchedulerConfig) -> list[QueueUsage]:
    total = snapshot.metrics.total
    shares = guaranteed_shares(config)
    return [
        QueueUsage(
            queue=q.path,
            used_percent=_used_percent(q, total),
            guaranteed_percent=shares.get(q.path),
            pending_containers=q.pending_containers,
            running_apps=q.num_active_applications,
            pending_apps=q.num_pending_applications,
        )
        for q in _walk(snapshot.scheduler.root)
    ]


def _walk(queue: QueueStatus) -> Iterator[QueueStatus]:
    yield queue
    for child in queue.children:
        yield from _walk(child)


def _used_percent(queue: QueueStatus, total: Resources) -> float:
    if queue.absolute_used_capacity is not None:
        return round(queue.absolute_used_capacity, 2)
    return round(100.0 * queue.used.dominant_share(total), 2) if not total.is_zero else 0.0


# --------------------------------------------------------------------------- a simulation


def usage_of_jobs(
    jobs: tuple[JobInProgress, ...], total: Resources, config: SchedulerConfig
) -> list[QueueUsage]:
    """The simulated cluster's usage: each job's AM and running containers count
    for its leaf (and every queue above it); the tasks not started yet, and the AM
    of a job still waiting for one, are pending."""
    shares = guaranteed_shares(config)
    measure = _memory_share if memory_only(config) else _dominant_share
    used: dict[str, Resources] = {}
    pending: dict[str, int] = {}
    running_apps: dict[str, int] = {}
    pending_apps: dict[str, int] = {}
    leaves = {leaf.name: leaf.path for leaf in config.leaves()}
    leaves.update({leaf.path: leaf.path for leaf in config.leaves()})
    for progress in jobs:
        leaf = leaves.get(progress.job.queue)
        if leaf is None:
            continue
        holding = sum((c.task.resources for c in progress.running), NO_RESOURCES)
        started = progress.am_started_s is not None
        if started:
            holding = holding + progress.job.am_resources
        for path in _ancestors(leaf):
            used[path] = used.get(path, NO_RESOURCES) + holding
            pending[path] = pending.get(path, 0) + len(progress.job.tasks) + (0 if started else 1)
            counts = running_apps if started else pending_apps
            counts[path] = counts.get(path, 0) + 1
    return [
        QueueUsage(
            queue=q.path,
            used_percent=measure(used.get(q.path, NO_RESOURCES), total),
            guaranteed_percent=shares.get(q.path),
            pending_containers=pending.get(q.path, 0),
            running_apps=running_apps.get(q.path, 0),
            pending_apps=pending_apps.get(q.path, 0),
        )
        for q in config.queues()
    ]


def memory_only(config: SchedulerConfig) -> bool:
    """Whether the scheduler counts memory alone: the Capacity Scheduler with its
    default resource calculator (vcores are then not enforced, and may be
    over-committed)."""
    if not isinstance(config, CapacitySchedulerConfig):
        return False
    return "DominantResourceCalculator" not in (config.global_value("resource-calculator") or "")


def _memory_share(used: Resources, total: Resources) -> float:
    if total.memory_mb <= 0:
        return 0.0
    return min(100.0, round(100.0 * used.memory_mb / total.memory_mb, 2))


def _dominant_share(used: Resources, total: Resources) -> float:
    """Percent of the cluster, at most 100: the simulator's jobs in progress may
    hold a container that is being released at this instant."""
    return min(100.0, round(100.0 * used.dominant_share(total), 2)) if not total.is_zero else 0.0


def _ancestors(path: str) -> list[str]:
    parts = path.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def usage_of(view: object, config: SchedulerConfig) -> list[QueueUsage]:
    """Usage from whatever the backend observed: an RM snapshot or a simulated view
    (anything else: none)."""
    if isinstance(view, ClusterSnapshot):
        return usage_of_snapshot(view, config)
    start = getattr(view, "start", None)
    cluster = getattr(view, "cluster", None)
    if start is not None and cluster is not None:
        return usage_of_jobs(start.jobs, cluster.total, config)
    return []


def is_capacity(config: SchedulerConfig) -> bool:
    return isinstance(config, CapacitySchedulerConfig)
