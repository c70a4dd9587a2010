"""The alternative actuator on the real RM (Capacity Scheduler, mutable store): the
batch queue's maximum capacity is capped at the share of the cluster the plan lets
batch see, through the configurator's scheduler-conf applier, and ``yarn-adapt
recover`` puts the original back."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from tests.colocation.factories import inputs, node, risk
from yarn_adapt.cli import cli
from yarn_adapt.colocation.actuate import Result
from yarn_adapt.colocation.decide import decide
from yarn_adapt.colocation.model import GuardPolicy, GuardSettings
from yarn_adapt.colocation.queuecap import QueueCap
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.model import Resources, SchedulerConfig
from yarn_adapt.yarn.apply import (
    Applier,
    ApplySettings,
    MemoryJournal,
    MutationApplier,
    PollSettings,
    running_document,
)
from yarn_adapt.yarn.rm import ResourceManagerClient


def maximum_of(cluster: MiniCluster, queue: str) -> float:
    queues = cluster.rm_get("scheduler")["scheduler"]["schedulerInfo"]["queues"]["queue"]
    return float(next(q for q in queues if q["queueName"] == queue)["maxCapacity"])


def test_the_batch_queue_is_capped_and_recover_gives_the_cap_back(
    colocation_cluster: MiniCluster, state_dir: Path
) -> None:
    cluster = colocation_cluster
    first, second = cluster.node_ids()
    whole = Resources(4096, 4)
    views = [node(first, total=whole, capacity=whole), node(second, total=whole, capacity=whole)]
    plan = decide(
        inputs(views, risk({first: 1.0, second: 0.0})),
        {},
        GuardSettings(policy=GuardPolicy.TOPOSCH_PAPER),
    )  # the rank lowers first
    with ResourceManagerClient([cluster.rm_url]) as rm:
        settings = ApplySettings(state_dir=state_dir, verify=PollSettings(timeout_s=30.0))
        applier: Applier[SchedulerConfig] = MutationApplier(rm, settings, MemoryJournal())  # type: ignore[assignment]
        cap = QueueCap(lambda: running_document(rm), lambda: applier, "root.default", state_dir,
                       via="mutation")  # fmt: skip
        outcomes = cap.act(plan)
        assert {o.result for o in outcomes.values()} == {Result.DONE}
        assert "capped at 62.5 %" in outcomes[first].status  # a quarter of first, all second
        assert maximum_of(cluster, "default") == 62.5
        assert cap.pending_nodes() == ["queue root.default"]
        assert cap.act(plan) == {}  # the same cap again: nothing to do
    result = CliRunner().invoke(
        cli, ["recover", "--rm", cluster.rm_url, "--state-dir", str(state_dir)]
    )
    assert result.exit_code == 0, result.output
    assert "queue root.default: done: root.default maximum-capacity back to 100" in result.output
    assert maximum_of(cluster, "default") == 100.0
