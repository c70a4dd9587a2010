"""The Capacity Scheduler's own rules, checked on the model before anything is written.

Pure: (config, running config) -> issues. Each rule names the Hadoop 3.4 class that
enforces it (package ``org.apache.hadoop.yarn.server.resourcemanager.scheduler.capacity``
unless said otherwise). Rules YARN enforces are ``REFUSED`` (``rmadmin -refreshQueues``
fails and the old queues stay); the few sanity rules YARN 3.4 does *not* enforce but
yarn-adapt does are ``ADVISORY`` and say so in their message.

Legacy queue mode (``yarn.scheduler.capacity.legacy-queue-mode.enabled``, default
true) is what the sibling-mode and sum rules assume; with it off YARN skips them and
so does this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum

from yarn_adapt.errors import ValidationIssue
from yarn_adapt.model.capacity import (
    CAPACITY_PREFIX,
    LEAF_ORDERING_POLICIES,
    PARENT_ORDERING_POLICIES,
    AbsoluteCapacity,
    Capacity,
    CapacityQueue,
    CapacitySchedulerConfig,
    Percentage,
    QueueState,
    Weight,
    parse_capacity,
)
from yarn_adapt.model.resources import NO_RESOURCES, Resources
from yarn_adapt.yarn.schedconf.capacity_xml import (
    CAPACITY,
    MAXIMUM_CAPACITY,
    ROOT,
    format_number,
    parse_float,
    parse_queue_capacity,
)
from yarn_adapt.yarn.schedconf.issues import advisory, refused

# AbstractParentQueue.PRECISION: sums are compared as fractions of 1.
SUM_PRECISION = 0.0005
# CapacitySchedulerConfiguration.throwExceptionForUnexpectedWeight
MAX_WEIGHT = 10000.0
LABELS_PREFIX = "accessible-node-labels"
ALLOW_ZERO_CAPACITY_SUM = "allow-zero-capacity-sum"
AUTO_CREATE_V1 = "auto-create-child-queue.enabled"
AUTO_CREATE_V2 = "auto-queue-creation-v2.enabled"
DEFAULT_LABEL_EXPRESSION = "default-node-label-expression"
ANY_LABEL = "*"

Issues = Iterator[ValidationIssue]


class Mode(Enum):
    """AbstractParentQueue.QueueCapacityType"""

    WEIGHT = "weight"
    ABSOLUTE = "absolute"
    PERCENT = "percentage"


@dataclass(frozen=True)
class Context:
    """What every rule needs to know about the configuration as a whole."""

    config: CapacitySchedulerConfig
    legacy: bool
    dominant: bool
    all_labels: frozenset[str]

    @classmethod
    def of(cls, config: CapacitySchedulerConfig) -> Context:
        legacy = config.global_value("legacy-queue-mode.enabled")
        calculator = config.global_value("resource-calculator") or ""
        labels = frozenset().union(*(configured_labels(q) for q in config.queues()))
        return cls(
            config,
            legacy=_java_boolean(legacy, default=True),
            dominant="DominantResourceCalculator" in calculator,
            all_labels=labels,
        )

    def parent(self, queue: CapacityQueue) -> CapacityQueue | None:
        return self.config.find(queue.parent_path) if queue.parent_path else None

    def labels(self, queue: CapacityQueue) -> frozenset[str]:
        """QueueNodeLabelsSettings: root sees every configured label."""
        return self.all_labels if queue.path == ROOT else configured_labels(queue)


def validate_capacity(
    config: CapacitySchedulerConfig, running: CapacitySchedulerConfig | None = None
) -> list[ValidationIssue]:
    """Every rule ``config`` breaks; with ``running`` (what the RM runs now) also the
    rules about changing it."""
    context = Context.of(config)
    issues: list[ValidationIssue] = [*_root_rules(config), *_global_rules(config)]
    for queue in config.queues():
        for rule in QUEUE_RULES:
            issues += rule(context, queue)
        if has_children_or_auto_creation(queue):
            for parent_rule in PARENT_RULES:
                issues += parent_rule(context, queue)
    if running is not None:
        issues += transition_issues(running, config)
    return issues


# --------------------------------------------------------------------------- helpers


def _java_boolean(raw: str | None, default: bool) -> bool:
    """Configuration.getBoolean: only 'true'/'false' (any case) count."""
    value = (raw or "").strip().lower()
    return {"true": True, "false": False}.get(value, default)


def configured_labels(queue: CapacityQueue) -> frozenset[str]:
    """CapacitySchedulerConfiguration.getConfiguredNodeLabelsByQueue: '' plus every
    label named in an ``accessible-node-labels.<label>.<property>`` of the queue."""
    labels = {""}
    for suffix, _ in queue.other_properties:
        parts = suffix.split(".")
        if parts[0] == LABELS_PREFIX and len(parts) >= 3:
            labels.add(parts[1])
    return frozenset(labels)


def has_children_or_auto_creation(queue: CapacityQueue) -> bool:
    """CapacitySchedulerQueueManager.parseQueue makes these ParentQueues."""
    return bool(queue.children) or _auto_creation(queue)


def _auto_creation(queue: CapacityQueue) -> bool:
    return _java_boolean(queue.other(AUTO_CREATE_V1), False) or _java_boolean(
        queue.other(AUTO_CREATE_V2), False
    )


def _label_key(label: str, prop: str) -> str:
    return prop if not label else f"{LABELS_PREFIX}.{label}.{prop}"


def label_capacity(queue: CapacityQueue, label: str, prop: str = CAPACITY) -> Capacity | None:
    """The queue's capacity (or maximum-capacity) for a node label; None when unset
    or unreadable (unreadable values are reported by :func:`_label_value_rule`)."""
    if not label:
        return queue.capacity if prop == CAPACITY else queue.maximum_capacity
    raw = queue.other(_label_key(label, prop))
    if raw is None:
        return None
    try:
        return parse_queue_capacity(raw) if prop == CAPACITY else parse_capacity(raw)
    except ValueError:
        return None


def percent_of(queue: CapacityQueue, label: str) -> float:
    """getNonLabeledQueueCapacity / getLabeledQueueCapacity as a percentage: root is
    always 100, an unset, absolute or weight capacity counts 0."""
    if queue.path == ROOT:
        return 100.0
    capacity = label_capacity(queue, label)
    return capacity.percent if isinstance(capacity, Percentage) else 0.0


def _is_absolute(capacity: Capacity | None) -> bool:
    """A configured minimum resource other than Resources.none()."""
    return isinstance(capacity, AbsoluteCapacity) and not (
        capacity.resources.is_zero and all(v.strip() in ("0", "") for _, v in capacity.others)
    )


def effective_state(config: CapacitySchedulerConfig, queue: CapacityQueue) -> QueueState:
    """QueueStateHelper.initializeState: an unset state follows the parent's."""
    if queue.state is not None:
        return QueueState.STOPPED if queue.state is QueueState.DRAINING else queue.state
    parent = config.find(queue.parent_path) if queue.parent_path else None
    return effective_state(config, parent) if parent is not None else QueueState.RUNNING


