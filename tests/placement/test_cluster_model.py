"""The RU cluster model: speeds follow the interference model, queued jobs run
later, and a small experiment runs end to end for every policy."""

from __future__ import annotations

import numpy as np
import pytest

from tests.placement.factories import BOOK, CPU_HEAVY, LIGHT
from yarn_adapt.placement.agents import DirectScheduler, SharedState
from yarn_adapt.placement.baselines import POLICY_NAMES, FirstFitPlacer
from yarn_adapt.placement.cluster_model import ClusterModel, ModelSettings
from yarn_adapt.placement.experiment import Scenario, prepare, run_policy
from yarn_adapt.placement.jobs import PlacementJob
from yarn_adapt.placement.state import RUState, Topology
from yarn_adapt.placement.workloads import JobArrival

TRUTH = {"cpu": CPU_HEAVY, "light": LIGHT}


def _model(servers: int, rus: int, slope: float = 1.0) -> ClusterModel:
    state = RUState(Topology.uniform(servers, rus))
    scheduler = DirectScheduler(SharedState(state), FirstFitPlacer(), np.random.default_rng(0))
    settings = ModelSettings(slope=slope, horizon_s=1000.0, measure_until_s=1000.0)
    return ClusterModel(state, scheduler, TRUTH, BOOK, settings)


def test_a_job_alone_runs_at_full_speed_and_its_own_rus_contend() -> None:
    alone = _model(1, 4).run([JobArrival(PlacementJob("a", "cpu", 1), 1.0, 10.0)])
    assert alone.jobs[0].end_s == pytest.approx(11.0)
    pair = _model(1, 4).run([JobArrival(PlacementJob("a", "cpu", 2), 1.0, 10.0)])
    # each RU sees the other's cpu 0.9 over 3 neighbours = 0.3, tolerates 0.1
    assert pair.jobs[0].end_s == pytest.approx(1.0 + 10.0 * (1 + (0.3 - 0.1)))


def test_neighbours_slow_each_other_down_and_leave() -> None:
    jobs = [
        JobArrival(PlacementJob("a", "cpu", 1), 0.0, 10.0),
        JobArrival(PlacementJob("b", "cpu", 1), 0.0, 20.0),
    ]
    result = _model(1, 2, slope=2.0).run(jobs)
    # each sees the other's 0.9 cpu pressure (M - 1 = 1), tolerates 0.1: speed 1 / (1 + 2 x 0.8)
    speed = 1 / (1 + 2 * 0.8)
    a_end = 10.0 / speed
    assert result.jobs[0].end_s == pytest.approx(a_end)
    # b ran a_end seconds at that speed, then alone at full speed
    assert result.jobs[1].end_s == pytest.approx(a_end + (20.0 - a_end * speed))
    assert result.jobs[0].performance == pytest.approx(speed)


def test_a_job_with_no_room_waits_for_one_to_leave() -> None:
    jobs = [
        JobArrival(PlacementJob("a", "light", 4), 0.0, 10.0),
        JobArrival(PlacementJob("b", "light", 2), 1.0, 5.0),
    ]
    result = _model(1, 4).run(jobs)
    first, second = result.jobs
    assert second.start_s == pytest.approx(first.end_s)
    assert second.start_s is not None
    assert second.end_s == pytest.approx(second.start_s + 5.0)


def test_every_policy_runs_a_small_experiment() -> None:
    bench = prepare(Scenario(servers=12, horizon_s=120.0, classes=6, seed=3))
    assert bench.jobs and bench.residents
    for policy in POLICY_NAMES:
        result = run_policy(bench, policy)
        performance = result.performances()
        assert len(performance) == len(result.jobs) > 0
        assert ((performance > 0) & (performance <= 1.0 + 1e-9)).all()
        assert 0.3 < result.utilisation < 1.0
        assert len(result.decision_ns) >= len(result.jobs)


def test_the_fitting_slot_diagnostic_looks_at_the_true_profiles() -> None:
    """One server: a CPU-heavy job on three RUs. A CPU-sensitive job arriving then
    has no RU on which it would run within 5% of ideal; a light one has. The heavy
    job itself had none either: its own three RUs on the one server press 0.6 CPU
    on each other."""
    state = RUState(Topology.uniform(1, 4))
    scheduler = DirectScheduler(SharedState(state), FirstFitPlacer(), np.random.default_rng(0))
    settings = ModelSettings(horizon_s=100.0, measure_until_s=100.0, check_slots=True)
    model = ClusterModel(state, scheduler, TRUTH, BOOK, settings)
    result = model.run(
        [
            JobArrival(PlacementJob("hog", "cpu", 3), 0.0, 50.0),
            JobArrival(PlacementJob("sensitive", "cpu", 1), 1.0, 1.0),
            JobArrival(PlacementJob("light", "light", 1), 60.0, 1.0),
        ]
    )
    assert [job.slot_at_arrival for job in result.jobs] == [False, False, True]


def test_each_job_is_scored_against_the_best_rus_free_at_its_arrival() -> None:
    """Tarcil §6.3's optimal: the best available resources, zero delay. Two servers
    of 4 RUs. The CPU hog (3 RUs) could have run at 1 / 1.2 split 2 + 1 (its RUs
    on one server press 0.3 CPU each on the others, past a tolerance of 0.1);
    first fit packs all three on server 0 (0.6 - 0.1 over: 1 / 1.5), so it gets
    0.8 of its optimal. The pair then gets the empty server, its optimum. The
    6-RU job finds 3 RUs free: no optimal to score it against."""
    state = RUState(Topology.uniform(2, 4))
    scheduler = DirectScheduler(SharedState(state), FirstFitPlacer(), np.random.default_rng(0))
    settings = ModelSettings(horizon_s=100.0, measure_until_s=100.0, check_slots=True)
    model = ClusterModel(state, scheduler, TRUTH, BOOK, settings)
    hog, pair, big = model.run(
        [
            JobArrival(PlacementJob("hog", "cpu", 3), 0.0, 50.0),
            JobArrival(PlacementJob("pair", "cpu", 2), 1.0, 10.0),
            JobArrival(PlacementJob("big", "light", 6), 2.0, 1.0),
        ]
    ).jobs
    assert hog.best_speed_at_arrival == pytest.approx(1 / 1.2)
    assert hog.performance == pytest.approx(1 / 1.5)
    assert hog.performance_vs_best_available == pytest.approx(0.8)
    assert pair.best_speed_at_arrival == pytest.approx(1 / 1.2)
    assert pair.performance_vs_best_available == pytest.approx(1.0)
    assert big.best_speed_at_arrival == 0.0 and big.performance_vs_best_available is None
