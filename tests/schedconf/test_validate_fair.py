"""Fair Scheduler rules: each with an allocation file that keeps it and one that
breaks it; a broken rule names the queue (or top-level element) and the property."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.schedconf.factories import FIXTURES, fair
from yarn_adapt.yarn.confxml import Enforcement, enforcement_of, read_fair, validate

REFUSED, IGNORED, ADVISORY = Enforcement.REFUSED, Enforcement.IGNORED, Enforcement.ADVISORY

SPECIFIED_DEFAULT = '<rule name="specified"/><rule name="default" queue="a"/>'


@dataclass(frozen=True)
class Case:
    name: str
    body: str
    expected: list[tuple[str, str, Enforcement]] = field(default_factory=list)


def policy(rules: str) -> str:
    return f'<queue name="a"/><queuePlacementPolicy>{rules}</queuePlacementPolicy>'


CASES = [
    Case("two leaves", '<queue name="a"><weight>2</weight></queue><queue name="b"/>'),
    # ---- AllocationFileQueueParser
    Case(
        "maxAMShare on a parent",
        '<queue name="p"><maxAMShare>0.5</maxAMShare><queue name="c"/></queue>',
        [("root.p", "maxAMShare", REFUSED)],
    ),
    Case(
        "maxAMShare on a declared parent",
        '<queue name="p" type="parent"><maxAMShare>0.5</maxAMShare></queue>',
        [("root.p", "maxAMShare", REFUSED)],
    ),
    Case(
        "reservable parent",
        '<queue name="p" type="parent"><reservation/></queue>',
        [("root.p", "reservation", REFUSED)],
    ),
    Case("reservable leaf", '<queue name="r"><reservation/></queue>'),
    Case(
        "unknown scheduling policy",
        '<queue name="a"><schedulingPolicy>lottery</schedulingPolicy></queue>',
        [("root.a", "schedulingPolicy", REFUSED)],
    ),
    Case(
        "policy names in any case",
        '<queue name="a"><schedulingPolicy>FIFO</schedulingPolicy></queue>',
    ),
    Case(
        "policy class name",
        '<queue name="a"><schedulingPolicy>org.example.Policy</schedulingPolicy></queue>',
    ),
    Case(
        "preemption timeout that is not a number",
        '<queue name="a"><minSharePreemptionTimeout>soon</minSharePreemptionTimeout></queue>',
        [("root.a", "minSharePreemptionTimeout", REFUSED)],
    ),
    Case(
        "empty ACL element",
        '<queue name="a"><aclSubmitApps></aclSubmitApps></queue>',
        [("root.a", "aclSubmitApps", REFUSED)],
    ),
    Case("ACL of one space (nobody)", '<queue name="a"><aclSubmitApps> </aclSubmitApps></queue>'),
    # ---- AllocationFileParser (top level)
    Case(
        "fifo as the default policy",
        "<defaultQueueSchedulingPolicy>fifo</defaultQueueSchedulingPolicy>",
        [("", "defaultQueueSchedulingPolicy", REFUSED)],
    ),
    Case(
        "a default that is not a number",
        "<queueMaxAppsDefault>many</queueMaxAppsDefault>",
        [("", "queueMaxAppsDefault", REFUSED)],
    ),
    Case(
        "a default resource that does not parse",
        "<queueMaxResourcesDefault>lots</queueMaxResourcesDefault>",
        [("", "queueMaxResourcesDefault", REFUSED)],
    ),
    # ---- policy hierarchy (SchedulingPolicy.isChildPolicyAllowed)
    Case(
        "fifo on a parent",
        '<queue name="p"><schedulingPolicy>fifo</schedulingPolicy><queue name="c"/></queue>',
        [("root.p", "schedulingPolicy", IGNORED)],
    ),
    Case(
        "drf under the default fair root",
        '<queue name="a"><schedulingPolicy>drf</schedulingPolicy></queue>',
        [("root.a", "schedulingPolicy", IGNORED)],
    ),
    Case(
        "drf under a drf root",
        '<queue name="root"><schedulingPolicy>drf</schedulingPolicy>'
        '<queue name="a"><schedulingPolicy>drf</schedulingPolicy></queue></queue>',
    ),
    Case(
        "fifo leaf under a fair parent",
        '<queue name="p"><queue name="c"><schedulingPolicy>fifo</schedulingPolicy></queue></queue>',
    ),
    # ---- values YARN takes as given
    Case("weight 0", '<queue name="a"><weight>0</weight></queue>'),
    Case(
        "negative weight",
        '<queue name="a"><weight>-1</weight></queue>',
        [("root.a", "weight", ADVISORY)],
    ),
    Case("maxAMShare -1 (no limit)", '<queue name="a"><maxAMShare>-1</maxAMShare></queue>'),
    Case(
        "maxAMShare above 1",
        '<queue name="a"><maxAMShare>1.5</maxAMShare></queue>',
        [("root.a", "maxAMShare", ADVISORY)],
    ),
    Case(
        "negative maxRunningApps",
        '<queue name="a"><maxRunningApps>-2</maxRunningApps></queue>',
        [("root.a", "maxRunningApps", ADVISORY)],
    ),
    Case(
        "negative user maxRunningApps",
        '<user name="bob"><maxRunningApps>-1</maxRunningApps></user><queue name="a"/>',
        [("user bob", "maxRunningApps", ADVISORY)],
    ),
    Case(
        "minResources above maxResources",
        '<queue name="a"><minResources>memory-mb=4096, vcores=4</minResources>'
        "<maxResources>2048 mb, 8 vcores</maxResources></queue>",
        [("root.a", "minResources", ADVISORY)],
    ),
    # ---- QueuePlacementPolicy
    Case("specified then default", policy(SPECIFIED_DEFAULT)),
    Case("empty placement policy", policy(""), [("", "queuePlacementPolicy", REFUSED)]),
    Case("unknown rule", policy('<rule name="team"/>'), [("", "queuePlacementPolicy", REFUSED)]),
    Case("rule without a name", policy("<rule/>"), [("", "queuePlacementPolicy", REFUSED)]),
    Case(
        "nestedUserQueue without a parent rule",
        policy('<rule name="nestedUserQueue"/><rule name="default"/>'),
        [("", "queuePlacementPolicy", REFUSED)],
    ),
    Case(
        "reject as a parent rule",
        policy('<rule name="nestedUserQueue"><rule name="reject"/></rule><rule name="default"/>'),
        [("", "queuePlacementPolicy", REFUSED)],
    ),
    Case(
        "a rule after a terminal one",
        policy('<rule name="default"/><rule name="specified"/>'),
        [("", "queuePlacementPolicy", REFUSED)],
    ),
    Case(
        "a last rule that may not place",
        policy('<rule name="specified"/><rule name="user" create="false"/>'),
        [("", "queuePlacementPolicy", REFUSED)],
    ),
    Case(
        "nested user queue under an existing group queue",
        policy(
            '<rule name="nestedUserQueue"><rule name="secondaryGroupExistingQueue"/></rule>'
            '<rule name="reject"/>'
        ),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_fair_rules(case: Case) -> None:
    issues = validate(fair(case.body))
    found = sorted((i.queue, i.prop, enforcement_of(i)) for i in issues)
    assert found == sorted(case.expected), [str(i) for i in issues]
    for issue in issues:
        where = ".".join(p for p in (issue.queue, issue.prop) if p)
        assert str(issue).startswith(where + ": ")


@pytest.mark.parametrize("name", ["fair-scheduler.xml", "fair-scheduler-explicit-root.xml"])
def test_fixture_allocation_files_are_valid(name: str) -> None:
    assert validate(read_fair(FIXTURES / name).config) == []
