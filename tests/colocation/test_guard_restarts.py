"""The guard through restarts, on the real two-node YARN (issue 30). Measured on Hadoop
3.4.3 (tests/minicluster/test_colocation_cluster.py, test_ha_nodes.py): a NodeManager
that restarts registers with the total it is configured with, so YARN forgets the
guard's ``updateNodeResource``; a restarted or failed-over ResourceManager gets the
lowered total back from the NodeManager, which was told it in a heartbeat answer. The
guard notices the first within one cycle and pushes its total again; of the second it
says in the audit log that the RM is a new one, and pushes again what is missing. The
journal keeps the registered total as the original throughout, and nothing is killed.
"""

from __future__ import annotations

from pathlib import Path

from tests.colocation.conftest import open_store, write_traces
from tests.colocation.test_guard_live import FLOOR, WHOLE, RmNodes, totals
from tracing.redisconn import RedisConfig
from tracing.risk import RiskSettings
from yarn_adapt.colocation.actuate import Result, RmNodeTotals
from yarn_adapt.colocation.demand import NoDemand
from yarn_adapt.colocation.guard import ColocationGuard, MemoryRecorder
from yarn_adapt.colocation.model import GuardMode, GuardPolicy, GuardSettings
from yarn_adapt.colocation.observe import GuardObserver, TraceStoreRisk
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.yarn.apply import PollSettings
from yarn_adapt.yarn.http import HttpSettings
from yarn_adapt.yarn.rm import ResourceManagerClient

ELSEWHERE = "elsewhere:1"


def test_a_total_yarn_forgets_is_pushed_again_and_an_rm_restart_is_said(
    colocation_cluster: MiniCluster, trace_config: RedisConfig, state_dir: Path
) -> None:
    cluster = colocation_cluster
    risky = cluster.nodemanager_id(0)
    write_traces(trace_config, {risky: 60_000, ELSEWHERE: 2_000})
    rm = ResourceManagerClient([cluster.rm_url], HttpSettings(read_timeout_s=15.0, retries=1))
    recorder = MemoryRecorder()
    with rm:
        guard = ColocationGuard(
            GuardSettings(nu=1.0, policy=GuardPolicy.TOPOSCH_PAPER),
            GuardObserver(
                TraceStoreRisk(
                    lambda: open_store(trace_config),
                    window_s=600.0,
                    risk_settings=RiskSettings(alpha=0.5),
                ),
                NoDemand(),
            ),
            RmNodeTotals(rm, state_dir, verify=PollSettings(timeout_s=15.0, interval_s=0.1)),
            recorder,
            mode=GuardMode.AUTO,
        )
        try:
            report = guard.run_round(RmNodes(cluster).nodes())
            assert report.outcomes[risky].result is Result.DONE
            assert totals(cluster)[risky] == FLOOR

            # A NodeManager restart: YARN forgets; one cycle pushes the total again.
            cluster.restart_nodemanager(0)
            assert totals(cluster)[risky] == WHOLE
            guard.run_round(RmNodes(cluster).nodes())
            assert totals(cluster)[risky] == FLOOR
            (entry,) = guard.actuator.journalled().values()
            assert (entry.node_id, entry.original, entry.last_set) == (risky, WHOLE, FLOOR)
            pushed = [d for a, d in recorder.audit_log if a == "guard pushes a forgotten total"
                      " again"]  # fmt: skip
            assert len(pushed) == 1 and risky in pushed[0] and "pushed again: done" in pushed[0]
            assert guard.repushes == {risky: 1}
            assert 0 < guard.repush_gap_s[risky] < 120  # since the cycle that saw it held

            # An RM restart: the NodeManager registers again with the total it was last
            # told in a heartbeat answer -- the guard's, or (a restart right after the
            # push, before the next heartbeat) its own; either way one cycle later the
            # node has the guard's total, and the audit log says the RM is a new one.
            cluster.restart_resourcemanager()
            guard.run_round(RmNodes(cluster).nodes())
            assert totals(cluster)[risky] == FLOOR
            (said,) = [d for a, d in recorder.audit_log if a == "guard sees a new ResourceManager"]
            assert "the RM answering now started at " in said, said
            assert not any("kill" in a for a, _ in recorder.audit_log), recorder.audit_log
            assert guard.actuator.journalled()[risky].original == WHOLE
        finally:
            restored = guard.stop()
            guard.close()
    assert [o.result for o in restored] == [Result.DONE]
    assert totals(cluster)[risky] == WHOLE
