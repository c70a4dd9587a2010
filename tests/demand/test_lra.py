"""The latency-critical applications' demand learner: the allocation and split
rules on table cases, convergence to the true need with coverage at the stated
rate on synthetic feedback, the closed loop with the guard's reservation, the
stated-demand fallback and the warm start."""

from __future__ import annotations

import math

import numpy as np
import pytest

from yarn_adapt.demand.learner import ProfiledCurve
from yarn_adapt.demand.lra import (
    LraDemandLearner,
    LraMode,
    LraRound,
    LraSettings,
    LraSpec,
    NodeCpu,
    fraction_within,
    had_vcores,
    node_shares,
)
from yarn_adapt.demand.model import DemandSource

# A service costing WORK vcore-seconds per request: the fraction of requests within
# target rises from 0 at one request's worth of CPU per request/s to 1, with the
# steepest slope STEEP / WORK (within the learner's default Lipschitz constant).
WORK, STEEP, GOAL = 0.02, 3.0, 0.95
NEED = WORK * (1.0 - math.log(1.0 - GOAL) / STEEP)  # vcores per request/s at the goal


def within_target(x: float) -> float:
    return 1.0 - math.exp(-STEEP * (x / WORK - 1.0)) if x > WORK else 0.0


def shop(**overrides: object) -> LraSpec:
    fields: dict[str, object] = {"name": "shop", "services": ("frontend",), "target_ms": 100.0}
    fields.update(overrides)
    return LraSpec(**fields)  # type: ignore[arg-type]


def daily_load(r: int, noise: float) -> float:
    return 50.0 * (1.0 + 0.3 * math.sin(2.0 * math.pi * r / 96.0)) * (1.0 + noise)


def feed_round(
    learner: LraDemandLearner, rng: np.random.Generator, load: float, had: float
) -> float:
    """One 30 s round: Poisson requests, binomially within target; returns the
    true fraction within target."""
    truth = within_target(had / load)
    requests = int(rng.poisson(load * 30.0))
    learner.observe(LraRound("shop", 30.0, requests, int(rng.binomial(requests, truth)), had))
    return truth


# --------------------------------------------------------------------------- rules


def test_an_application_has_what_it_used_plus_its_share_of_the_idle_cpu() -> None:
    nodes = [
        NodeCpu("n0", capacity=4.0, batch=1.0, applications={"shop": 1.0}),  # 2 idle: all its
        NodeCpu("n1", capacity=4.0, batch=0.0, applications={"shop": 1.0, "ads": 3.0}),
        NodeCpu("n2", capacity=4.0, batch=4.0, applications={"ads": 0.5}),  # not there
    ]
    assert had_vcores("shop", nodes) == pytest.approx(3.0 + 1.0)
    assert had_vcores("ads", nodes) == pytest.approx(3.0 + 0.5)
    # batch using more than its share leaves the application what it used
    assert had_vcores("shop", [NodeCpu("n0", 4.0, 3.5, {"shop": 1.0})]) == pytest.approx(1.0)
    assert had_vcores("none", nodes) == 0.0


def test_demand_splits_by_the_cpu_used_else_over_the_nodes_traced() -> None:
    assert node_shares({"n0": 3.0, "n1": 1.0, "n2": 0.0}) == {"n0": 0.75, "n1": 0.25}
    assert node_shares({}, ["n1", "n0", "n1"]) == {"n0": 0.5, "n1": 0.5}
    assert node_shares({}) == {}


def test_the_fraction_within_target_has_a_standard_error_even_when_all_made_it() -> None:
    fraction, sigma = fraction_within(100, 100)
    assert fraction == 1.0
    assert sigma == pytest.approx(math.sqrt((102 / 104) * (2 / 104) / 104))
    assert fraction_within(100, 90)[0] == 0.9
    assert math.isnan(fraction_within(0, 0)[0])


# --------------------------------------------------------------------------- learning


def test_the_upper_demand_converges_to_the_true_need_with_coverage_at_the_rate() -> None:
    # Feedback from a cluster whose batch churns: the CPU the application had
    # varies from half to 2.5 times its need, the load daily +-30 %. The demand's
    # upper bound at the forecast load must cover the true need there in at least
    # 90 % of independent runs (the stated confidence), and close in on it.
    ratios: dict[int, list[float]] = {30: [], 200: []}
    for seed in range(20):
        rng = np.random.default_rng(seed)
        learner = LraDemandLearner([shop(stated=0.05)])
        noise = 0.0
        for r in range(200):
            noise = 0.7 * noise + rng.normal(0.0, 0.05)
            load = daily_load(r, noise)
            feed_round(learner, rng, load, rng.uniform(0.5, 2.5) * NEED * load)
            if r + 1 in ratios:
                demand = learner.demand("shop")
                assert demand is not None and demand.source is DemandSource.LEARNED
                assert demand.lower <= demand.estimate <= demand.upper
                ratios[r + 1].append(demand.upper / (NEED * demand.load))
    early, late = np.array(ratios[30]), np.array(ratios[200])
    assert np.mean(late >= 1.0) >= 0.9
    assert np.median(late) < np.median(early)
    assert np.median(late) < 1.1


