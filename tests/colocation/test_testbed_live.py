"""The live testbed in its short form: the application's P95 with the guard on is
below its P95 with the guard off, by more than the run-to-run spread of either
(three runs each); batch goes where the guard sends it and none of it is killed.
The full form is ``yarn-adapt bench testbed``."""

from __future__ import annotations

import statistics
from pathlib import Path

from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.testbed import run as testbed

SHORT = testbed.TestbedOptions(
    rate_rps=20.0,
    warmup_s=2.0,
    alone_s=4.0,
    phase_s=6.0,
    repeats=3,
    settle_max_s=8.0,
    makespan=False,
)


def test_the_guard_lowers_the_applications_tail_latency(
    colocation_cluster: MiniCluster, tmp_path: Path
) -> None:
    result = testbed.run_testbed(colocation_cluster, SHORT, colocation_cluster.root / "testbed")
    report = "\n".join(result.table())
    off, on = result.p95s("off"), result.p95s("on")
    assert len(off) == len(on) == 3, report
    spread = max(max(off) - min(off), max(on) - min(on))
    assert statistics.fmean(off) - statistics.fmean(on) > spread, report
    assert result.preempted_containers == 0
    for window, figures in result.windows:
        assert figures.requests >= 0.5 * SHORT.rate_rps * SHORT.phase_s, report
        if window.name == "on":  # the risky node keeps no batch
            assert window.risky_node_batch_vcores < 0.5, report
        if window.name == "off":  # batch uses it again
            assert window.risky_node_batch_vcores >= 0.5, report
    assert result.guard_rounds > 0 and not result.guard_problems, result.guard_problems
