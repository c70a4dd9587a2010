"""Admission control (Tarcil §4): LSH buckets by cosine similarity, free counters,
and the wait estimate."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.placement.factories import BOOK, CPU_HEAVY, NET_HEAVY, cluster, load_servers
from yarn_adapt.errors import InputError
from yarn_adapt.placement.admission import (
    AdmissionControl,
    AdmissionSettings,
    AppearanceRates,
    LshHasher,
    WaitDecision,
    WaitQueue,
    time_until,
    wait_or_place,
)
from yarn_adapt.placement.jobs import Outcome, PlacementJob
from yarn_adapt.placement.quality import QualityKernel
from yarn_adapt.placement.tarcil import TarcilPlacer, TarcilSettings

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
    control = AdmissionControl(state, AdmissionSettings(max_wait_s=60, seed=0))
    return control, QualityKernel.for_profile(CPU_HEAVY)


def test_the_estimate_is_mu_plus_two_sigma_of_the_time_until_enough_offers() -> None:
    control, _ = _busy_cluster()
    for t in range(1, 7):  # an offer of 2 acceptable RUs every second, of 4 every other
        control.appearances.note("cpu", 2 if t % 2 else 4, float(t))
    control.appearances.note("net", 50, 3.0)  # another class: not counted
    assert control.appearances.rate("cpu", 6.0) == pytest.approx(1.0)
    assert control.appearances.rate("cpu", 6.0, at_least=3) == pytest.approx(0.5)
    assert control.estimate("cpu", 2, now=6.0) == pytest.approx(time_until(1, 1.0))
    assert time_until(1, 1.0) == pytest.approx(3.0)
    # a 4-RU job needs one of the bigger offers, which come at half the rate
    assert control.estimate("cpu", 4, now=6.0) == pytest.approx(time_until(1, 0.5))
    # two jobs of the class queued before it: three offers to wait for
    control.enqueue(1, "cpu", 3, 6.0, 10.0, None)
    control.enqueue(2, "cpu", 1, 6.0, 10.0, None)
    assert control.estimate("cpu", 2, now=6.0) == pytest.approx((3 + 2 * math.sqrt(3)) / 1.0)
    assert control.estimate("cpu", 5, now=6.0) is None  # no offer that big lately
    assert control.estimate("never-seen", 1, now=6.0) is None


def test_the_rate_window_keeps_the_newest_offers() -> None:
    rates = AppearanceRates(window=3)
    for t, count in [(1.0, 1), (1.5, 1), (2.0, 1), (4.0, 1)]:
        rates.note("c", count, t)
    # the offer at 1 s fell out; the oldest kept one (1.5 s) opens the window
    assert rates.rate("c", 4.0) == pytest.approx(2 / 2.5)
    rates.note("c", 0, 5.0)  # nothing acceptable: not an offer
    assert rates.rate("c", 6.5) == pytest.approx(2 / 5.0)


@pytest.mark.parametrize(
    ("overshoot", "duration", "estimate", "queue", "bound"),
    [
        (0.5, 10.0, 2.0, True, 5.0),  # 5 s slower now; about 2 s to wait: wait, <= 5 s
        (0.5, 10.0, 6.0, False, 5.0),  # waiting would cost more than running slower
        (0.05, 2.0, 0.2, False, 0.1),  # a short job barely slowed: place now
        (2.0, 100.0, 45.0, True, 60.0),  # the bound is capped at max_wait_s
        (2.0, 100.0, 61.0, False, 60.0),
        (0.5, 10.0, None, False, 5.0),  # nothing acceptable appeared lately
        (0.0, 10.0, 1.0, False, 0.0),  # no slowdown predicted: nothing to wait for
        (0.3, None, 59.0, True, 60.0),  # unknown duration: up to max_wait_s
    ],
)
def test_wait_or_place_weighs_the_wait_against_running_slower(
    overshoot: float, duration: float | None, estimate: float | None, queue: bool, bound: float
) -> None:
    decision = wait_or_place(
        overshoot=overshoot, duration_s=duration, estimate_s=estimate, max_wait_s=60.0
    )
    assert decision.queue is queue
    assert decision.bound_s == pytest.approx(bound)
    if duration is not None:
        assert decision.cost_now_s == pytest.approx(duration * overshoot)


def test_waits_that_ran_out_stop_similar_jobs_from_queueing() -> None:
    control, _ = _busy_cluster()
    for t in range(1, 11):  # an offer of 4 acceptable RUs a second
        control.appearances.note("cpu", 4, float(t))

    def decide(size: int, now: float) -> WaitDecision:
        return control.decide("cpu", size, overshoot=1.0, duration_s=20.0, now=now)

    assert decide(1, 10.0).queue
    for owner in range(3):  # three similar waits ran out their bound
        control.enqueue(owner, "cpu", 1, 10.0, 5.0, 2.0)
        control.dequeue(owner, 15.0, ran_out=True)
    assert not decide(1, 15.0).queue
    assert "ran out" in decide(1, 15.0).reason
    assert decide(4, 15.0).queue  # another size band is not similar
    for t in range(70, 80):
        control.appearances.note("cpu", 4, float(t))
    assert decide(1, 80.0).queue  # the failures left the feedback window
    records = control.wait_records()
    assert [(r.waited_s, r.ran_out, r.estimate_s) for r in records] == [(5.0, True, 2.0)] * 3
    assert (
        "no acceptable RU"
        in control.decide("cpu", 5, overshoot=1.0, duration_s=20.0, now=80.0).reason
    )  # no offer of 5 came: place now


def test_the_queue_keeps_each_class_oldest_first() -> None:
    queue = WaitQueue()
    for owner, job_class, size in [(7, "a", 2), (3, "b", 1), (9, "a", 4), (1, "a", 1)]:
        queue.add(owner, job_class, size, float(owner), 10.0, None)
    assert queue.oldest("a", 2) == [7, 9]
    assert queue.rus_waiting("a") == 7 and queue.rus_waiting("b") == 1
    queue.remove(9)
    assert queue.oldest("a", 5) == [7, 1] and queue.rus_waiting("a") == 3
    assert sorted(queue.classes()) == ["a", "b"] and len(queue) == 3
    with pytest.raises(InputError, match="already queued"):
        queue.add(7, "a", 1, 0.0, 1.0, None)


def test_enough_acceptable_rus_are_admitted_with_the_derived_sample() -> None:
    state = cluster(10)
    load_servers(state, [(s, 7, CPU_HEAVY) for s in range(8)])
    control = AdmissionControl(state)
    kernel = QualityKernel.for_profile(CPU_HEAVY)
    assessment = control.assess(4, kernel.acceptable)
    assert not assessment.short
    assert assessment.good_free == 16  # the two idle servers
    assert assessment.sample.r == math.ceil(math.log(1e-3) / math.log(1 - 16 / 24))
    scarce = control.assess(20, kernel.acceptable)
    assert scarce.short


def test_tarcil_waits_only_when_its_samples_miss_and_waiting_pays() -> None:
    """Every free RU has three CPU-heavy neighbours: a CPU-sensitive job's best
    sample would run it 1.8x slower (and slow its neighbours)."""
    state = cluster(4, rus_per_server=4)
    load_servers(state, [(s, 3, CPU_HEAVY) for s in range(4)])
    admission = AdmissionControl(state, AdmissionSettings(max_wait_s=60))
    placer = TarcilPlacer(BOOK, TarcilSettings(), admission)
    rng = np.random.default_rng(5)
    long = PlacementJob("l", "cpu", 1, expected_duration_s=100.0)
    short = PlacementJob("s", "cpu", 1, expected_duration_s=0.5)
    # nothing acceptable has appeared lately: no estimate, placed now
    first = placer.place(long, state, rng, now=10.0)
    assert first.placed and first.own_overshoot == pytest.approx(0.8, abs=0.02)
    assert "no acceptable RU" in first.reason
    for t in range(1, 11):  # an offer of one acceptable RU a second
        admission.appearances.note("cpu", 1, float(t))
    queued = placer.place(long, state, rng, now=10.0)
    assert queued.outcome is Outcome.QUEUED
    assert queued.wait_estimate_s == pytest.approx(time_until(1, 1.0))
    assert queued.wait_bound_s == 60.0  # 100 s x 1.1 slower, capped
    # a short job loses less running slower than it would waiting
    assert placer.place(short, state, rng, now=10.0).placed
    # at its bound it is placed with the largest sample, whatever it finds
    forced = placer.place(long, state, rng, now=70.0, force=True)
    assert forced.placed and forced.sample_size == 32
    # offered a server that freed up: placed there if it meets the job, else it waits
    still_bad = placer.place(long, state, rng, now=12.0, offered=np.array([2]))
    assert still_bad.outcome is Outcome.QUEUED
    state.release(state.rus_of(np.array([3]))[:3], now=12.0)  # server 3 empties
    offered = placer.place(long, state, rng, now=12.0, offered=np.array([3]))
    assert offered.placed and state.server_of(offered.rus).tolist() == [3]
    assert offered.overshoot == 0.0
    takeable = placer.takeable(state, ["cpu", "light"], np.array([0, 3]))
    # cpu: one RU on the empty server (two would press 0.3 CPU on each other)
    assert takeable.tolist() == [[0, 1], [0, 4]]
