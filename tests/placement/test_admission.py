"""Admission control (Tarcil §4): LSH buckets by cosine similarity, free counters,
and the wait estimate."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.placement.factories import CPU_HEAVY, LIGHT, NET_HEAVY, cluster, load_servers
from yarn_adapt.placement.admission import (
    AdmissionControl,
    AdmissionSettings,
    LshHasher,
    Verdict,
)
from yarn_adapt.placement.profiles import InterferenceProfile
from yarn_adapt.placement.quality import QualityKernel

levels = st.lists(st.floats(0.5, 99), min_size=5, max_size=5).map(np.array)


@given(v=levels, scale=st.floats(0.05, 20), seed=st.integers(0, 1000))
@settings(max_examples=100, deadline=None)
def test_vectors_at_cosine_one_share_a_direction(v: np.ndarray, scale: float, seed: int) -> None:
    hasher = LshHasher(planes=6, bands=4, seed=seed)
    assert hasher.signature(v)[0] == hasher.signature(v * scale)[0]


@given(v=levels, w=levels, seed=st.integers(0, 1000))
@settings(max_examples=100, deadline=None)
def test_same_bucket_means_no_hyperplane_separates(v: np.ndarray, w: np.ndarray, seed: int) -> None:
    hasher = LshHasher(planes=5, bands=3, seed=seed)
    if hasher.bucket(v)[0] == hasher.bucket(w)[0]:
        assert (np.sign(hasher.normals @ v) >= 0).tolist() == (
            np.sign(hasher.normals @ w) >= 0
        ).tolist()
        assert hasher.band(v)[0] == hasher.band(w)[0]


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@given(seed=st.integers(0, 10_000))
@settings(max_examples=25, deadline=None)
def test_closer_vectors_collide_more_often(seed: int) -> None:
    """Random-hyperplane LSH: Pr[same signature] = (1 - angle / pi)^planes, so over
    many hash families a near pair collides more often than a far pair."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(1, 99, 5)
    near = base + rng.normal(0, 3, 5)
    far = rng.uniform(1, 99, 5)
    if _cosine(base, far) > _cosine(base, near) - 0.05:
        return  # not a near / far pair
    families = [LshHasher(planes=3, bands=1, seed=s) for s in range(300)]
    same_near = sum(h.signature(base)[0] == h.signature(near)[0] for h in families)
    same_far = sum(h.signature(base)[0] == h.signature(far)[0] for h in families)
    assert same_near > same_far


def test_buckets_separate_servers_by_contention_direction() -> None:
    state = cluster(8)
    load_servers(
        state, [(s, 6, CPU_HEAVY) for s in range(4)] + [(s, 6, NET_HEAVY) for s in range(4, 8)]
    )
    control = AdmissionControl(state, AdmissionSettings(planes=6, bands=4, seed=1))
    buckets = control.counters.server_bucket
    assert len(set(buckets[:4].tolist())) == 1 and len(set(buckets[4:].tolist())) == 1
    assert buckets[0] != buckets[4]
    assert control.counters.free[buckets[0]] == 4 * 2


@given(ops=st.lists(st.tuples(st.booleans(), st.integers(0, 15), st.integers(1, 4)), max_size=40))
@settings(max_examples=40, deadline=None)
def test_counters_match_a_recount_after_any_changes(ops: list[tuple[bool, int, int]]) -> None:
    state = cluster(16, rus_per_server=4)
    control = AdmissionControl(state, AdmissionSettings(seed=2))
    held: list[np.ndarray] = []
    for owner, (occupy, server, count) in enumerate(ops):
        if occupy and len(state.free_rus_on(server)) >= count:
            rus = state.free_rus_on(server)[:count]
            state.occupy(rus, owner, CPU_HEAVY.caused)
            held.append(rus)
        elif held:
            state.release(held.pop(0), now=float(owner))
    control.flush()
    fresh = AdmissionControl(state, AdmissionSettings(seed=2)).counters
    assert np.array_equal(control.counters.free, fresh.free)
    assert np.allclose(control.counters.level_sum, fresh.level_sum)
    assert int(control.counters.free.sum()) == state.free_count


