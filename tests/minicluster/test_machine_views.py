"""Each pinned NodeManager of the co-location cluster reports its own machine, not the
host: CPU burnt in one node's cpuset shows on that node alone, a container's CPU shows
in the node's vcores beside the node's cores, and the product's "outside the
containers" figure is what runs beside them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from yarn_adapt.minicluster import MiniCluster, cpusets
from yarn_adapt.minicluster.machines import resident_kb
from yarn_adapt.model.cluster import NodeUtilization
from yarn_adapt.testbed import burner
from yarn_adapt.yarn.parse import parse_nodes

pytestmark = [pytest.mark.yarn, pytest.mark.slow]


def utilization(cluster: MiniCluster) -> dict[str, NodeUtilization]:
    nodes = parse_nodes(cluster.rm_get("nodes"), cluster.rm_url)
    return {node.id: node.utilization for node in nodes if node.utilization is not None}


def settles(check: Callable[[dict[str, NodeUtilization]], bool], cluster: MiniCluster) -> bool:
    """``check`` holds on the RM's report within 40 s (NodeManagers report every 1-3 s)."""
    deadline = time.monotonic() + 40.0
    while time.monotonic() < deadline:
        if check(utilization(cluster)):
            return True
        time.sleep(1.0)
    return False


@contextmanager
def burning_in(group: Path) -> Iterator[None]:
    script = 'echo $$ > "$0/cgroup.procs" && exec "$@"'
    process = subprocess.Popen(["/bin/sh", "-c", script, str(group), sys.executable, "-c",
                                "while True: pass"])  # fmt: skip
    try:
        yield
    finally:
        process.kill()
        process.wait()


def test_cpu_burnt_in_one_nodes_cpuset_shows_on_that_node_alone(
    colocation_cluster: MiniCluster,
) -> None:
    cluster = colocation_cluster
    busy, idle = cluster.nodemanager_id(1), cluster.nodemanager_id(0)
    group = cluster.nm_cpuset(1)
    assert group is not None
    with burning_in(group):
        assert settles(lambda u: u[busy].node_cpu >= 0.8 and u[idle].node_cpu <= 0.4, cluster), (
            utilization(cluster)
        )
        seen = utilization(cluster)
    assert seen[busy].outside_containers_cores(4.0) >= 0.8  # no container runs
    for index in range(2):  # memory: what the node's own processes hold, not the host's
        held_mb = resident_kb(cpusets.tasks(cluster.nm_cpuset(index))) / 1024  # type: ignore[arg-type]
        reported = seen[cluster.nodemanager_id(index)].node_memory_mb
        assert 0 < reported <= held_mb + 128, (index, reported, held_mb)


def test_a_burning_container_is_counted_in_vcores_beside_the_nodes_cores(
    colocation_cluster: MiniCluster, tmp_path: Path
) -> None:
    cluster = colocation_cluster
    script = tmp_path / "burner.py"
    shutil.copy(burner.__file__, script)
    app = cluster.submit_shell_app("default", 2, sys.executable, [str(script), "120"],
                                   container_mb=512, vcores=1, name="machine-views")  # fmt: skip
    try:
        app.wait_running(120.0)

        def burning(u: dict[str, NodeUtilization]) -> bool:
            return any(use.containers_cpu >= 2.5 for use in u.values())

        assert settles(burning, cluster), utilization(cluster)
        seen = utilization(cluster)
    finally:
        app.kill()
    vcores_per_core = cluster.spec.nm_vcores  # one CPU per node
    for use in (use for use in seen.values() if use.containers_cpu >= 2.5):
        assert use.node_cpu <= 1.1, use  # cores of a one-CPU machine
        assert use.outside_containers_cores(vcores_per_core) <= 0.4, use  # the NodeManager
