"""The Capacity Scheduler cluster with a file store: apps, history, refreshQueues, node sizes."""

from __future__ import annotations

import subprocess
import time

import pytest

from yarn_adapt.minicluster import MiniCluster

from .support import as_list, capacity_queues, capacity_xml, configured_capacities

pytestmark = [pytest.mark.yarn, pytest.mark.slow]

BASELINE = {"root.default": 40.0, "root.a": 30.0, "root.b": 30.0}


def test_cluster_is_active_with_the_baseline_queues_and_one_full_node(
    capacity_cluster: MiniCluster,
) -> None:
    info = capacity_cluster.rm_get("info")["clusterInfo"]
    assert (info["haState"], info["state"]) == ("ACTIVE", "STARTED")
    assert info["hadoopVersion"].startswith("3.4.")
    assert configured_capacities(capacity_cluster) == BASELINE
    [node] = as_list(capacity_cluster.rm_get("nodes")["nodes"]["node"])
    assert node["state"] == "RUNNING"
    assert (node["totalResource"]["memory"], node["totalResource"]["vCores"]) == (8192, 8)


def test_distributed_shell_app_runs_in_queue_a_and_finishes(capacity_cluster: MiniCluster) -> None:
    submitted = capacity_cluster.submit_sleep_app("a", containers=2, sleep_s=5, name="ds-a")
    running = submitted.wait_running(120)
    assert running["state"] == "RUNNING"
    queue_a = capacity_queues(capacity_cluster)["root.a"]
    # AM plus the two sleep containers get allocated while the shell commands sleep.
    deadline = time.monotonic() + 30
    while queue_a["numContainers"] < 3 and time.monotonic() < deadline:
        time.sleep(0.3)
        queue_a = capacity_queues(capacity_cluster)["root.a"]
    assert queue_a["numContainers"] == 3
    assert queue_a["resourcesUsed"]["memory"] == 3 * 256
    finished = submitted.wait(180)
    assert (finished["state"], finished["finalStatus"]) == ("FINISHED", "SUCCEEDED")
    listed = {app["id"]: app for app in as_list(capacity_cluster.rm_get("apps")["apps"]["app"])}
    assert listed[submitted.application_id()]["queue"] == "root.a"
    assert listed[submitted.application_id()]["name"] == "ds-a"
    assert submitted.client_exit_code() == 0


def test_mapreduce_sleep_job_shows_in_job_history_with_tasks_and_attempts(
    capacity_cluster: MiniCluster,
) -> None:
    submitted = capacity_cluster.submit_mr_sleep_job(
        "b", maps=2, reduces=1, map_ms=500, reduce_ms=500
    )
    finished = submitted.wait(300)
    assert (finished["state"], finished["finalStatus"], finished["queue"]) == (
        "FINISHED", "SUCCEEDED", "root.b",
    )  # fmt: skip
    job = capacity_cluster.wait_for_history_job(submitted.job_id, 60)
    assert (job["state"], job["queue"], job["mapsTotal"], job["reducesTotal"]) == (
        "SUCCEEDED", "root.b", 2, 1,
    )  # fmt: skip
    listed = as_list(capacity_cluster.jhs_get("mapreduce/jobs")["jobs"]["job"])
    assert submitted.job_id in {j["id"] for j in listed}
    tasks = as_list(
        capacity_cluster.jhs_get(f"mapreduce/jobs/{submitted.job_id}/tasks")["tasks"]["task"]
    )
    assert sorted(t["type"] for t in tasks) == ["MAP", "MAP", "REDUCE"]
    for task in tasks:
        path = f"mapreduce/jobs/{submitted.job_id}/tasks/{task['id']}/attempts"
        attempts = as_list(capacity_cluster.jhs_get(path)["taskAttempts"]["taskAttempt"])
        assert task["successfulAttempt"] in {a["id"] for a in attempts}
        assert all(a["state"] == "SUCCEEDED" and a["elapsedTime"] >= 0 for a in attempts)


