"""The guard against a real two-node YARN (each NodeManager pinned to one CPU) and a
real redis-server: it lowers the risky node's total to its floor (a quarter: never
empty), the RM places the next batch containers on the other node, no running
container is killed, and every node's total comes back -- at stop, after kill -9 +
``yarn-adapt recover``, and when the guard is switched off. A node whose total changes
outside the guard (standing in for a NodeManager re-registering smaller) keeps that
total as its capacity: stop and recover never put back the old one. Bad input: traces
missing for a node, an RM that refuses the update, a node the RM does not know, a node
back under a new port -- no action there, a clear status, nothing left throttled.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.colocation.conftest import open_store, write_traces
from tests.colocation.faults import RefusingRM
from tracing.redisconn import RedisConfig
from tracing.risk import RiskSettings
from yarn_adapt.cli import cli
from yarn_adapt.colocation.actuate import Result, RmNodeTotals
from yarn_adapt.colocation.demand import NoDemand
from yarn_adapt.colocation.guard import ColocationGuard, MemoryRecorder
from yarn_adapt.colocation.model import (
    Action,
    GuardMode,
    GuardPolicy,
    GuardSettings,
    NodeDecision,
)
from yarn_adapt.colocation.observe import GuardObserver, TraceStoreRisk
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.model import Resources
from yarn_adapt.yarn.apply import PollSettings
from yarn_adapt.yarn.http import HttpSettings
from yarn_adapt.yarn.rm import ResourceManagerClient

WHOLE = Resources(4096, 4)
FLOOR = Resources(1024, 1)  # the default floor: a quarter of the node
NOTHING = Resources(0, 0)
ELSEWHERE = "elsewhere:1"  # a host with traces that is no node of this cluster


@contextmanager
def guard_for(rm_url: str, config: RedisConfig, state_dir: Path) -> Iterator[ColocationGuard]:
    with ResourceManagerClient([rm_url], HttpSettings(read_timeout_s=15.0, retries=0)) as rm:
        guard = make_guard(rm, config, state_dir)
        try:
            yield guard
        finally:
            guard.close()


def make_guard(rm: ResourceManagerClient, config: RedisConfig, state_dir: Path) -> ColocationGuard:
    risk = TraceStoreRisk(lambda: open_store(config), window_s=120.0,
                          risk_settings=RiskSettings(alpha=0.5))  # fmt: skip
    return ColocationGuard(
        # the paper's rank lowers the risky node with no QoS target: these tests are
        # about acting on the RM, journalling and giving back (the slack policy's
        # decision: test_slack.py; live: test_service_live.py)
        GuardSettings(nu=1.0, policy=GuardPolicy.TOPOSCH_PAPER),
        GuardObserver(risk, NoDemand()),
        RmNodeTotals(rm, state_dir, verify=PollSettings(timeout_s=15.0, interval_s=0.1)),
        MemoryRecorder(),
        mode=GuardMode.AUTO,
    )


def totals(cluster: MiniCluster) -> dict[str, Resources]:
    rm = ResourceManagerClient([cluster.rm_url], HttpSettings())
    with rm:
        return {node.id: node.total for node in rm.nodes()}


def used(cluster: MiniCluster) -> dict[str, int]:
    nodes = cluster.rm_get("nodes")["nodes"]["node"]
    return {node["id"]: int(node["usedVirtualCores"]) for node in nodes}


def test_guard_moves_new_batch_off_the_risky_node_and_gives_every_node_back(
    colocation_cluster: MiniCluster, trace_config: RedisConfig, state_dir: Path
) -> None:
    cluster = colocation_cluster
    risky, other = cluster.node_ids()
    # 1 AM + 9 containers of 1 vcore / 1 GB: 7 fit at once (4 a node), so both nodes run
    # some and 2 wait for a second wave.
    app = cluster.submit_sleep_app("default", 9, 6, container_mb=1024, name="batch")
    app_id = app.application_id()
    _until(lambda: sum(used(cluster).values()) == 8, 120, "both nodes full of batch")
    running_on_risky = used(cluster)[risky]
    assert running_on_risky >= 1

    # Traces: the risky node's service is slow; the other node sends none.
    write_traces(trace_config, {risky: 60_000, ELSEWHERE: 2_000})
    with guard_for(cluster.rm_url, trace_config, state_dir) as guard:
        _throttle_and_give_back(cluster, guard, app_id, risky, other, running_on_risky)


def _throttle_and_give_back(
    cluster: MiniCluster,
    guard: ColocationGuard,
    app_id: str,
    risky: str,
    other: str,
    running_on_risky: int,
) -> None:
    report = guard.run_round(RmNodes(cluster).nodes())
    decisions = {d.node_id: d for d in report.plan.decisions}  # type: ignore[union-attr]
    assert decisions[risky].action is Action.LOWER
    assert report.outcomes[risky].result is Result.DONE
    assert decisions[other].action is Action.HOLD
    assert "no traces from this node" in decisions[other].reason
    assert totals(cluster)[risky] == FLOOR  # below what runs there: overcommitted
    assert totals(cluster)[other] == WHOLE
    # what the agent is asked: batch's use above the floor, never all of it
    assert decisions[risky].reclaim.vcores == running_on_risky - FLOOR.vcores

    # The second wave goes to the other node (the risky one takes new work only below
    # its floor); nothing on the risky one is killed.
    seen_on_risky_after: list[int] = []

    def finished() -> bool:
        seen_on_risky_after.append(used(cluster)[risky])
        return cluster.app(app_id)["state"] in ("FINISHED", "FAILED", "KILLED")

    _until(finished, 180, "the batch app to finish")
    final = cluster.app(app_id)
    assert (final["state"], final["finalStatus"]) == ("FINISHED", "SUCCEEDED")
    assert int(final.get("numNonAMContainerPreempted", 0)) == 0
    # what it runs only shrinks until it is within the floor, and stays within it
    samples = [running_on_risky, *seen_on_risky_after]
    assert all(b <= max(a, FLOOR.vcores) for a, b in itertools.pairwise(samples)), samples
    assert seen_on_risky_after[-1] <= max(FLOOR.vcores, 1 if _am_on(cluster, final, risky) else 0)

    # Stop: every total back, the journal empty.
    restored = guard.stop()
    assert [o.result for o in restored] == [Result.DONE]
    assert totals(cluster) == {risky: WHOLE, other: WHOLE}
    assert guard.actuator.pending_nodes() == []

    # Switched off: lowered again, then off gives it back at once.
    guard.run_round(RmNodes(cluster).nodes())
    assert totals(cluster)[risky] == FLOOR
    back = guard.set_mode(GuardMode.OFF, "test")
    assert [o.node_id for o in back] == [risky]
    assert totals(cluster) == {risky: WHOLE, other: WHOLE}
    assert guard.reclaim_for(risky) is None


def test_kill_9_then_recover_gives_the_node_back(
    colocation_cluster: MiniCluster, trace_config: RedisConfig, state_dir: Path
) -> None:
    cluster = colocation_cluster
    risky, other = cluster.node_ids()
    write_traces(trace_config, {risky: 60_000, ELSEWHERE: 2_000})
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, cluster.rm_url, trace_config.url, trace_config.prefix,
         str(state_dir)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": _package_parent()},
    )  # fmt: skip
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "throttled"
        assert totals(cluster)[risky] == FLOOR
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        if child.stdout is not None:
            child.stdout.close()
    assert totals(cluster)[risky] == FLOOR  # nothing gave it back
    result = CliRunner().invoke(
        cli, ["recover", "--rm", cluster.rm_url, "--state-dir", str(state_dir)]
    )
    assert result.exit_code == 0, result.output
    assert f"node {risky}: done: restored 4096 MB / 4 vcores" in result.output
    assert totals(cluster) == {risky: WHOLE, other: WHOLE}
    with ResourceManagerClient([cluster.rm_url]) as rm:
        assert RmNodeTotals(rm, state_dir).pending_nodes() == []


CHILD = """
import sys
from pathlib import Path
from tests.colocation.test_guard_live import make_guard, RmNodes
from tracing.redisconn import RedisConfig
from yarn_adapt.yarn.rm import ResourceManagerClient
url, redis_url, prefix, state = sys.argv[1:]
rm = ResourceManagerClient([url])
guard = make_guard(rm, RedisConfig(url=redis_url, prefix=prefix), Path(state))
report = guard.run_round(RmNodes.of(url).nodes())
assert any(o.result.value == "done" for o in report.outcomes.values()), report.summary()
print("throttled", flush=True)
import time
time.sleep(600)
"""


def test_an_rm_that_refuses_leaves_the_node_as_it_was(
    colocation_cluster: MiniCluster, trace_config: RedisConfig, state_dir: Path
) -> None:
    cluster = colocation_cluster
    risky, other = cluster.node_ids()
    write_traces(trace_config, {risky: 60_000, other: 2_000})
    with (
        RefusingRM(cluster.rm_url) as proxy,
        guard_for(proxy.url, trace_config, state_dir) as guard,
    ):
        report = guard.run_round(RmNodes(cluster).nodes())
    outcome = report.outcomes[risky]
    assert outcome.result is Result.REFUSED
    assert "the RM refused" in outcome.status and "403" in outcome.status
    assert proxy.refused == 1
    assert totals(cluster) == {risky: WHOLE, other: WHOLE}
    assert guard.actuator.pending_nodes() == []  # nothing journalled to undo
    request = guard.reclaim_for(risky)
    assert request is not None and request.cpu_millicores == 0  # the total did not change


def test_a_node_the_rm_does_not_know_is_left_alone_and_kept_in_the_journal(
    colocation_cluster: MiniCluster, state_dir: Path
) -> None:
    with ResourceManagerClient([colocation_cluster.rm_url], HttpSettings(retries=0)) as rm:
        _unknown_node(rm, state_dir)


def test_a_node_back_whole_is_a_total_yarn_forgot_and_is_pushed_again(
    colocation_cluster: MiniCluster, trace_config: RedisConfig, state_dir: Path
) -> None:
    """A node the guard had lowered that YARN reports whole again (what a NodeManager
    restart does, issue 30): the guard's total was forgotten, not given back -- the
    same round pushes it again, keeps the node journalled and decides from there; the
    guard's stop gives the node back whole and empties the journal."""
    risky, _ = colocation_cluster.node_ids()
    write_traces(trace_config, {ELSEWHERE: 60_000, risky: 2_000})  # the node's risk is 0
    with guard_for(colocation_cluster.rm_url, trace_config, state_dir) as guard:
        guard.actuator.originals.intend(risky, WHOLE, NOTHING)  # type: ignore[attr-defined]
        guard.actuator.originals.confirmed(risky, NOTHING)  # type: ignore[attr-defined]
        report = guard.run_round(RmNodes(colocation_cluster).nodes())
        assert guard.repushes == {risky: 1}
        assert guard.actuator.pending_nodes() == [risky]
        assert report.plan is not None
        (decision,) = [d for d in report.plan.decisions if d.node_id == risky]
        assert decision.current == NOTHING  # decided from the total pushed again
        assert totals(colocation_cluster)[risky] == decision.target != WHOLE
        assert [o.result for o in guard.stop()] == [Result.DONE]
        assert guard.actuator.pending_nodes() == []
    assert totals(colocation_cluster)[risky] == WHOLE


