"""Capacity Scheduler rules: each rule with a configuration that keeps it and one
that breaks it. A broken rule must name the queue and the property."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.schedconf.factories import capacity
from yarn_adapt.errors import ConfigValidationError
from yarn_adapt.yarn.confxml import Enforcement, enforcement_of, raise_if_invalid, validate

REFUSED, ADVISORY = Enforcement.REFUSED, Enforcement.ADVISORY


@dataclass(frozen=True)
class Case:
    name: str
    changes: dict[str, str | None]
    # (queue, property, enforcement) of every expected issue; empty = valid
    expected: list[tuple[str, str, Enforcement]] = field(default_factory=list)


NESTED = {"root.a.queues": "x,y", "root.a.x.capacity": "60", "root.a.y.capacity": "40"}
ABSOLUTE_PARENT = {
    "root.queues": "p",
    "root.p.capacity": "[memory=4096,vcores=4]",
    "root.p.queues": "x,y",
    "root.p.x.capacity": "[memory=2048,vcores=2]",
    "root.p.y.capacity": "[memory=1024,vcores=1]",
}
LABELS = {
    "root.accessible-node-labels.gpu.capacity": "100",
    "root.a.accessible-node-labels": "gpu",
    "root.a.accessible-node-labels.gpu.capacity": "100",
}

CASES = [
    Case("baseline", {}),
    # ---- percentage sums (AbstractParentQueue.setChildQueues)
    Case("children sum to 110", {"root.a.capacity": "60"}, [("root", "capacity", REFUSED)]),
    Case("sum within YARN's 0.05% precision", {"root.a.capacity": "49.99"}),
    Case("sum off by 0.1", {"root.a.capacity": "49.9"}, [("root", "capacity", REFUSED)]),
    Case(
        "zero sum under root",
        {"root.a.capacity": "0", "root.b.capacity": "0"},
        [("root", "capacity", REFUSED)],
    ),
    Case("nested children sum to 100", NESTED),
    Case(
        "nested children sum to 90",
        {**NESTED, "root.a.y.capacity": "30"},
        [("root.a", "capacity", REFUSED)],
    ),
    Case(
        "zero sum under a parent with capacity",
        {**NESTED, "root.a.x.capacity": "0", "root.a.y.capacity": "0"},
        [("root.a", "capacity", REFUSED)],
    ),
    Case(
        "zero sum allowed by allow-zero-capacity-sum",
        {
            **NESTED,
            "root.a.x.capacity": "0",
            "root.a.y.capacity": "0",
            "root.a.allow-zero-capacity-sum": "true",
        },
    ),
    Case(
        "zero sum under a zero-capacity parent",
        {
            **NESTED,
            "root.a.capacity": "0",
            "root.b.capacity": "100",
            "root.a.x.capacity": "0",
            "root.a.y.capacity": "0",
        },
    ),
    Case(
        "positive children under a zero-capacity parent",
        {**NESTED, "root.a.capacity": "0", "root.b.capacity": "100"},
        [("root.a", "capacity", REFUSED)],
    ),
    # ---- ranges (CapacitySchedulerConfiguration)
    Case(
        "capacity above 100",
        {"root.a.capacity": "120", "root.b.capacity": "-20"},
        [("root.a", "capacity", REFUSED), ("root.b", "capacity", REFUSED)],
    ),
    Case(
        "capacity -1",
        {"root.a.capacity": "-1", "root.b.capacity": "101"},
        [("root.a", "capacity", REFUSED), ("root.b", "capacity", REFUSED)],
    ),
    Case("maximum-capacity -1 means 100", {"root.a.maximum-capacity": "-1"}),
    Case(
        "maximum-capacity below capacity",
        {"root.a.maximum-capacity": "40"},
        [("root.a", "maximum-capacity", ADVISORY)],
    ),
    Case(
        "maximum-capacity above 100",
        {"root.a.maximum-capacity": "150"},
        [("root.a", "maximum-capacity", ADVISORY)],
    ),
    Case(
        "maximum-capacity as a weight",
        {"root.a.maximum-capacity": "2w"},
        [("root.a", "maximum-capacity", REFUSED)],
    ),
    # ---- modes among siblings
    Case("weights", {"root.a.capacity": "2w", "root.b.capacity": "1.5w"}),
    Case(
        "weight above 10000",
        {"root.a.capacity": "10001w", "root.b.capacity": "1w"},
        [("root.a", "capacity", REFUSED)],
    ),
    Case(
        "weight mixed with percentage",
        {"root.a.capacity": "2w"},
        [("root", "queues", REFUSED)],
    ),
    Case(
        "absolute then percentage among siblings",
        {"root.a.capacity": "[memory=1024,vcores=1]"},
        [("root", "queues", REFUSED)],
    ),
    # YARN's flag logic forgets a percentage sibling seen before an absolute one.
    Case("percentage then absolute among siblings", {"root.b.capacity": "[memory=1024,vcores=1]"}),
    Case(
        "weights in non-legacy mode may mix",
        {"root.a.capacity": "2w", "legacy-queue-mode.enabled": "false"},
    ),
    Case("absolute children within the parent", ABSOLUTE_PARENT),
    Case(
        "absolute children above the parent (memory)",
        {**ABSOLUTE_PARENT, "root.p.x.capacity": "[memory=4096,vcores=2]"},
        [("root.p", "capacity", REFUSED)],
    ),
    Case(
        "absolute children above the parent in vcores only (memory calculator)",
        {**ABSOLUTE_PARENT, "root.p.x.capacity": "[memory=2048,vcores=8]"},
    ),
    Case(
        "absolute child under a percentage parent",
        {**NESTED, "root.a.x.capacity": "[memory=1024,vcores=1]", "root.a.y.capacity": "0"},
        [("root.a", "capacity", REFUSED)],
    ),
    Case(
        "absolute minimum above absolute maximum",
        {**ABSOLUTE_PARENT, "root.p.y.maximum-capacity": "[memory=512,vcores=1]"},
        [("root.p.y", "maximum-capacity", REFUSED)],
    ),
    # ---- user limits and AM share (not enforced by YARN 3.4)
    Case("user-limit-factor -1 (no limit)", {"root.a.user-limit-factor": "-1"}),
    Case(
        "user-limit-factor 0",
        {"root.a.user-limit-factor": "0"},
        [("root.a", "user-limit-factor", ADVISORY)],
    ),
    Case(
        "minimum-user-limit-percent 0 and 150",
        {"root.a.minimum-user-limit-percent": "0", "root.b.minimum-user-limit-percent": "150"},
        [
            ("root.a", "minimum-user-limit-percent", ADVISORY),
            ("root.b", "minimum-user-limit-percent", ADVISORY),
        ],
    ),
    Case(
        "maximum-am-resource-percent above 1",
        {"root.a.maximum-am-resource-percent": "1.5", "maximum-am-resource-percent": "2"},
        [
            ("", "yarn.scheduler.capacity.maximum-am-resource-percent", ADVISORY),
            ("root.a", "maximum-am-resource-percent", ADVISORY),
        ],
    ),
    # ---- ordering policies
    Case("leaf fair policy", {"root.a.ordering-policy": "fair"}),
    Case("leaf policy class name", {"root.a.ordering-policy": "org.example.MyPolicy"}),
    Case(
        "leaf with a parent policy",
        {"root.a.ordering-policy": "utilization"},
        [("root.a", "ordering-policy", REFUSED)],
    ),
    Case(
        "parent with a leaf policy",
        {**NESTED, "root.a.ordering-policy": "fair"},
        [("root.a", "ordering-policy", REFUSED)],
    ),
    Case(
        "parent priority-utilization", {**NESTED, "root.a.ordering-policy": "priority-utilization"}
    ),
    # ---- states
    Case("stopped, lower case", {"root.a.state": "stopped"}),
    Case(
        "DRAINING is not configurable", {"root.a.state": "DRAINING"}, [("root.a", "state", REFUSED)]
    ),
    Case(
        "RUNNING child of a STOPPED parent",
        {**NESTED, "root.a.state": "STOPPED", "root.a.x.state": "RUNNING"},
        [("root.a.x", "state", REFUSED)],
    ),
    Case("unset child of a STOPPED parent", {**NESTED, "root.a.state": "STOPPED"}),
    Case("root without children", {"root.queues": None}, [("root", "queues", REFUSED)]),
    # ---- node labels
    Case("label capacities add up", LABELS),
    Case(
        "label capacity missing among root's children",
        {**LABELS, "root.a.accessible-node-labels.gpu.capacity": None},
        [("root", "accessible-node-labels.gpu.capacity", REFUSED)],
    ),
    Case(
        "child label not accessible to the parent",
        {
            **LABELS,
            **NESTED,
            "root.a.x.accessible-node-labels": "gpu,ssd",
            "root.a.x.accessible-node-labels.gpu.capacity": "100",
        },
        [("root.a.x", "accessible-node-labels", REFUSED)],
    ),
    Case(
        "default label expression not accessible",
        {**LABELS, "root.a.default-node-label-expression": "ssd"},
        [("root.a", "default-node-label-expression", REFUSED)],
    ),
    Case(
        "label capacity that does not parse",
        {**LABELS, "root.a.accessible-node-labels.gpu.maximum-capacity": "lots"},
        [("root.a", "accessible-node-labels.gpu.maximum-capacity", REFUSED)],
    ),
    Case(
        "absolute for one label, percentage for another",
        {**LABELS, "root.a.accessible-node-labels.gpu.capacity": "[memory=1024,vcores=1]"},
        [("root", "queues", REFUSED), ("root.a", "capacity", REFUSED)],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_capacity_rules(case: Case) -> None:
    issues = validate(capacity(case.changes))
    found = sorted((i.queue, i.prop, enforcement_of(i)) for i in issues)
    assert found == sorted(case.expected), [str(i) for i in issues]
    for issue in issues:
        where = f"{issue.queue}.{issue.prop}" if issue.queue else issue.prop
        assert str(issue).startswith(where + ": ")
        assert issue.message


RUNNING = {**NESTED, "root.b.queues": "z", "root.b.z.capacity": "100"}


@dataclass(frozen=True)
class Transition:
    name: str
    running: dict[str, str | None]
    new: dict[str, str | None]
    expected: list[tuple[str, str]] = field(default_factory=list)
    words: str = ""


TRANSITIONS = [
    Transition("nothing changes", RUNNING, RUNNING),
    Transition(
        "remove a RUNNING leaf",
        RUNNING,
        {**RUNNING, "root.a.queues": "x", "root.a.x.capacity": "100", "root.a.y.capacity": None},
        [("root.a.y", "state")],
        "cannot be removed",
    ),
    Transition(
        "remove a STOPPED leaf",
        {**RUNNING, "root.a.y.state": "STOPPED"},
        {**RUNNING, "root.a.queues": "x", "root.a.x.capacity": "100", "root.a.y.capacity": None},
    ),
    Transition(
        "remove a leaf whose leftover state says STOPPED",
        RUNNING,
        {**RUNNING, "root.a.queues": "x", "root.a.x.capacity": "100", "root.a.y.state": "STOPPED"},
    ),
    Transition(
        "move a RUNNING leaf to another parent",
        RUNNING,
        {
            **RUNNING,
            "root.a.queues": "x",
            "root.a.x.capacity": "100",
            "root.b.queues": "z,y",
            "root.b.z.capacity": "50",
            "root.b.y.capacity": "50",
        },
        [("root.a.y", "state")],
        "cannot move to root.b.y",
    ),
    Transition(
        "turn a RUNNING leaf into a parent",
        RUNNING,
        {**RUNNING, "root.a.y.queues": "w", "root.a.y.w.capacity": "100"},
        [("root.a.y", "queues")],
        "cannot become a parent",
    ),
    Transition(
        "turn a STOPPED leaf into a parent",
        {**RUNNING, "root.a.y.state": "STOPPED"},
        {
            **RUNNING,
            "root.a.y.queues": "w",
            "root.a.y.w.capacity": "100",
            "root.a.y.state": "STOPPED",
        },
    ),
    Transition(
        "shrink a leaf's maximum allocation",
        {**RUNNING, "root.a.x.maximum-allocation-mb": "4096"},
        {**RUNNING, "root.a.x.maximum-allocation-mb": "2048"},
        [("root.a.x", "maximum-allocation-mb")],
        "cannot shrink",
    ),
]


@pytest.mark.parametrize("case", TRANSITIONS, ids=lambda c: c.name)
def test_capacity_transitions(case: Transition) -> None:
    issues = validate(capacity(case.new), capacity(case.running))
    assert sorted((i.queue, i.prop) for i in issues) == sorted(case.expected)
    assert all(case.words in i.message for i in issues)


def test_raise_if_invalid_gives_one_line_naming_the_file_queue_and_property() -> None:
    with pytest.raises(ConfigValidationError) as caught:
        raise_if_invalid(
            capacity({"root.a.capacity": "60", "root.b.state": "DRAINING"}),
            source="conf/capacity-scheduler.xml",
        )
    message = caught.value.one_line()
    assert message.startswith("conf/capacity-scheduler.xml: root.")
    assert "(and 1 more)" in message
    assert "\n" not in str(caught.value)
    assert len(caught.value.issues) == 2


def test_raise_if_invalid_is_silent_for_a_valid_config() -> None:
    raise_if_invalid(capacity())
