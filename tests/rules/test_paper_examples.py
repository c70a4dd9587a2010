"""The paper's worked examples: Fig. 5 (Algorithm 2, and Algorithm 1 around it) and
Fig. 7 (three configurations allocating five containers to five waiting jobs)."""

from __future__ import annotations

import pytest

from rules.algorithm2 import Allocation, execution_time, rank_tasks
from rules.inputs import GroupConfig, JobMix, MixJob, RunningTasks
from tests.rules.factories import capacity, containers, fair, job, latencies, mix, run

# Fig. 5: seven tasks; tasks 3-6 share an execution order. Durations consistent with the
# text: task 1 holds container 1 until 6; task 2 (from 3) and task 3 (from 6) end at 9.
FIG5_TASKS = rank_tasks([[6.0], [6.0], [3.0, 3.0, 3.0, 3.0], [2.0]])
FIG5_ALLOCATIONS = [Allocation(0.0, 1), Allocation(3.0, 1), Allocation(7.0, 2)]


def test_algorithm2_fig5_assignment_follows_the_text() -> None:
    estimate = execution_time(FIG5_TASKS, FIG5_ALLOCATIONS)
    # iteration 1: task 1 -> container 1; iteration 2: task 2 -> container 2, then task 3
    # -> container 1 (free at 6 < 7); iteration 3: tasks 4, 5 -> the new containers 3, 4;
    # at 9 containers 1 and 2 come free and take tasks 6 and 7.
    assert estimate.assigned == (0, 1, 0, 2, 3, 0, 1)
    assert estimate.available_s == (12.0, 11.0, 10.0, 10.0)
    assert estimate.execution_s == 12.0


def test_algorithm2_with_one_allocation_is_list_scheduling() -> None:
    estimate = execution_time([4.0, 4.0, 4.0], [Allocation(2.0, 2)])
    assert estimate.available_s == (10.0, 6.0)
    assert estimate.execution_s == 8.0


def _fig5_mix(framework: str) -> JobMix:
    """j_v waits with one free container at 0; two other jobs hold the rest and
    release one container at 3 and two at 7: the allocations of Fig. 5."""
    # One stage whose task runs are in execution order: Algorithm 2 assigns by rank,
    # it has no barrier between orders (task 2 starts while task 1 runs).
    jv = MixJob("jv", "q", 0.0, (((1, 6.0), (1, 6.0), (4, 3.0), (1, 2.0)),))
    holders = (
        job("a", "q", maps=0, running=(RunningTasks(1, 3.0),), am_running=True),
        job("b", "q", maps=0, running=(RunningTasks(2, 7.0),), am_running=True),
    )
    return JobMix((*holders, jv), framework=framework, am_containers=False)


@pytest.mark.parametrize("framework", ["reuse", "mapreduce"])
def test_algorithm1_fig5_allocations_give_algorithm2s_execution_time(framework: str) -> None:
    jobs = _fig5_mix(framework)
    config = capacity(("q", 100, 100))
    estimate, grants = run(config, jobs, containers(4))
    assert latencies(estimate, jobs)["jv"] == 12.0
    moments = [t for t, job_id, _ in grants if job_id == "jv"]
    if framework == "mapreduce":  # every task's container is granted anew
        assert moments == [0.0, 3.0, 6.0, 7.0, 7.0, 9.0, 9.0]
    else:  # containers are kept: only the allocations of Fig. 5 are grants
        assert moments == [0.0, 3.0, 7.0, 7.0]


FIG7_JOBS = mix(job("j1", "q1", maps=1), *(job(f"j{i}", "q2", maps=2) for i in range(2, 6)))
C1 = capacity(("q1", 40, 40), ("q2", 60, 60))
C2 = fair(("q1", 2), ("q2", 3), policy="fifo")
C3 = fair(("q1", 2), ("q2", 3), policy="fair")


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        pytest.param(C1, {"j1": 1, "j2": 2, "j3": 1}, id="C1-capacity-fifo"),
        pytest.param(C2, {"j1": 1, "j2": 2, "j3": 2}, id="C2-fair-scheduler-fifo"),
        pytest.param(C3, {"j1": 1, "j2": 1, "j3": 1, "j4": 1, "j5": 1}, id="C3-fair-fair"),
    ],
)
@pytest.mark.parametrize("per_node", [None, 1, 5], ids=["no-nodes", "five-nodes", "one-node"])
def test_fig7_allocations(
    config: GroupConfig, expected: dict[str, int], per_node: int | None
) -> None:
    # With nodes, grants come on heartbeats within the first second; tasks run 100 s.
    _, grants = run(config, FIG7_JOBS, containers(5, per_node))
    first_round = [job_id for moment, job_id, is_am in grants if moment < 50 and not is_am]
    counts = {job_id: first_round.count(job_id) for job_id in sorted(set(first_round))}
    assert counts == expected


def test_fig7_latencies_rank_the_three_configurations() -> None:
    # every task runs 100 s: C2 finishes j2 and j3 in one round, C1 and C3 need two
    results = {
        name: run(config, FIG7_JOBS, containers(5))[0].mean_latency_s
        for name, config in (("C1", C1), ("C2", C2), ("C3", C3))
    }
    assert results == {"C1": 180.0, "C2": 140.0, "C3": 180.0}
