"""Scheduling agents with optimistic commits: conflicts happen, no RU is ever given
twice."""

from __future__ import annotations

import threading

import numpy as np

from tests.placement.factories import BOOK, CPU_HEAVY, LIGHT, NET_HEAVY, cluster, tenant
from yarn_adapt.placement.admission import AdmissionControl
from yarn_adapt.placement.agents import AgentPool, AgentSettings, SchedulingAgent, SharedState
from yarn_adapt.placement.jobs import PlacementJob
from yarn_adapt.placement.state import FREE
from yarn_adapt.placement.tarcil import TarcilPlacer, TarcilSettings

PROFILES = {"cpu": CPU_HEAVY, "net": NET_HEAVY, "light": LIGHT}


def _assert_no_double_booking(shared: SharedState, held: dict[int, np.ndarray]) -> None:
    all_rus = np.concatenate(list(held.values())) if held else np.empty(0, dtype=np.int64)
    assert len(all_rus) == len(set(all_rus.tolist())), "an RU was given to two jobs"
    for owner, rus in held.items():
        assert (shared.state.occupant[rus] == owner).all()
    busy = int((shared.state.occupant != FREE).sum())
    assert busy == len(all_rus) == shared.state.ru_count - shared.state.free_count


def test_stale_agents_conflict_but_never_double_book() -> None:
    state = cluster(12, rus_per_server=4)
    shared = SharedState(state)
    admission = AdmissionControl(state)
    placer = TarcilPlacer(BOOK, TarcilSettings(), admission)
    # copies re-read only every 50 s: they go stale fast
    pool = AgentPool(
        shared, placer, AgentSettings(agents=6, sync_interval_s=50.0), np.random.default_rng(1)
    )
    rng = np.random.default_rng(2)
    held: dict[int, np.ndarray] = {}
    for owner in range(400):
        now = owner * 0.1
        pool.maintain(now)
        name = ("cpu", "net", "light")[owner % 3]
        job = PlacementJob(f"j{owner}", name, int(rng.integers(1, 5)))
        done = pool.schedule(job, owner, tenant(PROFILES[name]), now, force=bool(owner % 2))
        if done.placed:
            assert len(done.rus) == job.ru_count
            held[owner] = done.rus
        if len(held) > 8 and rng.random() < 0.6:
            victim = next(iter(held))
            shared.release(held.pop(victim), now)
        admission.flush()
        _assert_no_double_booking(shared, held)
    stats = shared.stats
    assert stats.conflicted_commits > 0, "stale copies should have met taken RUs"
    assert 0 < stats.conflict_rate < 1
    assert stats.retries > 0


def test_agents_on_threads_never_double_book() -> None:
    state = cluster(16, rus_per_server=4)
    shared = SharedState(state)
    placer = TarcilPlacer(BOOK, TarcilSettings())  # no admission: sequential sample size
    settings = AgentSettings(agents=1, sync_interval_s=5.0)
    held: dict[int, np.ndarray] = {}
    lock = threading.Lock()

    def work(index: int) -> None:
        agent = SchedulingAgent(shared, placer, settings, np.random.default_rng(index))
        agent.maintain(0.0)
        for k in range(60):
            owner = index * 1000 + k
            agent.maintain(float(k))  # catches up every ~5 jobs
            job = PlacementJob(f"t{owner}", "light", 2)
            done = agent.schedule(job, owner, tenant(LIGHT), float(k), force=True)
            with lock:
                if done.placed:
                    held[owner] = done.rus
                if len(held) > 20:
                    victim = min(held)
                    shared.release(held.pop(victim))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    _assert_no_double_booking(shared, held)
    assert shared.stats.commits >= 120


def test_a_job_that_cannot_complete_gives_back_what_it_took() -> None:
    state = cluster(2, rus_per_server=4)
    shared = SharedState(state)
    placer = TarcilPlacer(BOOK, TarcilSettings())
    agent = SchedulingAgent(
        shared,
        placer,
        AgentSettings(agents=1, sync_interval_s=1e9, max_retries=2),
        np.random.default_rng(0),
    )
    agent.maintain(0.0)
    # behind the agent's back, someone takes 6 of the 8 RUs
    shared.try_commit(np.arange(6), 99, tenant(LIGHT))
    done = agent.schedule(PlacementJob("big", "light", 4), 1, tenant(LIGHT), 0.0, force=True)
    assert not done.placed
    assert state.free_count == 2
    assert (state.occupant[:6] == 99).all()


def test_a_commit_on_a_server_grown_more_contended_is_refused_and_replaced() -> None:
    """Two agents with copies read at the same moment: the first puts a CPU hog on
    server 0; the second, whose copy still shows server 0 clean, picks it for a
    CPU-sensitive job. Its commit is refused there (the quality it chose the RU
    for no longer holds), it re-reads server 0 and places the job elsewhere."""
    state = cluster(2, rus_per_server=4)
    shared = SharedState(state)
    placer = TarcilPlacer(BOOK, TarcilSettings())
    settings = AgentSettings(agents=2, sync_interval_s=1000.0, check_quality=True)
    first = SchedulingAgent(shared, placer, settings, np.random.default_rng(0))
    second = SchedulingAgent(shared, placer, settings, np.random.default_rng(1))
    first.maintain(0.0)
    second.maintain(0.0)
    hog = shared.try_commit(state.free_rus_on(0)[:3], 1, tenant(CPU_HEAVY))[0]
    assert len(hog) == 3
    assert second.local is not None and second.local.server_free[0] == 4  # stale
    forced = second.local.free_rus_on(0)[3:]  # the one RU of server 0 still free
    taken, refused = shared.try_commit(forced, 2, tenant(CPU_HEAVY), seen=second.local)
    assert len(taken) == 0 and refused.tolist() == forced.tolist()
    assert shared.stats.stale_commits == 1 and shared.stats.conflicted_commits == 0
    done = second.schedule(PlacementJob("sensitive", "cpu", 1), 2, tenant(CPU_HEAVY), 0.0,
                           force=True)  # fmt: skip
    assert done.placed and state.server_of(done.rus).tolist() == [1]
    # without the copy to compare with, the same commit on server 0 is taken
    taken, refused = shared.try_commit(forced, 3, tenant(CPU_HEAVY))
    assert taken.tolist() == forced.tolist() and len(refused) == 0
