"""Algorithm 3: exact against brute force, bounds respected, monotone in the cluster's
size, and a hand-checked example in the shape of the paper's Fig. 8."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yarn_adapt.errors import InputError
from yarn_adapt.tuning.cluster_dp import (
    GroupCurve,
    InfeasibleLowerBounds,
    best_cluster_allocation,
)


def brute_force(curves: Sequence[GroupCurve], total: int) -> float:
    """The least sum of latencies over every choice of levels that fits."""
    return min(
        sum(curve.latency_at(level) for curve, level in zip(curves, choice, strict=True))
        for choice in itertools.product(*(curve.levels for curve in curves))
        if sum(choice) <= total
    )


@st.composite
def curves_and_total(draw: st.DrawFn, dense: bool) -> tuple[list[GroupCurve], int]:
    """Up to 4 groups, up to 12 spare containers; latencies small integers (ties)."""
    curves = []
    for index in range(draw(st.integers(1, 4))):
        lower = draw(st.integers(0, 4))
        span = draw(st.integers(0, 8))
        extras = (
            list(range(span + 1))
            if dense
            else sorted({0, *draw(st.lists(st.integers(1, 12), max_size=5))})
        )
        latencies = draw(st.lists(st.integers(0, 30), min_size=len(extras), max_size=len(extras)))
        levels = tuple(lower + e for e in extras)
        curves.append(GroupCurve(f"g{index}", levels, tuple(float(v) for v in latencies)))
    lowers = sum(c.lower for c in curves)
    return curves, lowers + draw(st.integers(0, 12))


@settings(max_examples=300, deadline=None)
@given(case=st.one_of(curves_and_total(dense=True), curves_and_total(dense=False)))
def test_the_dp_equals_brute_force(case: tuple[list[GroupCurve], int]) -> None:
    curves, total = case
    allocation = best_cluster_allocation(curves, total)
    assert allocation.predicted_total_latency == pytest.approx(brute_force(curves, total))
    chosen = [c.latency_at(n) for c, n in zip(curves, allocation.containers, strict=True)]
    assert allocation.predicted_total_latency == pytest.approx(sum(chosen))
    baseline = sum(c.latencies[0] for c in curves)
    assert allocation.latency_reduction == pytest.approx(baseline - sum(chosen))


@settings(max_examples=200, deadline=None)
@given(case=st.one_of(curves_and_total(dense=True), curves_and_total(dense=False)))
def test_the_allocation_respects_every_bound(case: tuple[list[GroupCurve], int]) -> None:
    curves, total = case
    allocation = best_cluster_allocation(curves, total)
    for curve, containers in zip(curves, allocation.containers, strict=True):
        assert containers in curve.levels
        assert curve.lower <= containers <= curve.upper
    assert sum(allocation.containers) + allocation.unallocated == total
    assert allocation.unallocated >= 0
    assert allocation.ratios == tuple(n / total if total else 0.0 for n in allocation.containers)


@settings(max_examples=150, deadline=None)
@given(case=st.one_of(curves_and_total(dense=True), curves_and_total(dense=False)))
def test_more_containers_never_predict_more_latency(case: tuple[list[GroupCurve], int]) -> None:
    curves, total = case
    predicted = [
        best_cluster_allocation(curves, size).predicted_total_latency
        for size in range(total, total + 6)
    ]
    assert all(b <= a for a, b in itertools.pairwise(predicted))


def test_ties_leave_useless_containers_unallocated() -> None:
    flat = GroupCurve("flat", (1, 2, 3), (5.0, 5.0, 5.0))
    steep = GroupCurve("steep", (1, 3), (9.0, 4.0))
    allocation = best_cluster_allocation([flat, steep], 10)
    assert allocation.containers == (1, 3)
    assert allocation.unallocated == 6


def test_a_fig8_shaped_example_by_hand() -> None:
    """R = 15 containers, three groups whose lower bounds add up to 8, so r_alloc = 7
    (the figures of the paper's Fig. 8 text; its tables are an image, so the values
    here are our own). Latency reductions per extra container:

    group 1 (lower 3, span 4):  4, 3, 2, 1
    group 2 (lower 2, span 3):  0.8, 0.8, 0.5
    group 3 (lower 3, span 5):  3, 3, 2, 1.5, 0.5

    The reductions are concave, so the best 7 extras are the 7 largest steps:
    4, 3, 2 (group 1), 3, 3, 2, 1.5 (group 3): 18.5 in all; group 2, which
    reduces least, gets nothing above its lower bound."""
    curves = [
        _from_steps("o1", 3, [4, 3, 2, 1], base=40.0),
        _from_steps("o2", 2, [0.8, 0.8, 0.5], base=30.0),
        _from_steps("o3", 3, [3, 3, 2, 1.5, 0.5], base=50.0),
    ]
    allocation = best_cluster_allocation(curves, 15)
    assert allocation.containers == (6, 2, 7)
    assert allocation.latency_reduction == pytest.approx(18.5)
    assert allocation.predicted_total_latency == pytest.approx(120.0 - 18.5)
    assert allocation.ratios == pytest.approx((6 / 15, 2 / 15, 7 / 15))
    assert min(allocation.ratios) == allocation.ratios[1]
    assert allocation.unallocated == 0


def _from_steps(name: str, lower: int, steps: Sequence[float], base: float) -> GroupCurve:
    latencies = [base, *(base - sum(steps[: i + 1]) for i in range(len(steps)))]
    return GroupCurve(name, tuple(range(lower, lower + len(latencies))), tuple(latencies))


def test_lower_bounds_beyond_the_cluster_are_one_clear_input_error() -> None:
    curves = [GroupCurve("a", (5, 6), (2.0, 1.0)), GroupCurve("b", (7,), (3.0,))]
    with pytest.raises(InfeasibleLowerBounds) as raised:
        best_cluster_allocation(curves, 11)
    assert isinstance(raised.value, InputError)
    assert raised.value.one_line() == (
        "the groups' lower bounds need 12 containers but the cluster has 11"
    )


@pytest.mark.parametrize(
    ("levels", "latencies"),
    [((), ()), ((1, 2), (1.0,)), ((2, 2), (1.0, 1.0)), ((3, 1), (1.0, 2.0)), ((-1, 2), (1.0, 2.0))],
)
def test_malformed_curves_are_refused(
    levels: tuple[int, ...], latencies: tuple[float, ...]
) -> None:
    with pytest.raises(ValueError):
        GroupCurve("g", levels, latencies)


def test_at_benchmark_scale_plenty_saturates_everyone_and_scarcity_is_shared() -> None:
    """500 groups, 8 levels each, ~48,000 containers: the scale of the §4.5.1 benchmark."""
    curves = []
    for g in range(500):
        levels = tuple(10 + g % 7 + step * (12 + g % 5) for step in range(8))
        latencies = tuple(1000.0 / (1 + step) + g for step in range(8))
        curves.append(GroupCurve(f"g{g}", levels, latencies))
    demand = sum(c.upper for c in curves)
    assert 45_000 < demand < 60_000
    allocation = best_cluster_allocation(curves, demand)
    assert allocation.containers == tuple(c.upper for c in curves)  # everyone saturated
    tight = best_cluster_allocation(curves, sum(c.lower for c in curves) + 100)
    assert sum(tight.containers) <= sum(c.lower for c in curves) + 100
    assert tight.predicted_total_latency < sum(c.latencies[0] for c in curves)
