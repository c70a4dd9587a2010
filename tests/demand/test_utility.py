"""Utilities clipped at the SLO: three really different shapes; the metrics."""

from __future__ import annotations

import numpy as np
import pytest

from yarn_adapt.demand.utility import (
    Utility,
    UtilityShape,
    egalitarian_welfare,
    njc_fairness,
    social_welfare,
    useful_usage,
)


@pytest.mark.parametrize(
    ("shape", "at_quarter", "at_slo", "above_slo"),
    [
        (UtilityShape.LINEAR, 0.25, 1.0, 1.0),
        (UtilityShape.QUADRATIC, 0.0625, 1.0, 1.0),
        (UtilityShape.SQRT, 0.5, 1.0, 1.0),
    ],
)
def test_each_shape_below_at_and_above_the_slo(
    shape: UtilityShape, at_quarter: float, at_slo: float, above_slo: float
) -> None:
    utility = Utility(400.0, shape)
    assert utility.of(100.0) == pytest.approx(at_quarter)
    assert utility.of(400.0) == pytest.approx(at_slo)
    assert utility.of(900.0) == pytest.approx(above_slo)
    assert utility.of(-5.0) == 0.0


def test_shapes_order_strictly_between_zero_and_the_slo() -> None:
    performance = np.linspace(0.01, 0.89, 50)
    quadratic = Utility(0.9, UtilityShape.QUADRATIC)(performance)
    linear = Utility(0.9, UtilityShape.LINEAR)(performance)
    root = Utility(0.9, UtilityShape.SQRT)(performance)
    assert np.all(quadratic < linear)
    assert np.all(linear < root)
    for values in (quadratic, linear, root):
        assert np.all(np.diff(values) > 0)


def test_an_slo_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Utility(0.0)


def test_metrics_of_the_fig5_njc_row() -> None:
    utilities = [1.0, 0.5, 25 / 90]
    fair = [1.0, 0.4, 20 / 90]
    assert social_welfare(utilities) == pytest.approx(0.59, abs=0.005)
    assert egalitarian_welfare(utilities) == pytest.approx(0.28, abs=0.005)
    assert njc_fairness(utilities, fair) == 1.0
    assert njc_fairness([0.0, 1.0, 1.0], fair) == 0.0
    assert useful_usage([10, 25, 25], [10, 50, 90], 60) == 1.0
    assert useful_usage([30, 20, 10], [10, 50, 90], 60) == pytest.approx(40 / 60)
