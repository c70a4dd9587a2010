"""What differs between two scheduler configurations, per queue and property.

Values are compared by meaning (``50`` and ``50.0`` are the same capacity, ``-1`` and
``100`` the same maximum-capacity, ``4096 mb, 4 vcores`` and
``memory-mb=4096, vcores=4`` the same resources), so the list holds only changes an
operator has to think about. :func:`render_diff` prints one aligned line per change;
the :class:`ConfigChange` list is what code (the mutation builder, the approval page)
consumes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from yarn_adapt.model.capacity import CapacitySchedulerConfig
from yarn_adapt.model.fair import FairQueue, FairSchedulerConfig, PlacementRule
from yarn_adapt.yarn.schedconf.capacity_xml import (
    QUEUES,
    capacity_properties,
    format_number,
    same_meaning,
)


class ChangeKind(StrEnum):
    QUEUE_ADDED = "queue added"
    QUEUE_REMOVED = "queue removed"
    SET = "set"
    UNSET = "unset"
    CHANGED = "changed"


@dataclass(frozen=True)
class ConfigChange:
    """One difference. ``queue`` is '' for a global setting; ``prop`` is '' for a
    queue that was added or removed (its settings follow as SET changes)."""

    kind: ChangeKind
    queue: str
    prop: str
    old: str | None = None
    new: str | None = None


@dataclass(frozen=True)
class _Value:
    """A value as written (``text``) and what it means (``meaning``)."""

    text: str
    meaning: object


_Flat = dict[tuple[str, str], _Value]


def diff_configs(
    old: CapacitySchedulerConfig | FairSchedulerConfig,
    new: CapacitySchedulerConfig | FairSchedulerConfig,
) -> list[ConfigChange]:
    """Every change from ``old`` to ``new``: global settings first, then queues in
    tree order (a removed queue where it used to be)."""
    if isinstance(old, CapacitySchedulerConfig) and isinstance(new, CapacitySchedulerConfig):
        return _diff(_capacity_flat(old), _capacity_flat(new), _paths(old), _paths(new))
    if isinstance(old, FairSchedulerConfig) and isinstance(new, FairSchedulerConfig):
        return _diff(_fair_flat(old), _fair_flat(new), _paths(old), _paths(new))
    raise TypeError("both configurations must be of the same scheduler")


def _paths(config: CapacitySchedulerConfig | FairSchedulerConfig) -> list[str]:
    return [queue.path for queue in config.queues()]


def _diff(old: _Flat, new: _Flat, old_paths: list[str], new_paths: list[str]) -> list[ConfigChange]:
    changes = _property_changes(old, new, "")
    for path in _merged_order(old_paths, new_paths):
        if path not in old_paths:
            changes.append(ConfigChange(ChangeKind.QUEUE_ADDED, path, ""))
        elif path not in new_paths:
            changes.append(ConfigChange(ChangeKind.QUEUE_REMOVED, path, ""))
            continue
        changes += _property_changes(old, new, path)
    return changes


def _merged_order(old: list[str], new: list[str]) -> list[str]:
    """New tree order, each removed queue inserted after its old predecessor."""
    merged = list(new)
    for index, path in enumerate(old):
        if path not in merged:
            before = old[index - 1] if index else None
            at = merged.index(before) + 1 if before in merged else len(merged)
            merged.insert(at, path)
    return merged


def _property_changes(old: _Flat, new: _Flat, queue: str) -> list[ConfigChange]:
    keys = [k for k in new if k[0] == queue] + [k for k in old if k[0] == queue and k not in new]
    changes = []
    for key in keys:
        before, after = old.get(key), new.get(key)
        if before is None and after is not None:
            changes.append(ConfigChange(ChangeKind.SET, queue, key[1], None, after.text))
        elif after is None and before is not None:
            changes.append(ConfigChange(ChangeKind.UNSET, queue, key[1], before.text, None))
        elif before is not None and after is not None and before.meaning != after.meaning:
            changes.append(ConfigChange(ChangeKind.CHANGED, queue, key[1], before.text, after.text))
    return changes


# --------------------------------------------------------------------------- flattening


class _CapacityMeaning:
    """Equality by :func:`same_meaning` for one capacity property."""

    def __init__(self, suffix: str, text: str) -> None:
        self.suffix = suffix
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _CapacityMeaning) and same_meaning(
            self.suffix or None, self.text, other.text
        )

    __hash__ = None  # type: ignore[assignment]


def _capacity_flat(config: CapacitySchedulerConfig) -> _Flat:
    flat: _Flat = {}
    for prop in capacity_properties(config):
        if prop.suffix == QUEUES:
            continue  # the tree shows as queues added and removed
        key = (prop.queue, prop.suffix or prop.name)
        flat[key] = _Value(prop.value, _CapacityMeaning(prop.suffix, prop.value))
    return flat


def _fair_flat(config: FairSchedulerConfig) -> _Flat:
    flat: _Flat = {}
    _add_repeated(flat, "", config.defaults)
    for user in config.users:
        prefix = f"user {user.name} "
        if user.max_running_apps is not None:
            text = str(user.max_running_apps)
            flat[("", prefix + "maxRunningApps")] = _Value(text, user.max_running_apps)
        _add_repeated(flat, "", [(prefix + tag, text) for tag, text in user.other_elements])
    if config.placement_rules is not None:
        text = ", ".join(_rule_text(rule) for rule in config.placement_rules) or "(empty)"
        flat[("", "queuePlacementPolicy")] = _Value(text, config.placement_rules)
    for queue in config.queues():
        flat.update(_fair_queue_flat(queue))
    return flat


def _fair_queue_flat(queue: FairQueue) -> _Flat:
    flat: _Flat = {}
    numbers = {"weight": queue.weight, "maxAMShare": queue.max_am_share}
    for tag, number in numbers.items():
        if number is not None:
            flat[(queue.path, tag)] = _Value(format_number(number), number)
    if queue.scheduling_policy is not None:
        policy = queue.scheduling_policy
        flat[(queue.path, "schedulingPolicy")] = _Value(policy, policy.lower())
    for tag, resources in (
        ("minResources", queue.min_resources),
        ("maxResources", queue.max_resources),
    ):
        if resources is not None:
            amount = (resources.memory_mb, resources.vcores)
            percent = (resources.memory_percent, resources.vcores_percent)
            flat[(queue.path, tag)] = _Value(resources.text, amount + percent)
    if queue.max_running_apps is not None:
        count = queue.max_running_apps
        flat[(queue.path, "maxRunningApps")] = _Value(str(count), count)
    if queue.declared_parent:
        flat[(queue.path, "type")] = _Value("parent", "parent")
    _add_repeated(flat, queue.path, queue.other_elements)
    return flat


def _add_repeated(flat: _Flat, queue: str, pairs: Iterable[tuple[str, str]]) -> None:
    """Simple elements; a repeated tag is numbered (``aclSubmitApps#2``)."""
    seen: dict[str, int] = {}
    for tag, text in pairs:
        seen[tag] = seen.get(tag, 0) + 1
        name = tag if seen[tag] == 1 else f"{tag}#{seen[tag]}"
        flat[(queue, name)] = _Value(text, text)


def _rule_text(rule: PlacementRule) -> str:
    attributes = ",".join(f"{k}={v}" for k, v in rule.attributes)
    text = rule.name + (f"({attributes})" if attributes else "")
    return text + (f"[{_rule_text(rule.parent_rule)}]" if rule.parent_rule else "")


# --------------------------------------------------------------------------- rendering

_SIGNS = {
    ChangeKind.QUEUE_ADDED: "+",
    ChangeKind.QUEUE_REMOVED: "-",
    ChangeKind.SET: "+",
    ChangeKind.UNSET: "-",
    ChangeKind.CHANGED: "~",
}


def render_diff(changes: Sequence[ConfigChange]) -> str:
    """One aligned line per change, e.g. ``~ root.a  capacity  30 -> 20``."""
    if not changes:
        return "no changes"
    queue_width = max(len(c.queue or "(global)") for c in changes)
    prop_width = max(len(c.prop) for c in changes)
    return "\n".join(_line(c, queue_width, prop_width) for c in changes)


def _line(change: ConfigChange, queue_width: int, prop_width: int) -> str:
    queue = (change.queue or "(global)").ljust(queue_width)
    if change.kind in (ChangeKind.QUEUE_ADDED, ChangeKind.QUEUE_REMOVED):
        return f"{_SIGNS[change.kind]} {queue}  ({change.kind})"
    prop = change.prop.ljust(prop_width)
    if change.kind is ChangeKind.CHANGED:
        what = f"{_shown(change.old)} -> {_shown(change.new)}"
    elif change.kind is ChangeKind.SET:
        what = _shown(change.new)
    else:
        what = f"{_shown(change.old)} (unset)"
    return f"{_SIGNS[change.kind]} {queue}  {prop}  {what}".rstrip()


def _shown(value: str | None) -> str:
    if value is None:
        return "(unset)"
    return repr(value) if not value.strip() or value != value.strip() else value