# --------------------------------------------------------------------------- whole config


def _root_rules(config: CapacitySchedulerConfig) -> Issues:
    # CapacitySchedulerQueueManager.validateParent
    if not has_children_or_auto_creation(config.root):
        yield refused(ROOT, "queues", "the root queue must list child queues")


def _global_rules(config: CapacitySchedulerConfig) -> Issues:
    raw = config.global_value("maximum-am-resource-percent")
    if raw is None:
        return
    name = f"{CAPACITY_PREFIX}maximum-am-resource-percent"
    try:
        value = parse_float(raw)
    except ValueError:
        # CapacitySchedulerConfiguration.getMaximumApplicationMasterResourcePercent
        yield refused("", name, f"not a number: {raw!r}")
        return
    if not 0 <= value <= 1:
        yield advisory("", name, f"{raw} is outside [0, 1] (a fraction; YARN 3.4 accepts it)")


# --------------------------------------------------------------------------- per queue


def _capacity_range_rule(context: Context, queue: CapacityQueue) -> Issues:
    """CapacitySchedulerConfiguration.getNonLabeledQueueCapacity /
    internalGetLabeledQueueCapacity / throwExceptionForUnexpectedWeight (not root)."""
    if queue.path == ROOT:
        return
    for label in sorted(context.labels(queue)):
        capacity = label_capacity(queue, label)
        prop = _label_key(label, CAPACITY)
        if isinstance(capacity, Percentage) and not 0 <= capacity.percent <= 100:
            yield refused(queue.path, prop, f"{capacity} is outside [0, 100]")
        if isinstance(capacity, Weight) and capacity.weight > MAX_WEIGHT:
            yield refused(queue.path, prop, f"weight {capacity} is above {MAX_WEIGHT:g}")


