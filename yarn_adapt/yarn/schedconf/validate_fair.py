"""The Fair Scheduler's own rules for an allocation file, checked on the model.

Pure: config -> issues. The Fair Scheduler treats problems in three ways (Hadoop 3.4,
package ``...scheduler.fair``), mirrored by :class:`Enforcement`:

* ``REFUSED``: ``AllocationFileLoaderService.reloadAllocations`` throws, the RM logs
  "Failed to reload fair scheduler config file" and keeps the previous allocations
  (``AllocationFileParser``, ``AllocationFileQueueParser``, ``QueuePlacementPolicy``).
* ``IGNORED``: the file loads but the RM logs an ERROR and drops part of it: a new
  queue whose policy its parent does not allow is not created, an existing one keeps
  its old policy (``QueueManager.createQueue``, ``FSQueue.verifyAndSetPolicyFromConf``,
  ``SchedulingPolicy.isChildPolicyAllowed``; seen on a 3.4.3 RM).
* ``ADVISORY``: YARN takes the value as is (or only logs a warning) but the result is
  surely unintended: negative weights or limits, min above max.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from yarn_adapt.errors import ValidationIssue
from yarn_adapt.model.fair import FairQueue, FairResources, FairSchedulerConfig, PlacementRule
from yarn_adapt.yarn.schedconf.capacity_xml import format_number
from yarn_adapt.yarn.schedconf.fair_xml import (
    MAX_AM_SHARE,
    MAX_RESOURCES,
    MAX_RUNNING_APPS,
    MIN_RESOURCES,
    SCHEDULING_POLICY,
    WEIGHT,
    parse_java_double,
    parse_java_int,
    parse_resources,
)
from yarn_adapt.yarn.schedconf.issues import advisory, ignored, refused

Issues = Iterator[ValidationIssue]

KNOWN_POLICIES = ("fair", "fifo", "drf")
RESERVATION = "reservation"
DEFAULT_POLICY = "defaultQueueSchedulingPolicy"
DEFAULT_MODE = "defaultQueueSchedulingMode"

# Queue child elements YARN reads with getFirstChild(): an empty one is a
# NullPointerException in AllocationFileQueueParser, i.e. a failed reload.
_TEXT_PARSERS: dict[str, Callable[[str], object]] = {
    "minSharePreemptionTimeout": parse_java_int,
    "fairSharePreemptionTimeout": parse_java_int,
    "fairSharePreemptionThreshold": parse_java_double,
    "maxChildResources": parse_resources,
    "maxContainerAllocation": parse_resources,
    "allowPreemptionFrom": str,
    "aclSubmitApps": str,
    "aclAdministerApps": str,
    "aclAdministerReservations": str,
    "aclListReservations": str,
    "aclSubmitReservations": str,
}
# AllocationFileParser's top-level text values and how it parses them.
_DEFAULT_PARSERS: dict[str, Callable[[str], object]] = {
    "queueMaxResourcesDefault": parse_resources,
    "userMaxAppsDefault": parse_java_int,
    "queueMaxAppsDefault": parse_java_int,
    "queueMaxAMShareDefault": parse_java_double,
    "defaultFairSharePreemptionThreshold": parse_java_double,
    "defaultFairSharePreemptionTimeout": parse_java_int,
    "fairSharePreemptionTimeout": parse_java_int,
    "defaultMinSharePreemptionTimeout": parse_java_int,
}
# QueuePlacementPolicy.RULES: name -> when the rule is terminal
# ("true" always, "false" never, "create" when its create flag is on).
PLACEMENT_RULES = {
    "user": "create",
    "primaryGroup": "create",
    "secondaryGroupExistingQueue": "false",
    "specified": "false",
    "nestedUserQueue": "create",
    "default": "create",
    "reject": "true",
}


def validate_fair(
    config: FairSchedulerConfig, running: FairSchedulerConfig | None = None
) -> list[ValidationIssue]:
    """Every rule ``config`` breaks. The Fair Scheduler has no rules about changing a
    running configuration (queues dropped from the file live on while they hold
    applications), so ``running`` is accepted for symmetry and not used."""
    del running
    issues: list[ValidationIssue] = [*_defaults_rules(config), *_user_rules(config)]
    for queue in config.queues():
        for rule in QUEUE_RULES:
            issues += rule(config, queue)
    issues += _placement_rules(config.placement_rules)
    return issues


def is_parent(queue: FairQueue) -> bool:
    """AllocationFileQueueParser.loadQueue: children or type="parent"."""
    return bool(queue.children) or queue.declared_parent


def effective_policy(config: FairSchedulerConfig, queue: FairQueue) -> str:
    """AllocationConfiguration.getSchedulingPolicy: the queue's, else the default."""
    return (queue.scheduling_policy or _default_policy(config) or "fair").lower()


