"""RM and JobHistory JSON -> the frozen model, once, at the edge.

Every function takes the decoded document and the URL it came from, and either
returns model objects or raises :class:`YarnMalformedResponse` naming the URL and
the field (``apps.app[2].id: missing``). No raw dict leaves this module.

Tolerated, because real servers do it:

- a list that is ``null``, empty ``{}``, or a single object instead of a one-element
  list (``{"apps": null}``, ``{"app": {...}}``; Jersey-1 "natural" JSON);
- numbers sent as strings (``"1024"``), integral floats (``1024.0``);
- times of ``0`` or ``-1`` meaning "not yet" (-> ``None``), resource figures of
  ``-1`` meaning "none" (finished apps; -> 0);
- missing optional fields (-> documented defaults);
- a state this version does not know. It never crashes the observation; it is
  logged once at WARNING and mapped to the *safe* value below, chosen so decision
  code neither schedules onto nor counts as successful something it cannot vouch
  for:

  =============  ================================================================
  node state     ``UNHEALTHY`` (not schedulable)
  app state      ``FINISHED`` if it has a finish time, ``RUNNING`` if it holds
                 containers, else ``ACCEPTED`` (waiting)
  final status   ``UNDEFINED``
  job state      ``ERROR`` if it has a finish time, else ``RUNNING``
  HA state       ``INITIALIZING`` (not active: never used as the active RM)
  =============  ================================================================

  Task and attempt states are kept as the raw string (the model types them ``str``).
  An unknown *task type* or *scheduler type* is structural and raises.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from yarn_adapt.errors import YarnMalformedResponse
from yarn_adapt.model import (
    NO_RESOURCES,
    AppAttempt,
    Application,
    AppState,
    ClusterInfo,
    ClusterMetrics,
    FinalStatus,
    HAState,
    HistoryServerInfo,
    JobState,
    MapReduceJob,
    MapReduceTask,
    Node,
    NodeState,
    NodeUtilization,
    QueueStatus,
    Resources,
    SchedulerKind,
    SchedulerStatus,
    TaskAttempt,
    TaskType,
)

log = logging.getLogger(__name__)

E = TypeVar("E", bound=StrEnum)
_warned: set[tuple[str, str]] = set()


# --------------------------------------------------------------------------- reader


@dataclass(frozen=True)
class Fields:
    """One JSON object with the URL and the path it was found at, for error messages."""

    data: Mapping[str, object]
    url: str
    where: str

    @classmethod
    def root(cls, document: object, url: str) -> Fields:
        if not isinstance(document, Mapping):
            problem = f"expected a JSON object, got {type(document).__name__}"
            raise YarnMalformedResponse(url, problem)
        return cls(document, url, "")

    def _name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def bad(self, key: str, problem: str) -> YarnMalformedResponse:
        return YarnMalformedResponse(self.url, f"{self._name(key)}: {problem}")

    def _present(self, key: str) -> object | None:
        value = self.data.get(key)
        return None if value is None or value == "" else value

    def obj(self, key: str) -> Fields:
        value = self.data.get(key)
        if not isinstance(value, Mapping):
            raise self.bad(key, "missing" if value is None else "expected an object")
        return Fields(value, self.url, self._name(key))

    def opt_obj(self, key: str) -> Fields | None:
        return self.obj(key) if self.data.get(key) is not None else None

    def items(self, outer: str, inner: str) -> list[Fields]:
        """``{outer: {inner: [..]}}`` with every degenerate form tolerated."""
        container = self.data.get(outer)
        if container is None or container == {} or container == []:
            return []
        if isinstance(container, list):
            return self._as_list(container, outer)
        if not isinstance(container, Mapping):
            raise self.bad(outer, "expected an object or a list")
        return Fields(container, self.url, self._name(outer)).list_of(inner)

    def list_of(self, key: str) -> list[Fields]:
        value = self.data.get(key)
        if value is None:
            return []
        if isinstance(value, Mapping):
            return [Fields(value, self.url, self._name(key))]
        if not isinstance(value, list):
            raise self.bad(key, "expected a list")
        return self._as_list(value, key)

    def _as_list(self, values: list[object], key: str) -> list[Fields]:
        found = []
        for index, value in enumerate(values):
            if not isinstance(value, Mapping):
                raise self.bad(f"{key}[{index}]", "expected an object")
            found.append(Fields(value, self.url, f"{self._name(key)}[{index}]"))
        return found

    def text(self, key: str) -> str:
        value = self._present(key)
        if value is None:
            raise self.bad(key, "missing")
        return str(value)

    def opt_text(self, key: str, default: str = "") -> str:
        value = self._present(key)
        return default if value is None else str(value)

    def number(self, key: str) -> float:
        value = self._present(key)
        if value is None:
            raise self.bad(key, "missing")
        return self._as_number(key, value)

    def opt_number(self, key: str) -> float | None:
        value = self._present(key)
        return None if value is None else self._as_number(key, value)

    def _as_number(self, key: str, value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise self.bad(key, f"expected a number, got {value!r}")
        try:
            number = float(value)
        except ValueError:
            raise self.bad(key, f"expected a number, got {value!r}") from None
        if math.isnan(number):
            raise self.bad(key, "expected a number, got NaN")
        return number

    def integer(self, key: str) -> int:
        return _to_int(self.number(key))

    def count(self, key: str, default: int = 0) -> int:
        """A non-negative count; absent, -1 or other negatives mean none."""
        value = self.opt_number(key)
        return default if value is None else max(_to_int(value), 0)

    def time_ms(self, key: str) -> int | None:
        """Epoch milliseconds; absent, 0 or negative mean "not yet"."""
        value = self.opt_number(key)
        return _to_int(value) if value is not None and value > 0 else None

    def enum(self, key: str, kind: type[E], fallback: E) -> E:
        raw = self.text(key).strip().upper()
        try:
            return kind(raw)
        except ValueError:
            _warn_unknown(kind.__name__, raw, fallback.value, self.url)
            return fallback


def _to_int(number: float) -> int:
    return int(number) if math.isfinite(number) else 2**63 - 1


def _warn_unknown(kind: str, raw: str, fallback: str, url: str) -> None:
    if (kind, raw) not in _warned:
        _warned.add((kind, raw))
        log.warning("%s: unknown %s %r treated as %s", url, kind, raw, fallback)


def _resources(fields: Fields | None, memory_key: str = "memory") -> Resources | None:
    """``{memory, vCores}`` (also ``memorySize`` in newer RMs) or ``None``."""
    if fields is None:
        return None
    memory = fields.opt_number(memory_key)
    if memory is None:
        memory = fields.opt_number("memorySize")
    vcores = fields.opt_number("vCores")
    if memory is None and vcores is None:
        return None
    return Resources(max(_to_int(memory or 0), 0), max(_to_int(vcores or 0), 0))


def _required_resources(fields: Fields, key: str) -> Resources:
    found = _resources(fields.obj(key))
    if found is None:
        raise fields.bad(key, "expected memory and vCores")
    return found


def _pair(fields: Fields, memory_key: str, vcores_key: str) -> Resources:
    return Resources(fields.count(memory_key), fields.count(vcores_key))


# --------------------------------------------------------------------------- cluster


def parse_cluster_info(document: object, url: str) -> ClusterInfo:
    """``GET /ws/v1/cluster/info``."""
    info = Fields.root(document, url).obj("clusterInfo")
    return ClusterInfo(
        cluster_id=info.text("id"),
        state=info.opt_text("state", "UNKNOWN"),
        ha_state=info.enum("haState", HAState, HAState.INITIALIZING),
        hadoop_version=info.opt_text("hadoopVersion"),
        rm_version=info.opt_text("resourceManagerVersion"),
        started_ms=info.time_ms("startedOn") or 0,
    )


def parse_cluster_metrics(document: object, url: str) -> ClusterMetrics:
    """``GET /ws/v1/cluster/metrics``."""
    metrics = Fields.root(document, url).obj("clusterMetrics")
    return ClusterMetrics(
        apps_submitted=metrics.count("appsSubmitted"),
        apps_completed=metrics.count("appsCompleted"),
        apps_pending=metrics.count("appsPending"),
        apps_running=metrics.count("appsRunning"),
        apps_failed=metrics.count("appsFailed"),
        apps_killed=metrics.count("appsKilled"),
        total=_pair(metrics, "totalMB", "totalVirtualCores"),
        allocated=_pair(metrics, "allocatedMB", "allocatedVirtualCores"),
        available=_pair(metrics, "availableMB", "availableVirtualCores"),
        reserved=_pair(metrics, "reservedMB", "reservedVirtualCores"),
        containers_allocated=metrics.count("containersAllocated"),
        containers_pending=metrics.count("containersPending"),
        total_nodes=metrics.count("totalNodes"),
        active_nodes=metrics.count("activeNodes"),
        lost_nodes=metrics.count("lostNodes"),
        unhealthy_nodes=metrics.count("unhealthyNodes"),
    )


def parse_nodes(document: object, url: str) -> tuple[Node, ...]:
    """``GET /ws/v1/cluster/nodes``."""
    return tuple(_node(item) for item in Fields.root(document, url).items("nodes", "node"))


def parse_node(document: object, url: str) -> Node:
    """``GET /ws/v1/cluster/nodes/{id}``."""
    return _node(Fields.root(document, url).obj("node"))


def _node(node: Fields) -> Node:
    used = _pair(node, "usedMemoryMB", "usedVirtualCores")
    total = _resources(node.opt_obj("totalResource"))
    if total is None:  # older RMs: only used + available
        total = used + _pair(node, "availMemoryMB", "availableVirtualCores")
    return Node(
        id=node.text("id"),
        host=node.opt_text("nodeHostName"),
        rack=node.opt_text("rack", "/default-rack"),
        state=node.enum("state", NodeState, NodeState.UNHEALTHY),
        total=total,
        used=used,
        num_containers=node.count("numContainers"),
        http_address=node.opt_text("nodeHTTPAddress"),
        health_report=node.opt_text("healthReport"),
        last_health_update_ms=node.time_ms("lastHealthUpdate") or 0,
        utilization=_utilization(node.opt_obj("resourceUtilization")),
    )


def _utilization(fields: Fields | None) -> NodeUtilization | None:
    """``resourceUtilization`` (absent before the NM's first report, or on old RMs)."""
    if fields is None:
        return None
    node_cpu = fields.opt_number("nodeCPUUsage")
    if node_cpu is None:
        return None
    return NodeUtilization(
        node_cpu=max(0.0, node_cpu),
        node_memory_mb=max(0, fields.count("nodePhysicalMemoryMB")),
        containers_cpu=max(0.0, fields.opt_number("containersCPUUsage") or 0.0),
        containers_memory_mb=max(0, fields.count("aggregatedContainersPhysicalMemoryMB")),
    )


def parse_node_resource(document: object, url: str) -> Resources:
    """``POST /nodes/{id}/resource`` answer: ``{"resourceInfo": {memory, vCores}}``."""
    return _required_resources(Fields.root(document, url), "resourceInfo")


# --------------------------------------------------------------------------- apps


def parse_apps(document: object, url: str) -> tuple[Application, ...]:
    """``GET /ws/v1/cluster/apps``."""
    return tuple(_app(item) for item in Fields.root(document, url).items("apps", "app"))


def parse_app(document: object, url: str) -> Application:
    """``GET /ws/v1/cluster/apps/{id}``."""
    return _app(Fields.root(document, url).obj("app"))


def _app(app: Fields) -> Application:
    finished = app.time_ms("finishedTime")
    containers = app.count("runningContainers")
    return Application(
        id=app.text("id"),
        name=app.opt_text("name"),
        user=app.opt_text("user"),
        queue=app.opt_text("queue"),
        state=_app_state(app, finished, containers),
        final_status=_final_status(app),
        application_type=app.opt_text("applicationType"),
        submitted_ms=app.time_ms("startedTime") or 0,
        launched_ms=app.time_ms("launchTime"),
        finished_ms=finished,
        progress=app.opt_number("progress") or 0.0,
        allocated=_pair(app, "allocatedMB", "allocatedVCores"),
        running_containers=containers,
        priority=app.count("priority"),
        tags=_tags(app.opt_text("applicationTags")),
    )


def _app_state(app: Fields, finished: int | None, containers: int) -> AppState:
    if finished is not None:
        fallback = AppState.FINISHED
    else:
        fallback = AppState.RUNNING if containers > 0 else AppState.ACCEPTED
    return app.enum("state", AppState, fallback)


def _final_status(app: Fields) -> FinalStatus:
    if not app.opt_text("finalStatus"):
        return FinalStatus.UNDEFINED
    return app.enum("finalStatus", FinalStatus, FinalStatus.UNDEFINED)


def _tags(text: str) -> tuple[str, ...]:
    return tuple(tag.strip() for tag in text.split(",") if tag.strip())


def parse_app_attempts(document: object, url: str) -> tuple[AppAttempt, ...]:
    """``GET /ws/v1/cluster/apps/{id}/appattempts``."""
    root = Fields.root(document, url)
    return tuple(_attempt(item) for item in root.items("appAttempts", "appAttempt"))


def _attempt(attempt: Fields) -> AppAttempt:
    return AppAttempt(
        attempt_id=attempt.integer("id"),
        node_id=attempt.opt_text("nodeId"),
        container_id=attempt.opt_text("containerId"),
        start_ms=attempt.time_ms("startTime") or 0,
        state=attempt.opt_text("appAttemptState", "UNKNOWN"),
    )


# --------------------------------------------------------------------------- scheduler


def parse_scheduler(document: object, url: str) -> SchedulerStatus:
    """``GET /ws/v1/cluster/scheduler`` for the Capacity and the Fair Scheduler."""
    info = Fields.root(document, url).obj("scheduler").obj("schedulerInfo")
    kind = info.text("type")
    least = minimum_allocation(document)
    if kind == SchedulerKind.CAPACITY:
        return SchedulerStatus(SchedulerKind.CAPACITY, _capacity_queue(info, parent=None), least)
    if kind == SchedulerKind.FAIR:
        return SchedulerStatus(SchedulerKind.FAIR, _fair_queue(info.obj("rootQueue")), least)
    raise info.bad("type", f"unsupported scheduler {kind!r} (capacity and fair are supported)")


ALLOCATED_TYPES = ("memory-mb", "vcores")


def minimum_allocation(document: object) -> Resources | None:
    """``yarn.scheduler.minimum-allocation-{mb,vcores}``, to which the RM rounds every
    request, as the scheduler's resource informations carry it: YARN sets each
    resource type's ``minimumAllocation`` from those keys, and the queues' configured
    resources report it (their used resources report 0). None when no memory entry
    does (an RM before resource types)."""
    found: dict[str, int] = {}
    pending = [document]
    while pending and len(found) < len(ALLOCATED_TYPES):
        item = pending.pop()
        if isinstance(item, dict):
            name, least = item.get("name"), _whole(item.get("minimumAllocation"))
            if name in ALLOCATED_TYPES and least is not None and least > 0:
                found.setdefault(str(name), least)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    if "memory-mb" not in found:
        return None
    return Resources(found["memory-mb"], found.get("vcores", 1))


def _whole(value: object) -> int | None:
    """A whole number as the RM sends it (a JSON number, or one as a string)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _capacity_queue(queue: Fields, parent: str | None) -> QueueStatus:
    name = queue.text("queueName")
    path = queue.opt_text("queuePath") or (f"{parent}.{name}" if parent else name)
    children = tuple(_capacity_queue(c, path) for c in queue.items("queues", "queue"))
    default_partition = _default_partition(queue)
    return QueueStatus(
        path=path,
        state=queue.opt_text("state") or None,
        capacity=_percent(queue, "capacity"),
        maximum_capacity=_percent(queue, "maxCapacity"),
        absolute_capacity=_percent(queue, "absoluteCapacity"),
        absolute_maximum_capacity=_percent(queue, "absoluteMaxCapacity"),
        used_capacity=_percent(queue, "usedCapacity"),
        absolute_used_capacity=_percent(queue, "absoluteUsedCapacity"),
        user_limit_factor=queue.opt_number("userLimitFactor"),
        minimum_user_limit_percent=queue.opt_number("userLimit"),
        ordering_policy=queue.opt_text("orderingPolicyInfo") or None,
        maximum_am_resource_percent=queue.opt_number("configuredMaxAMResourceLimit"),
        configured_min_resource=_nonzero(default_partition, "configuredMinResource"),
        configured_max_resource=_nonzero(default_partition, "configuredMaxResource"),
        weight=_weight(queue),
        mode=queue.opt_text("mode") or None,
        used=_capacity_used(queue, children),
        num_applications=queue.count("numApplications"),
        num_active_applications=queue.count("numActiveApplications"),
        num_pending_applications=queue.count("numPendingApplications"),
        num_containers=queue.count("numContainers"),
        pending_containers=queue.count("pendingContainers"),
        children=children,
    )


def _percent(queue: Fields, key: str) -> float | None:
    """A 0-100 percentage without the float32 noise the RM adds (30.000002 -> 30.0)."""
    value = queue.opt_number(key)
    return None if value is None else round(value, 4)


def _capacity_used(queue: Fields, children: tuple[QueueStatus, ...]) -> Resources:
    """``resourcesUsed``; the root does not report it, so it is its children's sum."""
    reported = _resources(queue.opt_obj("resourcesUsed"))
    if reported is not None:
        return reported
    return sum((child.used for child in children), NO_RESOURCES)


def _default_partition(queue: Fields) -> Fields | None:
    """The ``capacities.queueCapacitiesByPartition`` entry of the default ("") label."""
    capacities = queue.opt_obj("capacities")
    if capacities is None:
        return None
    partitions = capacities.list_of("queueCapacitiesByPartition")
    return next((p for p in partitions if not p.opt_text("partitionName")), None)


def _nonzero(fields: Fields | None, key: str) -> Resources | None:
    """A configured resource, or ``None`` when YARN reports 0/0 ("not configured")."""
    found = _resources(fields.opt_obj(key)) if fields else None
    return None if found is None or found.is_zero else found


def _weight(queue: Fields) -> float | None:
    """``weight`` is -1 when the queue is not in weight mode (CS 3.4)."""
    weight = queue.opt_number("weight")
    return weight if weight is not None and weight >= 0 else None


def _fair_queue(queue: Fields) -> QueueStatus:
    active = queue.count("numActiveApps")
    pending = queue.count("numPendingApps")
    return QueueStatus(
        path=queue.text("queueName"),
        # FS reports its policies by getName(): "fair", but "FIFO" and "DRF".
        scheduling_policy=(queue.opt_text("schedulingPolicy") or "").lower() or None,
        min_resources=_resources(queue.opt_obj("minResources")),
        max_resources=_resources(queue.opt_obj("maxResources")),
        fair_share=_resources(queue.opt_obj("fairResources")),
        steady_fair_share=_resources(queue.opt_obj("steadyFairResources")),
        max_apps=_max_apps(queue),
        used=_resources(queue.opt_obj("usedResources")) or NO_RESOURCES,
        num_applications=active + pending,
        num_active_applications=active,
        num_pending_applications=pending,
        num_containers=queue.count("allocatedContainers"),
        pending_containers=queue.count("pendingContainers"),
        children=tuple(_fair_queue(c) for c in queue.items("childQueues", "queue")),
    )


def _max_apps(queue: Fields) -> int | None:
    value = queue.opt_number("maxApps")
    return _to_int(value) if value is not None and value >= 0 else None


# --------------------------------------------------------------------------- scheduler-conf


def parse_scheduler_conf(document: object, url: str) -> tuple[tuple[str, str], ...]:
    """``GET /ws/v1/cluster/scheduler-conf``: ``{"property": [{name, value}]}``
    (some versions wrap it in ``"configuration"``)."""
    root = Fields.root(document, url)
    if "configuration" in root.data:
        root = root.obj("configuration")
    return tuple((p.text("name"), p.opt_text("value")) for p in root.list_of("property"))


# --------------------------------------------------------------------------- history


def parse_history_info(document: object, url: str) -> HistoryServerInfo:
    """``GET /ws/v1/history/info``."""
    info = Fields.root(document, url).obj("historyInfo")
    return HistoryServerInfo(
        started_ms=info.time_ms("startedOn") or 0,
        hadoop_version=info.opt_text("hadoopVersion"),
        hadoop_build_version=info.opt_text("hadoopBuildVersion"),
    )


def parse_jobs(document: object, url: str) -> tuple[MapReduceJob, ...]:
    """``GET /ws/v1/history/mapreduce/jobs`` (the summary subset of each job)."""
    return tuple(_job(item) for item in Fields.root(document, url).items("jobs", "job"))


def parse_job(document: object, url: str) -> MapReduceJob:
    """``GET /ws/v1/history/mapreduce/jobs/{id}``."""
    return _job(Fields.root(document, url).obj("job"))


def _job(job: Fields) -> MapReduceJob:
    finished = job.time_ms("finishTime")
    return MapReduceJob(
        id=job.text("id"),
        name=job.opt_text("name"),
        queue=job.opt_text("queue"),
        user=job.opt_text("user"),
        state=job.enum("state", JobState, JobState.ERROR if finished else JobState.RUNNING),
        submit_ms=job.time_ms("submitTime") or 0,
        start_ms=job.time_ms("startTime"),
        finish_ms=finished,
        maps_total=job.count("mapsTotal"),
        maps_completed=job.count("mapsCompleted"),
        reduces_total=job.count("reducesTotal"),
        reduces_completed=job.count("reducesCompleted"),
        avg_map_time_ms=job.time_ms("avgMapTime"),
        avg_reduce_time_ms=job.time_ms("avgReduceTime"),
        avg_shuffle_time_ms=job.time_ms("avgShuffleTime"),
        avg_merge_time_ms=job.time_ms("avgMergeTime"),
    )


def parse_tasks(document: object, url: str) -> tuple[MapReduceTask, ...]:
    """``GET /ws/v1/history/mapreduce/jobs/{id}/tasks``."""
    return tuple(_task(item) for item in Fields.root(document, url).items("tasks", "task"))


def _task(task: Fields) -> MapReduceTask:
    return MapReduceTask(
        id=task.text("id"),
        task_type=_task_type(task),
        state=task.opt_text("state", "UNKNOWN"),
        start_ms=task.time_ms("startTime"),
        finish_ms=task.time_ms("finishTime"),
        elapsed_ms=task.count("elapsedTime"),
        successful_attempt=task.opt_text("successfulAttempt"),
    )


def _task_type(fields: Fields) -> TaskType:
    raw = fields.text("type").strip().upper()
    try:
        return TaskType(raw)
    except ValueError:
        raise fields.bad("type", f"unknown task type {raw!r}") from None


def parse_task_attempts(document: object, url: str) -> tuple[TaskAttempt, ...]:
    """``GET /ws/v1/history/mapreduce/jobs/{id}/tasks/{task}/attempts``."""
    root = Fields.root(document, url)
    return tuple(_task_attempt(item) for item in root.items("taskAttempts", "taskAttempt"))


def _task_attempt(attempt: Fields) -> TaskAttempt:
    return TaskAttempt(
        id=attempt.text("id"),
        task_type=_task_type(attempt),
        state=attempt.opt_text("state", "UNKNOWN"),
        start_ms=attempt.time_ms("startTime"),
        finish_ms=attempt.time_ms("finishTime"),
        elapsed_ms=attempt.count("elapsedTime"),
        node_http_address=attempt.opt_text("nodeHttpAddress"),
        rack=attempt.opt_text("rack"),
        container_id=attempt.opt_text("assignedContainerId"),
    )
