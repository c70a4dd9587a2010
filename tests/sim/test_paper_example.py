"""The AdaptiveConfig paper's Fig. 7 (§3.3.2): five containers, five waiting jobs.

j1 asks for one container in q1; j2..j5 ask for two each in q2. Only task
containers count in the paper's example, so AMs are off.

* C1, Capacity Scheduler with FIFO queues: q1 holds 2 containers, q2 holds 3
  ("fixed amounts", i.e. maximum = capacity); q2's head jobs j2 and j3 get its three
  containers in FIFO order.
* C2, Fair Scheduler with FIFO queues (weights 2:3): q1 would get 2 but j1 asks for
  one, so q2 gets the other four, which FIFO gives to the two first jobs.
* C3, Fair Scheduler with Fair queues: the four containers go one to each of j2..j5.
"""

from __future__ import annotations

import pytest

from tests.sim.factories import (
    capacity_leaf,
    capacity_tree,
    fair_leaf,
    fair_tree,
    granted_by,
    job,
    run,
)
from yarn_adapt.model import CapacitySchedulerConfig, FairSchedulerConfig
from yarn_adapt.sim import SimulationOptions

JOBS = [job("j1", "q1", maps=1)] + [job(f"j{i}", "q2", maps=2) for i in range(2, 6)]

C1 = capacity_tree(capacity_leaf("q1", 40, 40), capacity_leaf("q2", 60, 60))
C2 = fair_tree(fair_leaf("q1", 2, "fifo"), fair_leaf("q2", 3, "fifo"))
C3 = fair_tree(fair_leaf("q1", 2, "fair"), fair_leaf("q2", 3, "fair"))


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        pytest.param(C1, {"j1": 1, "j2": 2, "j3": 1}, id="C1-capacity-fifo"),
        pytest.param(C2, {"j1": 1, "j2": 2, "j3": 2}, id="C2-fair-scheduler-fifo"),
        pytest.param(C3, {"j1": 1, "j2": 1, "j3": 1, "j4": 1, "j5": 1}, id="C3-fair-fair"),
    ],
)
@pytest.mark.parametrize("layout", [(1, 5), (5, 1)], ids=["one-node", "five-nodes"])
def test_fig7_allocations(
    config: CapacitySchedulerConfig | FairSchedulerConfig,
    expected: dict[str, int],
    layout: tuple[int, int],
) -> None:
    # Every task runs 100 s; by t=10 every grant of the first round happened.
    result = run(JOBS, config, nodes=layout[0], containers_per_node=layout[1])
    assert granted_by(result, 10.0) == expected


def test_fig7_capacity_leaves_q1_spare_container_idle() -> None:
    options = SimulationOptions(am_containers=False, sample_interval_s=5.0)
    usage = run(JOBS, C1, options=options).cluster_usage
    # q1 keeps its second container unused: 4 of 5 busy until the first tasks end
    busy = {int(m) for t, m in zip(usage.times_s, usage.memory_mb, strict=True) if 5 < t < 100}
    assert busy == {4 * 1024}
