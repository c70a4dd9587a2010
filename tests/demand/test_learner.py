"""The monotone binned learner: coverage at the stated rate, monotone bands,
convergence; demand bounds; warm start; the stated-demand fallback."""

from __future__ import annotations

import numpy as np
import pytest

from yarn_adapt.demand.learner import (
    LearnerSettings,
    MonotoneLearner,
    ProfiledCurve,
    StatedDemand,
    demand_bounds,
)


def true_curve(x: np.ndarray) -> np.ndarray:
    """Appendix A.5's synthetic performance: a logistic in allocation per load."""
    return 1.0 / (1.0 + np.exp(-(x - 2.0) * 2.0))


SLOPE = 0.5  # the logistic's steepest slope (2 / 4)
GRID = np.linspace(0.0, 4.0, 161)


def trained(rounds: int, seed: int, sigma: float = 0.2, confidence: float = 0.9) -> MonotoneLearner:
    rng = np.random.default_rng(seed)
    learner = MonotoneLearner(
        LearnerSettings(x_max=4.0, lipschitz=SLOPE, ceiling=1.0, confidence=confidence)
    )
    xs = rng.uniform(0.0, 4.0, rounds)
    learner.observe_many(
        xs, true_curve(xs) + rng.normal(0.0, sigma, rounds), np.full(rounds, sigma)
    )
    return learner


def covers(learner: MonotoneLearner) -> bool:
    band = learner.band(GRID)
    truth = true_curve(GRID)
    return bool(np.all(band.lower <= truth + 1e-12) and np.all(truth <= band.upper + 1e-12))


def test_the_whole_band_covers_the_true_curve_at_the_stated_rate() -> None:
    # Appendix A.5's noise (Gaussian, sd 0.2). The band is simultaneous, so the
    # whole curve must be inside it in at least 90 % of independent runs.
    runs = [covers(trained(300, seed)) for seed in range(60)]
    assert np.mean(runs) >= 0.9


def test_a_wrong_lipschitz_constant_breaks_coverage() -> None:
    # The rate is earned by the assumptions: a learner told the curve is ten
    # times flatter than it is misses it in most runs.
    rng = np.random.default_rng(7)
    misses = 0
    for _ in range(20):
        learner = MonotoneLearner(LearnerSettings(x_max=4.0, lipschitz=SLOPE / 10, ceiling=1.0))
        xs = rng.uniform(0.0, 4.0, 40)
        learner.observe_many(xs, true_curve(xs) + rng.normal(0, 0.01, 40), np.full(40, 0.01))
        misses += not covers(learner)
    assert misses >= 10


def test_bands_are_monotone_even_from_non_monotone_noise() -> None:
    for seed in range(10):
        band = trained(80, seed, sigma=0.4).band(GRID)
        assert np.all(np.diff(band.lower) >= -1e-12)
        assert np.all(np.diff(band.upper) >= -1e-12)
        assert np.all(band.lower <= band.upper)
        assert np.all((band.lower >= 0.0) & (band.upper <= 1.0))


def test_the_band_narrows_and_the_estimate_converges_as_rounds_grow() -> None:
    widths, errors = [], []
    for rounds in (30, 300, 3000):
        learners = [trained(rounds, seed) for seed in range(5)]
        widths.append(
            np.mean([np.mean(lr.band(GRID).upper - lr.band(GRID).lower) for lr in learners])
        )
        errors.append(
            np.mean([np.max(np.abs(lr.band(GRID).estimate - true_curve(GRID))) for lr in learners])
        )
    assert widths[1] < 0.7 * widths[0]
    assert widths[2] < 0.6 * widths[1]
    assert errors[2] < errors[0]
    assert errors[2] < 0.12


def test_before_any_feedback_the_band_is_the_known_range() -> None:
    learner = MonotoneLearner(LearnerSettings(x_max=4.0, lipschitz=1.0, ceiling=1.0))
    band = learner.band(GRID)
    assert np.all(band.lower == 0.0)
    assert np.all(band.upper == 1.0)


def test_useless_feedback_is_ignored() -> None:
    learner = MonotoneLearner(LearnerSettings(x_max=4.0, lipschitz=1.0))
    for x, y, sigma in ((-1.0, 0.5, 0.1), (1.0, float("nan"), 0.1), (1.0, 0.5, 0.0)):
        learner.observe(x, y, sigma)
    assert learner.observations == 0
    learner.observe(0.0, 0.1, 0.1)  # no allocation at all is informative
    assert learner.observations == 1


def test_feedback_beyond_the_range_caps_the_upper_bound() -> None:
    learner = MonotoneLearner(LearnerSettings(x_max=4.0, lipschitz=1.0))
    for _ in range(50):
        learner.observe(9.0, 0.3, 0.05)
    assert float(learner.band(3.0).upper) < 0.4
    assert float(learner.band(3.0).lower) == 0.0


def test_demand_bounds_bracket_the_true_demand_and_shrink() -> None:
    goal = 0.7
    true_demand = 2.0 + np.log(goal / (1 - goal)) / 2.0
    widths = []
    for rounds in (200, 8000):
        bounds = demand_bounds(trained(rounds, seed=3), goal)
        assert bounds.lower <= true_demand <= bounds.upper
        assert bounds.lower <= bounds.explore <= bounds.upper
        assert bounds.lower <= bounds.recommendation(0.75) <= bounds.upper
        widths.append(bounds.upper - bounds.lower)
    assert widths[1] < 0.5 * widths[0]


def test_a_warm_start_from_a_profile_narrows_the_band() -> None:
    cold = MonotoneLearner(LearnerSettings(x_max=4.0, lipschitz=SLOPE, ceiling=1.0))
    warm = MonotoneLearner(LearnerSettings(x_max=4.0, lipschitz=SLOPE, ceiling=1.0))
    grid = np.linspace(0.0, 4.0, 200)
    warm.warm_start(
        ProfiledCurve.of(grid, true_curve(grid), true_curve(grid) - 0.1, true_curve(grid) + 0.1)
    )
    width = lambda lr: float(np.mean(lr.band(GRID).upper - lr.band(GRID).lower))  # noqa: E731
    assert width(warm) < 0.5 * width(cold)
    assert covers(warm)


def test_a_stated_demand_means_utility_linear_up_to_it() -> None:
    fallback = StatedDemand(unit_demand=2.5, slo=0.95)
    band = fallback.band(np.array([0.0, 1.25, 2.5, 5.0]))
    assert band.estimate.tolist() == pytest.approx([0.0, 0.475, 0.95, 0.95])
    assert demand_bounds(fallback, 0.95).upper == pytest.approx(2.5, abs=0.02)


def test_a_profiled_curve_must_not_decrease() -> None:
    with pytest.raises(ValueError, match="non-decreasing"):
        ProfiledCurve.of([0.0, 1.0, 2.0], [0.1, 0.5, 0.4])
