"""What a simulation runs on and how: the cluster, and the options of the run.

Defaults follow YARN's where YARN has one (NodeManager heartbeat 1 s,
``yarn.scheduler.minimum-allocation-mb`` 1024, Fair Scheduler ``assignmultiple``
false, preemption off); each field says where its default comes from.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property

from yarn_adapt.errors import SettingsError
from yarn_adapt.model.cluster import Node
from yarn_adapt.model.resources import Resources
from yarn_adapt.sim.hooks import (
    NO_LONG_RUNNING,
    HeartbeatNodePlacement,
    LongRunningWorkload,
    NodeCapacityProvider,
    PlacementPolicy,
    StaticNodeCapacity,
)

DEFAULT_CONTAINER = Resources(1024, 1)
DEFAULT_RACK = "/default-rack"


@dataclass(frozen=True)
class NodeSpec:
    """One NodeManager: its id and the resources it offers YARN."""

    id: str
    resources: Resources
    rack: str = DEFAULT_RACK


@dataclass(frozen=True)
class ClusterSpec:
    """The simulated cluster. ``minimum_allocation`` is YARN's
    ``yarn.scheduler.minimum-allocation-{mb,vcores}`` (1024 MiB, 1 vcore): requests and
    the Capacity Scheduler's limits are normalised to multiples of it."""

    nodes: tuple[NodeSpec, ...]
    minimum_allocation: Resources = DEFAULT_CONTAINER

    def __post_init__(self) -> None:
        if not self.nodes:
            raise SettingsError("cluster spec: no nodes")
        ids = [n.id for n in self.nodes]
        if len(set(ids)) != len(ids):
            raise SettingsError("cluster spec: node ids are not unique")
        if self.minimum_allocation.memory_mb <= 0 or self.minimum_allocation.vcores <= 0:
            raise SettingsError(
                f"cluster spec: minimum allocation must be positive, got {self.minimum_allocation}"
            )

    @classmethod
    def uniform(cls, count: int, per_node: Resources, **kwargs: Resources) -> ClusterSpec:
        """``count`` identical nodes named ``node-0001`` ..."""
        if count <= 0:
            raise SettingsError(f"cluster spec: node count must be positive, got {count}")
        width = max(4, len(str(count)))
        nodes = tuple(NodeSpec(f"node-{i:0{width}d}", per_node) for i in range(1, count + 1))
        return cls(nodes, **kwargs)

    @classmethod
    def of_containers(
        cls, count: int, containers_per_node: int, container: Resources = DEFAULT_CONTAINER
    ) -> ClusterSpec:
        """``count`` nodes that each hold ``containers_per_node`` containers of
        ``container`` size (the paper counts resources in containers)."""
        per_node = Resources(
            container.memory_mb * containers_per_node, container.vcores * containers_per_node
        )
        return cls.uniform(count, per_node, minimum_allocation=container)

    @classmethod
    def from_nodes(cls, nodes: Iterable[Node], **kwargs: Resources) -> ClusterSpec:
        """The schedulable nodes of an observed cluster (``ClusterSnapshot.nodes``)."""
        specs = tuple(NodeSpec(n.id, n.total, n.rack) for n in nodes if n.is_schedulable)
        return cls(specs, **kwargs)

    @cached_property
    def total(self) -> Resources:
        """All nodes' resources (worked out once: the tuner asks per group)."""
        return Resources(
            sum(n.resources.memory_mb for n in self.nodes),
            sum(n.resources.vcores for n in self.nodes),
        )


class HeartbeatMode(StrEnum):
    """``HEARTBEAT``: containers are granted only when a NodeManager heartbeats (every
    ``heartbeat_interval_s``, each node at its own phase), as in YARN.
    ``CONTINUOUS``: an ideal scheduler that grants the moment resources and demand
    meet, with no per-heartbeat assignment limit."""

    HEARTBEAT = "heartbeat"
    CONTINUOUS = "continuous"


@dataclass(frozen=True)
class PreemptionOptions:
    """Scheduler preemption (off by default, as in YARN).

    Capacity Scheduler (ProportionalCapacityPreemptionPolicy): every
    ``monitor_interval_s`` (3 s, ``monitoring_interval``) containers of queues above
    their ideal share are marked; a marked container still wanted after
    ``max_wait_before_kill_s`` (15 s) is killed. ``max_ignored_over_capacity`` (0.1),
    ``natural_termination_factor`` (0.2) and ``total_preemption_per_round`` (0.1) are
    the policy's defaults.

    Fair Scheduler: a queue below ``min(minResources, demand)`` for its
    ``minSharePreemptionTimeout``, or below ``fairSharePreemptionThreshold`` x fair
    share for its ``fairSharePreemptionTimeout``, is starved; containers of queues
    above their fair share are marked and killed after ``max_wait_before_kill_s``
    (``waitTimeBeforeKill``, 15 s). The allocation file's timeouts win; the two
    ``*_timeout_s`` fields here apply where the file sets none (YARN's own default is
    "never").
    """

    enabled: bool = False
    monitor_interval_s: float | None = None
    max_wait_before_kill_s: float = 15.0
    max_ignored_over_capacity: float = 0.1
    natural_termination_factor: float = 0.2
    total_preemption_per_round: float = 0.1
    fair_share_timeout_s: float | None = None
    min_share_timeout_s: float | None = None
    fair_share_threshold: float = 0.5


