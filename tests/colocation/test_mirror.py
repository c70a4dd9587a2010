"""The guard's totals mirrored into ``dynamic-resources.xml`` (issue 30): the operator's
own entries kept, the file put back as it was once the guard holds no node; on the real
mini YARN, a ResourceManager restarted after its NodeManager forgot the guard's total
(a NodeManager restart) gives the node the guard's total from its first answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.colocation.test_guard_live import FLOOR, WHOLE, totals
from yarn_adapt.colocation.actuate import Result, RmNodeTotals, restore_journalled
from yarn_adapt.colocation.mirror import (
    NODES,
    DynamicResourcesMirror,
    journalled_mirror,
    mirrored_properties,
)
from yarn_adapt.colocation.model import Action, GuardPlan, NodeDecision
from yarn_adapt.errors import ConfigFileError
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.model import Resources
from yarn_adapt.yarn.apply import PollSettings
from yarn_adapt.yarn.http import HttpSettings
from yarn_adapt.yarn.rm import ResourceManagerClient
from yarn_adapt.yarn.site import read_properties

NO_RM = ["true"]  # the refresh command where no RM reads the file
OPERATORS = """<configuration>
<property><name>yarn.resource.dynamic.nodes</name><value>w9:1</value></property>
<property><name>yarn.resource.dynamic.w9:1.memory</name><value>2048</value></property>
<property><name>yarn.resource.dynamic.w9:1.vcores</name><value>2</value></property>
</configuration>
"""


def test_the_operators_entries_are_kept_and_the_guards_win_for_its_nodes() -> None:
    operators = {NODES: "w9:1,w1:1", "yarn.resource.dynamic.w1:1.memory": "9999",
                 "yarn.resource.dynamic.w9:1.memory": "2048"}  # fmt: skip
    merged = mirrored_properties(operators, {"w1:1": Resources(1024, 1), "w2:1": FLOOR})
    assert merged[NODES] == "w9:1,w1:1,w2:1"
    assert merged["yarn.resource.dynamic.w1:1.memory"] == "1024"  # the guard's
    assert merged["yarn.resource.dynamic.w2:1.overcommittimeout"] == "-1"
    assert merged["yarn.resource.dynamic.w9:1.memory"] == "2048"  # the operator's


def test_the_file_follows_the_guard_and_goes_back_as_it_was(tmp_path: Path) -> None:
    path, guard_dir = tmp_path / "conf" / "dynamic-resources.xml", tmp_path / "state" / "guard"
    path.parent.mkdir()
    path.write_text(OPERATORS)
    path.chmod(0o640)
    mirror = DynamicResourcesMirror(path, guard_dir, refresh=NO_RM)
    assert mirror.sync({"w1:1": Resources(1024, 1)})
    written = read_properties(path)
    assert written[NODES] == "w9:1,w1:1" and written["yarn.resource.dynamic.w1:1.vcores"] == "1"
    assert written["yarn.resource.dynamic.w9:1.memory"] == "2048"
    assert path.stat().st_mode & 0o777 == 0o640
    assert not mirror.sync({"w1:1": Resources(1024, 1)})  # the same: nothing written
    assert journalled_mirror(guard_dir) is not None  # recover finds it
    assert mirror.sync({})  # the guard holds no node: the operator's file, byte for byte
    assert path.read_text() == OPERATORS
    assert journalled_mirror(guard_dir) is None and list(guard_dir.iterdir()) == []


def test_a_file_that_did_not_exist_is_removed_again(tmp_path: Path) -> None:
    path = tmp_path / "dynamic-resources.xml"
    mirror = DynamicResourcesMirror(path, tmp_path / "guard", refresh=NO_RM)
    assert mirror.sync({"w1:1": FLOOR}) and path.exists()
    assert mirror.sync({}) and not path.exists()


def test_a_refresh_the_rm_refuses_is_said_in_one_line_and_run_again(tmp_path: Path) -> None:
    """The file is written, the RM keeps its old copy: said, and the next sync (even
    with nothing new to write) asks again; once it succeeds nothing more is run."""
    path, marker = tmp_path / "dynamic-resources.xml", tmp_path / "refreshed"
    refresh = ["sh", "-c", f"test -e {marker}.ok && touch {marker} || exit 3"]
    mirror = DynamicResourcesMirror(path, tmp_path / "guard", refresh=refresh)
    with pytest.raises(
        ConfigFileError,
        match=r"dynamic-resources.xml: written, but the RM did "
        r"not re-read it \(exit 3: no output\); refreshed again next cycle",
    ):
        mirror.sync({"w1:1": FLOOR})
    assert read_properties(path)[NODES] == "w1:1" and mirror.unrefreshed
    Path(f"{marker}.ok").touch()
    assert not mirror.sync({"w1:1": FLOOR})  # nothing new to write: only the refresh
    assert marker.exists() and not mirror.unrefreshed
    marker.unlink()
    assert not mirror.sync({"w1:1": FLOOR}) and not marker.exists()
    assert journalled_mirror(tmp_path / "guard").refresh == tuple(refresh)  # type: ignore[union-attr]


def test_a_restarted_rm_starts_from_the_mirrored_total(
    colocation_cluster: MiniCluster, state_dir: Path
) -> None:
    cluster = colocation_cluster
    node_id = cluster.nodemanager_id(0)
    mirrored = cluster.conf_dir / "dynamic-resources.xml"
    refresh = [str(cluster.yarn_script), "rmadmin", "-refreshNodesResources"]
    assert not mirrored.exists()
    rm = ResourceManagerClient([cluster.rm_url], HttpSettings(read_timeout_s=15.0, retries=1))
    with rm:
        actuator = RmNodeTotals(
            rm, state_dir, verify=PollSettings(timeout_s=15.0, interval_s=0.1),
            mirror=DynamicResourcesMirror(mirrored, state_dir / "guard", refresh),
        )  # fmt: skip
        decision = NodeDecision(
            node_id=node_id, capacity=WHOLE, current=WHOLE, target=FLOOR, wanted=FLOOR,
            used=Resources(0, 0), reclaim=Resources(0, 0), action=Action.LOWER, reason="test",
        )  # fmt: skip
        try:
            assert actuator.act(GuardPlan(0.0, (decision,)))[node_id].result is Result.DONE
            assert read_properties(mirrored)[NODES] == node_id
            cluster.restart_nodemanager(0)  # forgets: registers with its own total
            assert totals(cluster)[node_id] == WHOLE
            cluster.restart_resourcemanager()  # reads dynamic-resources.xml as it starts
            assert totals(cluster)[node_id] == FLOOR
        finally:
            outcomes = restore_journalled(rm, state_dir)
    assert [o.result for o in outcomes] == [Result.DONE]
    assert totals(cluster)[node_id] == WHOLE
    assert not mirrored.exists()  # there was none: removed again
    # the RM re-read the file as it went: a NodeManager registering now (its restart)
    # gets its own total, not the one the RM read from the mirror as it started
    cluster.restart_nodemanager(0)
    assert totals(cluster)[node_id] == WHOLE
