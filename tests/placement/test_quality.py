"""Tarcil §3.2: encoding, target T_W, RU quality U_H and the match Q."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yarn_adapt.placement.profiles import InterferenceProfile
from yarn_adapt.placement.quality import QualityKernel, digits, encode, target_quality


def test_encoding_concatenates_two_digit_levels() -> None:
    assert encode([84, 31]) == 8431
    assert encode([0, 0, 7]) == 7


def test_target_orders_by_sensitivity_and_normalises() -> None:
    profile = InterferenceProfile.symmetric((0.31 * 99 / 99, 0.0, 0.84, 0.0, 0.0))
    # levels: cpu 31, llc 83 (0.84*99 = 83.16) -> ordered 83, 31, 0, 0, 0
    assert target_quality(profile) == pytest.approx(8331000000 / (100**5 - 1))


def test_quality_is_one_when_the_ru_tolerates_exactly_what_the_job_needs() -> None:
    profile = InterferenceProfile.symmetric((0.6, 0.2, 0.0, 0.0, 0.0))
    kernel = QualityKernel.for_profile(profile)
    tolerated = digits(profile.tolerance)  # contention equal to the tolerance
    assert kernel.ru_quality(tolerated[None, :])[0] == pytest.approx(kernel.target, abs=1e-9)
    assert kernel.match(tolerated[None, :])[0] == pytest.approx(1.0)


@given(
    sensitivity=st.lists(st.floats(0, 1), min_size=5, max_size=5),
    contention=st.lists(st.integers(0, 98), min_size=5, max_size=5),
    resource=st.integers(0, 4),
)
@settings(max_examples=120, deadline=None)
def test_more_contention_never_scores_higher_below_the_target(
    sensitivity: list[float], contention: list[int], resource: int
) -> None:
    kernel = QualityKernel.for_profile(InterferenceProfile.symmetric(sensitivity))
    levels = np.array([contention], dtype=np.float64)
    worse = levels.copy()
    worse[0, resource] += 1
    u, u_worse = kernel.ru_quality(levels)[0], kernel.ru_quality(worse)[0]
    assert u_worse < u
    if u < kernel.target:  # both degrade the job: the busier RU is no better
        assert kernel.match(worse)[0] <= kernel.match(levels)[0]
    q = kernel.match(np.vstack([levels, worse]))
    assert ((q >= 0) & (q <= 1)).all()
