"""The verification rules, on real /scheduler answers recorded from Hadoop 3.4.3."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from yarn_adapt.minicluster import DEFAULT_CAPACITY_XML, DEFAULT_FAIR_XML
from yarn_adapt.model import (
    CapacitySchedulerConfig,
    FairSchedulerConfig,
    Percentage,
    QueueState,
    SchedulerStatus,
)
from yarn_adapt.yarn.apply import mismatches
from yarn_adapt.yarn.confxml import parse_capacity_xml, parse_fair_xml
from yarn_adapt.yarn.parse import parse_scheduler

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "rm"


def recorded_status(name: str) -> SchedulerStatus:
    return parse_scheduler(json.loads((RECORDED / name).read_text()), name)


def baseline_capacity() -> CapacitySchedulerConfig:
    return parse_capacity_xml(DEFAULT_CAPACITY_XML).config


def baseline_fair() -> FairSchedulerConfig:
    return parse_fair_xml(DEFAULT_FAIR_XML).config


def with_capacity(config: CapacitySchedulerConfig, **percent: float) -> CapacitySchedulerConfig:
    for name, value in percent.items():
        queue = config.find(f"root.{name}")
        assert queue is not None
        config = config.with_queue(replace(queue, capacity=Percentage(value)))
    return config


def test_the_config_the_rm_runs_has_no_mismatch() -> None:
    assert mismatches(baseline_capacity(), recorded_status("capacity-scheduler.json")) == []
    assert mismatches(baseline_capacity(), recorded_status("capacity-scheduler-idle.json")) == []


def test_changed_capacities_are_named_with_queue_and_both_values() -> None:
    changed = with_capacity(baseline_capacity(), default=20, a=50)
    problems = mismatches(changed, recorded_status("capacity-scheduler-idle.json"))
    assert "root.default capacity: RM reports 40.0, expected 20.0" in problems
    assert "root.a capacity: RM reports 30.0, expected 50.0" in problems
    assert len(problems) == 2


@pytest.mark.parametrize(
    ("field", "value", "expected_text"),
    [
        ("user_limit_factor", 2.0, "root.a user_limit_factor: RM reports 1.0, expected 2.0"),
        ("ordering_policy", "fair", "root.a ordering_policy: RM reports fifo, expected fair"),
        (
            "maximum_am_resource_percent",
            0.2,
            "root.a maximum_am_resource_percent: RM reports 0.5, expected 0.2",
        ),
        (
            "minimum_user_limit_percent",
            50.0,
            "root.a minimum_user_limit_percent: RM reports 100.0, expected 50.0",
        ),
        ("state", QueueState.STOPPED, "root.a state: RM reports RUNNING, expected frozenset"),
    ],
)
def test_each_leaf_property_is_checked(field: str, value: object, expected_text: str) -> None:
    config = baseline_capacity()
    queue = config.find("root.a")
    assert queue is not None
    problems = mismatches(
        config.with_queue(replace(queue, **{field: value})),
        recorded_status("capacity-scheduler-idle.json"),
    )
    assert len(problems) == 1
    assert problems[0].startswith(expected_text)


def test_a_removed_queue_still_reported_is_a_mismatch() -> None:
    config = baseline_capacity()
    b_removed = replace(
        config.root, children=tuple(c for c in config.root.children if c.name != "b")
    )
    config = replace(config, root=b_removed)
    config = with_capacity(config, default=40, a=60)
    problems = mismatches(config, recorded_status("capacity-scheduler-idle.json"))
    assert "root.b: RM still reports a queue the config removed" in problems


def test_scheduler_kind_must_match() -> None:
    problems = mismatches(baseline_fair(), recorded_status("capacity-scheduler-idle.json"))
    assert problems == ["RM runs the capacityScheduler scheduler, the config is for the fair one"]


def test_fair_baseline_matches_and_weights_are_checked_through_steady_shares() -> None:
    status = recorded_status("fair-scheduler-idle.json")
    assert mismatches(baseline_fair(), status) == []
    config = baseline_fair()
    queue = config.find("root.a")
    assert queue is not None
    heavier = config.with_queue(replace(queue, weight=3.0))
    problems = mismatches(heavier, status)
    assert (
        "root.a weight: steady fair share is 33.3% of its parent's, weight 3 needs 60.0%"
        in problems
    )


def test_fair_policy_is_checked() -> None:
    config = baseline_fair()
    queue = config.find("root.b")
    assert queue is not None
    problems = mismatches(
        config.with_queue(replace(queue, scheduling_policy="drf")),
        recorded_status("fair-scheduler-idle.json"),
    )
    assert problems == ["root.b scheduling_policy: RM reports fair, expected drf"]