def _default_policy(config: FairSchedulerConfig) -> str | None:
    raw = config.default(DEFAULT_POLICY) or config.default(DEFAULT_MODE)
    return raw.strip() if raw else None


def _is_known_policy(policy: str) -> bool:
    # SchedulingPolicy.parse: the three names in any case, else a class name (which
    # is loaded with Class.forName; yarn-adapt cannot check that it exists).
    return policy.lower() in KNOWN_POLICIES or "." in policy


# --------------------------------------------------------------------------- top level


def _defaults_rules(config: FairSchedulerConfig) -> Issues:
    for tag, text in config.defaults:
        parser = _DEFAULT_PARSERS.get(tag)
        if parser is not None:
            yield from _text_rule("", tag, text, parser)
    policy = _default_policy(config)
    tag = DEFAULT_POLICY if config.default(DEFAULT_POLICY) else DEFAULT_MODE
    if policy is not None and policy.lower() == "fifo":
        # AllocationFileParser.extractSchedulingPolicy
        yield refused("", tag, "the default scheduling policy cannot be fifo")
    elif policy is not None and not _is_known_policy(policy):
        yield refused("", tag, f"{policy!r} is not fair, fifo, drf or a policy class")


def _text_rule(queue: str, tag: str, text: str, parser: Callable[[str], object]) -> Issues:
    if not text:
        # getFirstChild() is null: a NullPointerException ends the reload.
        yield refused(queue, tag, "is empty")
        return
    try:
        parser(text)
    except ValueError as exc:
        yield refused(queue, tag, str(exc))


def _user_rules(config: FairSchedulerConfig) -> Issues:
    for user in config.users:
        if user.max_running_apps is not None and user.max_running_apps < 0:
            yield advisory(
                f"user {user.name}",
                MAX_RUNNING_APPS,
                f"{user.max_running_apps} is negative (YARN accepts it)",
            )


# --------------------------------------------------------------------------- per queue


def _parent_only_rules(config: FairSchedulerConfig, queue: FairQueue) -> Issues:
    """AllocationFileQueueParser.loadQueue: a parent cannot be reservable or have an
    AM share (the implicit root has neither, so it passes)."""
    if not is_parent(queue):
        return
    if queue.max_am_share is not None:
        yield refused(queue.path, MAX_AM_SHARE, "a parent queue cannot have maxAMShare")
    if any(tag == RESERVATION for tag, _ in queue.other_elements):
        yield refused(queue.path, RESERVATION, "a parent queue cannot be reservable")


def _policy_rules(config: FairSchedulerConfig, queue: FairQueue) -> Issues:
    if queue.scheduling_policy is not None and not _is_known_policy(queue.scheduling_policy):
        # SchedulingPolicy.parse: "SchedulingPolicy class not found"
        yield refused(
            queue.path,
            SCHEDULING_POLICY,
            f"{queue.scheduling_policy!r} is not fair, fifo, drf or a policy class",
        )
        return
    if not queue.children:
        return
    mine = effective_policy(config, queue)
    if mine == "fifo":
        # FifoPolicy.isChildPolicyAllowed
        yield ignored(
            queue.path,
            SCHEDULING_POLICY,
            "fifo is only for leaf queues; YARN logs an error and does not create the "
            "queue (an existing one keeps its old policies)",
        )
        return
    for child in queue.children:
        if mine == "fair" and effective_policy(config, child) == "drf":
            # FairSharePolicy.isChildPolicyAllowed
            yield ignored(
                child.path,
                SCHEDULING_POLICY,
                f"drf under the fair parent {queue.path}; YARN logs an error and does not "
                "create the queue, an existing one keeps its old policy (make the parent drf)",
            )


