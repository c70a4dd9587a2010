"""The hindsight static and the horizon: which candidate the tuner takes (a table),
the static points replayed, the replay's pick, and the horizon's forecast part kept
apart from the prediction on the jobs in progress."""

from __future__ import annotations

import math

import pytest

from tests.tuning.factories import sleep_model, spec
from yarn_adapt.model import (
    CapacityQueue,
    CapacitySchedulerConfig,
    JobSpec,
    Percentage,
)
from yarn_adapt.sim import JobInProgress, SimulationStart
from yarn_adapt.tuning.apply import groups_of
from yarn_adapt.tuning.candidates import HINDSIGHT, RUNNING, SEARCH, Candidate, choose
from yarn_adapt.tuning.group_tuning import Prediction, split_prediction
from yarn_adapt.tuning.hindsight import hindsight_static, replayed_jobs, static_points
from yarn_adapt.tuning.paper import PaperCluster
from yarn_adapt.tuning.settings import TunerSettings
from yarn_adapt.tuning.space import (
    GridSpace,
    GroupSetting,
    Parameter,
    ParameterKind,
    QueueSetting,
    Scheduler,
)
from yarn_adapt.tuning.state import TuningState
from yarn_adapt.tuning.tuner import propose

PATHS = ("root.q1", "root.q2")


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    return sleep_model()


def split_space() -> GridSpace:
    """Capacity q1/q2 in eighths, each held to its capacity (the bench's space)."""
    splits = tuple((12.5 * i, 100 - 12.5 * i) for i in range(1, 8))
    return GridSpace(
        Scheduler.CAPACITY,
        "root",
        PATHS,
        (
            Parameter("split", ParameterKind.SPLIT, PATHS, splits, True),
            Parameter("static", ParameterKind.ELASTICITY, PATHS, (0.0,), True),
        ),
        "fifo",
    )


def static_capacity(q1: float) -> CapacitySchedulerConfig:
    leaves = (
        CapacityQueue("root.q1", capacity=Percentage(q1), maximum_capacity=Percentage(q1)),
        CapacityQueue(
            "root.q2", capacity=Percentage(100 - q1), maximum_capacity=Percentage(100 - q1)
        ),
    )
    return CapacitySchedulerConfig(CapacityQueue("root", children=leaves))


# --------------------------------------------------------------------------- the choice


def candidate(name: str, score: float, setting: str | None = "x") -> Candidate:
    chosen = (
        None
        if setting is None
        else GroupSetting(Scheduler.CAPACITY, "root", (QueueSetting("root.q1", 50.0, setting),))
    )
    return Candidate(name, chosen, Prediction(score, score))


@pytest.mark.parametrize(
    ("running_s", "search_s", "hindsight_s", "gain", "winner"),
    [
        # without a hindsight static: the search's best when it clears min_improvement
        (100.0, 90.0, None, 0.05, SEARCH),
        (100.0, 97.0, None, 0.05, RUNNING),
        # the hindsight static holds while the best challenger gains less than `gain`
        (100.0, 97.0, 100.0, 0.05, HINDSIGHT),
        (100.0, 96.0, 100.0, 0.05, HINDSIGHT),
        (120.0, 99.0, 100.0, 0.05, HINDSIGHT),  # moving back to it from a worse one
        # ... and is left when a challenger clearly gains
        (100.0, 90.0, 100.0, 0.05, SEARCH),
        (80.0, 90.0, 100.0, 0.05, RUNNING),  # the running one is clearly better: kept
        (100.0, 80.0, math.inf, 0.05, SEARCH),  # the hindsight static starves the jobs
        (math.inf, math.inf, math.inf, 0.05, HINDSIGHT),  # nothing finishes: no reason to move
    ],
)
def test_the_hindsight_static_is_left_only_for_a_clear_gain(
    running_s: float, search_s: float, hindsight_s: float | None, gain: float, winner: str
) -> None:
    running = candidate(RUNNING, running_s, None)
    searched = candidate(SEARCH, search_s, "fair")
    anchor = None if hindsight_s is None else candidate(HINDSIGHT, hindsight_s, "fifo")
    choice = choose(running, searched, anchor, gain)
    assert choice.candidate.name == winner
    if anchor is not None:  # the reason names the hindsight static and the gain needed
        assert "hindsight static" in choice.why and f"{gain:.0%}" in choice.why


# --------------------------------------------------------------------------- predictions


def test_the_forecast_part_is_kept_apart_from_the_jobs_in_progress() -> None:
    found = split_prediction((10.0, 30.0, 100.0, 300.0), observed=2)
    assert (found.observed_s, found.forecast_s, found.score_s) == (20.0, 200.0, 110.0)
    alone = split_prediction((10.0, 30.0), observed=2)
    assert alone.observed_s == alone.score_s == 20.0 and math.isnan(alone.forecast_s)
    starving = split_prediction((10.0, math.inf, 5.0), observed=1)
    assert starving.observed_s == 10.0 and starving.forecast_s == starving.score_s == math.inf


# --------------------------------------------------------------------------- replay