def _label_value_rule(context: Context, queue: CapacityQueue) -> Issues:
    """Unreadable per-label capacities fail Float.parseFloat in YARN."""
    for label in sorted(context.labels(queue) - {""}):
        for prop in (CAPACITY, MAXIMUM_CAPACITY):
            raw = queue.other(_label_key(label, prop))
            if raw is not None and label_capacity(queue, label, prop) is None:
                yield refused(queue.path, _label_key(label, prop), f"not a capacity: {raw!r}")


def _maximum_capacity_rule(context: Context, queue: CapacityQueue) -> Issues:
    for label in sorted(context.labels(queue)):
        prop = _label_key(label, MAXIMUM_CAPACITY)
        maximum = label_capacity(queue, label, MAXIMUM_CAPACITY)
        minimum = label_capacity(queue, label)
        if isinstance(maximum, Weight):
            # getNonLabeledQueueMaximumCapacity: Float.parseFloat("2w") fails
            yield refused(queue.path, prop, f"{maximum} is a weight; maximum-capacity cannot be")
        elif isinstance(maximum, Percentage):
            yield from _percent_maximum_rule(queue, prop, maximum, minimum)
        elif isinstance(maximum, AbsoluteCapacity) and isinstance(minimum, AbsoluteCapacity):
            yield from _absolute_pair_rule(context, queue, prop, minimum, maximum)


def _percent_maximum_rule(
    queue: CapacityQueue, prop: str, maximum: Percentage, minimum: Capacity | None
) -> Issues:
    # YARN 3.4 no longer checks these (CSQueueUtils.checkMaxCapacity is "used only by
    # tests"); a maximum outside (0, 100] or below the guarantee is surely a mistake.
    if not 0 < maximum.percent <= 100:
        yield advisory(queue.path, prop, f"{maximum} is outside (0, 100] (YARN 3.4 accepts it)")
    elif isinstance(minimum, Percentage) and maximum.percent < minimum.percent:
        yield advisory(
            queue.path,
            prop,
            f"{maximum} is below capacity {minimum} (YARN 3.4 accepts it)",
        )


def _absolute_pair_rule(
    context: Context,
    queue: CapacityQueue,
    prop: str,
    minimum: AbsoluteCapacity,
    maximum: AbsoluteCapacity,
) -> Issues:
    """AbstractCSQueue.validateMinResourceIsNotGreaterThanMaxResource"""
    verdict = _exceeds(context, minimum.resources, maximum.resources)
    message = f"capacity {minimum} is greater than maximum-capacity {maximum}"
    if verdict is True:
        yield refused(queue.path, prop, message)
    elif verdict is None:
        yield advisory(queue.path, prop, message + " in one dimension")


def _exceeds(context: Context, amount: Resources, limit: Resources) -> bool | None:
    """Resources.greaterThan(calculator, cluster, amount, limit): True when surely,
    False when surely not, None when it depends on the cluster size (dominant
    resource calculator with one dimension above and one below)."""
    if not context.dominant:
        # DefaultResourceCalculator compares memory only.
        return amount.memory_mb > limit.memory_mb
    if amount.fits_in(limit):
        return False
    if limit.fits_in(amount):
        return True
    return None


def _user_limit_rules(context: Context, queue: CapacityQueue) -> Issues:
    # AbstractLeafQueue takes these as given in 3.4; the ranges are the documented ones.
    factor = queue.user_limit_factor
    if factor is not None and factor <= 0 and factor != -1:
        yield advisory(
            queue.path,
            "user-limit-factor",
            f"{format_number(factor)} must be > 0, or -1 for no limit (YARN 3.4 accepts it)",
        )
    percent = queue.minimum_user_limit_percent
    if percent is not None and not 0 < percent <= 100:
        yield advisory(
            queue.path,
            "minimum-user-limit-percent",
            f"{format_number(percent)} is outside (0, 100] (YARN 3.4 accepts it)",
        )
    share = queue.maximum_am_resource_percent
    if share is not None and not 0 <= share <= 1:
        yield advisory(
            queue.path,
            "maximum-am-resource-percent",
            f"{format_number(share)} is outside [0, 1] (a fraction; YARN 3.4 accepts it)",
        )


