"""Differences per queue and property, and how an operator reads them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.schedconf.factories import FIXTURES, capacity, fair
from yarn_adapt.model import FairQueue, parse_fair_resources
from yarn_adapt.yarn.confxml import ChangeKind, ConfigChange, diff_configs, read_fair, render_diff

SET, UNSET, CHANGED = ChangeKind.SET, ChangeKind.UNSET, ChangeKind.CHANGED


def test_same_meaning_is_no_change() -> None:
    old = capacity({"root.a.capacity": "50.0", "root.a.maximum-capacity": "-1"})
    new = capacity({"root.a.capacity": "50", "root.a.maximum-capacity": "100"})
    assert diff_configs(old, new) == []
    assert render_diff([]) == "no changes"


def test_capacity_changes_per_queue_and_property() -> None:
    old = capacity(
        {
            "root.queues": "a,b,c",
            "root.c.capacity": "0",
            "maximum-applications": "100",
            "root.a.user-limit-factor": "2",
            "root.c.acl_submit_applications": "bob",
        }
    )
    new = capacity(
        {
            "root.queues": "a,b,d",
            "root.a.capacity": "30",
            "root.d.capacity": "20",
            "root.d.state": "STOPPED",
            "node-locality-delay": "-1",
        }
    )
    assert diff_configs(old, new) == [
        ConfigChange(SET, "", "yarn.scheduler.capacity.node-locality-delay", None, "-1"),
        ConfigChange(UNSET, "", "yarn.scheduler.capacity.maximum-applications", "100", None),
        ConfigChange(CHANGED, "root.a", "capacity", "50", "30"),
        ConfigChange(UNSET, "root.a", "user-limit-factor", "2", None),
        ConfigChange(ChangeKind.QUEUE_REMOVED, "root.c", ""),
        ConfigChange(ChangeKind.QUEUE_ADDED, "root.d", ""),
        ConfigChange(SET, "root.d", "capacity", None, "20"),
        ConfigChange(SET, "root.d", "state", None, "STOPPED"),
    ]


def test_rendering_is_one_aligned_line_per_change() -> None:
    old = capacity({"root.a.acl_submit_applications": "alice"})
    new = capacity(
        {"root.a.capacity": "40", "root.b.capacity": "60", "root.a.acl_submit_applications": " "}
    )
    text = render_diff(diff_configs(old, new))
    assert text.splitlines() == [
        "~ root.a  capacity                 50 -> 40",
        "~ root.a  acl_submit_applications  alice -> ' '",
        "~ root.b  capacity                 50 -> 60",
    ]


def test_fair_changes_compare_resources_by_amount() -> None:
    old = read_fair(FIXTURES / "fair-scheduler.xml").config
    batch = old.find("root.eng.batch")
    assert batch is not None
    same = old.with_queue(
        replace(batch, min_resources=parse_fair_resources("memory-mb=4096, vcores=4"))
    )
    assert diff_configs(old, same) == []
    changed = old.with_queue(replace(batch, weight=1.0, scheduling_policy=None))
    changed = changed.with_queue(FairQueue("root.users", declared_parent=False))
    assert render_diff(diff_configs(old, changed)).splitlines() == [
        "~ root.eng.batch  weight             2 -> 1",
        "- root.eng.batch  schedulingPolicy   drf (unset)",
        "- root.users      type               parent (unset)",
        "- root.users      maxChildResources  memory-mb=4096, vcores=4 (unset)",
    ]


def test_fair_top_level_changes() -> None:
    old = fair(
        '<queue name="a"/><queuePlacementPolicy><rule name="default"/></queuePlacementPolicy>',
        '<user name="bob"><maxRunningApps>2</maxRunningApps></user>',
    )
    new = fair(
        '<queue name="a"/>',
        '<user name="bob"><maxRunningApps>4</maxRunningApps></user>'
        "<queueMaxAppsDefault>9</queueMaxAppsDefault>",
    )
    assert diff_configs(old, new) == [
        ConfigChange(SET, "", "queueMaxAppsDefault", None, "9"),
        ConfigChange(CHANGED, "", "user bob maxRunningApps", "2", "4"),
        ConfigChange(UNSET, "", "queuePlacementPolicy", "default", None),
    ]


def test_configs_of_different_schedulers_cannot_be_compared() -> None:
    with pytest.raises(TypeError):
        diff_configs(capacity(), fair('<queue name="a"/>'))


def test_changes_show_values_as_yarn_understands_them() -> None:
    old = capacity({"root.a.maximum-capacity": "-1"})
    new = capacity({"root.a.maximum-capacity": "80"})
    [change] = diff_configs(old, new)
    assert (change.old, change.new) == ("100", "80")  # -1 means 100
