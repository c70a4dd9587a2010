"""Reading a scheduler configuration into the comparator's inputs.

:func:`group_config` extracts C_i -- what the comparator needs of one group's
queues -- from a Capacity or Fair configuration, applying YARN's defaults for unset
values (the model's ``effective_*`` accessors). Capacity percents are turned into
percents *of the group* (the parent's share is the cluster-level ratio, handled by
the DP), so a group's candidates compare on the group's own resources.

A search asks about thousands of candidate settings of one group: :class:`GroupBase`
turns a setting into its C_i directly (what writing the setting into the whole
configuration and reading the group back gives, without touching the other
queues), and :func:`canonical_key` says which candidates the engine cannot tell
apart at a resource level -- the same kernels and the same numbers in whole
containers.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, replace

from rules.inputs import GroupConfig, QueueConfig
from rules.mechanism import Mechanism
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
from yarn_adapt.tuning.space import GroupSetting, QueueSetting, Scheduler

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


@dataclass(frozen=True)
class GroupBase:
    """A group's C_i as configured, and each Capacity queue's configured maximum
    (``None``: unset), from which candidate settings are made."""

    config: GroupConfig
    maximums: Mapping[str, float | None]

    @classmethod
    def of(
        cls, config: SchedulerConfig, group: Group, *, fair_assign_multiple: bool | None = None
    ) -> GroupBase:
        base = group_config(config, group, fair_assign_multiple=fair_assign_multiple)
        maximums: dict[str, float | None] = {}
        for path in group.queues:
            queue = config.find(path)
            if isinstance(queue, CapacityQueue):
                maximum = queue.maximum_capacity
                maximums[queue.name] = maximum.percent if isinstance(maximum, Percentage) else None
        return cls(base, maximums)

    def with_setting(self, setting: GroupSetting) -> GroupConfig:
        """C_i under ``setting``: what ``group_config(apply_setting(config, setting))``
        gives (``tests/tuning/test_bridge.py`` holds them equal)."""
        wanted = {q.name: q for q in setting.queues}
        queues = tuple(
            self._queue(q, wanted.get(q.name), setting.scheduler) for q in self.config.queues
        )
        parent_policy = self.config.parent_policy
        if setting.scheduler is Scheduler.FAIR and any(q.policy == "drf" for q in setting.queues):
            parent_policy = "drf"  # apply_setting makes the parent drf (YARN requires it)
        return replace(self.config, queues=queues, parent_policy=parent_policy)

    def _queue(
        self, queue: QueueConfig, wanted: QueueSetting | None, scheduler: Scheduler
    ) -> QueueConfig:
        if wanted is None:
            return queue
        if scheduler is Scheduler.FAIR:
            return replace(queue, weight=wanted.share, policy=wanted.policy)
        configured = wanted.maximum if wanted.maximum is not None else self.maximums.get(queue.name)
        maximum = max(wanted.share, 100.0 if configured is None else configured)
        return replace(queue, capacity=wanted.share, maximum=maximum, policy=wanted.policy)


def canonical_key(config: GroupConfig, mechanism: Mechanism, units: int) -> Hashable:
    """What the engine reads of ``config`` at ``units`` minimum allocations, in whole
    containers: the kernels the rules chose, each queue's guarantee and ceiling
    (Capacity) or its share of the weights (Fair) rounded to whole units, and the
    settings the tuner does not change. Candidates with equal keys are scored once:
    they differ by less than half a container in what any queue is given."""
    choices = (
        mechanism.allocation,
        *mechanism.ordering,
        *mechanism.constraints,
        mechanism.estimation,
    )
    kernels = tuple((c.kernel, c.bindings) for c in choices)
    weights = sum(q.weight for q in config.queues) or 1.0
    queues = tuple(
        (
            round(q.capacity * units / 100.0),
            round(q.maximum * units / 100.0),
            round(q.weight / weights * units),
            q.min_resources,
            q.max_resources,
            q.am_share,
            q.user_limit_factor,
            q.minimum_user_limit_percent,
        )
        for q in config.queues
    )
    return kernels, queues, config.calculator, config.multiple_assignments