def _element_text_rules(config: FairSchedulerConfig, queue: FairQueue) -> Issues:
    for tag, text in queue.other_elements:
        parser = _TEXT_PARSERS.get(tag)
        if parser is not None:
            yield from _text_rule(queue.path, tag, text, parser)


def _limit_rules(config: FairSchedulerConfig, queue: FairQueue) -> Issues:
    # AllocationFileQueueParser takes these as given; negative values make no sense.
    if queue.weight is not None and not queue.weight >= 0:
        yield advisory(
            queue.path, WEIGHT, f"{format_number(queue.weight)} is negative (YARN accepts it)"
        )
    share = queue.max_am_share
    if share is not None and share != -1 and not 0 <= share <= 1:
        yield advisory(
            queue.path,
            MAX_AM_SHARE,
            f"{format_number(share)} is outside [0, 1] and not -1 (YARN caps it at 1)",
        )
    if queue.max_running_apps is not None and queue.max_running_apps < 0:
        yield advisory(
            queue.path, MAX_RUNNING_APPS, f"{queue.max_running_apps} is negative (YARN accepts it)"
        )


def _min_max_rule(config: FairSchedulerConfig, queue: FairQueue) -> Issues:
    """AllocationFileQueueParser.checkMinAndMaxResource only logs a warning."""
    low, high = queue.min_resources, queue.max_resources
    if low is None or high is None or not _above(low, high):
        return
    yield advisory(
        queue.path,
        MIN_RESOURCES,
        f"{low.text!r} is above {MAX_RESOURCES} {high.text!r} (YARN only logs a warning)",
    )


def _above(low: FairResources, high: FairResources) -> bool:
    pairs = [
        (low.memory_mb, high.memory_mb),
        (low.vcores, high.vcores),
        (low.memory_percent, high.memory_percent),
        (low.vcores_percent, high.vcores_percent),
    ]
    return any(a is not None and b is not None and a > b for a, b in pairs)


QUEUE_RULES: Sequence[Callable[[FairSchedulerConfig, FairQueue], Issues]] = (
    _parent_only_rules,
    _policy_rules,
    _element_text_rules,
    _limit_rules,
    _min_max_rule,
)


# --------------------------------------------------------------------------- placement


def _placement_rules(rules: tuple[PlacementRule, ...] | None) -> Issues:
    """QueuePlacementPolicy.fromXml / updateRuleSet / getParentRuleElement"""
    where, prop = "", "queuePlacementPolicy"
    if rules is None:
        return
    if not rules:
        yield refused(where, prop, "an empty placement policy is not allowed")
        return
    terminal: list[bool] = []
    for index, rule in enumerate(rules, start=1):
        problem = _rule_problem(rule)
        if problem:
            yield refused(where, prop, f"rule {index}: {problem}")
            return
        terminal.append(_is_terminal(rule))
    for index, is_terminal in enumerate(terminal[:-1], start=1):
        if is_terminal:
            yield refused(where, prop, f"rules after rule {index} can never be reached")
            return
    if not terminal[-1]:
        yield refused(where, prop, "the last rule can let an application through without a queue")


def _rule_problem(rule: PlacementRule) -> str | None:
    if not rule.name:
        return "a rule has no name"
    if rule.name not in PLACEMENT_RULES:
        return f"unknown rule {rule.name!r}"
    nested = rule.parent_rule
    if rule.name == "nestedUserQueue" and nested is None:
        return "nestedUserQueue needs a nested parent rule"
    if nested is None:
        return None
    if nested.name in ("reject", "nestedUserQueue"):
        return f"{nested.name!r} cannot be a parent rule"
    return _rule_problem(nested)


def _is_terminal(rule: PlacementRule) -> bool:
    kind = PLACEMENT_RULES[rule.name]
    own = kind == "true" or (kind == "create" and rule.create)
    if rule.parent_rule is None:
        return own
    return own and _is_terminal(rule.parent_rule)
