"""Granting a run of containers at once (``repeat_count``) must give exactly what
choosing container by container gives: same starts, same finishes, same events."""

from __future__ import annotations

import random

import pytest

from tests.sim.factories import capacity_leaf, capacity_tree, cluster, job, workload
from yarn_adapt.model import CapacityQueue, Percentage, Resources, Workload
from yarn_adapt.sim import SimulationOptions, simulate
from yarn_adapt.sim.capacity import CapacityModel

DRC = "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator"
SHAPES = [Resources(1024, 1), Resources(2048, 1), Resources(1024, 3)]


def mixed_workload(seed: int) -> Workload:
    rng = random.Random(seed)
    return workload(
        *(
            job(
                f"j{i}",
                rng.choice(["p.a", "p.b", "c", "d"]),
                maps=rng.choice([1, 1, 3, 10, 40, 120]),
                duration=rng.uniform(5, 60),
                submit=rng.uniform(0, 1000),
                reduces=rng.choice([0, 1, 2]),
                user=rng.choice(["u1", "u2", "u3"]),
                container=rng.choice(SHAPES),
                priority=rng.choice([0, 0, 1]),
            )
            for i in range(150)
        )
    )


def nested_config(calculator: str | None) -> object:
    parent = CapacityQueue(
        "root.p",
        capacity=Percentage(50),
        maximum_capacity=Percentage(80),
        children=(
            CapacityQueue("root.p.a", capacity=Percentage(30), user_limit_factor=3.0),
            CapacityQueue(
                "root.p.b",
                capacity=Percentage(70),
                ordering_policy="fair",
                minimum_user_limit_percent=40,
            ),
        ),
    )
    return capacity_tree(
        parent,
        capacity_leaf("c", 30, 60, user_limit_factor=2.0),
        capacity_leaf("d", 20, 100, user_limit_factor=-1.0),
        globals_=[("yarn.scheduler.capacity.resource-calculator", calculator)]
        if calculator
        else [],
    )


@pytest.mark.parametrize("calculator", [None, DRC], ids=["default", "drc"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_batched_grants_equal_one_by_one(
    seed: int, calculator: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = mixed_workload(seed)
    config = nested_config(calculator)
    options = SimulationOptions(seed=seed, am_startup_s=2.0)
    # the patch reaches the Python core only
    batched = simulate(jobs, config, cluster(5, 8), options, engine="python")  # type: ignore[arg-type]
    monkeypatch.setattr(CapacityModel, "repeat_count", lambda *args: 1)
    one_by_one = simulate(jobs, config, cluster(5, 8), options, engine="python")  # type: ignore[arg-type]
    assert batched.jobs == one_by_one.jobs
    assert batched.events == one_by_one.events