def _state_rules(context: Context, queue: CapacityQueue) -> Issues:
    """QueueStateHelper.setQueueState / initializeState"""
    if queue.state is QueueState.DRAINING:
        yield refused(queue.path, "state", "DRAINING cannot be configured (RUNNING or STOPPED)")
        return
    parent = context.parent(queue)
    if (
        queue.state is QueueState.RUNNING
        and parent is not None
        and effective_state(context.config, parent) is QueueState.STOPPED
    ):
        yield refused(
            queue.path,
            "state",
            f"RUNNING under the STOPPED parent {parent.path}: stop the child too or unset it",
        )


def _ordering_policy_rule(context: Context, queue: CapacityQueue) -> Issues:
    """Leaves: CapacitySchedulerConfiguration.getAppOrderingPolicy; parents:
    getQueueOrderingPolicy. Other names must be Java classes (not checked here)."""
    policy = queue.ordering_policy
    if policy is None or "." in policy:
        return
    is_parent = has_children_or_auto_creation(queue)
    allowed = PARENT_ORDERING_POLICIES if is_parent else LEAF_ORDERING_POLICIES
    if policy not in allowed:
        kind = "parent" if is_parent else "leaf"
        choices = ", ".join(sorted(allowed))
        yield refused(
            queue.path, "ordering-policy", f"{policy!r} is not a {kind} policy ({choices})"
        )


def _labels_rule(context: Context, queue: CapacityQueue) -> Issues:
    """QueueNodeLabelsSettings.validateNodeLabels and, for leaves,
    AbstractLeafQueue.setupQueueConfigs (default label expression)."""
    parent = context.parent(queue)
    if parent is None:
        return
    mine, parents = accessible_labels(context, queue), accessible_labels(context, parent)
    if ANY_LABEL not in parents:
        if ANY_LABEL in mine:
            yield refused(queue.path, LABELS_PREFIX, f"'*' while the parent {parent.path} is not")
        elif extra := sorted(mine - parents):
            yield refused(
                queue.path, LABELS_PREFIX, f"labels {extra} are not accessible to {parent.path}"
            )
    expression = default_label_expression(context, queue)
    is_leaf = not has_children_or_auto_creation(queue)
    if is_leaf and expression and ANY_LABEL not in mine and expression not in mine:
        yield refused(
            queue.path,
            DEFAULT_LABEL_EXPRESSION,
            f"{expression!r} is not one of the queue's accessible labels",
        )


def accessible_labels(context: Context, queue: CapacityQueue) -> frozenset[str]:
    """getAccessibleNodeLabels, inherited from the parent when unset; root is '*'."""
    if queue.path == ROOT:
        return frozenset({ANY_LABEL})
    raw = queue.other(LABELS_PREFIX)
    if raw is None:
        parent = context.parent(queue)
        return accessible_labels(context, parent) if parent is not None else frozenset()
    labels = frozenset(part.strip() for part in raw.split(",") if part.strip())
    return frozenset({ANY_LABEL}) if ANY_LABEL in labels else labels


def default_label_expression(context: Context, queue: CapacityQueue) -> str | None:
    """QueueNodeLabelsSettings.initializeDefaultLabelExpression"""
    raw = queue.other(DEFAULT_LABEL_EXPRESSION)
    if raw is not None:
        return raw.strip()
    parent = context.parent(queue)
    if parent is None or queue.other(LABELS_PREFIX) is None:
        return None
    if accessible_labels(context, queue) >= accessible_labels(context, parent):
        return default_label_expression(context, parent)
    return None


