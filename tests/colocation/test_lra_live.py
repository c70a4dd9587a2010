"""The guard with learned demand on the live testbed's pieces: the instrumented
services under open-loop load on the two-node mini YARN, their traces in a real
redis, their CPU from /proc. The guard (recommend mode) publishes each round a
demand whose upper bound covers the CPU the services measurably used, split over
the two nodes as their use is."""

from __future__ import annotations

import time
from pathlib import Path

from tracing.redisconn import make_client
from tracing.risk import RiskSettings
from tracing.store import TraceStore
from yarn_adapt.colocation.actuate import RmNodeTotals
from yarn_adapt.colocation.guard import ColocationGuard, MemoryRecorder
from yarn_adapt.colocation.lra import LearnedLraDemand, ProcessCpuUsage
from yarn_adapt.colocation.model import GuardMode, GuardSettings
from yarn_adapt.colocation.observe import GuardObserver, TraceStoreRisk
from yarn_adapt.demand.lra import LraDemandLearner, LraSettings, LraSpec
from yarn_adapt.demand.model import DemandSource
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.testbed import options as tb_options
from yarn_adapt.testbed import run as testbed
from yarn_adapt.testbed.cluster import NODE_VCORES

OPTIONS = tb_options.TestbedOptions(rate_rps=30.0, warmup_s=2.0, makespan=False)


def test_the_learned_demand_covers_the_cpu_the_services_used(
    colocation_cluster: MiniCluster, tmp_path: Path
) -> None:
    with testbed.Testbed(colocation_cluster, OPTIONS, colocation_cluster.root / "lra-live") as bed:
        service_pids = bed.service_pids  # node id -> the services' pids
        learner = LraDemandLearner(
            [LraSpec("shop", ("frontend", "inventory", "pricing"), target_ms=2000.0)],
            LraSettings(min_requests=10),
        )
        provider = LearnedLraDemand(learner, ProcessCpuUsage(lambda: {"shop": service_pids()}),
                                    round_s=2.0, vcores_per_core=float(NODE_VCORES))  # fmt: skip
        risk = TraceStoreRisk(
            lambda: TraceStore(make_client(bed.redis_config), bed.redis_config),
            window_s=6.0, risk_settings=RiskSettings(alpha=0.5), targets_ms={"frontend": 2000.0},
        )  # fmt: skip
        guard = ColocationGuard(
            GuardSettings(), GuardObserver(risk, provider),
            RmNodeTotals(bed.rm, tmp_path / "state"), MemoryRecorder(), mode=GuardMode.RECOMMEND,
        )  # fmt: skip
        measured = ProcessCpuUsage(lambda: {"shop": service_pids()})  # the check's own
        bed.start_load()
        time.sleep(OPTIONS.warmup_s)
        measured.read([], None, 0.0)
        reports = []
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            time.sleep(1.0)
            reports.append(guard.run_round(bed.rm.nodes()))
        used = measured.read([], None, 1.0)
        guard.close()
    assert used is not None
    used_vcores = {node: cores * NODE_VCORES for node, cores in used["shop"].items()}
    assert provider.rounds >= 3, provider.last_rounds
    assert provider.snapshot is not None
    (demand,) = provider.snapshot.demands
    assert demand.source is DemandSource.LEARNED and demand.observations >= 2
    assert 0.5 * OPTIONS.rate_rps <= demand.load <= 3 * OPTIONS.rate_rps, demand
    assert demand.upper >= sum(used_vcores.values()), (demand, used_vcores)
    plan = reports[-1].plan
    assert plan is not None
    for node_id, vcores in used_vcores.items():
        decision = plan.decision(node_id)
        assert decision is not None and decision.demand is not None, plan.summary()
        assert decision.demand.vcores >= vcores, (decision.demand, used_vcores)
    pricing_node, inventory_node = bed.node_ids  # pricing (CPU-heavy) runs on node 0
    assert plan.decision(pricing_node).demand.vcores > plan.decision(inventory_node).demand.vcores  # type: ignore[union-attr]
