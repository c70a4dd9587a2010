"""The HA pair with NodeManagers: they register with the active ResourceManager and,
after a fail-over, with the other. The ``updateNodeResource`` the first was given is
not in any state store (recovery is off here), yet the new active RM has it: Hadoop
3.4 sends the new total to the NodeManager in its heartbeat answer, and the
NodeManager registers with the other RM under that total. What the guard must notice
is a NodeManager *restart* (test_colocation_cluster.py), not a fail-over."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.colocation.factories import NOW_S, risk
from tests.colocation.test_edges import FixedRisk, NoDemands
from yarn_adapt.cli import cli
from yarn_adapt.colocation.actuate import Result, RmNodeTotals
from yarn_adapt.colocation.guard import ColocationGuard, GuardRoundReport, MemoryRecorder
from yarn_adapt.colocation.model import (
    Action,
    GuardMode,
    GuardPolicy,
    GuardSettings,
    NodeDecision,
    RiskReading,
)
from yarn_adapt.colocation.observe import GuardObserver
from yarn_adapt.colocation.originals import OriginalTotals
from yarn_adapt.minicluster.ha import HAResourceManagerPair
from yarn_adapt.model import Resources
from yarn_adapt.yarn.apply import PollSettings
from yarn_adapt.yarn.http import HttpSettings
from yarn_adapt.yarn.rm import ResourceManagerClient

pytestmark = [pytest.mark.yarn, pytest.mark.slow]

WHOLE = Resources(2048, 2)


@pytest.fixture(scope="module")
def pair() -> Iterator[HAResourceManagerPair]:
    with HAResourceManagerPair(nodemanagers=2, nm_memory_mb=2048, nm_vcores=2) as started:
        yield started


def totals(pair: HAResourceManagerPair, rm_id: str) -> dict[str, Resources]:
    return {
        str(node["id"]): Resources(
            int(node["totalResource"]["memory"]),  # type: ignore[index]
            int(node["totalResource"]["vCores"]),  # type: ignore[index]
        )
        for node in pair.nodes(rm_id)
    }


def test_after_a_fail_over_the_new_active_rm_has_the_total_the_nodemanager_was_given(
    pair: HAResourceManagerPair,
) -> None:
    first = totals(pair, "rm1")
    assert set(first.values()) == {WHOLE} and len(first) == 2
    lowered = sorted(first)[0]
    with ResourceManagerClient(list(pair.web_urls), HttpSettings(retries=1)) as rm:
        rm.update_node_resource(lowered, Resources(1024, 1))
    assert totals(pair, "rm1")[lowered] == Resources(1024, 1)
    time.sleep(2.0)  # a NodeManager heartbeat or two: it now carries the lowered total
    pair.fail_over("rm1", "rm2")
    pair.wait_for_nodes("rm2", 2)
    assert totals(pair, "rm2") == {**first, lowered: Resources(1024, 1)}  # carried by the NM


def test_recover_gives_a_node_back_through_whichever_rm_is_active(
    pair: HAResourceManagerPair, tmp_path: Path
) -> None:
    """The guard lowered a node through rm1; rm2 is active now: ``yarn-adapt recover``
    with both addresses finds the active one and puts the node back."""
    make_active(pair, "rm1")
    pair.wait_for_nodes("rm1", 2)
    with ResourceManagerClient(list(pair.web_urls), HttpSettings(retries=1)) as rm:
        actuator = RmNodeTotals(rm, tmp_path, verify=PollSettings(timeout_s=20.0))
        node_id = sorted(totals(pair, "rm1"))[1]
        decision = NodeDecision(
            node_id=node_id, capacity=WHOLE, current=WHOLE, target=Resources(1024, 1),
            wanted=Resources(1024, 1), used=Resources(0, 0), reclaim=Resources(0, 0),
            action=Action.LOWER, reason="test",
        )  # fmt: skip
        assert actuator.apply(decision).result is Result.DONE
    time.sleep(2.0)  # a NodeManager heartbeat or two: it now carries the lowered total
    make_active(pair, "rm2")
    pair.wait_for_nodes("rm2", 2)
    assert totals(pair, "rm2")[node_id] == Resources(1024, 1)
    urls = [arg for url in pair.web_urls for arg in ("--rm", url)]
    result = CliRunner().invoke(cli, ["recover", *urls, "--state-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert f"node {node_id}: done" in result.output
    assert totals(pair, "rm2")[node_id] == WHOLE
    assert OriginalTotals(tmp_path / "guard").load() == {}


def acted_on(report: GuardRoundReport, node_id: str) -> Result:
    """What the round's action on ``node_id`` gave; the round's decisions when it took
    none (CI once saw no action on a node just listed RUNNING: docs/flakes.md)."""
    outcome = report.outcomes.get(node_id)
    if outcome is None:
        decisions = [] if report.plan is None else report.plan.decisions
        said = "; ".join(f"{d.node_id} {d.action}: {d.reason}" for d in decisions)
        raise AssertionError(f"no action on {node_id}: {report.summary()} | {said}")
    return outcome.result


def whole_again(pair: HAResourceManagerPair, rm_id: str) -> None:
    """Every node whole on ``rm_id``. The tests share one pair: the recover test gives
    its node back through rm2 and ends, and when rm1 takes over at once the
    NodeManager can register under the lowered total it has not yet heard was undone
    (CI run s45b: the guard then saw its node already at the floor and held)."""
    lowered = [node for node, total in totals(pair, rm_id).items() if total != WHOLE]
    if lowered:
        with ResourceManagerClient([pair.web_url(rm_id)], HttpSettings(retries=1)) as rm:
            for node in lowered:
                rm.update_node_resource(node, WHOLE)
    assert set(totals(pair, rm_id).values()) == {WHOLE}


def make_active(pair: HAResourceManagerPair, wanted: str) -> None:
    for rm_id in ("rm1", "rm2"):
        if rm_id != wanted and pair.ha_state(rm_id) == "ACTIVE":
            pair.transition(rm_id, "standby")
    if pair.ha_state(wanted) != "ACTIVE":
        pair.transition(wanted, "active")


def test_through_a_fail_over_the_guard_keeps_its_node_lowered_and_says_so(
    pair: HAResourceManagerPair, tmp_path: Path
) -> None:
    """The guard lowers a node through rm1; rm2 takes over; one guard cycle later the
    node has the guard's total on rm2 (carried by its NodeManager, or pushed again), the
    audit log says a new RM answers and when it started, the journal keeps the
    registered total; the guard's stop gives the node back through rm2."""
    make_active(pair, "rm1")
    pair.wait_for_nodes("rm1", 2)
    whole_again(pair, "rm1")
    node_id = sorted(totals(pair, "rm1"))[1]
    recorder = MemoryRecorder()
    with ResourceManagerClient(list(pair.web_urls), HttpSettings(retries=1)) as rm:
        guard = ColocationGuard(
            GuardSettings(nu=1.0, policy=GuardPolicy.TOPOSCH_PAPER),
            GuardObserver(
                FixedRisk(RiskReading(risk({node_id: 1.0}))), NoDemands(), clock=lambda: NOW_S
            ),
            RmNodeTotals(rm, tmp_path, verify=PollSettings(timeout_s=20.0)),
            recorder,
            mode=GuardMode.AUTO,
            clock=lambda: NOW_S,
        )
        try:
            assert acted_on(guard.run_round(rm.nodes()), node_id) is Result.DONE
            lowered = totals(pair, "rm1")[node_id]
            assert lowered.vcores < WHOLE.vcores
            time.sleep(2.0)  # a NodeManager heartbeat or two
            make_active(pair, "rm2")
            pair.wait_for_nodes("rm2", 2)
            guard.run_round(rm.nodes())  # one guard period
            assert totals(pair, "rm2")[node_id] == lowered
            said = [d for a, d in recorder.audit_log if a == "guard sees a new ResourceManager"]
            assert len(said) == 1 and "the RM answering now started at" in said[0], said
            assert "ACTIVE" in said[0].upper()
            assert guard.actuator.journalled()[node_id].original == WHOLE  # type: ignore[attr-defined]
        finally:
            restored = guard.stop()
            guard.close()
    assert [o.result for o in restored] == [Result.DONE]
    assert totals(pair, "rm2")[node_id] == WHOLE
