"""YARN queues as tenants: the feedback of one interval, allocations to and from
scheduler configurations, the [cilantro] settings."""

from __future__ import annotations

import pytest

from tests.service.factories import settings_for
from yarn_adapt.demand.queues import AppOutcome, configure, leaf_units, queue_rounds
from yarn_adapt.demand.utility import QueueObjective, UtilityShape
from yarn_adapt.errors import SettingsError
from yarn_adapt.service.cilantro_settings import CilantroSection, queue_objectives
from yarn_adapt.service.demo.replay import demo_scheduler_file
from yarn_adapt.service.loop.hysteresis import queue_shares
from yarn_adapt.yarn.confxml import load_scheduler_config, validate, yarn_refuses

OBJECTIVES = {
    "root.q1": QueueObjective("root.q1", latency_s=60.0),
    "root.q2": QueueObjective("root.q2", latency_s=10.0),
}


def test_each_application_counts_once_when_its_outcome_is_decided() -> None:
    s = 1000
    outcomes = [
        AppOutcome("q1", 100 * s, 150 * s),  # met at 150
        AppOutcome("q1", 110 * s, 200 * s),  # late: decided (missed) at 170
        AppOutcome("root.q1", 130 * s, None),  # still running: missed at 190
        AppOutcome("q1", 150 * s, None),  # deadline 210: not decided yet
        AppOutcome("q1", 50 * s, 90 * s),  # decided before the window
        AppOutcome("q2", 195 * s, 198 * s),  # met
        AppOutcome("other", 120 * s, 130 * s),  # not a managed queue
    ]
    rounds = queue_rounds(outcomes, OBJECTIVES, 100 * s, 200 * s)
    q1, q2 = rounds["root.q1"], rounds["root.q2"]
    assert (q1.arrivals, q1.decided, q1.met) == (3, 3, 1)  # submitted at 110, 130, 150
    assert q1.performance == pytest.approx(1 / 3)
    assert (q2.arrivals, q2.decided, q2.met) == (1, 1, 1)
    assert 0 < q2.sigma < 0.5
    later = queue_rounds(outcomes, OBJECTIVES, 200 * s, 300 * s)["root.q1"]
    assert (later.arrivals, later.decided, later.met) == (0, 1, 0)  # the one due at 210


@pytest.mark.parametrize("scheduler", ["capacity", "fair"])
def test_an_allocation_becomes_valid_queue_shares(scheduler: str) -> None:
    config = load_scheduler_config(demo_scheduler_file(scheduler))
    assert leaf_units(config, 100) == pytest.approx({"root.q1": 50.0, "root.q2": 50.0})
    proposed, settings = configure(config, {"root.q1": 70, "root.q2": 30})
    assert not yarn_refuses(validate(proposed, config))
    shares = queue_shares(proposed)
    assert shares["root.q1"] == pytest.approx(70.0)
    assert shares["root.q2"] == pytest.approx(30.0)
    assert leaf_units(proposed, 100) == pytest.approx({"root.q1": 70.0, "root.q2": 30.0})
    assert settings["root"].describe()


def test_queue_objectives_from_defaults_and_overrides() -> None:
    section = CilantroSection(
        latency_s=300.0,
        queues=(
            "root.q2 latency_s=30 utility=quadratic",
            "q1 fraction=0.99",
            "root.q3 demand_vcores=12 utility=sqrt",
        ),
    )
    objectives = queue_objectives(section, ("root.q1", "root.q2", "root.q3"))
    assert objectives["root.q1"] == QueueObjective("root.q1", 300.0, 0.99, UtilityShape.LINEAR)
    assert objectives["root.q2"] == QueueObjective("root.q2", 30.0, 0.9, UtilityShape.QUADRATIC)
    stated = objectives["root.q3"]
    assert stated.stated_vcores == 12.0
    assert stated.utility.shape is UtilityShape.LINEAR  # §5: linear up to a stated demand


@pytest.mark.parametrize(
    ("tables", "message"),
    [
        (
            {"tuning": {"proposer": "magic"}},
            "[tuning] proposer: 'magic' adaptiveconfig or cilantro",
        ),
        ({"cilantro": {"policy": "max"}}, "[cilantro] policy: 'max' one of njc, sw, ew"),
        ({"cilantro": {"fraction": 1.5}}, "[cilantro] fraction: 1.5 in (0, 1]"),
        (
            {"cilantro": {"utility": "cubic"}},
            "[cilantro] utility: 'cubic' linear, quadratic or sqrt",
        ),
        (
            {"cilantro": {"queues": ["root.a speed=3"]}},
            "expected latency_s=, fraction=, utility= or demand_vcores=",
        ),
        ({"cilantro": {"queues": ["root.a demand_vcores=0"]}}, "demand_vcores must be positive"),
        ({"cilantro": {"queues": ["root.a fraction=2"]}}, "fraction in (0, 1]"),
        ({"cilantro": {"queues": ["root.a utility=cubic"]}}, "'cubic' is not a valid UtilityShape"),
    ],
)
def test_bad_cilantro_settings_are_one_line_errors(
    tmp_path: object, tables: dict[str, dict[str, object]], message: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        settings_for(tmp_path, **tables)  # type: ignore[arg-type]
    text = str(caught.value)
    assert "\n" not in text and text.startswith("test.toml: ")
    assert message in text
