"""The gates: minimum improvement, cooldown per group, change budget per round."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from tests.service.factories import demo_file, with_capacities
from yarn_adapt.service.loop.hysteresis import (
    Verdict,
    changed_groups,
    cooling_groups,
    judge,
    queue_shares,
    share_steps,
)
from yarn_adapt.service.settings import TuningSection
from yarn_adapt.service.state.records import (
    DecisionKind,
    GroupPrediction,
    Suggestion,
    relative_improvement,
)
from yarn_adapt.yarn.confxml import (
    ChangeKind,
    ConfigChange,
    diff_configs,
    load_scheduler_config,
    parse_fair_xml,
)

CURRENT = load_scheduler_config(demo_file())  # root.q1 50 / root.q2 50
GATES = TuningSection(min_improvement=0.05, cooldown_s=600, max_queue_changes=8, max_share_step=30)


def suggestion(q1: float, before: float = 100.0, after: float = 80.0) -> Suggestion:
    config = with_capacities(CURRENT, q1=q1, q2=100 - q1)
    return Suggestion(config, (GroupPrediction("root", before, after),), before, after)


def verdict_for(
    s: Suggestion, cooling: dict[str, float] | None = None, gates: TuningSection = GATES
) -> Verdict:
    changes = diff_configs(CURRENT, s.config)
    return judge(s, changes, CURRENT, cooling or {}, gates)


@pytest.mark.parametrize(
    ("q1", "before", "after", "propose", "auto", "kind", "reason"),
    [
        (50, 100, 80, False, False, DecisionKind.NO_CHANGE, "already runs"),
        (60, 100, 97, False, False, DecisionKind.BELOW_THRESHOLD, r"-3\.0%\) is below the 5%"),
        (60, 100, 90, True, True, None, r"1 m 40 s → 1 m 30 s \(-10\.0%\)"),
        (90, 100, 50, True, False, None, r"root\.q\d share moves 40\.0 points \(budget 30"),
        (60, float("nan"), 50, False, False, DecisionKind.BELOW_THRESHOLD, "below"),
    ],
)
def test_the_gates_in_order(
    q1: float,
    before: float,
    after: float,
    propose: bool,
    auto: bool,
    kind: DecisionKind | None,
    reason: str,
) -> None:
    verdict = verdict_for(suggestion(q1, before, after))
    assert (verdict.propose, verdict.auto_apply, verdict.kind) == (propose, auto, kind)
    assert re.search(reason, verdict.reason), verdict.reason


def test_a_group_in_cooldown_holds_the_proposal_back() -> None:
    verdict = verdict_for(suggestion(60), cooling={"root": 1000.0})
    assert not verdict.propose
    assert verdict.kind is DecisionKind.COOLDOWN
    assert "root changed recently; cooldown 10 m" in verdict.reason


def test_too_many_queue_changes_wait_for_an_operator() -> None:
    gates = replace(GATES, max_queue_changes=1)
    verdict = verdict_for(suggestion(60), gates=gates)
    assert verdict.propose and not verdict.auto_apply
    assert "2 queues change (budget 1 per round)" in verdict.reason


@pytest.mark.parametrize(
    ("last_change", "now", "cooling"),
    [
        ({"root": 100.0}, 650.0, {"root": 700.0}),
        ({"root": 100.0}, 700.0, {}),
        ({"root.a": 0.0, "root.b": 500.0}, 650.0, {"root.b": 1100.0}),
    ],
)
def test_cooling_groups(
    last_change: dict[str, float], now: float, cooling: dict[str, float]
) -> None:
    assert cooling_groups(last_change, now, 600.0) == cooling


def test_changes_belong_to_the_group_of_their_queue() -> None:
    fair = parse_fair_xml(
        "<allocations><queue name='a'><queue name='x'/><queue name='y'/></queue>"
        "<queue name='b'><queue name='z'/><queue name='w'/></queue></allocations>"
    ).config
    changes = diff_configs(fair, fair)
    assert changed_groups(changes, fair) == ()
    touched = [
        ConfigChange(ChangeKind.CHANGED, "root.a.x", "weight", "1", "2"),
        ConfigChange(ChangeKind.CHANGED, "root.b", "weight", "1", "3"),
        ConfigChange(ChangeKind.SET, "", "defaultQueueSchedulingPolicy", None, "fair"),
    ]
    assert changed_groups(touched, fair) == ("root.a", "root.b", "(global)")


def test_fair_shares_are_weights_over_sibling_weights() -> None:
    fair = parse_fair_xml(
        "<allocations><queue name='a'><weight>3</weight></queue>"
        "<queue name='b'><weight>1</weight></queue></allocations>"
    ).config
    assert queue_shares(fair) == {"root.a": 75.0, "root.b": 25.0}
    assert share_steps(CURRENT, with_capacities(CURRENT, q1=65, q2=35)) == {
        "root.q1": 15.0,
        "root.q2": 15.0,
    }


@pytest.mark.parametrize(
    ("before", "after", "improvement"),
    [
        (100.0, 80.0, 0.2),
        (float("inf"), 500.0, 1.0),  # jobs that would starve now finish
        (100.0, float("inf"), -1.0),
        (float("nan"), 80.0, 0.0),
        (float("inf"), float("inf"), 0.0),
    ],
)
def test_relative_improvement(before: float, after: float, improvement: float) -> None:
    assert relative_improvement(before, after) == pytest.approx(improvement)


def test_a_frozen_triggered_group_is_reported_as_cooling_down() -> None:
    unchanged = Suggestion(CURRENT, (), 100.0, 100.0, ("root: frozen",), ("root",))
    verdict = judge(unchanged, [], CURRENT, {"root": 99.0}, GATES)
    assert verdict.kind is DecisionKind.COOLDOWN
