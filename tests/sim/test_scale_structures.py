"""The structures that let the simulator run datacenter-sized days (issue 15) decide
exactly what the plain ones decided: a FIFO leaf's asks indexed by user and size
pick the app walking the leaf picks; task groups over a job's tasks grant the
tasks in their order; folded report runs give the events one report per batch
gave."""

from __future__ import annotations

import gc
import random
from dataclasses import replace
from typing import Any

import pytest

from tests.sim.factories import capacity_leaf, capacity_tree, cluster, job, workload
from yarn_adapt.model import Resources, TaskSpec, TaskType, Workload
from yarn_adapt.sim import PreemptionOptions, SimulationOptions, simulate
from yarn_adapt.sim.capacity import CapacityModel
from yarn_adapt.sim.state import LeafQueue, SimApp, group_tasks, split_stages

DRC = "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator"
SIDE_EFFECTS = (
    "_fit_blocked",
    "_skipped_for_room",
    "_passed_over_by_user",
    "_user_cap_known",
    "_user_cap_mem",
    "_user_cap_vc",
)


def busy_workload(seed: int) -> Workload:
    """Many small apps of several users and container sizes on few queues: long
    leaves, users over their limit, asks that do not fit every node."""
    rng = random.Random(seed)
    shapes = [Resources(1024, 1), Resources(2048, 1), Resources(3072, 2)]
    jobs = [
        job(
            f"j{i}",
            rng.choice(["a", "b"]),
            maps=rng.choice([1, 2, 5, 30]),
            duration=rng.uniform(5, 80),
            submit=rng.uniform(0, 600),
            reduces=rng.choice([0, 1]),
            user=rng.choice(["u1", "u2", "u3"]),
            container=rng.choice(shapes),
            priority=rng.choice([0, 0, 1]),
        )
        for i in range(200)
    ]
    return workload(*jobs)


@pytest.mark.parametrize(("seed", "calculator"), [(0, None), (1, DRC)], ids=["default", "drc"])
def test_indexed_asks_choose_what_walking_the_leaf_chooses(
    seed: int, calculator: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = {"calls": 0}
    indexed = CapacityModel._assign_by_ask

    def both(self: CapacityModel, leaf: LeafQueue, *limits: Any) -> SimApp | None:
        before = {name: getattr(self, name) for name in SIDE_EFFECTS}
        walked = self._walk_leaf(leaf, *limits)
        after_walk = {name: getattr(self, name) for name in SIDE_EFFECTS}
        for name, value in before.items():
            setattr(self, name, value)
        chosen = indexed(self, leaf, *limits)
        assert chosen is walked
        assert {name: getattr(self, name) for name in SIDE_EFFECTS} == after_walk
        checked["calls"] += 1
        return chosen

    monkeypatch.setattr(CapacityModel, "_assign_by_ask", both)
    monkeypatch.setattr(CapacityModel, "_index_pays", lambda self, leaf: leaf.policy != "fair")
    config = capacity_tree(
        capacity_leaf("a", 60, 100, user_limit_factor=1.0, minimum_user_limit_percent=40),
        capacity_leaf("b", 40, 70, user_limit_factor=2.0),
        globals_=[("yarn.scheduler.capacity.resource-calculator", calculator)]
        if calculator
        else [],
    )
    options = SimulationOptions(seed=seed, am_startup_s=1.0, preemption=PreemptionOptions(True))
    # the patches reach the Python core only
    result = simulate(busy_workload(seed), config, cluster(6, 6), options, engine="python")
    assert all(j.finish_s is not None for j in result.jobs)
    assert checked["calls"] > 500


def test_a_stage_of_distinct_durations_is_one_group_over_the_tasks() -> None:
    small, large = Resources(1024, 1), Resources(2048, 1)
    tasks = (
        *(TaskSpec(TaskType.MAP, 10.0 + i, small) for i in range(1000)),
        *(TaskSpec(TaskType.MAP, 5.0, large) for _ in range(3)),
        TaskSpec(TaskType.REDUCE, 7.0, small),
    )
    maps, reduces = split_stages(tasks)
    assert [(g.count, g.memory, g.tasks is not None) for g in maps] == [
        (1000, 1024, True),
        (3, 2048, False),
    ]
    assert maps[0].offset == 0 and maps[1].duration == 5.0
    assert [(g.count, g.duration) for g in reduces] == [(1, 7.0)]


def test_interleaved_stages_keep_each_stage_in_task_order() -> None:
    shape = Resources(1024, 1)
    tasks = tuple(
        TaskSpec(TaskType.MAP if i % 3 else TaskType.REDUCE, float(i), shape) for i in range(9)
    )
    maps, reduces = split_stages(tasks)
    assert [t.duration_s for g in maps for t in (g.tasks or ())][:6] == [1, 2, 4, 5, 7, 8]
    assert sum(g.count for g in maps) == 6 and sum(g.count for g in reduces) == 3
    assert list(group_tasks(())) == []


def test_folding_reports_changes_nothing() -> None:
    """Without preemption the ends of one job's batches that a node reports one
    after the other are folded into one batch; with it (nothing to preempt here)
    every batch stays its own (its monitor never runs here). Both give the same jobs
    and the same events."""
    rng = random.Random(4)
    shape = Resources(1024, 1)
    jobs = []
    for i in range(60):
        durations = [rng.uniform(10, 20) for _ in range(rng.choice([1, 8, 40]))]
        tasks = tuple(TaskSpec(TaskType.MAP, d, shape) for d in durations)
        jobs.append(replace(job(f"j{i}", "a", submit=rng.uniform(0, 300)), tasks=tasks))
    config = capacity_tree(capacity_leaf("a", 100))
    results = [
        simulate(workload(*jobs), config, cluster(10, 4), SimulationOptions(preemption=p))
        for p in (PreemptionOptions(False), PreemptionOptions(True, monitor_interval_s=1e9))
    ]
    folded, unfolded = results
    assert folded.jobs == unfolded.jobs
    assert folded.events == unfolded.events
    (first,) = [j for j in folded.jobs if j.id == "j0"]
    assert first.finish_s is not None


def test_a_run_leaves_no_cyclic_garbage_per_event() -> None:
    """The collector is paused during a run, so nothing made per event may be a
    cycle: what a collection finds afterwards is the run's own structures, a few
    objects per job, however many events there were."""
    rng = random.Random(5)
    shape = Resources(1024, 1)
    noisy = [
        replace(
            job(f"j{i}", "a", submit=rng.uniform(0, 600)),
            tasks=tuple(TaskSpec(TaskType.MAP, rng.uniform(5, 30), shape) for _ in range(200)),
        )
        for i in range(20)
    ]
    gc.collect()
    gc.disable()  # no automatic collection may hide what the run leaves
    try:
        result = simulate(
            workload(*noisy), capacity_tree(capacity_leaf("a", 100)), cluster(6, 6), engine="python"
        )
        events = result.events
        del result
        left = gc.collect()
    finally:
        gc.enable()
    assert events > 100 * len(noisy)
    assert left < events / 10
