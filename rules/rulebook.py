"""The scheduler's mechanism as business rules (durable-rules), in the paper's four
activation groups (AdaptiveConfig §3.3.2, Fig. 6).

Each activation group is one durable-rules ruleset. The facts of a candidate
configuration are posted to it as *events*; durable-rules consumes an event with
exactly one rule -- the matching rule of lowest ``pri`` -- so the rules of a group
never fire together, which is what a Drools activation group means. The firing
rule records a :class:`~rules.mechanism.KernelChoice` (numeric kernel + bindings)
for the request the event carries. Every group ends with a catch-all rule that
records ``unsupported``: a fact nothing else matches is reported, never silently
dropped (an exception inside a durable-rules action would be swallowed, so actions
only record).

The rules are data (:data:`DEFAULT_RULES`): a :class:`RuleBook` is a name plus a rule
table, so a variant book (one rule changed) can be defined next to the default in
the same process -- the tests use that to show the engine, not Python, picks the
mechanism. Rulesets are process-global in durable-rules: :func:`ensure_defined`
defines a book once per process (worker processes of a pool define it on first use).

Fact fields (see :mod:`rules.compiler` for how they are computed):

* allocation: ``scheduler`` (capacity|fair), ``elastic`` (a queue's maximum is above
  its capacity), ``parent_policy`` (fair|drf)
* ordering (one event per queue): ``scheduler``, ``policy``, ``uniform_shape`` (every
  container of the mix has the same shape), ``deadlines`` (some job has one)
* constraints (one event per kind): ``kind``
  (queue_bounds|am|placement|user_limit|resource_fit|heartbeat), ``scheduler``,
  ``bounded``, ``enabled``, ``constrained``, ``calculator``, ``nodes_known``,
  ``multiple`` (yes|no|default)
* estimation: ``framework`` (mapreduce|reuse)
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from durable.lang import get_host, m, post, pri, ruleset, when_all

from rules.mechanism import KernelChoice

ALLOCATION = "allocation"
ORDERING = "ordering"
CONSTRAINTS = "constraints"
ESTIMATION = "estimation"
ACTIVATION_GROUPS = (ALLOCATION, ORDERING, CONSTRAINTS, ESTIMATION)
UNSUPPORTED = "unsupported"
_CATCH_ALL_PRIORITY = 99


@dataclass(frozen=True)
class Rule:
    """One business rule: in ``group``, when ``when()`` holds (a durable-rules
    condition on the event ``m``), choose ``kernel`` with ``bindings``. Lower
    ``priority`` wins when several rules of a group match."""

    name: str
    group: str
    priority: int
    when: Callable[[], Any]
    kernel: str
    bindings: Mapping[str, str] = field(default_factory=dict)
    why: str = ""


def _rules() -> tuple[Rule, ...]:
    return (
        *_allocation_rules(),
        *_ordering_rules(),
        *_constraint_rules(),
        *_heartbeat_rules(),
        *_estimation_rules(),
    )


def _allocation_rules() -> tuple[Rule, ...]:
    # RegularContainerAllocator: an ask over the leaf's headroom ends the leaf's turn
    # (later, smaller asks wait behind it); the Fair Scheduler skips to the next app.
    guarantee = {"share": "capacity", "order": "used_over_share", "over_ceiling": "block"}
    return (
        Rule(
            "capacity-static-guarantees",
            ALLOCATION,
            1,
            lambda: (m.scheduler == "capacity") & (m.elastic == False),  # noqa: E712
            "guaranteed_share",
            {**guarantee, "ceiling": "capacity"},
            "Capacity, no queue elastic: each queue holds at most its guarantee (Fig. 7 C1)",
        ),
        Rule(
            "capacity-elastic-guarantees",
            ALLOCATION,
            2,
            lambda: m.scheduler == "capacity",
            "guaranteed_share",
            {**guarantee, "ceiling": "maximum"},
            "Capacity: guarantees first, idle capacity lent up to maximum-capacity, "
            "least used/guaranteed queue served first",
        ),
        Rule(
            "fair-drf-sharing",
            ALLOCATION,
            1,
            lambda: (m.scheduler == "fair") & (m.parent_policy == "drf"),
            "weighted_fair",
            {
                "weight": "weight",
                "floor": "min_resources",
                "ceiling": "max_resources",
                "measure": "dominant",
                "over_ceiling": "skip",
            },
            "Fair under a drf parent: queues below minResources first, then least "
            "dominant share per weight",
        ),
        Rule(
            "fair-weighted-sharing",
            ALLOCATION,
            2,
            lambda: m.scheduler == "fair",
            "weighted_fair",
            {
                "weight": "weight",
                "floor": "min_resources",
                "ceiling": "max_resources",
                "measure": "memory",
                "over_ceiling": "skip",
            },
            "Fair: dynamic sharing by weight; queues below minResources first, then least "
            "memory per weight",
        ),
    )


def _ordering_rules() -> tuple[Rule, ...]:
    return (
        Rule(
            "drf-on-uniform-containers-is-fair",
            ORDERING,
            0,
            lambda: (m.policy == "drf") & (m.uniform_shape == True),  # noqa: E712
            "least_used",
            {"measure": "memory"},
            "DRF when every container has one shape: the dominant share orders jobs as memory does",
        ),
        Rule(
            "fifo",
            ORDERING,
            1,
            lambda: m.policy == "fifo",
            "fifo",
            {},
            "FIFO: priority, then submission",
        ),
        Rule(
            "fair-share",
            ORDERING,
            1,
            lambda: m.policy == "fair",
            "least_used",
            {"measure": "memory"},
            "Fair: the job holding the least memory first",
        ),
        Rule(
            "drf",
            ORDERING,
            1,
            lambda: m.policy == "drf",
            "least_used",
            {"measure": "dominant"},
            "DRF: the job with the least dominant share first",
        ),
        Rule(
            "edf",
            ORDERING,
            1,
            lambda: (m.policy == "edf") & (m.deadlines == True),  # noqa: E712
            "earliest_deadline",
            {},
            "EDF: earliest deadline first, jobs without one last",
        ),
        Rule(
            "edf-without-deadlines",
            ORDERING,
            2,
            lambda: m.policy == "edf",
            "fifo",
            {},
            "EDF with no deadline known orders by submission",
        ),
        Rule(
            "lrtf",
            ORDERING,
            1,
            lambda: m.policy == "lrtf",
            "least_remaining_time",
            {},
            "LRTF: least estimated remaining work first",
        ),
    )


def _constraint_rules() -> tuple[Rule, ...]:
    return (
        Rule(
            "queue-bounds-from-constraints",
            CONSTRAINTS,
            1,
            lambda: (m.kind == "queue_bounds") & (m.bounded == True),  # noqa: E712
            "queue_bounds",
            {"kind": "queue_bounds", "source": "constraints"},
            "S^Queue bounds: a queue below its minimum is served first and never goes "
            "above its maximum",
        ),
        Rule(
            "queue-bounds-from-configuration",
            CONSTRAINTS,
            2,
            lambda: m.kind == "queue_bounds",
            "queue_bounds",
            {"kind": "queue_bounds", "source": "configuration"},
            "only the configuration bounds the queues",
        ),
        Rule(
            "no-am-containers",
            CONSTRAINTS,
            1,
            lambda: (m.kind == "am") & (m.enabled == False),  # noqa: E712
            "no_am",
            {"kind": "am"},
            "jobs run without an ApplicationMaster container",
        ),
        Rule(
            "capacity-am-limit",
            CONSTRAINTS,
            2,
            lambda: (m.kind == "am") & (m.scheduler == "capacity"),
            "am_limit",
            {"kind": "am", "base": "queue_limit", "at_least_one": "yes"},
            "Capacity: AMs of active jobs fit max(guarantee, limit) x "
            "maximum-am-resource-percent; one job is always activated",
        ),
        Rule(
            "fair-am-share",
            CONSTRAINTS,
            2,
            lambda: (m.kind == "am") & (m.scheduler == "fair"),
            "am_limit",
            {"kind": "am", "base": "fair_share", "at_least_one": "no"},
            "Fair: AMs fit the queue's instantaneous fair share x maxAMShare",
        ),
        Rule(
            "machine-placement",
            CONSTRAINTS,
            1,
            lambda: (m.kind == "placement") & (m.constrained == True),  # noqa: E712
            "allowed_machines",
            {"kind": "placement"},
            "a job uses only the containers of the machines it may run on",
        ),
        Rule(
            "any-machine",
            CONSTRAINTS,
            2,
            lambda: m.kind == "placement",
            "any_machine",
            {"kind": "placement"},
            "no placement constraint",
        ),
        Rule(
            "capacity-user-limit",
            CONSTRAINTS,
            1,
            lambda: (m.kind == "user_limit") & (m.scheduler == "capacity"),
            "user_limit",
            {"kind": "user_limit"},
            "Capacity: a user may hold capacity x user-limit-factor (one container past "
            "it); -1 lets the queue's maximum cap it",
        ),
        Rule(
            "no-user-limit",
            CONSTRAINTS,
            2,
            lambda: m.kind == "user_limit",
            "no_user_limit",
            {"kind": "user_limit"},
            "Fair: no per-user share limit",
        ),
        Rule(
            "capacity-default-calculator",
            CONSTRAINTS,
            1,
            lambda: (
                (m.kind == "resource_fit")
                & (m.scheduler == "capacity")
                & (m.calculator == "default")
            ),
            "fit",
            {"kind": "resource_fit", "dimensions": "memory"},
            "Capacity with DefaultResourceCalculator: only memory is compared and fitted",
        ),
        Rule(
            "both-dimensions",
            CONSTRAINTS,
            2,
            lambda: m.kind == "resource_fit",
            "fit",
            {"kind": "resource_fit", "dimensions": "memory+vcores"},
            "Fair, or DominantResourceCalculator: memory and vcores must both fit",
        ),
    )


def _heartbeat_rules() -> tuple[Rule, ...]:
    return (
        Rule(
            "no-node-heartbeats",
            CONSTRAINTS,
            0,
            lambda: (m.kind == "heartbeat") & (m.nodes_known == False),  # noqa: E712
            "continuous",
            {"kind": "heartbeat"},
            "nodes unknown: containers are granted the moment room and demand meet",
        ),
        Rule(
            "fair-one-container-per-heartbeat",
            CONSTRAINTS,
            1,
            lambda: (m.kind == "heartbeat") & (m.scheduler == "fair") & (m.multiple != "yes"),
            "heartbeat_grants",
            {"kind": "heartbeat", "per_heartbeat": "one"},
            "Fair, assignmultiple false (its default): one container per node heartbeat",
        ),
        Rule(
            "fair-assign-multiple",
            CONSTRAINTS,
            2,
            lambda: (m.kind == "heartbeat") & (m.scheduler == "fair"),
            "heartbeat_grants",
            {"kind": "heartbeat", "per_heartbeat": "half_free"},
            "Fair, assignmultiple with dynamic maxassign: up to half the node's free "
            "resources per heartbeat",
        ),
        Rule(
            "capacity-multiple-assignments",
            CONSTRAINTS,
            1,
            lambda: (m.kind == "heartbeat") & (m.scheduler == "capacity") & (m.multiple != "no"),
            "heartbeat_grants",
            {"kind": "heartbeat", "per_heartbeat": "max_assignments"},
            "Capacity, multiple assignments (its default): up to "
            "maximum-container-assignments (100) per node heartbeat",
        ),
        Rule(
            "capacity-single-assignment",
            CONSTRAINTS,
            2,
            lambda: (m.kind == "heartbeat") & (m.scheduler == "capacity"),
            "heartbeat_grants",
            {"kind": "heartbeat", "per_heartbeat": "one"},
            "Capacity without multiple assignments: one container per node heartbeat",
        ),
    )


def _estimation_rules() -> tuple[Rule, ...]:
    return (
        Rule(
            "mapreduce-containers-per-task",
            ESTIMATION,
            1,
            lambda: m.framework == "mapreduce",
            "per_task_containers",
            {},
            "MapReduce: every task's container returns to the scheduler when it ends; "
            "reduces start after the last map",
        ),
        Rule(
            "reused-containers",
            ESTIMATION,
            1,
            lambda: m.framework == "reuse",
            "container_reuse",
            {},
            "containers are kept for the job's next task (Algorithm 2)",
        ),
    )


DEFAULT_RULES: tuple[Rule, ...] = _rules()


@dataclass(frozen=True)
class RuleBook:
    """A named rule table; its rulesets are ``{name}.{activation group}``."""

    name: str
    rules: tuple[Rule, ...] = DEFAULT_RULES

    def ruleset(self, group: str) -> str:
        return f"{self.name}.{group}"

    def with_rule(self, name: str, replacement: Rule) -> RuleBook:
        """A variant: this book with rule ``name`` replaced (a new book name is needed:
        rulesets are process-global)."""
        rules = tuple(replacement if r.name == name else r for r in self.rules)
        return replace(self, rules=rules)

    def rule(self, name: str) -> Rule:
        return next(r for r in self.rules if r.name == name)


DEFAULT_BOOK = RuleBook("yarn_adapt.comparator")

# Decisions recorded by rule actions, by request id. Actions run synchronously
# inside ``post`` on the posting thread.
_decisions: dict[int, KernelChoice] = {}
_requests = itertools.count(1)
_lock = threading.Lock()
_defined: dict[str, int] = {}


def ensure_defined(book: RuleBook) -> None:
    """Define ``book``'s rulesets in this process unless already done."""
    with _lock:
        if _defined.get(book.name) == os.getpid():
            return
        if book.name in _defined:  # inherited through fork: the host already has them
            _defined[book.name] = os.getpid()
            return
        for group in ACTIVATION_GROUPS:
            _define_group(book, group)
        get_host()
        _defined[book.name] = os.getpid()