@pytest.mark.parametrize("ending", ["stop", "recover"])
def test_a_node_that_came_back_smaller_is_restored_to_what_it_has_now(
    colocation_cluster: MiniCluster, trace_config: RedisConfig, state_dir: Path, ending: str
) -> None:
    """Lowered by the guard, then set smaller from outside (an operator's own update
    standing in for a NodeManager re-registering with 3 GB / 3 vcores): the next round
    takes that as the node's capacity (and says so), and stopping -- or kill -9 and
    ``yarn-adapt recover`` -- ends the node at 3 GB, never the old 4 GB."""
    cluster = colocation_cluster
    risky, other = cluster.node_ids()
    smaller = Resources(3072, 3)
    write_traces(trace_config, {risky: 60_000, ELSEWHERE: 2_000})
    with guard_for(cluster.rm_url, trace_config, state_dir) as guard:
        guard.run_round(RmNodes(cluster).nodes())
        lowered = totals(cluster)[risky]
        assert lowered.fits_in(smaller) and lowered != smaller  # lowered by the guard
        cluster.set_node_resource(risky, smaller.memory_mb, smaller.vcores)

        report = guard.run_round(RmNodes(cluster).nodes())
        decision = report.plan.decision(risky)  # type: ignore[union-attr]
        assert decision is not None and decision.capacity == smaller, report.summary()
        assert decision.target == Resources(768, 1)  # a quarter of what it has now
        assert totals(cluster)[risky] == Resources(768, 1)
        recorder = guard.recorder
        assert isinstance(recorder, MemoryRecorder)
        assert any(
            action == "guard journal follows node"
            and detail.startswith(f"{risky}: changed outside the guard: total 3072 MB / 3 vcores")
            for action, detail in recorder.audit_log
        ), recorder.audit_log
        if ending == "stop":
            assert [o.result for o in guard.stop()] == [Result.DONE]
    if ending == "recover":
        result = CliRunner().invoke(
            cli, ["recover", "--rm", cluster.rm_url, "--state-dir", str(state_dir)]
        )
        assert result.exit_code == 0, result.output
        assert f"node {risky}: done: restored 3072 MB / 3 vcores" in result.output
    assert totals(cluster) == {risky: smaller, other: WHOLE}
    with ResourceManagerClient([cluster.rm_url]) as rm:
        assert RmNodeTotals(rm, state_dir).pending_nodes() == []


