"""Nodes, cluster information and metrics, and the snapshot the decision code reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from yarn_adapt.model.apps import Application, MapReduceJob
from yarn_adapt.model.resources import NO_RESOURCES, Resources
from yarn_adapt.model.scheduler_state import SchedulerStatus


class NodeState(StrEnum):
    NEW = "NEW"
    RUNNING = "RUNNING"
    UNHEALTHY = "UNHEALTHY"
    DECOMMISSIONING = "DECOMMISSIONING"
    DECOMMISSIONED = "DECOMMISSIONED"
    LOST = "LOST"
    REBOOTED = "REBOOTED"
    SHUTDOWN = "SHUTDOWN"


class HAState(StrEnum):
    ACTIVE = "ACTIVE"
    STANDBY = "STANDBY"
    INITIALIZING = "INITIALIZING"
    STOPPED = "STOPPED"


@dataclass(frozen=True)
class NodeUtilization:
    """What the NodeManager measured on its host (``resourceUtilization``): the whole
    node and the YARN containers on it, memory in MiB. The two CPU figures are in
    different units, as the NodeManager reports them: ``node_cpu`` in cores used
    (``/proc/stat``), ``containers_cpu`` in the vcores the node advertises (its
    ContainersMonitor scales the containers' share of the CPUs to its vcores: on a
    node of 1 CPU advertising 4 vcores, a container burning the CPU reports 4.0).
    :meth:`outside_containers_cores` puts them together."""

    node_cpu: float
    node_memory_mb: int
    containers_cpu: float
    containers_memory_mb: int

    def outside_containers_cores(self, vcores_per_core: float) -> float:
        """The CPU (cores) used on the node outside YARN's containers, for a node that
        advertises ``vcores_per_core`` vcores per core."""
        return max(0.0, self.node_cpu - self.containers_cpu / vcores_per_core)


@dataclass(frozen=True)
class Node:
    """A NodeManager as the RM sees it. ``id`` is ``host:port`` (the NM RPC port)."""

    id: str
    host: str
    rack: str
    state: NodeState
    total: Resources
    used: Resources
    num_containers: int = 0
    http_address: str = ""
    health_report: str = ""
    last_health_update_ms: int = 0
    utilization: NodeUtilization | None = None

    @property
    def available(self) -> Resources:
        return (self.total - self.used).clamped()

    @property
    def is_schedulable(self) -> bool:
        return self.state is NodeState.RUNNING


@dataclass(frozen=True)
class ClusterInfo:
    """``/ws/v1/cluster/info``."""

    cluster_id: str
    state: str
    ha_state: HAState
    hadoop_version: str
    rm_version: str
    started_ms: int

    @property
    def is_active(self) -> bool:
        return self.ha_state is HAState.ACTIVE


@dataclass(frozen=True)
class HistoryServerInfo:
    """``/ws/v1/history/info`` of the MapReduce JobHistory Server."""

    started_ms: int
    hadoop_version: str
    hadoop_build_version: str = ""


@dataclass(frozen=True)
class ClusterMetrics:
    """``/ws/v1/cluster/metrics``."""

    apps_submitted: int
    apps_completed: int
    apps_pending: int
    apps_running: int
    apps_failed: int
    apps_killed: int
    total: Resources
    allocated: Resources
    available: Resources
    reserved: Resources
    containers_allocated: int
    containers_pending: int
    total_nodes: int
    active_nodes: int
    lost_nodes: int
    unhealthy_nodes: int


@dataclass(frozen=True)
class ClusterSnapshot:
    """Everything observed in one pass, parsed once at the edge. Decision code reads
    only this (and history); it never sees raw JSON."""

    taken_ms: int
    info: ClusterInfo
    metrics: ClusterMetrics
    scheduler: SchedulerStatus
    nodes: tuple[Node, ...] = ()
    apps: tuple[Application, ...] = ()
    jobs: tuple[MapReduceJob, ...] = field(default=())

    @property
    def schedulable_resources(self) -> Resources:
        total = NO_RESOURCES
        for node in self.nodes:
            if node.is_schedulable:
                total = total + node.total
        return total
