"""From decided settings to a scheduler configuration (pure; nothing is written here).

:func:`apply_setting` writes one group's :class:`~yarn_adapt.tuning.space.GroupSetting`
into a Capacity or Fair configuration; :func:`apply_ratios` writes the cluster-level
ratios (each group's share of the cluster). :func:`groups_of` finds the groups of a
queue tree: every parent whose children are all leaves (``root`` itself when the
tree is flat).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from yarn_adapt.errors import SettingsError
from yarn_adapt.model import (
    Capacity,
    CapacityQueue,
    CapacitySchedulerConfig,
    FairQueue,
    FairSchedulerConfig,
    Percentage,
    SchedulerConfig,
)
from yarn_adapt.tuning.space import (
    CLUSTER_SHARE_DECIMALS,
    GroupSetting,
    Scheduler,
    covering_percentages,
    normalised_percentages,
)


@dataclass(frozen=True)
class Group:
    """A parent queue and its leaf children (full paths)."""

    parent: str
    queues: tuple[str, ...]

    @property
    def leaf_names(self) -> tuple[str, ...]:
        return tuple(q.rsplit(".", 1)[-1] for q in self.queues)


def scheduler_of(config: SchedulerConfig) -> Scheduler:
    return Scheduler.CAPACITY if isinstance(config, CapacitySchedulerConfig) else Scheduler.FAIR


def groups_of(config: SchedulerConfig) -> tuple[Group, ...]:
    """Every parent queue whose children are all leaves, in tree order."""
    found: list[Group] = []
    for queue in config.queues():
        children = queue.children
        if children and all(c.is_leaf for c in children):
            found.append(Group(queue.path, tuple(c.path for c in children)))
    return tuple(found)


def apply_setting(config: SchedulerConfig, setting: GroupSetting) -> SchedulerConfig:
    """``config`` with ``setting``'s children rewritten (other queues untouched)."""
    if scheduler_of(config) is not setting.scheduler:
        raise SettingsError(
            f"a {setting.scheduler} setting cannot apply to a {scheduler_of(config)} configuration"
        )
    if isinstance(config, CapacitySchedulerConfig):
        return _apply_capacity(config, setting)
    assert isinstance(config, FairSchedulerConfig)
    return _apply_fair(config, setting)


def _parent_of(config: SchedulerConfig, setting: GroupSetting) -> CapacityQueue | FairQueue:
    parent = config.find(setting.parent)
    if parent is None:
        raise SettingsError(f"the configuration has no queue {setting.parent}")
    missing = {q.path for q in setting.queues} - {c.path for c in parent.children}
    if missing:
        raise SettingsError(f"{setting.parent} has no child queue {sorted(missing)[0]}")
    return parent


def _apply_capacity(config: CapacitySchedulerConfig, setting: GroupSetting) -> SchedulerConfig:
    parent = _parent_of(config, setting)
    assert isinstance(parent, CapacityQueue)
    children = tuple(_capacity_child(c, setting) for c in parent.children)
    return config.with_queue(replace(parent, children=children))


def _capacity_child(child: CapacityQueue, setting: GroupSetting) -> CapacityQueue:
    wanted = next((q for q in setting.queues if q.path == child.path), None)
    if wanted is None:
        return child
    maximum = child.maximum_capacity if wanted.maximum is None else Percentage(wanted.maximum)
    if isinstance(maximum, Percentage) and maximum.percent < wanted.share:
        maximum = Percentage(wanted.share)  # YARN refuses maximum-capacity < capacity
    policy = child.ordering_policy
    if policy is not None or wanted.policy != child.effective_ordering_policy:
        policy = wanted.policy  # an unset policy that means the same stays unset
    return replace(
        child,
        capacity=Percentage(wanted.share),
        maximum_capacity=maximum,
        ordering_policy=policy,
    )