def test_refresh_queues_applies_an_edited_capacity_file(capacity_cluster: MiniCluster) -> None:
    capacity_cluster.write_scheduler_xml(capacity_xml({"default": 20, "a": 70, "b": 10}))
    assert configured_capacities(capacity_cluster) == BASELINE  # nothing until refreshed
    done = capacity_cluster.refresh_queues()
    assert done.returncode == 0, done.stderr
    assert configured_capacities(capacity_cluster) == {
        "root.default": 20.0, "root.a": 70.0, "root.b": 10.0,
    }  # fmt: skip


def test_refresh_command_is_a_standalone_command_line(capacity_cluster: MiniCluster) -> None:
    capacity_cluster.write_scheduler_xml(capacity_xml({"default": 50, "a": 25, "b": 25}))
    done = subprocess.run(
        capacity_cluster.refresh_command, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert configured_capacities(capacity_cluster)["root.a"] == 25.0


@pytest.mark.parametrize(
    ("broken", "complaint"),
    [
        (capacity_xml({"default": 40, "a": 40, "b": 30}), "capacity"),
        (capacity_xml({"default": 40, "a": 60}), "root.b"),  # b removed while RUNNING
    ],
    ids=["sum-110", "remove-running-queue"],
)
def test_refresh_refuses_a_broken_file_and_keeps_the_old_config(
    capacity_cluster: MiniCluster, broken: str, complaint: str
) -> None:
    capacity_cluster.write_scheduler_xml(broken)
    done = capacity_cluster.refresh_queues()
    assert done.returncode != 0
    assert "refreshQueues" in done.stderr and complaint in done.stderr
    assert configured_capacities(capacity_cluster) == BASELINE


def test_reset_brings_back_the_baseline_even_after_a_queue_was_added(
    capacity_cluster: MiniCluster,
) -> None:
    capacity_cluster.write_scheduler_xml(capacity_xml({"default": 30, "a": 30, "b": 30, "c": 10}))
    assert capacity_cluster.refresh_queues().returncode == 0
    assert "root.c" in configured_capacities(capacity_cluster)
    restarts = capacity_cluster.rm_restarts
    capacity_cluster.reset()  # c is RUNNING, so the RM refuses to drop it and is restarted
    assert capacity_cluster.rm_restarts == restarts + 1
    assert configured_capacities(capacity_cluster) == BASELINE
    assert capacity_cluster.read_scheduler_xml() == capacity_cluster.spec.initial_scheduler_xml


def test_node_resource_update_changes_total_resource(capacity_cluster: MiniCluster) -> None:
    [node_id] = capacity_cluster.node_ids()
    capacity_cluster.set_node_resource(node_id, 4096, 4)
    node = capacity_cluster.rm_get(f"nodes/{node_id}")["node"]
    assert (node["totalResource"]["memory"], node["totalResource"]["vCores"]) == (4096, 4)
    metrics = capacity_cluster.rm_get("metrics")["clusterMetrics"]
    assert (metrics["totalMB"], metrics["totalVirtualCores"]) == (4096, 4)


def test_yarn_script_runs_the_usual_client_commands(capacity_cluster: MiniCluster) -> None:
    [node_id] = capacity_cluster.node_ids()
    nodes = capacity_cluster.yarn("node", "-list")
    assert nodes.returncode == 0, nodes.stderr
    assert node_id in nodes.stdout
    queue = capacity_cluster.yarn("queue", "-status", "a")
    assert queue.returncode == 0, queue.stderr
    assert "\tCapacity : 30.00%" in queue.stdout
    classpath = capacity_cluster.yarn("classpath")
    assert classpath.stdout.strip().startswith(str(capacity_cluster.conf_dir))
    unknown = capacity_cluster.yarn("frobnicate")
    assert unknown.returncode == 1 and "unknown command" in unknown.stderr
