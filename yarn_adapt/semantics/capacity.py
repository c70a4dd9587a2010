"""Capacity Scheduler decisions (Hadoop 3.4.3, package
``org.apache.hadoop.yarn.server.resourcemanager.scheduler.capacity``), on memory
(DefaultResourceCalculator, the default ``resource-calculator``: only memory is
compared, also when a container is fitted).

Amounts are MiB; ``step`` is the minimum allocation
(``yarn.scheduler.minimum-allocation-mb``), to which YARN normalises requests and
rounds limits. A queue's guarantee (AbstractCSQueue.getEffectiveCapacity) is a
whole number of MiB, floored: percentages of the cluster are cut, not rounded
(DefaultQueueResourceRoundingStrategy; the real RM reports 2457 MiB for 30 % of
8192, tests/fixtures/rm/capacity-scheduler.json). :func:`effective_capacity` makes
that number from a configured fraction of a queue's resources.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

_SLACK = 1e-9


def round_up(amount: float, step: int) -> float:
    """Resources.roundUp / multiplyAndNormalizeUp: up to a multiple of ``step``."""
    return math.ceil(amount / step - _SLACK) * step


def effective_capacity(guaranteed: float) -> float:
    """The queue's guarantee as YARN holds it: whole MiB, floored."""
    return float(math.floor(guaranteed + _SLACK))


# --------------------------------------------------------------------------- queue order


def queue_order_key(
    used: float, guaranteed: float, position: int, *, cluster: float
) -> tuple[float, float, float, float]:
    """PriorityUtilizationQueueOrderingPolicy.PriorityQueueComparator (no queue
    priorities, one partition) as a sort key: queues with a guarantee before queues
    without; among them the lower used capacity (used / guaranteed; without a
    guarantee, used / cluster) first; then the larger guarantee; then the order the
    queues are configured in (the sort is stable)."""
    if guaranteed > 0:
        return (0.0, used / guaranteed, -guaranteed, float(position))
    return (1.0, used / cluster if cluster else 0.0, 0.0, float(position))


# --------------------------------------------------------------------------- users


def is_active_user(asking_apps: int) -> bool:
    """UsersManager's active users: a user is active while one of its apps has a
    pending ask (AppSchedulingInfo.updatePendingResources calls
    UsersManager.activateApplication when an ask appears, checkForDeactivation
    calls deactivateApplication when the last one is met). An app waiting for
    activation counts: its AM's ask is already pending (RMAppAttemptImpl's
    ScheduleTransition asks for the AM container at once)."""
    return asking_apps > 0


def user_limit(
    *,
    guaranteed: float,
    queue_used: float,
    active_used: float,
    active_users: int,
    minimum_user_limit_percent: float,
    user_limit_factor: float,
    queue_maximum: float,
    step: int,
) -> float:
    """UsersManager.computeUserLimit for an active user of weight 1, memory only.

    ``queueCapacity = max(effective capacity (floored), step)``; ``currentCapacity`` is it
    while the queue's consumption (its users' usage, rounded up to the step) is
    below it, else consumption + step; the limit is ``max(ceil((active users' use +
    step) / #active users), ceil(currentCapacity x minimum-user-limit-percent /
    100))``, capped by ``floor(queueCapacity x user-limit-factor)`` -- or, with the
    factor -1, by the queue's maximum -- and rounded up to the step."""
    capacity = max(effective_capacity(guaranteed), float(step))
    consumed = round_up(queue_used, step)
    current = capacity if consumed < capacity else consumed + step
    even = math.ceil((active_used + step) / max(1, active_users))
    floor_share = math.ceil(math.floor(current * minimum_user_limit_percent) / 100.0)
    cap = queue_maximum if user_limit_factor == -1 else math.floor(capacity * user_limit_factor)
    return round_up(min(max(even, floor_share), cap), step)


def can_assign_to_user(user_used: float, limit: float) -> bool:
    """AbstractLeafQueue.canAssignToUser: refused only when the user already holds
    *more* than the limit (a ``>`` check), so a user may go one container past it."""
    return user_used <= limit


def active_usage(users: Iterable[tuple[float, int]]) -> tuple[float, int]:
    """(memory held by the active users, how many) of ``(used, asking apps)`` pairs
    (UsersManager.totalResUsageForActiveUsers, activeUsers)."""
    held, count = 0.0, 0
    for used, asking in users:
        if is_active_user(asking):
            held += used
            count += 1
    return held, count


# --------------------------------------------------------------------------- AM limits


