"""The two-NodeManager cluster of the co-location tests: a NodeManager restarted on its
own port registers again under the same node id, and with it YARN forgets an
``updateNodeResource`` (the total is what the NodeManager is configured with) -- the
fact the guard must notice after a restart."""

from __future__ import annotations

import pytest

from yarn_adapt.minicluster import MiniCluster

pytestmark = [pytest.mark.yarn, pytest.mark.slow]


def total_of(cluster: MiniCluster, node_id: str) -> tuple[int, int]:
    nodes = cluster.rm_get("nodes")["nodes"]["node"]
    node = next(n for n in nodes if n["id"] == node_id)
    return int(node["totalResource"]["memory"]), int(node["totalResource"]["vCores"])


def test_a_restarted_nodemanager_comes_back_under_its_id_and_yarn_forgets_its_lowered_total(
    colocation_cluster: MiniCluster,
) -> None:
    cluster = colocation_cluster
    node_id = cluster.nodemanager_id(0)
    assert node_id != cluster.nodemanager_id(1)
    whole = (cluster.spec.nm_memory_mb, cluster.spec.nm_vcores)
    cluster.set_node_resource(node_id, 1024, 1)
    assert total_of(cluster, node_id) == (1024, 1)
    cluster.restart_nodemanager(0)
    assert cluster.nodemanager_id(0) == node_id
    assert total_of(cluster, node_id) == whole
    assert cluster.healthy()


def test_a_restarted_resourcemanager_gets_the_lowered_total_back_from_the_nodemanager(
    colocation_cluster: MiniCluster,
) -> None:
    """The RM keeps ``updateNodeResource`` in memory only, but the NodeManager was told
    the new total in its heartbeat answer and registers with it again."""
    cluster = colocation_cluster
    node_id = cluster.nodemanager_id(0)
    cluster.set_node_resource(node_id, 1024, 1)
    cluster.restart_resourcemanager()
    assert total_of(cluster, node_id) == (1024, 1)
