"""The ARMA(1,1) load forecaster: estimates and interval coverage."""

from __future__ import annotations

import numpy as np
import pytest

from yarn_adapt.demand.forecast import ArmaForecaster, hannan_rissanen


def arma_series(
    n: int, seed: int, constant: float = 10.0, phi: float = 0.8, theta: float = 0.4
) -> np.ndarray:
    rng = np.random.default_rng(seed)
    noise = rng.normal(0.0, 2.0, n)
    series = np.empty(n)
    series[0] = constant / (1 - phi)
    for t in range(1, n):
        series[t] = constant + phi * series[t - 1] + noise[t] + theta * noise[t - 1]
    return series


def test_hannan_rissanen_recovers_the_parameters() -> None:
    fitted = hannan_rissanen(arma_series(4000, seed=1))
    assert fitted.phi == pytest.approx(0.8, abs=0.05)
    assert fitted.theta == pytest.approx(0.4, abs=0.08)
    assert fitted.sigma2 == pytest.approx(4.0, rel=0.15)
    assert fitted.constant / (1 - fitted.phi) == pytest.approx(50.0, rel=0.05)


def test_the_one_step_interval_covers_at_its_confidence() -> None:
    inside = total = 0
    forecaster = ArmaForecaster(confidence=0.9)
    for value in arma_series(3000, seed=2):
        forecast = forecaster.forecast()
        if forecast is not None and forecaster.parameters is not None:
            total += 1
            inside += forecast.lower <= value <= forecast.upper
        forecaster.observe(float(value))
    assert 0.86 <= inside / total <= 0.94


def test_the_upper_end_grows_with_the_horizon_and_confidence() -> None:
    series = arma_series(400, seed=3)
    narrow, wide = ArmaForecaster(confidence=0.5), ArmaForecaster(confidence=0.99)
    for value in series:
        narrow.observe(float(value))
        wide.observe(float(value))
    one, five = narrow.forecast(1), narrow.forecast(5)
    assert one is not None and five is not None
    assert five.upper - five.mean > one.upper - one.mean
    assert wide.forecast(1).upper > one.upper  # type: ignore[union-attr]


def test_no_history_no_forecast_then_a_naive_one() -> None:
    forecaster = ArmaForecaster(min_history=12)
    assert forecaster.forecast() is None
    for value in (10.0, 12.0, 14.0):
        forecaster.observe(value)
    naive = forecaster.forecast()
    assert naive is not None and forecaster.parameters is None
    assert naive.mean == pytest.approx(12.0)
    assert naive.lower < 12.0 < naive.upper