def _busy_cluster() -> tuple[AdmissionControl, QualityKernel]:
    """Four servers, all but one RU busy with CPU-heavy work: a CPU-sensitive job
    finds no acceptable RU."""
    state = cluster(4, rus_per_server=4)
    load_servers(state, [(s, 3, CPU_HEAVY) for s in range(4)])
    control = AdmissionControl(state, AdmissionSettings(max_wait_s=60, patience=1.0, seed=0))
    return control, QualityKernel.for_profile(CPU_HEAVY)


@pytest.mark.parametrize(
    ("waits", "estimate"),
    [
        ([2.0, 4.0, 6.0], 4.0 + 2 * math.sqrt(8 / 3)),
        ([5.0, 5.0, 5.0, 5.0], 5.0),
        ([1.0, 3.0], None),  # too little history: from the free rate instead
    ],
)
def test_wait_estimate_is_mu_plus_two_sigma_of_similar_jobs(
    waits: list[float], estimate: float | None
) -> None:
    control, kernel = _busy_cluster()
    for wait in waits:
        control.record_wait("cpu", 2, wait, wait)
    control.record_wait("other-class", 2, 1000.0, 1000.0)  # not similar: ignored
    assessment = control.assess("cpu", 2, kernel.acceptable, now=10.0, expected_duration_s=100.0)
    if estimate is None:
        assert assessment.verdict is Verdict.PLACE_NOW  # no rate history either
        assert assessment.wait_estimate_s is None
    else:
        assert assessment.verdict is Verdict.QUEUE
        assert assessment.wait_estimate_s == pytest.approx(estimate)
        assert assessment.bound_s == 60.0


def test_a_wait_beyond_the_bound_places_now() -> None:
    control, kernel = _busy_cluster()
    for wait in (50.0, 70.0, 90.0):
        control.record_wait("cpu", 1, wait, wait)
    short_job = control.assess("cpu", 1, kernel.acceptable, now=0.0, expected_duration_s=10.0)
    assert short_job.verdict is Verdict.PLACE_NOW  # bound min(60, 1.0 x 10 s)
    assert short_job.sample.r == 32  # with the largest sample


def test_wait_from_the_free_rate_when_history_is_thin() -> None:
    state = cluster(4, rus_per_server=4)
    control = AdmissionControl(state, AdmissionSettings(max_wait_s=60, patience=1.0, seed=0))
    kernel = QualityKernel.for_profile(InterferenceProfile.symmetric((0.99,) * 5))
    held = [state.free_rus_on(s) for s in range(4)]
    for owner, rus in enumerate(held):
        state.occupy(rus, owner, LIGHT.caused)
    for t, rus in enumerate(held[:3], start=1):  # a server empties every second
        state.release(rus, now=float(t))
        state.occupy(rus, 10 + t, LIGHT.caused, now=float(t))
    assessment = control.assess("clean", 4, kernel.acceptable, now=4.0, expected_duration_s=100.0)
    # 4 clean RUs freed at 1, 2 and 3 s: 11 gaps over 3 s by 4 s; 4 needed
    assert assessment.verdict is Verdict.QUEUE
    assert assessment.wait_estimate_s == pytest.approx((4 + 2 * 2) / (11 / 3))


def test_enough_acceptable_rus_are_admitted_with_the_derived_sample() -> None:
    state = cluster(10)
    load_servers(state, [(s, 7, CPU_HEAVY) for s in range(8)])
    control = AdmissionControl(state)
    kernel = QualityKernel.for_profile(CPU_HEAVY)
    assessment = control.assess("cpu", 4, kernel.acceptable, now=0.0)
    assert assessment.verdict is Verdict.ADMIT
    assert assessment.good_free == 16  # the two idle servers
    assert assessment.sample.r == math.ceil(math.log(1e-3) / math.log(1 - 16 / 24))