def _define_group(book: RuleBook, group: str) -> None:
    members = [r for r in book.rules if r.group == group]
    with ruleset(book.ruleset(group)):
        for rule in members:
            when_all(pri(rule.priority), rule.when())(_action(rule))
        when_all(pri(_CATCH_ALL_PRIORITY), +m.request)(_unsupported(group))


def _action(rule: Rule) -> Callable[[Any], None]:
    choice = KernelChoice.of(rule.kernel, rule.name, rule.bindings)

    def record(c: Any) -> None:
        _decisions[int(c.m.request)] = choice

    return record


def _unsupported(group: str) -> Callable[[Any], None]:
    def record(c: Any) -> None:
        _decisions[int(c.m.request)] = KernelChoice(UNSUPPORTED, (), f"{group}: no rule matched")

    return record


def decide(book: RuleBook, group: str, facts: Mapping[str, object]) -> KernelChoice:
    """Post ``facts`` to ``group``'s ruleset and return the choice of the rule that
    fired (``unsupported`` when only the catch-all matched)."""
    ensure_defined(book)
    with _lock:
        request = next(_requests)
        post(book.ruleset(group), {"sid": "0", "request": request, **facts})
        choice = _decisions.pop(request, None)
    if choice is None:
        raise RuntimeError(f"rule engine: no rule of {book.ruleset(group)} recorded a decision")
    return choice


def rule_table(book: RuleBook = DEFAULT_BOOK) -> Sequence[tuple[str, str, int, str, str]]:
    """(group, rule, priority, kernel, why) rows, for docs and ``--explain`` output."""
    return [(r.group, r.name, r.priority, r.kernel, r.why) for r in book.rules]
