"""One short check of the Cilantro proposer on the real mini YARN (Hadoop 3.4 RM +
NM + JobHistory, capacity scheduler): applications of queue ``a`` miss its SLO, the
proposer reads that from the RM's application list and proposes more capacity for
``a`` within the step limit; approved, the RM runs it."""

from __future__ import annotations

import time
from pathlib import Path

from tests.service.live import live_service, reported_capacities
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.service.proposers.cilantro_adapter import CilantroProposer
from yarn_adapt.service.settings import Settings
from yarn_adapt.service.state.records import DecisionKind


def test_a_queue_missing_its_slo_gets_capacity_on_the_real_rm(
    capacity_cluster: MiniCluster, tmp_path: Path
) -> None:
    cilantro = {"policy": "sw", "latency_s": 3.0, "fraction": 0.9, "max_step": 0.1}
    tuning = {"proposer": "cilantro", "min_improvement": 0.0}
    service = live_service(capacity_cluster, tmp_path, tuning=tuning, cilantro=cilantro)
    settings: Settings = service.settings
    proposer = CilantroProposer(settings)
    service.loop.proposer = proposer
    assert service.start() == []
    # The cluster is shared with other tests: feedback counts this test's applications
    # only (the first round would otherwise look back a whole interval).
    proposer.last_taken_ms = int(time.time() * 1000)
    apps = [capacity_cluster.submit_sleep_app("a", containers=1, sleep_s=15) for _ in range(4)]
    for app in apps:
        app.application_id()
    time.sleep(4.0)  # past the 3 s bound: all four are decided, as misses
    report = service.loop.run_round()
    [decision] = report.decisions
    assert decision.kind is DecisionKind.PROPOSED, decision.reason
    proposal = service.store.proposal(decision.proposal_id or 0)
    capacity = {c.queue: c for c in proposal.changes if c.prop == "capacity"}
    assert "root.a" in capacity, (proposal.changes, proposal.reasons)
    assert float(capacity["root.a"].new) > float(capacity["root.a"].old)
    assert float(capacity["root.a"].new) - float(capacity["root.a"].old) <= 10.5
    assert any(r.startswith("root.a: 4 submitted, 0/4 within 3 s") for r in proposal.reasons)
    demand = proposer.snapshot.of("root.a") if proposer.snapshot else None
    assert demand is not None and demand.observations == 1
    before = reported_capacities(capacity_cluster)
    applied = service.desk.approve(proposal.id, "test")
    assert str(applied.state) == "applied", applied.note
    after = reported_capacities(capacity_cluster)
    assert after["a"] > before["a"]
    service.close()
