"""No process outlives a cluster: after stop(), and after its owner is SIGKILLed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from yarn_adapt.minicluster import MiniCluster, MiniClusterError, MiniClusterSpec
from yarn_adapt.minicluster.processes import kill_marked_processes

pytestmark = [pytest.mark.yarn, pytest.mark.slow]

OWNER_SCRIPT = """
import sys, time
from yarn_adapt.minicluster import MiniCluster, MiniClusterError, MiniClusterSpec
try:
    cluster = MiniCluster(keep_dir=True).start()
except MiniClusterError as exc:
    print("START FAILED", exc.one_line(), flush=True)
    sys.exit(3)
cluster.submit_sleep_app("a", containers=1, sleep_s=600)
print("ROOT", cluster.root, flush=True)
time.sleep(600)
"""


def tied_pids(root: Path) -> list[int]:
    """Processes tied to the cluster at ``root``, without killing them."""
    from yarn_adapt.minicluster.processes import _marked_pids

    return list(_marked_pids(root))


def wait_for_am_container(root: Path) -> None:
    """RM, NM, JHS and the client, plus the AM container's shells and JVM."""
    deadline = time.monotonic() + 120
    while len(tied_pids(root)) < 7:
        assert time.monotonic() < deadline, f"no AM container started: {tied_pids(root)}"
        time.sleep(0.3)


def cannot_start(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def no_pool_cluster(cluster_pool: object) -> None:
    """These tests start their own cluster; stop the shared one to spare the two cores."""
    cluster_pool.stop_all()  # type: ignore[attr-defined]


@pytest.mark.usefixtures("no_pool_cluster")
def test_two_nodemanagers_register_and_stop_twice_leaves_nothing() -> None:
    cluster = MiniCluster(MiniClusterSpec(nodemanagers=2, nm_memory_mb=2048, nm_vcores=2))
    try:
        cluster.start()
    except MiniClusterError as exc:
        cannot_start(exc.one_line())
    root = cluster.root
    assert len(cluster.node_ids()) == 2
    # the RM's node-attribute store is the cluster's own, not /tmp/hadoop-yarn-<user>'s
    # (which every RM on the machine would share: one's transition to active failed)
    assert (root / "tmp" / "node-attribute").is_dir()
    metrics = cluster.rm_get("metrics")["clusterMetrics"]
    assert (metrics["totalMB"], metrics["totalVirtualCores"]) == (4096, 4)
    cluster.submit_sleep_app("a", containers=2, sleep_s=600)
    wait_for_am_container(root)
    cluster.stop()
    cluster.stop()
    assert tied_pids(root) == []
    assert not root.exists()
    assert not cluster.running


@pytest.mark.usefixtures("no_pool_cluster")
def test_killing_the_owner_process_takes_the_cluster_down() -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT], stdout=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    assert owner.stdout is not None
    first_line = owner.stdout.readline().split()
    root = None
    try:
        if first_line[:2] == ["START", "FAILED"]:
            cannot_start(" ".join(first_line))
        assert first_line[0] == "ROOT", first_line
        root = Path(first_line[1])
        wait_for_am_container(root)
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
        deadline = time.monotonic() + 15
        while tied_pids(root) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert tied_pids(root) == []
    finally:
        owner.kill()
        owner.wait()
        owner.stdout.close()
        if root is not None:
            kill_marked_processes(root)
            shutil.rmtree(root, ignore_errors=True)
