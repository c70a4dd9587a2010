"""A latency-critical application's memory demand: its working set against its load,
reserved at an upper bound that never falls below what it has been seen to hold
(``yarn_adapt/demand/memory.py``, fed through ``LraDemandLearner``)."""

from __future__ import annotations

import numpy as np
import pytest

from yarn_adapt.demand.lra import LraDemandLearner, LraRound, LraSpec
from yarn_adapt.demand.memory import MemoryLearner, MemorySample, fit_working_set

Samples = tuple[tuple[float, float], ...]


@pytest.mark.parametrize(
    ("samples", "load", "estimate", "upper_at_least", "upper_at_most"),
    [
        # the same working set at every load: that, and no margin (no scatter)
        (((10, 500), (20, 500), (30, 500)), 40.0, 500.0, 500.0, 500.0),
        # 200 MB + 10 MB per request/s: the line, extrapolated to the forecast load
        (((10, 300), (20, 400), (30, 500), (40, 600)), 60.0, 800.0, 800.0, 800.0),
        # less memory at more load is no slope: the mean, bounded by the largest seen
        (((10, 700), (20, 600), (30, 500)), 40.0, 600.0, 700.0, 1000.0),
        # scatter: a margin above the line, and never below the peak
        (((10, 480), (10, 520), (20, 610), (20, 590), (30, 700)), 30.0, 703.0, 710.0, 800.0),
    ],
)
def test_the_memory_bound_is_the_working_set_at_the_forecast_load_with_a_margin(
    samples: Samples, load: float, estimate: float, upper_at_least: float, upper_at_most: float
) -> None:
    learner = MemoryLearner()
    for rps, mb in samples:
        learner.observe(rps, mb)
    demand = learner.demand("shop", load)
    assert demand is not None
    assert demand.estimate == pytest.approx(estimate, abs=5.0)
    assert upper_at_least - 1e-6 <= demand.upper <= upper_at_most
    assert demand.upper >= max(mb for _, mb in samples)  # never less than it held
    assert demand.lower <= demand.estimate <= demand.upper
    assert demand.observations == len(samples)


@pytest.mark.parametrize(
    "samples",
    [(), ((10.0, 500.0),), ((10.0, float("nan")), (20.0, 400.0)), ((-1.0, 300.0), (5.0, 300.0))],
)
def test_too_few_usable_samples_give_no_memory_demand(samples: Samples) -> None:
    learner = MemoryLearner()
    for rps, mb in samples:
        learner.observe(rps, mb)
    assert learner.demand("shop", 10.0) is None


def test_the_bound_covers_new_rounds_at_about_its_confidence() -> None:
    rng = np.random.default_rng(0)
    covered = trials = 0
    for _ in range(200):
        learner = MemoryLearner(confidence=0.9)
        for _ in range(30):
            rps = float(rng.uniform(10, 50))
            learner.observe(rps, 200 + 8 * rps + float(rng.normal(0, 25)))
        demand = learner.demand("shop", 50.0)
        assert demand is not None
        trials += 1
        covered += 200 + 8 * 50 + float(rng.normal(0, 25)) <= demand.upper
    assert covered / trials >= 0.85


def test_the_fit_never_slopes_down() -> None:
    fit = fit_working_set((MemorySample(10.0, 900.0), MemorySample(50.0, 100.0)))
    assert fit is not None and fit.slope == 0.0 and fit.at(50.0) == pytest.approx(500.0)


def test_the_lra_learner_learns_memory_from_its_rounds_with_or_without_a_target() -> None:
    learner = LraDemandLearner([LraSpec("shop", ("frontend",), target_ms=100.0),
                                LraSpec("batchless", ("cron",))])  # fmt: skip
    for step in range(6):
        requests = 600 + 60 * step  # 10 .. 15 requests/s over a minute
        held = {"a:1": 300.0 + 2.0 * requests / 60, "b:1": 100.0}
        for app in ("shop", "batchless"):
            learner.observe(LraRound(app, 60.0, requests, requests, 4.0, {"a:1": 1.0}, held))
    for app in ("shop", "batchless"):
        memory = learner.memory_demand(app)
        assert memory is not None and learner.memory_samples(app) == 6
        assert memory.upper >= 300.0 + 2.0 * 15 + 100.0  # at least the largest round
    assert learner.memory_snapshot(0).unit == "MB"
    assert learner.memory_shares("shop") == pytest.approx({"a:1": 330 / 430, "b:1": 100 / 430})