def closed_loop(reserve: str, seed: int, rounds: int = 150) -> tuple[list[float], list[float]]:
    """The guard's loop: the application has what the guard reserves for it
    (batch takes the rest of an 8-vcore node). Returns per round the reservation
    over the true need at that round's load, and the true fraction within target."""
    rng = np.random.default_rng(seed)
    learner = LraDemandLearner([shop()])
    reserved, noise = 8.0, 0.0
    over, met = [], []
    for r in range(rounds):
        noise = 0.7 * noise + rng.normal(0.0, 0.05)
        load = daily_load(r, noise)
        met.append(feed_round(learner, rng, load, reserved))
        over.append(reserved / (NEED * load))
        demand = learner.demand("shop")
        assert demand is not None
        reserved = min(8.0, demand.upper if reserve == "upper" else demand.estimate)
    return over, met


def test_in_the_guards_loop_the_recommendation_converges_and_the_upper_bound_is_safe() -> None:
    # Reserving eq. 6's recommendation explores below the bound: within 150 rounds
    # the reservation is within 25 % of the need, the SLO missed in few rounds.
    # Reserving the upper bound never misses it, but learns only from loads above
    # their forecast, so it stays far above the need.
    for seed in range(3):
        over, met = closed_loop("recommendation", seed)
        assert np.median(over[-50:]) < 1.25
        assert np.mean(np.array(met) < GOAL) < 0.1
        over, met = closed_loop("upper", seed)
        assert min(met[1:]) >= GOAL
        assert np.median(over[-50:]) > 1.5


# --------------------------------------------------------------------------- fallbacks


def test_without_feedback_the_stated_demand_times_the_forecast_load_is_used() -> None:
    learner = LraDemandLearner(
        [shop(target_ms=None, stated=0.05), shop(name="ads", target_ms=None, stated=None)]
    )
    assert learner.demand("shop") is None  # no load seen yet
    for _ in range(5):
        learner.observe(LraRound("shop", 30.0, 1500, 0, 4.0))  # no target: no learning
        learner.observe(LraRound("ads", 30.0, 1500, 0, 4.0))
    demand = learner.demand("shop")
    assert demand is not None and demand.source is DemandSource.STATED
    assert demand.load >= 50.0
    assert demand.upper == demand.lower == demand.estimate == pytest.approx(0.05 * demand.load)
    assert learner.demand("ads") is None  # no target, nothing stated: nothing known
    assert [d.application for d in learner.snapshot(1).demands] == ["shop"]


def test_stated_mode_uses_the_stated_demand_even_with_feedback() -> None:
    learner = LraDemandLearner([shop(stated=0.05)], LraSettings(mode=LraMode.STATED))
    for _ in range(5):
        learner.observe(LraRound("shop", 30.0, 1500, 1500, 4.0))
    demand = learner.demand("shop")
    assert demand is not None and demand.source is DemandSource.STATED
    assert demand.upper == pytest.approx(0.05 * demand.load)


def test_too_few_requests_teach_the_forecaster_not_the_learner() -> None:
    learner = LraDemandLearner([shop()], LraSettings(min_requests=50))
    learner.observe(LraRound("shop", 30.0, 10, 10, 4.0))
    assert learner.learner("shop") is None
    assert learner.demand("shop") is None


def test_a_warm_start_gives_a_profiled_demand_before_any_feedback() -> None:
    grid = np.linspace(0.0, 0.16, 81)
    truth = np.array([within_target(x) for x in grid])
    curve = ProfiledCurve.of(grid, truth, np.clip(truth - 0.02, 0, 1), np.clip(truth + 0.02, 0, 1))
    learner = LraDemandLearner([shop(warm_start=curve)])
    learner.observe(LraRound("shop", 30.0, 10, 10, 4.0))  # a load, too few requests to learn
    demand = learner.demand("shop")
    assert demand is not None and demand.source is DemandSource.PROFILED
    assert NEED * demand.load <= demand.upper <= 1.3 * NEED * demand.load


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: shop(services=()), "at least one service"),
        (lambda: shop(target_ms=-1.0), "latency target"),
        (lambda: shop(percentile=100.0), "percentile"),
        (lambda: shop(stated=0.0), "stated demand"),
        (lambda: LraSettings(range_factor=1.0), "range_factor"),
        (lambda: LraDemandLearner([shop(), shop()]), "unique"),
    ],
)
def test_impossible_settings_are_refused(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()  # type: ignore[operator]
