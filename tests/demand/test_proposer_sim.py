"""The Cilantro proposer driving the simulated cluster through the service: a
congested queue missing its SLO gets capacity from one that meets it, in bounded
steps, through the same review path as the tuner."""

from __future__ import annotations

from pathlib import Path

from tests.service.factories import TOKEN, settings_for, simulated_backend
from yarn_adapt.model import TaskType, Workload
from yarn_adapt.model.workload import JobSpec, TaskSpec
from yarn_adapt.service.loop.hysteresis import queue_shares
from yarn_adapt.service.proposers.choose import snapshot_proposer
from yarn_adapt.service.proposers.cilantro_adapter import CilantroProposer
from yarn_adapt.service.service import Service
from yarn_adapt.service.state.records import DecisionKind
from yarn_adapt.service.web.app import create_app

CONTAINER_MB = 2048


def skewed_workload(minutes: int = 30) -> Workload:
    """q1: a ten-task job every 30 s (more than the cluster's 16 containers keep up
    with: its backlog grows); q2: a one-task job every 2 minutes."""
    from yarn_adapt.model import Resources

    container = Resources(CONTAINER_MB, 1)
    jobs = []
    for i in range(minutes * 2):
        tasks = tuple(TaskSpec(TaskType.MAP, 90.0, container) for _ in range(10))
        jobs.append(JobSpec(f"busy_{i:03d}", i * 30.0, "q1", tasks, am_resources=container))
    for i in range(minutes // 2):
        tasks = (TaskSpec(TaskType.MAP, 20.0, container),)
        jobs.append(JobSpec(f"light_{i:03d}", i * 120.0 + 5, "q2", tasks, am_resources=container))
    return Workload(tuple(jobs), "skewed")


def test_the_congested_queue_gains_capacity_step_by_step(tmp_path: Path) -> None:
    settings = settings_for(
        tmp_path,
        service={"mode": "recommend", "auto_approve": True, "interval_s": 60.0},
        tuning={"proposer": "cilantro", "cooldown_s": 0.0, "min_improvement": 0.0},
        cilantro={"policy": "sw", "latency_s": 150.0, "fraction": 0.9, "max_step": 0.1},
    )
    proposer = snapshot_proposer(settings)
    assert isinstance(proposer, CilantroProposer)
    service = Service.build(
        settings, simulated_backend(tmp_path, skewed_workload()), proposer, token=TOKEN
    )
    service.start()
    shares = []
    kinds = []
    for _ in range(12):
        report = service.loop.run_round()
        kinds += [d.kind for d in report.decisions]
        shares.append(queue_shares(service.backend.document().config)["root.q1"])
    assert DecisionKind.APPLIED in kinds or DecisionKind.PROPOSED in kinds
    assert shares[-1] > 60.0
    steps = [abs(b - a) for a, b in zip([50.0, *shares], shares, strict=False)]
    assert max(steps) <= 10.0 + 1.0  # max_step: 10 % of the managed resources a round
    first = service.store.proposal(1)
    assert first.reasons[0].startswith("predicted social welfare")
    assert any(r.startswith("root.q1: ") and "within 150 s" in r for r in first.reasons)
    assert any(c.queue == "root.q1" and c.prop == "capacity" for c in first.changes)
    snapshot = proposer.snapshot
    assert snapshot is not None
    assert {d.application for d in snapshot.demands} == {"root.q1", "root.q2"}
    page = create_app(service).test_client().get("/proposals/1").get_data(as_text=True)
    assert "No job latency is predicted" in page and "predicted social welfare" in page
    assert "root.q1" in page and "capacity" in page
    service.close()
