"""Acceptance against the real mini YARN with the Fair Scheduler: the service
proposes a change of weights, an operator approves it, the allocation file is
rewritten and the scheduler's own reload picks it up; the apply is verified through
the steady fair shares the RM reports (weights themselves are not reported)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from tests.service.factories import TOKEN
from tests.service.live import api, live_settings
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.model import FairSchedulerConfig
from yarn_adapt.service.backend import Observed, YarnBackend
from yarn_adapt.service.runner import serving
from yarn_adapt.service.service import Service
from yarn_adapt.service.state.records import GroupPrediction, ProposalState, Suggestion
from yarn_adapt.yarn.apply import ApplyStep
from yarn_adapt.yarn.confxml import read_fair

WEIGHTS = {"default": 1.0, "a": 3.0, "b": 1.0}


@dataclass
class FairWeightsProposer:
    """Stands in for the tuner (its choices are tested elsewhere): proposes these
    weights for the leaves of root, every time it is asked."""

    weights: dict[str, float]

    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        config = observed.config
        assert isinstance(config, FairSchedulerConfig)
        for leaf, weight in self.weights.items():
            queue = config.find(f"root.{leaf}")
            assert queue is not None
            config = config.with_queue(replace(queue, weight=weight))
        group = GroupPrediction("root", 100.0, 70.0, jobs=4)
        reasons = tuple(f"root.{leaf} weight -> {w:g}" for leaf, w in self.weights.items())
        return Suggestion(config, (group,), 100.0, 70.0, reasons, ("root",))


def steady_fair_memory(cluster: MiniCluster) -> dict[str, int]:
    root = cluster.rm_get("scheduler")["scheduler"]["schedulerInfo"]["rootQueue"]
    leaves = root["childQueues"]["queue"]
    return {q["queueName"].removeprefix("root."): int(q["steadyFairResources"]["memory"])
            for q in leaves}  # fmt: skip


def test_the_service_proposes_and_applies_through_the_fair_reload(
    fair_cluster: MiniCluster, tmp_path: Path
) -> None:
    before = steady_fair_memory(fair_cluster)
    assert before["a"] == before["b"] == before["default"]
    settings = live_settings(fair_cluster, tmp_path, scheduler={"verify_timeout_s": 45.0})
    service = Service.build(
        settings, YarnBackend(settings), FairWeightsProposer(WEIGHTS), token=TOKEN
    )
    try:
        assert service.start() == []
        with serving(service) as server:
            assert server is not None
            round_reply = api(server.url, "POST", "/api/rounds")
            assert round_reply.json()["decisions"][0]["kind"] == "proposed", round_reply.text
            detail = api(server.url, "GET", "/api/proposals/1", token=None).json()
            added = [line for line in detail["xml_diff"].splitlines() if line.startswith("+ ")]
            assert any('name="a"' in line and "<weight>3" in line for line in added), added
            assert steady_fair_memory(fair_cluster) == before  # nothing changed yet

            approved = api(server.url, "POST", "/api/proposals/1/approve")
            assert approved.status_code == 200, approved.text
            assert approved.json()["state"] == "applied", approved.text

        assert service.store.proposal(1).state is ProposalState.APPLIED
        on_disk = read_fair(fair_cluster.scheduler_xml_path).config
        queue_a = on_disk.find("root.a")
        assert queue_a is not None and queue_a.weight == 3.0
        after = steady_fair_memory(fair_cluster)
        # 3 : 1 : 1 of 8192 MB, to the scheduler's rounding of each share
        assert after["b"] == after["default"] and abs(after["a"] - 3 * after["b"]) <= 4, after
        [apply_row] = service.store.applies(proposal_id=1)
        steps = [e.step for e in service.store.journal_entries(apply_row.apply_id)]
        assert steps[-1] is ApplyStep.VERIFIED, steps
        assert ApplyStep.ACTIVATED in steps
    finally:
        service.close()
