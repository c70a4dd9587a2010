"""The domain model: frozen, typed data parsed once at the edges.

Nothing here does I/O. Decision code (``rules``, ``yarn_adapt.tuning``,
``yarn_adapt.sim``) reads only these types.

- ``resources``: memory in MiB, vcores.
- ``cluster``: nodes, cluster info and metrics, ``ClusterSnapshot`` (everything one
  observation saw).
- ``capacity`` / ``fair``: the two scheduler configurations as queue trees; ``None``
  means unset, and ``effective_*`` applies YARN's defaults. ``queue_tree``: paths,
  walking, replacing a queue.
- ``scheduler_state``: what ``/ws/v1/cluster/scheduler`` reports, for verification.
- ``apps``: RM applications, JobHistory jobs, tasks, attempts.
- ``workload``: ``JobSpec`` / ``TaskSpec`` / ``Workload`` for the simulator and the tuner.
- ``serialize``: JSON.
"""

from yarn_adapt.model.apps import (
    AppAttempt,
    Application,
    AppState,
    FinalStatus,
    JobState,
    MapReduceJob,
    MapReduceTask,
    TaskAttempt,
    TaskType,
)
from yarn_adapt.model.capacity import (
    AbsoluteCapacity,
    Capacity,
    CapacityMode,
    CapacityQueue,
    CapacitySchedulerConfig,
    Percentage,
    QueueState,
    Weight,
    parse_capacity,
)
from yarn_adapt.model.cluster import (
    ClusterInfo,
    ClusterMetrics,
    ClusterSnapshot,
    HAState,
    HistoryServerInfo,
    Node,
    NodeState,
    NodeUtilization,
)
from yarn_adapt.model.fair import (
    FairQueue,
    FairResources,
    FairSchedulerConfig,
    FairUser,
    PlacementRule,
    SchedulingPolicy,
    parse_fair_resources,
)
from yarn_adapt.model.resources import NO_RESOURCES, Resources
from yarn_adapt.model.scheduler_state import QueueStatus, SchedulerKind, SchedulerStatus
from yarn_adapt.model.workload import JobFeatures, JobSpec, TaskSpec, Workload

SchedulerConfig = CapacitySchedulerConfig | FairSchedulerConfig

__all__ = [
    "NO_RESOURCES",
    "AbsoluteCapacity",
    "AppAttempt",
    "AppState",
    "Application",
    "Capacity",
    "CapacityMode",
    "CapacityQueue",
    "CapacitySchedulerConfig",
    "ClusterInfo",
    "ClusterMetrics",
    "ClusterSnapshot",
    "FairQueue",
    "FairResources",
    "FairSchedulerConfig",
    "FairUser",
    "FinalStatus",
    "HAState",
    "HistoryServerInfo",
    "JobFeatures",
    "JobSpec",
    "JobState",
    "MapReduceJob",
    "MapReduceTask",
    "Node",
    "NodeState",
    "NodeUtilization",
    "Percentage",
    "PlacementRule",
    "QueueState",
    "QueueStatus",
    "Resources",
    "SchedulerConfig",
    "SchedulerKind",
    "SchedulerStatus",
    "SchedulingPolicy",
    "TaskAttempt",
    "TaskSpec",
    "TaskType",
    "Weight",
    "Workload",
    "parse_capacity",
    "parse_fair_resources",
]
