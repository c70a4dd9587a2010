"""The sample size with a guarantee (Tarcil §3.3) and batch sampling."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.placement.factories import BOOK, CPU_HEAVY, LIGHT, cluster, load_servers
from yarn_adapt.placement.jobs import PlacementJob
from yarn_adapt.placement.sampling import (
    SampleSizeError,
    paper_examples,
    pick_best,
    pick_best_distinct,
    sample_size,
)
from yarn_adapt.placement.scoring import Scorer
from yarn_adapt.placement.state import RUState, Topology
from yarn_adapt.placement.tarcil import TarcilPlacer, TarcilSettings


@given(
    p=st.floats(1e-9, 0.5),
    g=st.floats(1e-3, 0.999),
)
@settings(max_examples=100, deadline=None)
def test_sample_size_is_the_smallest_meeting_the_guarantee(p: float, g: float) -> None:
    size = sample_size(p, g)
    assert (1 - g) ** size.r <= p * (1 + 1e-9)
    if size.r > 1:
        assert (1 - g) ** (size.r - 1) > p
    assert size.r == max(1, math.ceil(math.log(p) / math.log(1 - g) - 1e-9))
    assert size.miss_probability == pytest.approx((1 - g) ** size.r)


def test_paper_examples_follow_the_formula() -> None:
    unloaded, loaded = paper_examples()
    # Pr[Q < 0.8] = 1e-3 over 100 RUs: the top 20 acceptable
    assert unloaded.good_share == 0.2
    assert unloaded.derived.exact == pytest.approx(30.9566, abs=1e-3)
    assert unloaded.derived.r == 31
    # 8 of the top 20 free, sampling every RU: Pr[Q < 0.92] = 1e-3
    assert loaded.good_share == 0.08
    assert loaded.derived.exact == pytest.approx(82.8451, abs=1e-3)
    assert loaded.derived.r == 83
    # the paper prints 32 and 82: 32 meets the target, 82 misses it by 7%
    assert (unloaded.paper_r, loaded.paper_r) == (32, 82)
    assert unloaded.paper_r_miss_probability < 1e-3
    assert loaded.paper_r_miss_probability == pytest.approx(1.07e-3, rel=0.01)


def test_load_raises_the_sample_size() -> None:
    assert sample_size(1e-3, 0.08).r > sample_size(1e-3, 0.2).r


@pytest.mark.parametrize(
    ("p", "g", "cap", "message"),
    [
        (0.0, 0.5, None, "miss probability"),
        (1.0, 0.5, None, "miss probability"),
        (1e-3, 1.5, None, "acceptable share"),
        (1e-3, -0.1, None, "acceptable share"),
        (1e-3, 0.0, None, "unreachable"),
        (1e-3, 0.5, 0, "cap"),
    ],
)
def test_impossible_guarantees_are_one_line_errors(
    p: float, g: float, cap: int | None, message: str
) -> None:
    with pytest.raises(SampleSizeError, match=message) as info:
        sample_size(p, g, cap=cap)
    assert "\n" not in info.value.one_line()


def test_unreachable_target_with_a_cap_says_so() -> None:
    size = sample_size(1e-3, 0.0, cap=32)
    assert (size.r, size.reachable, size.capped, size.miss_probability) == (32, False, True, 1.0)
    assert sample_size(1e-3, 0.01, cap=32).capped


@given(st.lists(st.floats(0, 1), min_size=1, max_size=200), st.integers(1, 50))
@settings(max_examples=100, deadline=None)
def test_pick_best_takes_the_m_highest(values: list[float], m: int) -> None:
    quality = np.array(values)
    chosen = pick_best(quality, m)
    assert len(chosen) == min(m, len(values))
    assert len(set(chosen.tolist())) == len(chosen)
    expected = np.sort(quality)[::-1][: len(chosen)]
    assert np.array_equal(quality[chosen], expected)  # best first
    # ties go to the earlier sample (the samples come in random order)
    for a, b in itertools.pairwise(chosen):
        if quality[a] == quality[b]:
            assert a < b


def test_pick_best_distinct_keeps_one_per_group() -> None:
    quality = np.array([0.9, 0.8, 0.7, 0.95, 0.1])
    groups = np.array([1, 1, 2, 3, 3])
    assert pick_best_distinct(quality, groups, 3).tolist() == [3, 0, 2]


class RecordingView:
    """An RUState that remembers what the placer sampled."""

    def __init__(self, state: RUState) -> None:
        self.state = state
        self.sampled: list[int] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.state, name)

    def sample_free(self, count: int, rng: np.random.Generator) -> np.ndarray:
        picked = self.state.sample_free(count, rng)
        self.sampled.extend(picked.tolist())
        return picked


@pytest.mark.parametrize("m", [1, 3, 6])
def test_batch_sampling_keeps_the_m_best_of_r_times_m(m: int) -> None:
    state = cluster(40)
    load_servers(state, [(s, s % 7, CPU_HEAVY if s % 2 else LIGHT) for s in range(40)])
    view = RecordingView(state)
    placer = TarcilPlacer(BOOK, TarcilSettings(protect=False))
    placement = placer.place(PlacementJob("j", "cpu", m), view, np.random.default_rng(3))  # type: ignore[arg-type]
    assert placement.placed and len(placement.rus) == m
    sampled = np.unique(view.sampled)
    assert len(view.sampled) >= placement.sample_size * m  # R * m drawn
    scorer = Scorer.for_profile(CPU_HEAVY, protect=False)
    scores = scorer.score(state, state.server_of(sampled))
    chosen_scores = np.sort(scorer.score(state, state.server_of(placement.rus)))[::-1]
    assert set(placement.rus.tolist()) <= set(sampled.tolist())
    assert np.allclose(chosen_scores, np.sort(scores)[::-1][:m])


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(0, 6), min_size=1, max_size=40),
    st.lists(st.integers(-1, 8), min_size=1, max_size=5),
)
def test_a_racks_servers_are_found_without_a_scan(racks: list[int], wanted: list[int]) -> None:
    """Rack-local sampling reads the rack index, not every server: the same
    servers as a scan would find, in the same order (racks need not be contiguous)."""
    state = RUState(Topology(np.full(len(racks), 2), np.asarray(racks)))
    asked = np.asarray(wanted, dtype=np.int64)
    found = state.servers_in_racks(asked)
    scanned = np.flatnonzero(np.isin(np.asarray(racks), np.unique(asked)))
    assert sorted(found.tolist()) == scanned.tolist()
    assert len(set(found.tolist())) == len(found)
    sampled = state.sample_free_in_racks(asked, 5, np.random.default_rng(0))
    assert set(state.server_of(sampled).tolist()) <= set(scanned.tolist())
