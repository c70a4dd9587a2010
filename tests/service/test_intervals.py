"""The likely range of a prediction, calibrated on the predictions already checked on
their own jobs (issue 29, item 2): wide until outcomes exist, then where outcomes
have fallen, covering about the share it states; the ledger that checks every
round's prediction for the configuration that ran its jobs."""

from __future__ import annotations

import math
import random

import pytest

from tests.service.factories import demo_file, with_capacities
from yarn_adapt.model import SchedulerConfig
from yarn_adapt.service.backend import FinishedJob
from yarn_adapt.service.proposers.intervals import (
    LEVEL,
    MIN_CHECKED,
    PRIOR_SIGMA,
    Calibration,
    PredictionLedger,
    RoundPrediction,
    log_ratio_spread,
    normal_quantile,
    t_quantile,
)
from yarn_adapt.yarn.confxml import read_capacity


def demo_config() -> SchedulerConfig:
    return read_capacity(demo_file()).config


def test_before_any_check_the_range_is_a_wide_prior() -> None:
    low, high = Calibration().range_of(100.0) or (0.0, 0.0)
    half = normal_quantile(0.9) * PRIOR_SIGMA
    assert (low, high) == (
        pytest.approx(100 * math.exp(-half)),
        pytest.approx(100 * math.exp(half)),
    )
    assert high / low > 2  # never the ±1 % a model of task times alone gave
    # a model that measured itself wider widens the prior further
    wider = Calibration(prior_sigma=0.8).range_of(100.0)
    assert wider is not None and wider[1] > high
    assert "prior" in Calibration().describe()
    assert Calibration().range_of(math.inf) is None


def test_with_checks_the_range_is_where_outcomes_fell() -> None:
    # predictions have run 30 % short, give or take 5 %
    ratios = tuple(math.log(1.3) + e for e in (-0.05, 0.0, 0.05, -0.02, 0.02, 0.0))
    calibration = Calibration(ratios)
    assert calibration.calibrated and "calibrated on the last 6" in calibration.describe()
    bounds = calibration.range_of(100.0)
    assert bounds is not None
    low, high = bounds
    assert 115 < low < 130 < high < 145  # it need not hold the prediction: it says so
    n = len(ratios)
    mean = sum(ratios) / n
    sd = math.sqrt(sum((r - mean) ** 2 for r in ratios) / (n - 1))
    half = t_quantile(0.9, n - 1) * sd * math.sqrt(1 + 1 / n)
    assert high == pytest.approx(100 * math.exp(mean + half))
    assert not Calibration(ratios[: MIN_CHECKED - 1]).calibrated


@pytest.mark.parametrize(
    ("p", "degrees", "exact"), [(0.9, 2, 1.886), (0.9, 5, 1.476), (0.9, 30, 1.310)]
)
def test_students_quantile_is_close(p: float, degrees: int, exact: float) -> None:
    assert t_quantile(p, degrees) == pytest.approx(exact, rel=0.025)


@pytest.mark.parametrize("spread", [0.1, 0.4])
def test_the_stated_share_of_outcomes_falls_inside(spread: float) -> None:
    """Outcomes off by a log-normal factor (a bias and a spread the calibration does
    not know): each range stated from the checks before it holds about 80 %."""
    rng = random.Random(7)
    ratios: list[float] = []
    inside = judged = 0
    for _ in range(3000):
        bounds = Calibration(tuple(ratios)).range_of(100.0)
        assert bounds is not None
        outcome = 100.0 * math.exp(rng.gauss(0.2, spread))
        if len(ratios) >= MIN_CHECKED:
            judged += 1
            inside += bounds[0] <= outcome <= bounds[1]
        ratios.append(math.log(outcome / 100.0))
    assert abs(inside / judged - LEVEL) < 0.03


def _job(job_id: str, submitted_s: float, finished_s: float) -> FinishedJob:
    return FinishedJob(job_id, "q1", int(submitted_s * 1000), int(finished_s * 1000))


def test_the_ledger_checks_the_prediction_for_the_configuration_that_ran() -> None:
    current = demo_config()
    proposed = with_capacities(current, q1=70.0, q2=30.0)
    ledger = PredictionLedger()
    ledger.record(
        [
            RoundPrediction(100.0, "root", ("a", "b"), 90.0, 60.0, (80.0, 100.0), (50.0, 65.0),
                            proposed),
            RoundPrediction(100.0, "root.other", ("c",), 40.0, 40.0, (30.0, 50.0), (30.0, 50.0)),
        ]
    )  # fmt: skip
    # the same round (a second suggestion): nothing is settled yet
    assert ledger.observe([_job("a", 0.0, 50.0)], current, 100.0) == []
    # the next round finds the proposed configuration running
    assert ledger.observe([_job("c", 90.0, 150.0)], proposed, 160.0)[0].config == "running"
    [checked] = ledger.observe([_job("b", 10.0, 80.0)], proposed, 220.0)
    assert (checked.config, checked.predicted_s, checked.realised_s) == ("proposed", 60.0, 60.0)
    assert (checked.low_s, checked.high_s, checked.inside) == (50.0, 65.0, True)
    assert ledger.coverage() == (1, 2)  # root.other's 60 s fell outside 30-50 s
    assert ledger.open_predictions == 0
    assert len(ledger.calibration().log_ratios) == 2


def test_a_proposal_left_unapplied_is_checked_as_the_running_configuration() -> None:
    current = demo_config()
    ledger = PredictionLedger()
    proposed = with_capacities(current, q1=70.0, q2=30.0)
    ledger.record([RoundPrediction(0.0, "root", ("a",), 90.0, 60.0, (80.0, 100.0), None, proposed)])
    [checked] = ledger.observe([_job("a", 0.0, 95.0)], current, 60.0)
    assert checked.config == "running" and checked.predicted_s == 90.0 and checked.inside


def test_the_spread_of_checked_log_ratios_is_reported_over_every_run() -> None:
    found = log_ratio_spread([(0.1, -0.1), (0.3,), ()])
    assert found["prediction_log_error_mean_ratio"] == pytest.approx(0.1, abs=1e-3)
    assert found["prediction_log_error_sd_ratio"] == pytest.approx(0.2, abs=1e-3)
    too_few = log_ratio_spread([(0.2,)])
    assert too_few == {
        "prediction_log_error_mean_ratio": 0.2,
        "prediction_log_error_sd_ratio": None,
    }
