"""The live testbed in its short form: the application's P95 with the guard and the node
agents on is below its P95 with the guard off in every run, by a factor larger than the
run-to-run spread (max / min) of either (three runs each); batch goes where the guard
sends it and none of it is killed; the agents (real ``yarn-adapt agent run``
processes reading the reclaim requests of a real ``yarn-adapt serve``) squeezed
batch containers in mini-steps, and when stopped put every limit back: clean exit, no
state file, no cgroup of theirs left, every process they had moved back where it came
from. The full form, with the guard-only phase and the makespans, is ``yarn-adapt bench
testbed``."""

from __future__ import annotations

import statistics
from pathlib import Path

from yarn_adapt.colocation.model import DEFAULT_MIN_VISIBLE_FRACTION
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.testbed import options as tb_options
from yarn_adapt.testbed import results as tb_results
from yarn_adapt.testbed import run as testbed
from yarn_adapt.testbed.cluster import NODE_VCORES

# The guard never empties a node: batch keeps a quarter of it (1 of its 4 vcores).
FLOOR_VCORES = DEFAULT_MIN_VISIBLE_FRACTION * NODE_VCORES

SHORT = tb_options.TestbedOptions(
    rate_rps=20.0,
    warmup_s=2.0,
    alone_s=4.0,
    phase_s=6.0,
    repeats=3,
    settle_max_s=8.0,
    makespan=False,
    guard_only=False,
    baselines=False,
    load_profile="steady",  # a constant load and CPU burners: the effect alone
    batch_mix="cpu",  # the baselines are the bench's (each a serve restart or a static close)
    # Batch and services as equal tasks: the guard's effect is far beyond the spread
    # here. With YARN's CPU weights (the bench's default) "off" is milder and noisier
    # (seen: 122-324 ms off against 63-93 ms on, effect 2.6x within an off spread of
    # 2.6x); the weights' placement has its own test (test_yarn_cgroups.py).
    yarn_cgroups=False,
)


def test_the_guard_and_the_agents_lower_the_applications_tail_latency_and_restore_every_limit(
    colocation_cluster: MiniCluster, tmp_path: Path
) -> None:
    result = testbed.run_testbed(colocation_cluster, SHORT, colocation_cluster.root / "testbed")
    report = "\n".join(result.table())
    off, on = result.p95s("off"), result.p95s("on")
    assert len(off) == len(on) == 3, report
    # Latency noise is multiplicative (an unguarded window's P95 moves by factors with
    # the batch's bursts, a guarded one's by milliseconds), so effect and spread are
    # ratios: every run without the guard is slower than every run with it, and the
    # guard's effect (mean off / mean on) exceeds the run-to-run spread (max / min).
    assert min(off) > max(on), report
    spread = max(max(off) / min(off), max(on) / min(on))
    assert statistics.fmean(off) / statistics.fmean(on) > spread, report
    assert result.preempted_containers == 0
    for window, figures in result.windows:
        # at least half the requests the window's length asks (alone windows are shorter)
        length = SHORT.alone_s if window.name == "alone" else SHORT.phase_s
        assert figures.requests >= 0.5 * SHORT.rate_rps * length, report
        if window.name == "on":  # the risky node keeps its floor of batch, or its agent
            held = window.reclaimed_millicores[0]  # squeezes what runs above it
            assert window.risky_node_batch_vcores <= FLOOR_VCORES + 0.5 or held > 0, report
        if window.name == "off":  # batch uses it again
            assert window.risky_node_batch_vcores >= 0.5, report
    assert result.guard_rounds > 0 and not result.guard_problems, result.guard_problems

    agents = result.summary()["agents"]
    assert result.qos_target_ms is not None and result.qos_target_ms > 0
    # Squeezed, in mini-steps: some task took more than one step.
    assert agents["tasks_squeezed"] > 0 and agents["steps"] > agents["tasks_squeezed"], agents
    # None killed. A poll of the service may time out while the node's CPUs are
    # saturated by design (the agent keeps its last target): a few are tolerated.
    assert agents["killed"] == 0 and agents["request_errors"] <= 10, agents
    # Stopped while batch still ran: every limit back.
    assert result.restores, agents
    final = result.restores[-1]
    assert final.exit_codes == [0, 0], agents
    assert not final.state_files_left and not final.groups_left, agents
    # The last stop caught squeezed processes still running (its long burners outlive
    # it), and every one went back.
    assert any(c.caught_squeezed for c in result.restores), [c.to_json() for c in result.restores]
    assert all(
        c.pids_back == c.pids_checked and c.limits_back == c.limits_checked for c in result.restores
    ), final.misplaced
    assert all(check.complete for check in result.restores), agents

    # The calibration's measurements: per node the batch CPU share (cpuacct), per service
    # replica its requests and their CPU time; batch used the risky node's CPU without
    # the guard and (much) less with it, and none ran in the first alone window.
    windows = tb_results.result_json(result)["windows"]
    assert [w["name"] for w in windows] == [w.name for w, _ in result.windows]
    for window in windows:
        assert len(window["batch_cpu_share"]) == 2, window
        assert all(0.0 <= share <= 1.0 for share in window["batch_cpu_share"]), window
        replicas = {(s["service"], s["node"]): s for s in window["services"]}
        assert len(replicas) == 4, window
        for replica in replicas.values():
            assert replica["requests"] > 0 and replica["cpu_ms_median"] > 0, window
            assert replica["self_p95_ms"] >= replica["cpu_ms_median"] * 0.5, window
    assert max(windows[0]["batch_cpu_share"]) < 0.1, windows[0]
    risky = {name: statistics.fmean(w["batch_cpu_share"][0] for w in windows if w["name"] == name)
             for name in ("off", "on")}  # fmt: skip
    # How much less is the guard's to decide: it lowers the risky node by the danger it
    # sees (SLO slack), down to its floor of a quarter of the node (issue 23), so "on"
    # may keep 1 to 3 of the 4 burners there (seen: 0.59 off, 0.41 on with 3 vcores).
    assert risky["off"] > 0.2 and risky["off"] > risky["on"], risky


def test_the_baselines_close_the_risky_node_and_restart_the_service_under_their_policy(
    colocation_cluster: MiniCluster,
) -> None:
    """The bench's baselines without their windows: ``static`` closes the risky node
    to batch through the RM and gives it back after; ``slack-only`` restarts ``serve``
    under that policy with the agents; ``off`` stops the agents, which put back all
    they changed."""
    with testbed.Testbed(colocation_cluster, SHORT, colocation_cluster.root / "baselines") as bed:
        risky = bed.node_ids[0]
        whole = bed.rm.node(risky).total
        bed.enter(tb_options.STATIC)
        assert bed.rm.node(risky).total.vcores == bed.floor_vcores
        bed.enter(tb_options.SLACK_ONLY)
        assert bed.rm.node(risky).total == whole
        assert bed.service is not None and bed.service.starts == 2
        status = bed.service.status()
        assert status is not None and status["policy"] == "slack-only"
        assert status["mode"] == "auto"
        assert all(agent.running for agent in bed.agents)
        bed.enter(tb_options.OFF)
        assert not any(agent.running for agent in bed.agents)
        assert bed.restores and all(check.complete for check in bed.restores)
    nodes = colocation_cluster.rm_get("nodes")["nodes"]["node"]
    after = next(n["totalResource"] for n in nodes if n["id"] == risky)
    assert (after["memory"], after["vCores"]) == (whole.memory_mb, whole.vcores)
