"""§4.2 / §7.2: the end-to-end policy lowers an application's P99 below
resource-fair, the evolutionary algorithm and ε-greedy on a synthetic service graph."""

from __future__ import annotations

import numpy as np

from yarn_adapt.demand.curves import load_arrivals
from yarn_adapt.demand.microservices import (
    AppRound,
    CilantroEndToEnd,
    EndToEndEpsilonGreedy,
    EndToEndEvolutionary,
    EndToEndPolicy,
    EndToEndResourceFair,
    ServiceGraph,
    run_end_to_end,
)
from yarn_adapt.workload.bundled import TWITTER, bundled_trace

APP = ServiceGraph(work=(0.02, 0.05, 0.01, 0.08, 0.03, 0.04), paths=((0, 1, 3), (0, 2, 4), (0, 5)))


def test_cilantro_end_to_end_beats_the_baselines_on_p99() -> None:
    trace = load_arrivals(bundled_trace(TWITTER))
    loads = trace[:80] / trace.mean() * 140.0
    policies: list[EndToEndPolicy] = [
        EndToEndResourceFair(),
        EndToEndEvolutionary(seed=1),
        EndToEndEpsilonGreedy(seed=1),
        CilantroEndToEnd(seed=1),
    ]
    late = {}
    for policy in policies:
        run = run_end_to_end(APP, policy, loads, 60, 10, np.random.default_rng(1))
        late[policy.name] = float(np.mean(run.p99_s[40:]))
    best_baseline = min(v for k, v in late.items() if k != "cilantro")
    assert late["cilantro"] < 0.6 * best_baseline


def test_the_step_limit_and_the_minimum_hold() -> None:
    policy = CilantroEndToEnd(seed=2)
    previous = np.array([10, 10, 10, 10, 10, 10])
    for r in range(8):
        context = AppRound(60, 6, 140.0, previous, max_step=5, round=r)
        allocation = policy.allocate(context)
        assert allocation.sum() <= 60 and allocation.min() >= 1
        if r >= 3:  # rounds 0-1 are equal shares, round 2 random (the paper's start)
            assert np.all(np.abs(allocation - previous) <= 5)
        policy.observe(allocation, 140.0, APP.p99(allocation, 140.0))
        previous = allocation