def _label_mode_rule(context: Context, queue: CapacityQueue) -> Issues:
    """AbstractCSQueue.updateCapacityConfigType: in legacy mode one queue uses either
    percentages or absolute resources for all of its labels."""
    if not context.legacy or queue.path == ROOT:
        return
    kinds = {_is_absolute_config(label_capacity(queue, label)) for label in context.labels(queue)}
    if len(kinds) > 1:
        yield refused(
            queue.path,
            CAPACITY,
            "mixes absolute and percentage capacities across node labels (legacy queue mode)",
        )


def _is_absolute_config(capacity: Capacity | None) -> bool:
    # checkConfigTypeIsAbsoluteResource matches the [...] pattern, zero or not.
    return isinstance(capacity, AbsoluteCapacity)


QUEUE_RULES: Sequence[Callable[[Context, CapacityQueue], Issues]] = (
    _label_value_rule,
    _capacity_range_rule,
    _maximum_capacity_rule,
    _user_limit_rules,
    _state_rules,
    _ordering_policy_rule,
    _labels_rule,
    _label_mode_rule,
)


# --------------------------------------------------------------------------- per parent


@dataclass(frozen=True)
class ModeFinding:
    mode: Mode
    mixed: bool
    details: tuple[str, ...]


def capacity_mode(queues: Sequence[CapacityQueue], labels: Sequence[str]) -> ModeFinding:
    """AbstractParentQueue.getCapacityConfigurationTypeForQueues, quirks included: an
    absolute capacity clears the percentage flag a previous queue set."""
    percentage = weight = absolute = False
    details: list[str] = []
    for queue in queues:
        for label in labels:
            capacity = label_capacity(queue, label)
            where = f"{queue.path}" + (f" (label {label})" if label else "")
            if percent_of(queue, label) > 0:
                percentage = True
            if isinstance(capacity, Weight):
                weight = True
                details.append(f"{where} uses weights")
            if _is_absolute(capacity):
                absolute, percentage = True, False
                details.append(f"{where} uses absolute resources")
            if percentage:
                details.append(f"{where} uses percentages")
    mixed = (percentage + weight + absolute) > 1
    if weight or not queues:
        return ModeFinding(Mode.WEIGHT, mixed, tuple(details))
    return ModeFinding(Mode.ABSOLUTE if absolute else Mode.PERCENT, mixed, tuple(details))


def _children_rules(context: Context, parent: CapacityQueue) -> Issues:
    """AbstractParentQueue.setChildQueues (legacy queue mode only)."""
    if not context.legacy or not parent.children:
        return
    labels = sorted(context.labels(parent))
    children = capacity_mode(parent.children, labels)
    if children.mixed:
        yield refused(
            parent.path,
            "queues",
            "children mix weight, percentage and absolute capacities (legacy queue mode): "
            + "; ".join(dict.fromkeys(children.details)),
        )
        return
    own = capacity_mode([parent], labels)
    if Mode.ABSOLUTE in (children.mode, own.mode):
        yield from _absolute_children_rules(context, parent, children.mode, own.mode, labels)
    if children.mode is Mode.PERCENT:
        for label in labels:
            yield from _percent_sum_rule(parent, label, own.mode)


def _absolute_children_rules(
    context: Context, parent: CapacityQueue, children: Mode, own: Mode, labels: list[str]
) -> Issues:
    if children is not own and parent.path != ROOT:
        yield refused(
            parent.path,
            CAPACITY,
            "with absolute resources, the parent and all its children must use them",
        )
        return
    for label in labels:
        yield from _absolute_sum_rule(context, parent, label)


def _absolute_sum_rule(context: Context, parent: CapacityQueue, label: str) -> Issues:
    own = label_capacity(parent, label)
    if not _is_absolute(own):
        return
    assert isinstance(own, AbsoluteCapacity)
    total = NO_RESOURCES
    for child in parent.children:
        capacity = label_capacity(child, label)
        if isinstance(capacity, AbsoluteCapacity):
            total = total + capacity.resources
    verdict = _exceeds(context, total, own.resources)
    message = f"children's absolute capacities add up to {total}, more than {own.resources}"
    prop = _label_key(label, CAPACITY)
    if verdict is True:
        yield refused(parent.path, prop, message)
    elif verdict is None:
        yield advisory(parent.path, prop, message + " in one dimension")