def test_an_entry_of_a_node_back_under_a_new_port_is_dropped(
    colocation_cluster: MiniCluster, state_dir: Path
) -> None:
    """The journal holds a lowered node ``host:1`` the RM no longer lists, while it
    lists a node on the same host it does not journal: the NodeManager came back under
    a new id. ``recover`` drops the old entry (saying why), changes no node, succeeds."""
    cluster = colocation_cluster
    host = cluster.node_ids()[0].rsplit(":", 1)[0]
    old = f"{host}:1"
    with ResourceManagerClient([cluster.rm_url]) as rm:
        journal = RmNodeTotals(rm, state_dir).originals
        journal.intend(old, Resources(8192, 8), FLOOR)
        journal.confirmed(old, FLOOR)
    result = CliRunner().invoke(
        cli, ["recover", "--rm", cluster.rm_url, "--state-dir", str(state_dir)]
    )
    assert result.exit_code == 0, result.output
    assert f"node {old}: left-alone: back under a new node id: the RM no longer lists it" in (
        result.output
    )
    assert journal.load() == {}
    assert set(totals(cluster).values()) == {WHOLE}


def _unknown_node(rm: ResourceManagerClient, state_dir: Path) -> None:
    actuator = RmNodeTotals(rm, state_dir, verify=PollSettings(timeout_s=2.0, interval_s=0.1))
    gone = "lost-host:1"  # no node of the cluster on that host
    decision = NodeDecision(
        node_id=gone, capacity=WHOLE, current=WHOLE, target=FLOOR, wanted=FLOOR,
        used=NOTHING, reclaim=NOTHING, action=Action.LOWER, reason="test",
    )  # fmt: skip
    outcome = actuator.apply(decision)
    assert outcome.result is Result.GONE
    assert "no longer knows the node" in outcome.status
    # a node the guard had lowered, then lost: kept until it re-registers
    actuator.originals.intend(gone, WHOLE, FLOOR)
    (kept,) = actuator.restore_all()
    assert kept.result is Result.GONE
    assert actuator.pending_nodes() == [gone]


# --------------------------------------------------------------------------- helpers


class RmNodes:
    def __init__(self, cluster: MiniCluster | None = None, url: str | None = None) -> None:
        self.url = url or (cluster.rm_url if cluster else "")

    @classmethod
    def of(cls, url: str) -> RmNodes:
        return cls(url=url)

    def nodes(self) -> tuple:  # type: ignore[type-arg]
        with ResourceManagerClient([self.url], HttpSettings()) as rm:
            return rm.nodes()


def _am_on(cluster: MiniCluster, app: dict[str, object], node_id: str) -> bool:
    nodes = cluster.rm_get("nodes")["nodes"]["node"]
    http = next(n["nodeHTTPAddress"] for n in nodes if n["id"] == node_id)
    return str(app.get("amHostHttpAddress", "")) == http


def _until(check: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.3)
    pytest.fail(f"timed out waiting for {what}")


def _package_parent() -> str:
    return str(Path(__file__).resolve().parents[2])
