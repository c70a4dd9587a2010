"""What the RM must report once it runs a configuration (pure).

``mismatches(config, status)`` lists every reported value that differs from what
``config`` says, one readable line each (``root.a capacity: RM reports 30, expected
40``). An empty list means the RM runs the configuration. Only values the REST API
reports are checked: the Fair Scheduler does not report queue weights, so weights
are checked through the steady fair shares they produce when that is unambiguous.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from yarn_adapt.model import (
    AbsoluteCapacity,
    Capacity,
    CapacityQueue,
    CapacitySchedulerConfig,
    FairQueue,
    FairSchedulerConfig,
    Percentage,
    QueueState,
    QueueStatus,
    Resources,
    SchedulerKind,
    SchedulerStatus,
    Weight,
)

PERCENT_TOLERANCE = 0.05
WEIGHT_SHARE_TOLERANCE = 0.02
SchedulerConfig = CapacitySchedulerConfig | FairSchedulerConfig


@dataclass(frozen=True)
class Expected:
    """One value the RM should report for a queue."""

    queue: str
    field: str
    expected: object

    def check(self, status: QueueStatus) -> str | None:
        reported = getattr(status, self.field)
        if _same(reported, self.expected):
            return None
        return f"{self.queue} {self.field}: RM reports {reported}, expected {self.expected}"


def _same(reported: object, expected: object) -> bool:
    if isinstance(expected, float) and isinstance(reported, int | float):
        return abs(reported - expected) <= PERCENT_TOLERANCE
    if isinstance(expected, frozenset):
        return reported in expected
    return reported == expected


def mismatches(config: SchedulerConfig, status: SchedulerStatus) -> list[str]:
    if isinstance(config, CapacitySchedulerConfig):
        if status.kind is not SchedulerKind.CAPACITY:
            return [f"RM runs the {status.kind} scheduler, the config is for the capacity one"]
        return _capacity_mismatches(config, status)
    if status.kind is not SchedulerKind.FAIR:
        return [f"RM runs the {status.kind} scheduler, the config is for the fair one"]
    return _fair_mismatches(config, status)


def _compare(expectations: Iterator[Expected], status: SchedulerStatus) -> list[str]:
    problems: list[str] = []
    for expected in expectations:
        reported = status.find(expected.queue)
        if reported is None:
            problems.append(f"{expected.queue}: RM does not report this queue")
            continue
        problem = expected.check(reported)
        if problem:
            problems.append(problem)
    return list(dict.fromkeys(problems))


# --------------------------------------------------------------------------- capacity


def _capacity_mismatches(config: CapacitySchedulerConfig, status: SchedulerStatus) -> list[str]:
    problems = _compare(capacity_expectations(config), status)
    wanted = {queue.path for queue in config.queues()}
    problems += [
        f"{queue.path}: RM still reports a queue the config removed"
        for queue in status.queues()
        if queue.path not in wanted
    ]
    return problems


def capacity_expectations(config: CapacitySchedulerConfig) -> Iterator[Expected]:
    for queue in config.queues():
        if queue.path == "root":
            continue  # the RM reports neither state nor capacities for root
        yield from _state_expectation(config, queue)
        yield from _capacity_value(queue.path, "capacity", queue.capacity, default=None)
        yield from _capacity_value(
            queue.path, "maximum_capacity", queue.maximum_capacity, default=Percentage(100.0)
        )
        if queue.is_leaf:
            yield from _leaf_expectations(config, queue)


def _state_expectation(config: CapacitySchedulerConfig, queue: CapacityQueue) -> Iterator[Expected]:
    if _stopped_here_or_above(config, queue):
        yield Expected(queue.path, "state", frozenset({"STOPPED", "DRAINING"}))
    else:
        yield Expected(queue.path, "state", QueueState.RUNNING.value)


def _stopped_here_or_above(config: CapacitySchedulerConfig, queue: CapacityQueue) -> bool:
    path: str | None = queue.path
    while path is not None:
        node = config.find(path)
        if node is not None and node.effective_state is not QueueState.RUNNING:
            return True
        path = node.parent_path if node is not None else None
    return False


def _capacity_value(
    path: str, field: str, value: Capacity | None, default: Capacity | None
) -> Iterator[Expected]:
    value = value if value is not None else default
    if isinstance(value, Percentage):
        yield Expected(path, field, float(value.percent))
    elif isinstance(value, AbsoluteCapacity):
        resource_field = (
            "configured_min_resource" if field == "capacity" else "configured_max_resource"
        )
        yield Expected(path, resource_field, value.resources)
    elif isinstance(value, Weight) and field == "capacity":
        yield Expected(path, "weight", float(value.weight))


def _leaf_expectations(config: CapacitySchedulerConfig, queue: CapacityQueue) -> Iterator[Expected]:
    yield Expected(queue.path, "user_limit_factor", float(queue.effective_user_limit_factor))
    yield Expected(
        queue.path, "minimum_user_limit_percent", float(queue.effective_minimum_user_limit_percent)
    )
    yield Expected(queue.path, "ordering_policy", queue.effective_ordering_policy)
    yield Expected(queue.path, "maximum_am_resource_percent", config.effective_am_percent(queue))


# --------------------------------------------------------------------------- fair


def _fair_mismatches(config: FairSchedulerConfig, status: SchedulerStatus) -> list[str]:
    return _compare(fair_expectations(config), status) + _weight_mismatches(config, status)


def fair_expectations(config: FairSchedulerConfig) -> Iterator[Expected]:
    for queue in config.queues():
        yield Expected(queue.path, "scheduling_policy", config.effective_policy(queue))
        if queue.min_resources is not None and queue.min_resources.memory_mb is not None:
            yield Expected(queue.path, "min_resources", _absolute(queue, "min"))
        if queue.max_running_apps is not None:
            yield Expected(queue.path, "max_apps", queue.max_running_apps)


def _absolute(queue: FairQueue, which: str) -> Resources:
    value = queue.min_resources if which == "min" else queue.max_resources
    assert value is not None and value.memory_mb is not None and value.vcores is not None
    return Resources(value.memory_mb, value.vcores)


def _weight_mismatches(config: FairSchedulerConfig, status: SchedulerStatus) -> list[str]:
    """Siblings without min/max resources split their parent's steady fair share in
    proportion to their weights (FairScheduler ComputeFairShares)."""
    problems: list[str] = []
    for parent in config.queues():
        plain = [c for c in parent.children if c.min_resources is None and c.max_resources is None]
        if len(plain) < 2 or len(plain) != len(parent.children):
            continue
        problems += _sibling_share_problems(plain, status)
    return problems


def _sibling_share_problems(siblings: list[FairQueue], status: SchedulerStatus) -> list[str]:
    shares = {q.path: _steady_memory(status, q.path) for q in siblings}
    if any(share is None for share in shares.values()):
        return []
    total_share = sum(share or 0 for share in shares.values())
    total_weight = sum(q.effective_weight for q in siblings)
    if total_share <= 0 or total_weight <= 0:
        return []
    problems = []
    for queue in siblings:
        observed = (shares[queue.path] or 0) / total_share
        wanted = queue.effective_weight / total_weight
        if abs(observed - wanted) > WEIGHT_SHARE_TOLERANCE:
            problems.append(
                f"{queue.path} weight: steady fair share is {observed:.1%} of its parent's, "
                f"weight {queue.effective_weight:g} needs {wanted:.1%}"
            )
    return problems


def _steady_memory(status: SchedulerStatus, path: str) -> int | None:
    queue = status.find(path)
    if queue is None or queue.steady_fair_share is None:
        return None
    return queue.steady_fair_share.memory_mb