def am_limit(guaranteed: float, current_limit: float, am_percent: float, step: int) -> float:
    """AbstractLeafQueue.calculateAndGetAMResourceLimitPerPartition (default
    partition): ``max(guarantee, the queue's current limit) x
    maximum-am-resource-percent``, normalised up to the step."""
    usable = max(effective_capacity(guaranteed), current_limit)
    return round_up(usable * am_percent, step)


def user_am_limit(
    *,
    guaranteed: float,
    am_percent: float,
    minimum_user_limit_percent: float,
    active_users: int,
    user_limit_factor: float,
    queue_am_limit: float,
    step: int,
) -> float:
    """AbstractLeafQueue.getUserAMResourceLimitPerPartition (user weight 1): the
    guarantee x AM percent x ``max(minimum-user-limit-percent, 1 / #active users)``
    x user-limit-factor (the factor -1 leaves it out), normalised up, at most the
    queue's AM limit."""
    share = max(minimum_user_limit_percent / 100.0, 1.0 / max(active_users, 1))
    factor = am_percent if user_limit_factor == -1 else am_percent * share * user_limit_factor
    return min(round_up(effective_capacity(guaranteed) * factor, step), queue_am_limit)


def may_activate(
    *,
    am_request: float,
    queue_am_used: float,
    queue_am_limit: float,
    user_am_used: float,
    user_am_limit: float,
    at_least_one: bool = True,
) -> bool:
    """AbstractLeafQueue.activateApplications for one pending app: its AM must fit
    the queue's and its user's AM limits, except that a queue holding no AM yet
    activates it anyway ("skipping enforcement to allow at least one application
    to start"; ``at_least_one=False`` leaves that out)."""
    if at_least_one and queue_am_used <= 0:
        return True
    if queue_am_used + am_request > queue_am_limit:
        return False
    return user_am_used + am_request <= user_am_limit


# --------------------------------------------------------------------------- queue limits


def child_limit(maximum: float, parent_limit: float, parent_used: float, used: float) -> float:
    """ParentQueue.getResourceLimitsOfChild: a child may grow to its maximum
    capacity, but no further than what its parent's own limit leaves it
    (``parent limit - parent used + child used``); AbstractCSQueue
    .canAssignToThisQueue then refuses a container that takes the child past it."""
    return min(maximum, parent_limit - parent_used + used)


DEFAULT_MAXIMUM_APPLICATIONS = 10000  # CapacitySchedulerConfiguration


MAXIMUM_APPLICATIONS = "maximum-applications"  # the per-queue and global property


def maximum_applications(
    queue_setting: int | None, system_setting: int | None, absolute_capacity: float
) -> int:
    """AbstractLeafQueue.setupQueueConfigs: ``maximum-applications`` of the queue if
    set, else the system-wide one (``yarn.scheduler.capacity.maximum-applications``,
    default 10000) x the queue's absolute capacity, cast to int; apps beyond it are
    refused at submission (AbstractLeafQueue.validateSubmitApplication)."""
    if queue_setting is not None and queue_setting >= 0:
        return queue_setting
    system = DEFAULT_MAXIMUM_APPLICATIONS if system_setting is None else system_setting
    return int(system * absolute_capacity)


# --------------------------------------------------------------------------- heartbeats

DEFAULT_MAXIMUM_ASSIGNMENTS = 100  # 3.4 (-1, unlimited, in 3.3)
DEFAULT_MAXIMUM_OFFSWITCH_ASSIGNMENTS = 1
UNLIMITED_ASSIGNMENTS = 1 << 30


def heartbeat_assignments(
    *,
    multiple_enabled: bool,
    maximum_assignments: int | None,
    off_switch_only: bool,
    maximum_offswitch: int | None,
) -> int:
    """CapacityScheduler.canAllocateMore with its settings
    (``per-node-heartbeat.multiple-assignments-enabled``, ``.maximum-container-
    assignments``, ``.maximum-offswitch-assignments``): how many containers one node
    heartbeat may grant. One when multiple assignments are off; a negative maximum
    is unlimited; when every request is off-switch (ANY), the off-switch limit
    (CSAssignment off-switch count, ``canAssign`` in ParentQueue) caps it too."""
    if not multiple_enabled:
        limit = 1
    else:
        most = DEFAULT_MAXIMUM_ASSIGNMENTS if maximum_assignments is None else maximum_assignments
        limit = UNLIMITED_ASSIGNMENTS if most < 0 else max(most, 1)
    if off_switch_only:
        off = (
            DEFAULT_MAXIMUM_OFFSWITCH_ASSIGNMENTS
            if maximum_offswitch is None
            else maximum_offswitch
        )
        limit = min(limit, max(1, off))
    return limit
