"""What each placer chooses: locality first and quality to break ties, the greedy
optimum over every server, YARN's first fit, least-loaded water-filling."""

from __future__ import annotations

import numpy as np
import pytest

from tests.placement.factories import BOOK, CPU_HEAVY, LIGHT, NET_HEAVY, cluster, load_servers
from yarn_adapt.placement.baselines import FirstFitPlacer, GreedyPlacer, LeastLoadedPlacer
from yarn_adapt.placement.jobs import Locality, PlacementJob
from yarn_adapt.placement.sampling import sample_best
from yarn_adapt.placement.scoring import Scorer, rank_within
from yarn_adapt.placement.state import RUState
from yarn_adapt.placement.tarcil import TarcilPlacer, TarcilSettings

RNG = np.random.default_rng(7)


def _mixed(servers: int = 16) -> RUState:
    state = cluster(servers, rus_per_server=8, per_rack=4)
    plan = [(s, 3 + s % 4, (CPU_HEAVY, NET_HEAVY, LIGHT)[s % 3]) for s in range(servers)]
    load_servers(state, plan)
    return state


def test_preferred_servers_come_first_then_quality() -> None:
    state = _mixed()
    job = PlacementJob("j", "light", 3, preferred_servers=(5, 9))
    placement = TarcilPlacer(BOOK).place(job, state, RNG)
    servers = set(state.server_of(placement.rus).tolist())
    assert servers <= {5, 9}
    # with more RUs than the preferred servers hold, the rest goes elsewhere
    free_there = len(state.free_rus_on(5)) + len(state.free_rus_on(9))
    bigger = TarcilPlacer(BOOK).place(job.needing(free_there + 2), state, RNG)
    on_preferred = np.isin(state.server_of(bigger.rus), [5, 9]).sum()
    assert on_preferred == free_there
    # but not where it would run much slower: server 9 holds four CPU-heavy jobs
    sensitive = TarcilPlacer(BOOK).place(
        PlacementJob("c", "cpu", 1, preferred_servers=(9,)), state, RNG
    )
    assert state.server_of(sensitive.rus).tolist() != [9]


def test_preferred_racks_are_ranked_before_the_rest() -> None:
    state = _mixed()
    job = PlacementJob("j", "light", 2, preferred_racks=(2,))
    placement = GreedyPlacer(BOOK).place(job, state, RNG)
    assert set(state.rack_of(state.server_of(placement.rus)).tolist()) == {2}
    sampled = TarcilPlacer(BOOK).place(job, state, RNG)
    assert set(state.rack_of(state.server_of(sampled.rus)).tolist()) == {2}


@pytest.mark.parametrize("placer", [TarcilPlacer(BOOK), GreedyPlacer(BOOK)])
def test_same_server_and_spread(placer: TarcilPlacer | GreedyPlacer) -> None:
    state = _mixed()
    together = placer.place(PlacementJob("t", "light", 4, Locality.SAME_SERVER), state, RNG)
    assert len(set(state.server_of(together.rus).tolist())) == 1
    spread = placer.place(PlacementJob("s", "light", 5, Locality.SPREAD), state, RNG)
    assert len(set(state.server_of(spread.rus).tolist())) == 5


def test_greedy_takes_the_best_server_of_all() -> None:
    state = _mixed()
    scorer = Scorer.for_profile(CPU_HEAVY, protect=True)
    servers = state.servers_with_free()
    best = servers[np.argmax(scorer.score(state, servers))]
    placement = GreedyPlacer(BOOK).place(PlacementJob("g", "cpu", 1), state, RNG)
    assert scorer.score(state, state.server_of(placement.rus))[0] == pytest.approx(
        scorer.score(state, np.array([best]))[0]
    )


def test_a_jobs_own_rus_count_against_a_server() -> None:
    servers = np.array([4, 4, 9, 4, 9])
    score = np.array([0.5, 0.9, 0.7, 0.1, 0.8])
    assert rank_within(servers, score).tolist() == [1, 0, 1, 2, 0]
    # the heavy job spreads rather than piling onto one empty server
    state = cluster(8)
    placement = GreedyPlacer(BOOK).place(PlacementJob("h", "cpu", 4), state, RNG)
    assert len(set(state.server_of(placement.rus).tolist())) > 1
    packed = GreedyPlacer(BOOK, protect=False).place(PlacementJob("h", "cpu", 4), state, RNG)
    assert len(set(state.server_of(packed.rus).tolist())) == 1  # Q alone ignores it


def test_yarn_fills_servers_in_heartbeat_order() -> None:
    state = cluster(4, rus_per_server=4)
    state.occupy(state.free_rus_on(0)[:3], 1, LIGHT.caused)
    placer = FirstFitPlacer()
    first = placer.place(PlacementJob("a", "light", 3), state, RNG)
    assert state.server_of(first.rus).tolist() == [0, 1, 1]
    second = placer.place(PlacementJob("b", "light", 1), state, RNG)
    assert state.server_of(second.rus).tolist() == [2]  # the next heartbeat


def test_least_loaded_water_fills() -> None:
    state = cluster(3, rus_per_server=4)
    state.occupy(state.free_rus_on(0)[:2], 1, LIGHT.caused)
    placement = LeastLoadedPlacer().place(PlacementJob("l", "light", 4), state, RNG)
    # free 2, 4, 4: each RU goes to the emptiest server at that point
    assert np.bincount(state.server_of(placement.rus), minlength=3).tolist() == [0, 2, 2]


def test_tarcil_without_admission_sizes_its_sample_from_a_first_batch() -> None:
    state = _mixed()
    placement = TarcilPlacer(BOOK, TarcilSettings(first_batch=4, cap=32)).place(
        PlacementJob("q", "net", 2), state, RNG
    )
    assert placement.placed and 4 <= placement.sample_size <= 32


def test_sample_best_scores_only_its_samples() -> None:
    seen: list[int] = []

    def risk_free(index: np.ndarray) -> np.ndarray:
        seen.extend(index.tolist())
        return -np.asarray(index, dtype=float)  # lower index, lower risk

    best = sample_best(10_000, risk_free, np.random.default_rng(1), r=8)
    assert best == min(seen) and len(seen) == 8
    assert sample_best(0, risk_free, np.random.default_rng(1), r=8) is None