def _apply_fair(config: FairSchedulerConfig, setting: GroupSetting) -> SchedulerConfig:
    parent = _parent_of(config, setting)
    assert isinstance(parent, FairQueue)
    setting = _keep_weight_scale(parent, setting)
    children = tuple(_fair_child(config, c, setting) for c in parent.children)
    policy = parent.scheduling_policy
    if any(q.policy == "drf" for q in setting.queues):
        policy = "drf"  # FairSharePolicy refuses a drf child: the parent must be drf
    return config.with_queue(replace(parent, children=children, scheduling_policy=policy))


def _fair_child(config: FairSchedulerConfig, child: FairQueue, setting: GroupSetting) -> FairQueue:
    wanted = next((q for q in setting.queues if q.path == child.path), None)
    if wanted is None:
        return child
    policy = child.scheduling_policy
    if policy is not None or wanted.policy != config.effective_policy(child):
        policy = wanted.policy
    weight = child.weight
    if weight is not None or abs(wanted.share - child.effective_weight) > 1e-9:
        weight = wanted.share
    return replace(child, weight=weight, scheduling_policy=policy)


def _keep_weight_scale(parent: FairQueue, setting: GroupSetting) -> GroupSetting:
    """Weights only matter relative to each other: when the new ones are the current
    ones scaled, keep the current numbers (no change to write)."""
    current = {c.path: c.effective_weight for c in parent.children}
    pairs = [(current.get(q.path, 0.0), q.share) for q in setting.queues]
    if not pairs or any(old <= 0 for old, _ in pairs):
        return setting
    scale = pairs[0][1] / pairs[0][0]
    if all(abs(new - old * scale) <= 1e-6 * max(new, 1.0) for old, new in pairs):
        queues = tuple(replace(q, share=current[q.path]) for q in setting.queues)
        return replace(setting, queues=queues)
    return setting


def apply_ratios(config: SchedulerConfig, ratios: Mapping[str, float]) -> SchedulerConfig:
    """Each group parent's share of its own parent: Capacity ``capacity`` (normalised
    among siblings to 100), Fair ``weight`` (its percent of the cluster). ``ratios``
    maps parent paths to fractions of the cluster; groups that are ``root`` itself are
    skipped (root has no share). Written so that none reads back fewer containers
    than its fraction stands for (:func:`~yarn_adapt.tuning.space.covering_percentages`)."""
    shares = {path: r for path, r in ratios.items() if path != "root"}
    if not shares:
        return config
    if isinstance(config, CapacitySchedulerConfig):
        return _capacity_ratios(config, shares)
    assert isinstance(config, FairSchedulerConfig)
    paths = list(shares)
    total = round(100.0 * sum(shares.values()), CLUSTER_SHARE_DECIMALS)
    weights = covering_percentages([100.0 * shares[p] for p in paths], paths, total)
    given = config  # one index; parents before children, so a nested change stays
    for path in sorted(weights, key=lambda p: p.count(".")):
        weight = weights[path]
        queue = given.find(path)
        if queue is None:
            raise SettingsError(f"the configuration has no queue {path}")
        config = config.with_queue(replace(queue, weight=weight))
    return config


def _capacity_ratios(
    config: CapacitySchedulerConfig, shares: Mapping[str, float]
) -> CapacitySchedulerConfig:
    parents = {path.rsplit(".", 1)[0] for path in shares}
    for parent_path in parents:
        parent = config.find(parent_path)
        if parent is None:
            raise SettingsError(f"the configuration has no queue {parent_path}")
        paths = [c.path for c in parent.children]
        raw = [shares.get(p, float("nan")) for p in paths]
        percents = normalised_percentages(raw, paths, covering=True)
        children = tuple(
            replace(
                c,
                capacity=Percentage(percents[c.path]),
                maximum_capacity=_at_least(c, percents[c.path]),
            )
            for c in parent.children
        )
        config = config.with_queue(replace(parent, children=children))
    return config


def _at_least(queue: CapacityQueue, percent: float) -> Capacity | None:
    maximum = queue.maximum_capacity
    if isinstance(maximum, Percentage) and maximum.percent < percent:
        return Percentage(percent)
    return maximum
