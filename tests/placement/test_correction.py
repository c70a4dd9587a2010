"""Online profile correction: the monitors' measurements repair a badly completed
profile, and placers use the repaired one."""

from __future__ import annotations

import numpy as np
import pytest

from tests.placement.factories import cluster
from yarn_adapt.errors import InputError
from yarn_adapt.placement.correction import CorrectionSettings, LiveProfiles, fit_tolerance
from yarn_adapt.placement.experiment import Scenario, prepare, run_policy
from yarn_adapt.placement.profiles import InterferenceProfile, ProfileBook
from yarn_adapt.placement.tarcil import TarcilPlacer

# true: tolerates little LLC pressure, causes no disk pressure
TRUE = InterferenceProfile((0.76, 0.77, 0.91, 0.07, 0.35), (0.67, 0.91, 0.83, 0.07, 0.37))
# as three probes and collaborative filtering left it: LLC tolerance far too high,
# disk pressure 0.6 too high (the bench's worst completed class, c07 at seed 1)
COMPLETED = InterferenceProfile(
    (0.78, 0.86, 0.50, 0.57, 0.54), (0.68, 0.92, 0.91, 0.67, 0.66), "completed"
)


def _observations(
    rng: np.random.Generator, count: int, high: float
) -> tuple[np.ndarray, np.ndarray]:
    contention = rng.uniform(0.0, high, (count, 5))
    overshoot = np.maximum(contention - np.array(TRUE.tolerance), 0.0).sum(axis=1)
    return contention, 1.0 / (1.0 + overshoot)


@pytest.mark.parametrize("high", [0.3, 0.5])
def test_slowdowns_pull_an_overrated_tolerance_down(high: float) -> None:
    rng = np.random.default_rng(0)
    contention, speed = _observations(rng, 300, high)
    settings = CorrectionSettings(steps=300)
    believed = np.array(COMPLETED.tolerance)
    fitted = fit_tolerance(contention, 1 / speed - 1, believed, believed, settings)
    truth = np.array(TRUE.tolerance)
    assert abs(fitted[2] - truth[2]) < 0.04  # LLC: 0.50 -> about 0.09
    assert abs(believed[2] - truth[2]) > 0.4
    # disk contention (up to `high`) never slowed the job: the disk tolerance moves
    # little either way -- some blame spreads there (the softmax's temperature), and
    # contention past it without a slowdown pushes it up
    assert abs(fitted[3] - believed[3]) < 0.1


def test_no_slowdown_where_one_was_predicted_raises_the_tolerance() -> None:
    contention = np.tile([0.0, 0.0, 0.0, 0.6, 0.0], (50, 1))  # heavy disk, no slowdown
    believed = np.array(COMPLETED.tolerance)  # disk tolerance 0.43
    fitted = fit_tolerance(contention, np.zeros(50), believed, believed, CorrectionSettings())
    assert fitted[3] >= 0.59
    assert np.allclose(np.delete(fitted, 3), np.delete(believed, 3), atol=0.02)


def test_the_monitors_repair_the_book_and_placers_follow() -> None:
    book = ProfileBook({"c07": COMPLETED})
    live = LiveProfiles(book)
    placer = TarcilPlacer(live)
    before = placer.scorers.scorer("c07")
    assert live.revision("c07") == 0 and live.refit() == []
    rng = np.random.default_rng(1)
    for report in range(6):  # each monitor report brings 64 observations
        contention, speed = _observations(rng, 64, 0.4)
        live.observe_slowdown("c07", contention, speed)
        live.observe_pressure("c07", np.array(TRUE.caused))  # measured on its servers
        changed = live.refit()
        if report == 0:
            assert changed == ["c07"] and live.revision("c07") == 1
    corrected = live.profile("c07")
    assert corrected.source == "corrected" and live.revision("c07") >= 2
    assert corrected.caused == pytest.approx(TRUE.caused)  # disk 0.67 -> 0.07
    assert abs(corrected.tolerance[2] - TRUE.tolerance[2]) < 0.05
    after = placer.scorers.scorer("c07")
    assert after is not before and after.caused == pytest.approx(TRUE.caused)
    assert live.profile("never-seen") == book.default  # the book's default, unchanged
    # the corrected scorer no longer takes a server with LLC pressure for clean
    state = cluster(1, rus_per_server=8)
    llc = InterferenceProfile((0.0,) * 5, (0.0, 0.0, 0.9, 0.0, 0.0))
    state.occupy(np.arange(2), 1, llc.caused)  # LLC contention 2 x 0.9 / 7 = 0.26
    server = np.array([0])
    assert before.acceptable(state, server).all() and not after.acceptable(state, server).any()


def test_bad_observations_are_one_line_errors() -> None:
    live = LiveProfiles(ProfileBook({}))
    with pytest.raises(InputError, match="speeds must be in"):
        live.observe_slowdown("x", np.zeros((1, 5)), np.array([0.0]))
    with pytest.raises(InputError, match="contention rows"):
        live.observe_slowdown("x", np.zeros((2, 4)), np.array([1.0, 1.0]))
    with pytest.raises(InputError, match="N fractions"):
        live.observe_pressure("x", np.array([2.0, 0, 0, 0, 0]))
    with pytest.raises(InputError, match="correction"):
        CorrectionSettings(temperature=0.0)


def test_a_tarcil_run_corrects_its_worst_completed_class() -> None:
    bench = prepare(Scenario(servers=16, horizon_s=150.0, classes=8, seed=2))
    result = run_policy(bench, "tarcil")
    assert result.profiles is not None and result.adjustments is not None
    assert result.adjustments.observations > 0 and result.adjustments.corrections > 0

    def error(profile: InterferenceProfile, name: str) -> float:
        return float(np.abs(profile.as_row() - bench.truth[name].as_row()).max())

    worst = max(bench.truth, key=lambda name: error(bench.book.profile(name), name))
    assert bench.book.profile(worst).source == "completed"
    assert error(result.profiles.profile(worst), worst) < error(bench.book.profile(worst), worst)
