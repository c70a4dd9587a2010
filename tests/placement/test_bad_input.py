"""Bad input gets a clear decision: an unknown class, an empty cluster, a target
that cannot be met, a job too big for the cluster."""

from __future__ import annotations

import numpy as np
import pytest

from tests.placement.factories import BOOK, CPU_HEAVY, cluster, load_servers, tenant
from yarn_adapt.errors import InputError
from yarn_adapt.placement.admission import AdmissionControl, AdmissionSettings
from yarn_adapt.placement.agents import DirectScheduler, SharedState
from yarn_adapt.placement.baselines import POLICY_NAMES
from yarn_adapt.placement.cluster_model import ClusterModel, ModelSettings
from yarn_adapt.placement.jobs import Outcome, PlacementJob
from yarn_adapt.placement.policies import make_placer
from yarn_adapt.placement.profiles import (
    InterferenceProfile,
    ProbeMeasurement,
    ProfileBook,
    ProfileError,
)
from yarn_adapt.placement.state import RUState, Topology
from yarn_adapt.placement.tarcil import TarcilPlacer, TarcilSettings
from yarn_adapt.placement.workloads import JobArrival

RNG = np.random.default_rng(0)


def test_a_class_with_no_profile_gets_the_documented_default() -> None:
    default = BOOK.profile("never-seen")
    assert default.source == "default"
    mean = np.mean([p.as_row() for p in BOOK.profiles.values()], axis=0)
    assert np.allclose(default.as_row(), mean)
    assert ProfileBook({}).profile("x").sensitivity == (0.5,) * 5
    placement = TarcilPlacer(BOOK).place(PlacementJob("j", "never-seen", 2), cluster(4), RNG)
    assert placement.placed and len(placement.rus) == 2


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_an_empty_cluster_rejects_at_once(policy: str) -> None:
    empty = RUState(Topology.uniform(0, 8))
    placer = make_placer(policy, BOOK)
    placement = placer.place(PlacementJob("j", "cpu", 1), empty, RNG)
    assert placement.outcome is Outcome.REJECTED
    assert "no resource units" in placement.reason
    model = ClusterModel(
        empty, DirectScheduler(SharedState(empty), placer, RNG), {"cpu": CPU_HEAVY}, BOOK,
        ModelSettings(horizon_s=10.0, measure_until_s=10.0),
    )  # fmt: skip
    result = model.run([JobArrival(PlacementJob("j", "cpu"), 1.0, 1.0)])
    assert result.jobs[0].rejected and result.utilisation == 0.0


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_a_job_bigger_than_the_cluster_is_rejected_and_a_full_one_waits(policy: str) -> None:
    state = cluster(2, rus_per_server=4)
    placer = make_placer(policy, BOOK)
    assert placer.place(PlacementJob("huge", "cpu", 9), state, RNG).outcome is Outcome.REJECTED
    state.occupy(np.arange(6), 1, CPU_HEAVY.caused)
    assert placer.place(PlacementJob("big", "cpu", 3), state, RNG).outcome is Outcome.NO_ROOM


def test_a_target_quality_of_one_queues_or_places_never_hangs() -> None:
    """Sensitivity 1.0 everywhere: T_W = 1, only contention-free RUs will do."""
    state = cluster(6, rus_per_server=4)
    load_servers(state, [(s, 2, CPU_HEAVY) for s in range(6)])
    book = ProfileBook({"picky": InterferenceProfile.symmetric((1.0,) * 5)})
    admission = AdmissionControl(state, AdmissionSettings(max_wait_s=5.0))
    placer = TarcilPlacer(book, TarcilSettings(), admission)
    job = PlacementJob("p", "picky", 2, expected_duration_s=10.0)
    first = placer.place(job, state, RNG, now=0.0)
    assert first.outcome in (Outcome.QUEUED, Outcome.PLACED)
    forced = placer.place(job, state, RNG, now=5.0, force=True)
    assert forced.placed and forced.sample_size == 32  # best effort, largest sample
    # the same in the model: the job ends, and the run terminates
    shared = SharedState(state)
    model = ClusterModel(
        state, DirectScheduler(shared, placer, RNG), {"picky": book.profile("picky")}, book,
        ModelSettings(horizon_s=100.0, measure_until_s=100.0), admission,
    )  # fmt: skip
    result = model.run([JobArrival(job, 0.0, 10.0)])
    assert result.jobs[0].end_s is not None and not result.jobs[0].rejected


def test_the_model_refuses_a_class_it_has_no_truth_for() -> None:
    state = cluster(2)
    model = ClusterModel(
        state, DirectScheduler(SharedState(state), make_placer("greedy", BOOK), RNG),
        {"cpu": CPU_HEAVY}, BOOK, ModelSettings(horizon_s=10.0, measure_until_s=10.0),
    )  # fmt: skip
    with pytest.raises(InputError, match="class 'mystery' has no true profile"):
        model.run([JobArrival(PlacementJob("j", "mystery"), 0.0, 1.0)])


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ProbeMeasurement("c", "gpu", "caused", 0.5), "unknown resource"),
        (lambda: ProbeMeasurement("c", "cpu", "caused", 1.5), "not a fraction"),
        (lambda: ProbeMeasurement("c", "cpu", "felt", 0.5), "kind must be"),  # type: ignore[arg-type]
        (lambda: InterferenceProfile((0.1,) * 4, (0.1,) * 5), "expected 5"),
        (lambda: InterferenceProfile((0.1,) * 5, (float("nan"),) * 5), "not a fraction"),
        (lambda: PlacementJob("j", "c", 0), "at least one RU"),
        (lambda: Topology.uniform(3, 0), "cannot build"),
    ],
)
def test_malformed_input_is_a_one_line_error(build: object, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        build()  # type: ignore[operator]
    assert "\n" not in info.value.one_line()
    if "probe" in message or "resource" in message:
        assert isinstance(info.value, ProfileError)
    assert CPU_HEAVY is not None and callable(tenant)
