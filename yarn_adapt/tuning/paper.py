"""The AdaptiveConfig evaluation settings (§4.2-§4.4) as reusable pieces: the queue
trees the candidates are written into, the clusters of six and eight containers,
job mixes cut from a trace, and the comparator's view of a candidate.

Choices the paper leaves open are made here once, and said:

* A container is 1 vcore and 2 GiB (§4.2); nodes hold two containers each (the
  testbed's nodes were far larger; two per node keeps several heartbeating nodes in
  a six-container cluster). SWIM tasks ask for one container, AMs for 1 GiB, which
  the 2 GiB minimum allocation rounds up to a container. Google tasks ask for what
  the trace says (scaled to the §4.2 testbed node), on a 1 GiB minimum allocation.
* §4.2's queue constraints -- each queue between 10 % and 90 % of the group -- are
  written into the base configurations: Capacity ``maximum-capacity`` 90, Fair
  ``minResources`` 10 % and ``maxResources`` 90 %. Everything else keeps YARN's
  defaults (user-limit-factor 1, maximum-am-resource-percent 0.1, maxAMShare 0.5,
  one container per Fair heartbeat).
* A mix is ``size`` consecutive jobs of the trace, submission times rebased to 0 and
  stretched or compressed so the mix offers ``load`` x the cluster's
  container-seconds over its submission span (the paper's mixes are "mixes of jobs
  submitted to" six- or eight-container clusters; a trace's own arrival rate is for
  its 600- or 12,000-machine cluster). Google jobs keep at most ``max_tasks`` of
  their tasks, so a mix fits the small clusters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from rules.inputs import GroupConfig, GroupResources
from yarn_adapt.model import (
    CapacityQueue,
    CapacitySchedulerConfig,
    FairQueue,
    FairSchedulerConfig,
    JobSpec,
    Percentage,
    Resources,
    SchedulerConfig,
    Workload,
    parse_fair_resources,
)
from yarn_adapt.sim import ClusterSpec
from yarn_adapt.tuning.apply import Group, apply_setting
from yarn_adapt.tuning.bridge import group_config
from yarn_adapt.tuning.space import ConfigSpace, Scheduler

CONTAINER = Resources(2048, 1)
CONTAINERS_PER_NODE = 2
QUEUE_MIN_PERCENT = 10.0
QUEUE_MAX_PERCENT = 90.0


def leaf_paths(queues: Sequence[str]) -> tuple[str, ...]:
    return tuple(q if q.startswith("root.") else f"root.{q}" for q in queues)


def capacity_base(queues: Sequence[str]) -> CapacitySchedulerConfig:
    """Leaves under root, equal capacities, maximum-capacity 90 (§4.2)."""
    paths = leaf_paths(queues)
    share = round(100.0 / len(paths), 2)
    shares = [share] * (len(paths) - 1) + [round(100.0 - share * (len(paths) - 1), 2)]
    leaves = tuple(
        CapacityQueue(p, capacity=Percentage(s), maximum_capacity=Percentage(QUEUE_MAX_PERCENT))
        for p, s in zip(paths, shares, strict=True)
    )
    return CapacitySchedulerConfig(CapacityQueue("root", children=leaves))


def fair_base(queues: Sequence[str]) -> FairSchedulerConfig:
    """Leaves under root, weight 1, minResources 10 % and maxResources 90 % (§4.2)."""
    low = parse_fair_resources(f"{QUEUE_MIN_PERCENT:g}%")
    high = parse_fair_resources(f"{QUEUE_MAX_PERCENT:g}%")
    leaves = tuple(
        FairQueue(p, weight=1.0, min_resources=low, max_resources=high) for p in leaf_paths(queues)
    )
    return FairSchedulerConfig(FairQueue("root", children=leaves))


def base_config(scheduler: Scheduler, queues: Sequence[str]) -> SchedulerConfig:
    return capacity_base(queues) if scheduler is Scheduler.CAPACITY else fair_base(queues)


@dataclass(frozen=True)
class Candidate:
    """One candidate configuration: what the simulator runs and what the comparator
    reads, both from the same scheduler configuration."""

    label: str
    config: SchedulerConfig
    group: GroupConfig


def candidates(space: ConfigSpace, base: SchedulerConfig) -> list[Candidate]:
    """Every point of ``space`` written into ``base``."""
    found = []
    for point in space.points():
        setting = space.decode(point)
        config = apply_setting(base, setting)
        group = Group(setting.parent, tuple(q.path for q in setting.queues))
        found.append(Candidate(setting.describe(), config, group_config(config, group)))
    return found


@dataclass(frozen=True)
class PaperCluster:
    """``containers`` containers of ``container`` on nodes of two, with the
    minimum allocation ``unit``."""

    containers: int
    container: Resources = CONTAINER
    unit: Resources = CONTAINER

    def spec(self) -> ClusterSpec:
        per_node = self.container * CONTAINERS_PER_NODE
        nodes = -(-self.containers // CONTAINERS_PER_NODE)
        spec = ClusterSpec.uniform(nodes, per_node, minimum_allocation=self.unit)
        odd = self.containers % CONTAINERS_PER_NODE
        if not odd:
            return spec
        last = replace(spec.nodes[-1], resources=self.container * odd)
        return replace(spec, nodes=(*spec.nodes[:-1], last))

    def resources(self, *, with_nodes: bool = True) -> GroupResources:
        nodes = tuple(n.resources for n in self.spec().nodes)
        total = Resources(sum(n.memory_mb for n in nodes), sum(n.vcores for n in nodes))
        return GroupResources(total, self.unit, nodes if with_nodes else ())


def make_mix(
    jobs: Sequence[JobSpec], containers: int, load: float, max_tasks: int | None = None
) -> Workload:
    """``jobs`` rebased to start at 0 and spread so they offer ``load`` x
    ``containers`` container-seconds per second of their submission span (tasks
    beyond ``max_tasks`` dropped first)."""
    trimmed = [_trim(job, max_tasks) for job in jobs]
    start = trimmed[0].submit_s
    span = trimmed[-1].submit_s - start
    work = sum(job.total_task_seconds for job in trimmed)
    factor = work / (load * containers * span) if span > 0 else 1.0
    rebased = tuple(replace(j, submit_s=round((j.submit_s - start) * factor, 3)) for j in trimmed)
    return Workload(rebased, source=f"mix({len(rebased)} jobs, load {load:g})")


def _trim(job: JobSpec, max_tasks: int | None) -> JobSpec:
    if max_tasks is None or len(job.tasks) <= max_tasks:
        return job
    return replace(job, tasks=job.tasks[:max_tasks])
