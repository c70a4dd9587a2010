"""The Capacity Scheduler cluster with the ``memory`` store: the scheduler-conf mutation API."""

from __future__ import annotations

import pytest

from yarn_adapt.minicluster import MiniCluster

from .support import configured_capacities

pytestmark = [pytest.mark.yarn, pytest.mark.slow]

BASELINE = {"root.default": 40.0, "root.a": 30.0, "root.b": 30.0}
PREFIX = "yarn.scheduler.capacity."


def update_capacities(**capacities: float) -> str:
    updates = "".join(
        f"<update-queue><queue-name>root.{queue}</queue-name><params>"
        f"<entry><key>capacity</key><value>{capacity:g}</value></entry>"
        "</params></update-queue>"
        for queue, capacity in capacities.items()
    )
    return f"<sched-conf>{updates}</sched-conf>"


def test_store_starts_from_the_capacity_file(capacity_memory_cluster: MiniCluster) -> None:
    stored = capacity_memory_cluster.scheduler_conf()
    assert stored[f"{PREFIX}root.queues"] == "default,a,b"
    assert stored[f"{PREFIX}root.a.capacity"] == "30"
    assert configured_capacities(capacity_memory_cluster) == BASELINE


def test_put_scheduler_conf_applies_a_valid_change(capacity_memory_cluster: MiniCluster) -> None:
    status, text = capacity_memory_cluster.put_scheduler_conf(update_capacities(a=50, b=10))
    assert (status, text) == (200, "Configuration change successfully applied.")
    assert configured_capacities(capacity_memory_cluster) == {
        "root.default": 40.0, "root.a": 50.0, "root.b": 10.0,
    }  # fmt: skip
    assert capacity_memory_cluster.scheduler_conf()[f"{PREFIX}root.a.capacity"] == "50"


def test_put_scheduler_conf_refuses_capacities_over_100(
    capacity_memory_cluster: MiniCluster,
) -> None:
    status, text = capacity_memory_cluster.put_scheduler_conf(update_capacities(a=80))
    assert status == 400
    assert "capacity" in text.lower()
    assert configured_capacities(capacity_memory_cluster) == BASELINE
    assert capacity_memory_cluster.scheduler_conf()[f"{PREFIX}root.a.capacity"] == "30"


def test_reset_removes_a_queue_added_through_the_api(capacity_memory_cluster: MiniCluster) -> None:
    add_c = (
        "<sched-conf><add-queue><queue-name>root.c</queue-name><params>"
        "<entry><key>capacity</key><value>10</value></entry></params></add-queue>"
        "<update-queue><queue-name>root.default</queue-name><params>"
        "<entry><key>capacity</key><value>30</value></entry></params></update-queue></sched-conf>"
    )
    assert capacity_memory_cluster.put_scheduler_conf(add_c)[0] == 200
    assert configured_capacities(capacity_memory_cluster)["root.c"] == 10.0
    capacity_memory_cluster.reset()
    assert configured_capacities(capacity_memory_cluster) == BASELINE
    assert f"{PREFIX}root.c.capacity" not in capacity_memory_cluster.scheduler_conf()


def test_schedulerconf_cli_goes_through_the_same_api(capacity_memory_cluster: MiniCluster) -> None:
    done = capacity_memory_cluster.yarn(
        "schedulerconf", "-update", "root.a:capacity=20;root.b:capacity=40"
    )
    assert done.returncode == 0, done.stderr
    assert configured_capacities(capacity_memory_cluster) == {
        "root.default": 40.0, "root.a": 20.0, "root.b": 40.0,
    }  # fmt: skip


def test_refresh_queues_is_refused_while_the_store_is_mutable(
    capacity_memory_cluster: MiniCluster,
) -> None:
    done = capacity_memory_cluster.refresh_queues()
    assert done.returncode != 0
    assert "refreshQueues is not allowed" in done.stderr
