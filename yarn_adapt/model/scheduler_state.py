"""What the RM reports its scheduler is running (``/ws/v1/cluster/scheduler``).

This is the *observed* state: the appliers verify a change by comparing it with the
configuration they wrote, and the tuner reads queue usage from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from yarn_adapt.model.queue_tree import QueueNode, QueueTree
from yarn_adapt.model.resources import NO_RESOURCES, Resources


class SchedulerKind(StrEnum):
    CAPACITY = "capacityScheduler"
    FAIR = "fairScheduler"
    FIFO = "fifoScheduler"


@dataclass(frozen=True)
class QueueStatus(QueueNode):
    """One queue's reported configuration and usage. Percentages are 0-100 as the RM
    reports them; ``None`` where this scheduler does not report the field."""

    path: str
    state: str | None = None
    # Capacity Scheduler (percent of parent / of cluster)
    capacity: float | None = None
    maximum_capacity: float | None = None
    absolute_capacity: float | None = None
    absolute_maximum_capacity: float | None = None
    used_capacity: float | None = None
    absolute_used_capacity: float | None = None
    user_limit_factor: float | None = None
    minimum_user_limit_percent: float | None = None
    ordering_policy: str | None = None
    maximum_am_resource_percent: float | None = None
    configured_min_resource: Resources | None = None
    configured_max_resource: Resources | None = None
    weight: float | None = None
    mode: str | None = None
    # Fair Scheduler
    scheduling_policy: str | None = None
    min_resources: Resources | None = None
    max_resources: Resources | None = None
    fair_share: Resources | None = None
    steady_fair_share: Resources | None = None
    max_apps: int | None = None
    # both
    used: Resources = NO_RESOURCES
    num_applications: int = 0
    num_active_applications: int = 0
    num_pending_applications: int = 0
    num_containers: int = 0
    pending_containers: int = 0
    children: tuple[QueueStatus, ...] = ()

    @property
    def is_leaf(self) -> bool:
        return not self.children


@dataclass(frozen=True)
class SchedulerStatus(QueueTree["QueueStatus"]):
    """``minimum_allocation``: the RM's ``yarn.scheduler.minimum-allocation-{mb,vcores}``
    when it reports them (None: not reported)."""

    kind: SchedulerKind
    root: QueueStatus
    minimum_allocation: Resources | None = None
