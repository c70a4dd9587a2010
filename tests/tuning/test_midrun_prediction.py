"""Predictions from a cluster in mid-run: what the tuner predicts for the jobs in
progress under the running configuration must be what happens to them.

The service always predicts from a live cluster -- jobs holding AMs and containers,
a backlog waiting -- so this is the path every proposal takes. Task times here are
constant, so the fitted model is exact and the simulator (which the segment runner
of the adaptive bench and the demo drive) is the reference: what is left is the
state conversion and the comparator's mechanism, heartbeats included."""

from __future__ import annotations

import copy
import statistics

import pytest

from yarn_adapt.model import JobFeatures, JobSpec, Resources, TaskSpec, TaskType, Workload
from yarn_adapt.service.demo.simcluster import SimulatedCluster
from yarn_adapt.tuning.paper import PaperCluster, capacity_base, fair_base
from yarn_adapt.tuning.settings import TunerSettings
from yarn_adapt.tuning.space import SpaceSettings
from yarn_adapt.tuning.state import TuningState
from yarn_adapt.tuning.tuner import propose
from yarn_adapt.workload import fit_task_time_model

CONTAINER = Resources(2048, 1)
TASK_S = 20.0


def job(index: int, submit: float) -> JobSpec:
    maps = 1 + index % 3
    tasks = (TaskSpec(TaskType.MAP, TASK_S, CONTAINER),) * maps
    features = JobFeatures(job_type="sleep", map_tasks=maps)
    return JobSpec(f"j{index:03d}", submit, f"q{1 + index % 2}", tasks, features=features)


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    return fit_task_time_model(Workload(tuple(job(i, float(i)) for i in range(40))))


@pytest.mark.parametrize("base", [fair_base(("q1", "q2")), capacity_base(("q1", "q2"))])
def test_a_backlog_is_predicted_as_the_simulator_drains_it(model, base) -> None:  # type: ignore[no-untyped-def]
    # 90 jobs in 135 s on 8 containers (4 nodes, heartbeats): a backlog builds up;
    # at 150 s every job is in, some running with their AMs, most waiting
    workload = Workload(tuple(job(i, 1.5 * i) for i in range(90)))
    cluster = PaperCluster(8).spec()
    replay = SimulatedCluster(workload, cluster, base)
    replay.advance(150.0)
    view = replay.view()
    assert sum(1 for p in view.start.jobs if p.am_started_s is not None) >= 2
    assert sum(1 for p in view.start.jobs if p.am_started_s is None) >= 20

    state = TuningState(view.time_s, view.start, view.cluster)
    settings = TunerSettings(interval_s=60.0, space=SpaceSettings(d=3), levels=2)
    predicted = propose(state, base, model, settings).cluster_before_s

    ahead = copy.deepcopy(replay)
    while not ahead.done:
        ahead.advance(600.0)
    realised = statistics.fmean(ahead.ended[p.job.id].latency_s for p in view.start.jobs)  # type: ignore[misc]
    # heartbeat phases are drawn differently by the two: a few per cent apart at most
    assert predicted == pytest.approx(realised, rel=0.05)