def test_small_spaces_are_replayed_whole_and_large_ones_on_a_lattice() -> None:
    assert len(static_points(split_space(), 81)) == 7
    steps = tuple(12.5 * i for i in range(1, 8))
    four = tuple(f"root.q{i}" for i in range(1, 5))
    space = GridSpace(
        Scheduler.CAPACITY,
        "root",
        four,
        tuple(Parameter(f"{p}.share", ParameterKind.SHARE, (p,), steps, True) for p in four),
    )
    points = static_points(space, 81)
    assert 1 < len(points) <= 81
    assert {i for p in points for i in p} == {0, 3, 6}  # the ends and the middle
    settings = [space.decode(p) for p in points]
    assert len(set(settings)) == len(settings)  # equal shares at 1, 4 or 7 appear once


def test_the_replay_picks_the_static_that_serves_the_busy_queue(model) -> None:  # type: ignore[no-untyped-def]
    """Every job of the last hour came to q1, each wider than the cluster: the
    static giving q1 most wins."""
    wide = [spec(f"h{i}", "q1", 120.0 * i, maps=10) for i in range(20)]
    history = replayed_jobs(wide, model)
    current = static_capacity(50)
    group = groups_of(current)[0]
    cluster = PaperCluster(8).spec()
    found = hindsight_static(history, current, group, split_space(), cluster, 81)
    assert found is not None and found.candidates == 7 and found.jobs == 20
    assert found.setting.queue("root.q1").share == 87.5
    assert "best of 7" in found.describe()
    only_q2 = [j for j in history if j.queue == "q2"]
    assert hindsight_static(only_q2, current, group, split_space(), cluster, 81) is None


def tuning_state(now: float, jobs: list[JobSpec], history: list[JobSpec]) -> TuningState:
    start = SimulationStart(now, tuple(JobInProgress(j) for j in jobs))
    recent = tuple(j for j in jobs if j.submit_s > now - 60.0)
    return TuningState(now, start, PaperCluster(8).spec(), recent, tuple(history))


def test_the_tuner_holds_the_hindsight_static_against_a_one_interval_view(model) -> None:  # type: ignore[no-untyped-def]
    """The last hour kept both queues busy; this instant only q1 has jobs. Without
    the hindsight static the tuner hands q1 nearly everything; with it, it holds the
    static that served both, unless the move gains more than ``hindsight_gain``."""
    history = [spec(f"h{i}", f"q{1 + i % 2}", 60.0 * i) for i in range(60)]
    now = 3600.0
    jobs = [spec(f"j{i}", "q1", now - 30.0 + i, maps=8) for i in range(3)]
    current = static_capacity(50)
    spaces = {"root": split_space()}
    myopic = TunerSettings(interval_s=60.0, spaces=spaces, min_improvement=0.0, hindsight=False)
    alone = propose(tuning_state(now, jobs, history), current, model, myopic).groups[0]
    assert alone.candidate == SEARCH and math.isnan(alone.hindsight_s)
    held = TunerSettings(
        interval_s=60.0, spaces=spaces, min_improvement=0.0, hindsight=True, hindsight_gain=0.99
    )
    decision = propose(tuning_state(now, jobs, history), current, model, held).groups[0]
    assert decision.candidate == HINDSIGHT and math.isfinite(decision.hindsight_s)
    assert "hindsight static" in decision.reason and "99%" in decision.reason
    left = TunerSettings(
        interval_s=60.0, spaces=spaces, min_improvement=0.0, hindsight=True, hindsight_gain=0.0
    )
    moved = propose(tuning_state(now, jobs, history), current, model, left).groups[0]
    assert moved.after_s <= decision.after_s


def test_the_horizon_states_the_jobs_in_progress_apart_from_the_forecast(model) -> None:  # type: ignore[no-untyped-def]
    """With a forecast, ``before_s`` / ``after_s`` are the jobs in progress (what can
    be checked once they finish); the forecast jobs' prediction is stated apart."""
    now = 100.0
    jobs = [spec(f"j{i}", "q1", 90.0 + i) for i in range(3)] + [spec("k", "q2", 95.0)]
    spaces = {"root": split_space()}
    settings = TunerSettings(
        interval_s=60.0, spaces=spaces, forecast=True, forecast_intervals=2, hindsight=False
    )
    assert settings.horizon_intervals == 2
    decision = propose(tuning_state(now, jobs, []), static_capacity(50), model, settings).groups[0]
    assert decision.jobs == 4 and decision.forecast_jobs == 8  # two intervals of 4
    assert math.isfinite(decision.forecast_before_s) and math.isfinite(decision.forecast_after_s)
    assert "forecast" in decision.reason or decision.changed
    plain = TunerSettings(interval_s=60.0, spaces=spaces, hindsight=False)
    alone = propose(tuning_state(now, jobs, []), static_capacity(50), model, plain).groups[0]
    assert alone.forecast_jobs == 0 and math.isnan(alone.forecast_after_s)
    # the same jobs in progress, predicted under the same running configuration: the
    # forecast jobs come later and only ever delay them
    assert decision.before_s >= alone.before_s