@dataclass(frozen=True)
class SimulationHooks:
    """Seams for what later parts plug in: what batch may use on each node over time,
    where a granted container goes, and latency-critical services beside batch."""

    node_capacity: NodeCapacityProvider = field(default_factory=StaticNodeCapacity)
    placement: PlacementPolicy = field(default_factory=HeartbeatNodePlacement)
    long_running: LongRunningWorkload = NO_LONG_RUNNING


@dataclass(frozen=True)
class SimulationOptions:
    """How to run a simulation.

    ``am_containers``: every job first gets an ApplicationMaster container
    (``JobSpec.am_resources``), charged against maximum-am-resource-percent /
    maxAMShare; ``False`` runs jobs without AMs (the AdaptiveConfig paper's examples
    count only task containers). ``am_startup_s``: from AM container grant to its task
    requests. ``am_teardown_s``: from last task end to job end.
    ``off_switch_requests``: all requests are ANY (distributed shell), so the Capacity
    Scheduler's ``maximum-offswitch-assignments`` (default 1) caps grants per
    heartbeat; by default requests count as rack-local, as MapReduce map requests on
    a one-rack cluster are. ``max_assignments_per_heartbeat`` overrides the
    scheduler's own limit. ``fair_assign_multiple`` / ``fair_max_assign`` /
    ``fair_dynamic_max_assign`` are yarn-site's ``yarn.scheduler.fair.assignmultiple``
    (false), ``maxassign`` (-1) and ``dynamic.max.assign`` (true).
    ``horizon_s``: stop there; jobs still running are reported unfinished.
    ``out_of_band_heartbeats``: a NodeManager heartbeats at once when one of its
    containers ends (YARN's ContainerImpl calls
    ``NodeStatusUpdater.sendOutofBandHeartBeat`` on every finished container), so the
    RM frees the container and schedules on that node at the end itself rather than
    at the node's next regular heartbeat. Off by default (the simpler model the
    scheduler tests were checked against); :mod:`yarn_adapt.sim.calibration` turns it
    on to mirror real YARN. The node's regular heartbeats keep their phase (YARN
    restarts the interval after an out-of-band one; not modelled).
    ``am_allocate_interval_s``: AMs call allocate every so often and re-send their
    ask one call late, as AMRMClient-based AMs do, so the RM grants surplus
    containers that the AM releases on its next call but one (see
    :mod:`yarn_adapt.sim.engine`, "AM allocate calls"). ``None`` (default): asks
    are exact and no surplus is granted. ``container_start_spread_s``: the
    containers one heartbeat grants to an app start (and so end) this far apart, as
    an AM launching them one by one does (0: together).
    """

    heartbeat_mode: HeartbeatMode = HeartbeatMode.HEARTBEAT
    heartbeat_interval_s: float = 1.0
    am_containers: bool = True
    am_startup_s: float = 0.0
    am_teardown_s: float = 0.0
    off_switch_requests: bool = False
    max_assignments_per_heartbeat: int | None = None
    fair_assign_multiple: bool = False
    fair_max_assign: int = -1
    fair_dynamic_max_assign: bool = True
    sample_interval_s: float = 60.0
    horizon_s: float | None = None
    out_of_band_heartbeats: bool = False
    am_allocate_interval_s: float | None = None
    container_start_spread_s: float = 0.0
    seed: int = 0
    record_allocations: bool = False
    preemption: PreemptionOptions = field(default_factory=PreemptionOptions)
    hooks: SimulationHooks = field(default_factory=SimulationHooks)

    def __post_init__(self) -> None:
        checks = {
            "heartbeat_interval_s": self.heartbeat_interval_s > 0,
            "am_startup_s": self.am_startup_s >= 0,
            "am_teardown_s": self.am_teardown_s >= 0,
            "sample_interval_s": self.sample_interval_s > 0,
            "container_start_spread_s": self.container_start_spread_s >= 0,
        }
        for name, ok in checks.items():
            value = getattr(self, name)
            if not ok or not math.isfinite(value):
                raise SettingsError(f"simulation option {name}: invalid value {value!r}")
        interval = self.am_allocate_interval_s
        if interval is not None and not (interval > 0 and math.isfinite(interval)):
            raise SettingsError(
                f"simulation option am_allocate_interval_s: invalid value {interval!r}"
            )
        if (
            self.max_assignments_per_heartbeat is not None
            and self.max_assignments_per_heartbeat < 1
        ):
            raise SettingsError(
                "simulation option max_assignments_per_heartbeat: must be at least 1, got "
                f"{self.max_assignments_per_heartbeat}"
            )

    @property
    def continuous(self) -> bool:
        return self.heartbeat_mode is HeartbeatMode.CONTINUOUS
