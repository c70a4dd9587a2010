"""Reading a scheduler configuration into the comparator's inputs.

:func:`group_config` extracts C_i -- what the comparator needs of one group's
queues -- from a Capacity or Fair configuration, applying YARN's defaults for unset
values (the model's ``effective_*`` accessors). Capacity percents are turned into
percents *of the group* (the parent's share is the cluster-level ratio, handled by
the DP), so a group's candidates compare on the group's own resources.
"""

from __future__ import annotations

from dataclasses import replace

from rules.inputs import GroupConfig, QueueConfig
from yarn_adapt.errors import SettingsError
from yarn_adapt.model import (
    CapacityQueue,
    CapacitySchedulerConfig,
    FairQueue,
    FairSchedulerConfig,
    Percentage,
    SchedulerConfig,
)
from yarn_adapt.tuning.apply import Group

DOMINANT_CALCULATOR = "DominantResourceCalculator"
MULTIPLE_ASSIGNMENTS = "per-node-heartbeat.multiple-assignments-enabled"


def group_config(
    config: SchedulerConfig, group: Group, *, fair_assign_multiple: bool | None = None
) -> GroupConfig:
    """C_i of ``group`` as ``config`` sets it. ``fair_assign_multiple`` is
    yarn-site's ``yarn.scheduler.fair.assignmultiple`` (not in fair-scheduler.xml)."""
    parent = config.find(group.parent)
    if parent is None:
        raise SettingsError(f"the configuration has no queue {group.parent}")
    if isinstance(config, CapacitySchedulerConfig):
        assert isinstance(parent, CapacityQueue)
        return _capacity_group(config, parent, group)
    assert isinstance(parent, FairQueue)
    return replace(_fair_group(config, parent, group), multiple_assignments=fair_assign_multiple)


def _children(parent: CapacityQueue | FairQueue, group: Group) -> list[CapacityQueue | FairQueue]:
    found = [c for c in parent.children if c.path in group.queues]
    if len(found) != len(group.queues):
        raise SettingsError(f"{group.parent} lacks some of the queues {group.queues}")
    return found


def _capacity_group(
    config: CapacitySchedulerConfig, parent: CapacityQueue, group: Group
) -> GroupConfig:
    calculator = config.global_value("resource-calculator") or ""
    queues = tuple(
        _capacity_queue(config, child)
        for child in _children(parent, group)
        if isinstance(child, CapacityQueue)
    )
    multiple = config.global_value(MULTIPLE_ASSIGNMENTS)
    return GroupConfig(
        "capacity",
        queues,
        calculator="dominant" if DOMINANT_CALCULATOR in calculator else "default",
        multiple_assignments=None if multiple is None else multiple.strip().lower() == "true",
    )


def _percent(value: object, default: float) -> float:
    return value.percent if isinstance(value, Percentage) else default


def _capacity_queue(config: CapacitySchedulerConfig, queue: CapacityQueue) -> QueueConfig:
    capacity = _percent(queue.capacity, 0.0)
    return QueueConfig(
        name=queue.name,
        policy=queue.effective_ordering_policy,
        capacity=capacity,
        maximum=max(capacity, _percent(queue.maximum_capacity, 100.0)),
        am_share=config.effective_am_percent(queue),
        user_limit_factor=queue.effective_user_limit_factor,
        minimum_user_limit_percent=queue.effective_minimum_user_limit_percent,
    )


def _fair_group(config: FairSchedulerConfig, parent: FairQueue, group: Group) -> GroupConfig:
    queues = tuple(
        QueueConfig(
            name=child.name,
            policy=config.effective_policy(child),
            weight=child.effective_weight,
            min_resources=child.min_resources,
            max_resources=child.max_resources,
            am_share=config.effective_max_am_share(child),
        )
        for child in _children(parent, group)
        if isinstance(child, FairQueue)
    )
    return GroupConfig("fair", queues, parent_policy=config.effective_policy(parent))