def _percent_sum_rule(parent: CapacityQueue, label: str, own: Mode) -> Issues:
    total = sum(percent_of(child, label) for child in parent.children)
    fraction = total / 100
    parent_fraction = percent_of(parent, label) / 100
    allow_zero = _java_boolean(parent.other(ALLOW_ZERO_CAPACITY_SUM), False)
    prop = _label_key(label, CAPACITY)
    shown = format_number(round(total, 6))
    if abs(1 - fraction) > SUM_PRECISION:
        if abs(fraction) > SUM_PRECISION:
            yield refused(
                parent.path, prop, f"children's capacities add up to {shown}, not 100 (or 0)"
            )
        elif own is Mode.PERCENT and abs(parent_fraction) > SUM_PRECISION and not allow_zero:
            yield refused(
                parent.path,
                prop,
                f"children's capacities add up to 0 while {parent.path} has capacity; "
                f"set {ALLOW_ZERO_CAPACITY_SUM}=true to allow it",
            )
    elif own is Mode.PERCENT and parent_fraction <= 0 and not allow_zero:
        yield refused(
            parent.path,
            prop,
            f"{parent.path} has zero capacity but its children add up to {shown}",
        )


PARENT_RULES: Sequence[Callable[[Context, CapacityQueue], Issues]] = (_children_rules,)


# --------------------------------------------------------------------------- transitions


def transition_issues(
    running: CapacitySchedulerConfig, new: CapacitySchedulerConfig
) -> list[ValidationIssue]:
    """CapacitySchedulerConfigValidator.validateQueueHierarchy: what may change
    between the running configuration and the new one."""
    issues: list[ValidationIssue] = []
    for old in running.queues():
        current = new.find(old.path)
        if current is None:
            issues += _removal_rule(running, new, old)
        else:
            issues += _conversion_rules(running, new, old, current)
            issues += _maximum_allocation_rule(old, current)
    return issues


def _removal_rule(
    running: CapacitySchedulerConfig, new: CapacitySchedulerConfig, old: CapacityQueue
) -> Issues:
    # The new file may still carry <path>.state=STOPPED for a queue it drops.
    leftover = new.global_value(f"{old.path}.state")
    if effective_state(running, old) is QueueState.STOPPED:
        return
    if leftover is not None and leftover.strip().upper() == QueueState.STOPPED:
        return
    moved = [q.path for q in new.queues() if q.name == old.name and running.find(q.path) is None]
    if moved:
        message = (
            f"RUNNING queue cannot move to {moved[0]}; YARN only lets a STOPPED queue be "
            "removed (then create the new one)"
        )
    else:
        message = "RUNNING queue cannot be removed; set its state to STOPPED first"
    yield refused(old.path, "state", message)


def _conversion_rules(
    running: CapacitySchedulerConfig,
    new: CapacitySchedulerConfig,
    old: CapacityQueue,
    current: CapacityQueue,
) -> Issues:
    was_parent = has_children_or_auto_creation(old)
    is_parent = has_children_or_auto_creation(current)
    if not was_parent and is_parent:
        stopped = QueueState.STOPPED in (
            effective_state(running, old),
            effective_state(new, current),
        )
        if not stopped:
            yield refused(
                current.path,
                "queues",
                "a RUNNING leaf cannot become a parent; set state STOPPED first",
            )
    if was_parent and is_parent:
        was_managed = _java_boolean(old.other(AUTO_CREATE_V1), False)
        is_managed = _java_boolean(current.other(AUTO_CREATE_V1), False)
        if was_managed != is_managed:
            yield refused(
                current.path,
                AUTO_CREATE_V1,
                "a parent queue cannot switch auto-created-leaf management on or off",
            )


def _maximum_allocation_rule(old: CapacityQueue, current: CapacityQueue) -> Issues:
    """AbstractLeafQueue.reinitialize: the maximum allocation cannot shrink."""
    if current.children or old.children:
        return
    for prop in ("maximum-allocation-mb", "maximum-allocation-vcores"):
        before, after = old.other(prop), current.other(prop)
        try:
            shrinks = before is not None and after is not None and int(after) < int(before)
        except ValueError:
            shrinks = False
        if shrinks:
            yield refused(current.path, prop, f"cannot shrink from {before} to {after}")
